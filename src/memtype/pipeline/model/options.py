"""What a run is told besides its input and output: what it reads, how it executes, what it writes.

:meth:`memtype.pipeline.Pipeline.run` takes three option objects, one per question a user
answers separately (and the ``memtype run`` flags fill them one to one, each flag's name a
field's name):

- :class:`ReadOptions`, how the input is read: the file-name ``pattern``, the ``layout``.
  A property of the data, reused for every run over plates of that instrument.
- :class:`ExecutionOptions`, where and how the groups run: the ``executor`` and its
  ``workers``, ``client`` or ``scheduler``, the memory ``budgets`` and
  ``intermediate_budget``, when to stop (``max_failures``), the ``progress`` shown.
  A property of the machine, reused for every pipeline run on it.
- :class:`WriteOptions`, what happens to the output: an existing one kept (``resume``) or
  replaced (``overwrite``, ``overwrite_foreign``), the ``plate`` its OME-Zarr declares, the
  ``overview_column``. A property of this one run.

Each is a frozen dataclass checked when it is made (a bad value fails before anything is
read), printed with only the fields that differ from the defaults.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.pipeline.execution.executors import EXECUTORS, Executor
from memtype.pipeline.execution.progress import Progress
from memtype.pipeline.execution.stopping import DEFAULT_MAX_FAILURES, check_max_failures
from memtype.pipeline.io.overview import check_overview_column
from memtype.pipeline.io.patterns import FilenamePattern
from memtype.pipeline.io.plates import PlateLayout
from memtype.pipeline.planning import device_budgets

__all__ = ["ReadOptions", "ExecutionOptions", "WriteOptions", "OPTIONS", "run_options"]


class _Options:
    """Printing shared by the option objects: only the fields that differ from the defaults."""

    def __repr__(self) -> str:
        changed = [f"{f.name}={getattr(self, f.name)!r}" for f in dataclasses.fields(self)  # type: ignore[arg-type]
                   if getattr(self, f.name) != f.default]
        return f"{type(self).__name__}({', '.join(changed)})"


def _check_optional_int(name: str, value: object, least: int) -> None:
    """``value`` is None or an int (not a bool) of at least ``least``."""
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise ArgumentTypeError(f"{name} must be an int or None; received {value!r}.")
    if value < least:
        raise InvalidArgumentError(f"{name} must be at least {least}; received {value}.")


@dataclass(frozen=True, repr=False)
class ReadOptions(_Options):
    """How a run reads its input.

    Parameters
    ----------
    pattern : str, optional
        Overrides the pipeline's file-name pattern, and reads the input by pattern.
    layout : str, optional
        Reads the input as this layout (``"imagexpress"``, ``"phenix"``, ``"ome-zarr"``,
        ``"ome-tiff"``, ``"pattern"``) instead of detecting it (the reader checks the name).

    Raises
    ------
    InvalidArgumentError
        A pattern that is not a valid file-name pattern (a ``ValueError``).

    Examples
    --------
    >>> ReadOptions(layout="phenix")
    ReadOptions(layout='phenix')
    """

    pattern: str | None = None
    layout: str | None = None

    def __post_init__(self) -> None:
        if self.pattern is not None:
            FilenamePattern(self.pattern)


@dataclass(frozen=True, repr=False)
class ExecutionOptions(_Options):
    """Where and how the groups of a run execute.

    Parameters
    ----------
    executor : {"inline", "threads", "dask"} or Executor
        Where groups run. ``"dask"`` uses ``client`` (any scheduler), or connects to
        ``scheduler``, or starts a LocalCluster of ``workers`` processes (a ``client`` or
        ``scheduler`` implies ``"dask"``); the workers write their results straight to the
        output, which they must be able to reach. A given Executor stays open after the run.
    workers : int, optional
        Threads or worker processes, at least 1 (one per CPU core by default).
    client : dask.distributed.Client, optional
        The dask client to run on.
    scheduler : str, optional
        The address of a dask scheduler to connect to.
    progress : bool or Progress, optional
        Show a progress bar (default: when stderr is a terminal).
    max_failures : int
        Stop the run when the first this many groups all fail with the same error, before
        any succeeds (default 3; 0: never); a full disk (``ENOSPC``, ``EDQUOT``) stops it at
        once. ``report.stopped`` says why; the groups not run are ``report.not_run``, and
        ``WriteOptions(resume=True)`` does them later.
    budgets : dict of str to int, optional
        Room per device in bytes (``{"opencl:0": 2 << 30}``) for the plan (see
        :meth:`Pipeline.plan`), keyed as the device prints. A group that runs out of memory
        in a step runs again with the next-best plan avoiding that device (that framework,
        on the host), the host last; ``report.fallbacks`` lists them.
    intermediate_budget : int, optional
        Bytes of intermediates each group keeps on its device before spilling.

    Raises
    ------
    InvalidArgumentError
        An unknown executor name, ``workers`` below 1, a negative ``max_failures`` or
        ``intermediate_budget`` or budget (a ``ValueError``).
    ArgumentTypeError
        A value of the wrong type (a ``TypeError``).
    DeviceError
        A budget's key that names no device.

    Examples
    --------
    >>> ExecutionOptions("threads", workers=2, max_failures=0)
    ExecutionOptions(executor='threads', workers=2, max_failures=0)
    """

    executor: str | Executor = "inline"
    workers: int | None = None
    client: Any | None = None
    scheduler: str | None = None
    progress: bool | Progress | None = None
    max_failures: int = DEFAULT_MAX_FAILURES
    budgets: Mapping[str, int] | None = None
    intermediate_budget: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.executor, Executor) and self.executor not in EXECUTORS:
            raise InvalidArgumentError(f"executor must be one of {', '.join(EXECUTORS)} or "
                                       f"an Executor; received {self.executor!r}.")
        _check_optional_int("workers", self.workers, 1)
        _check_optional_int("intermediate_budget", self.intermediate_budget, 0)
        check_max_failures(self.max_failures)
        if self.progress is not None and not isinstance(self.progress, (bool, Progress)):
            raise ArgumentTypeError("progress must be True, False, None or a Progress; "
                                    f"received {self.progress!r}.")
        if self.budgets is not None:  # each device named as it prints
            object.__setattr__(self, "budgets", device_budgets(self.budgets))


@dataclass(frozen=True, repr=False)
class WriteOptions(_Options):
    """What a run does with its output.

    Parameters
    ----------
    resume : bool
        Keep an existing output and skip the groups it already holds; refused when they
        were produced by a different pipeline.
    overwrite : bool
        Delete an existing output first, if an earlier run wrote it (it holds
        ``.memtype/done``); a directory memtype did not write is refused.
    overwrite_foreign : bool
        Delete an existing output first, whatever it holds (memtype's or not).
    plate : {96, 384}, optional
        The standard plate whose rows and columns the OME-Zarr output declares (default: the
        smallest that has every well; wells beyond 384's grid keep just the rows and columns
        in use).
    overview_column : str, optional
        What the plate overview's heatmap shows: a side-output column's mean per well
        (``"area"``, or ``"nuclei:area"`` for table ``nuclei``); by default a table's
        ``count`` (see :func:`memtype.pipeline.io.overview.well_values`).

    Raises
    ------
    InvalidArgumentError
        More than one of ``resume``, ``overwrite`` and ``overwrite_foreign``; a plate size
        that is not 96 or 384; an overview column that is not ``[table:]column``.

    Examples
    --------
    >>> WriteOptions(resume=True)
    WriteOptions(resume=True)
    """

    resume: bool = False
    overwrite: bool = False
    overwrite_foreign: bool = False
    plate: int | None = None
    overview_column: str | None = None

    def __post_init__(self) -> None:
        chosen = [name for name in ("resume", "overwrite", "overwrite_foreign")
                  if getattr(self, name)]
        if len(chosen) > 1:
            raise InvalidArgumentError(
                f"WriteOptions takes one of resume, overwrite and overwrite_foreign; received "
                f"{' and '.join(f'{name}=True' for name in chosen)}.")
        if self.plate is not None:
            PlateLayout(self.plate)
        check_overview_column(self.overview_column)


OPTIONS: dict[str, type[_Options]] = {"read": ReadOptions, "execution": ExecutionOptions,
                                      "write": WriteOptions}
""":meth:`Pipeline.run`'s option parameters and their classes."""


def _refuse_moved(moved: Mapping[str, object]) -> None:
    """Refuse the keywords ``**moved`` caught, naming each one's new place (a ``TypeError``,
    as Python's own for an unknown keyword)."""
    if not moved:
        return
    homes = {f.name: f"{param}={cls.__name__}({f.name}=...)"
             for param, cls in OPTIONS.items() for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    parts = [f"{name}= is now {homes[name]}" if name in homes
             else f"{name}= is no argument of it" for name in moved]
    raise ArgumentTypeError(f"Pipeline.run() got {', '.join(f'{n}=' for n in moved)}: "
                            f"{'; '.join(parts)}.")


def run_options(executor: str | Executor | None, execution: ExecutionOptions | None,
                read: ReadOptions | None, write: WriteOptions | None,
                moved: Mapping[str, object]) -> tuple[ExecutionOptions, ReadOptions, WriteOptions]:
    """A run's three option objects, the defaults where None, ``executor`` put in.

    Raises
    ------
    ArgumentTypeError
        A keyword of the old flat signature (``workers=``...), naming its new place; an
        option object of the wrong class; ``executor`` beside an ``execution`` naming
        another executor.
    """
    _refuse_moved(moved)
    given = {"execution": execution, "read": read, "write": write}
    for param, value in given.items():
        if value is not None and not isinstance(value, OPTIONS[param]):
            raise ArgumentTypeError(f"Pipeline.run({param}=) must be a "
                                    f"{OPTIONS[param].__name__}; received {value!r}.")
    execution = execution or ExecutionOptions()
    if executor is not None:
        if execution.executor not in ("inline", executor):
            raise ArgumentTypeError(
                f"Pipeline.run() got executor={executor!r} and {execution!r}; expected one "
                "executor (put it in ExecutionOptions).")
        execution = dataclasses.replace(execution, executor=executor)
    return execution, read or ReadOptions(), write or WriteOptions()
