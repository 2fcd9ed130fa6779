"""Pipeline: steps run over the groups of a plate, by an executor, into an output directory."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from memtype.errors import NoImagesError, StoreNotFoundError
from memtype.frameworks import get_framework
from memtype.pipeline.executors import Executor, make_executor
from memtype.pipeline.outputs import OutputSpec
from memtype.pipeline.patterns import (DEFAULT_PATTERN, FilenamePattern, ImageRecord,
                                       group_records, match_files)
from memtype.pipeline.progress import Progress, make_progress
from memtype.pipeline.report import GroupResult, RunReport
from memtype.pipeline.runner import GroupTask, RunContext, execute_group
from memtype.pipeline.steps import FunctionStep

__all__ = ["Pipeline"]

PathOrStore = str | os.PathLike[str] | Any


def _as_step(step: FunctionStep | Callable[..., Any]) -> FunctionStep:
    """A FunctionStep from a step or a bare decorated function."""
    return step if isinstance(step, FunctionStep) else FunctionStep(step)


def _unique_names(steps: Sequence[FunctionStep]) -> None:
    """Rename repeated step names ``name``, ``name_2``... (they key summaries and outputs)."""
    seen: dict[str, int] = {}
    for step in steps:
        count = seen.get(step.name, 0) + 1
        seen[step.name] = count
        if count > 1:
            step.name = f"{step.name}_{count}"


def _input_store(source: PathOrStore) -> Any:
    """A DiskStore on an input directory, or a given Store as it is."""
    from memtype.storage import DiskStore, Store

    if isinstance(source, Store):
        return source
    path = os.fspath(source)
    if not os.path.isdir(path):
        what = "is not a directory" if os.path.exists(path) else "does not exist"
        raise StoreNotFoundError(f"Input directory {path!r} {what}; expected a directory "
                                 "of images.")
    return DiskStore(path, read_only=True)


def _find_images(store: Any, pattern: FilenamePattern) -> list[ImageRecord]:
    """Every image in the store whose file name matches the pattern."""
    files = store.list_files("", recursive=True)
    records = match_files(files, pattern)
    if not records:
        example = ", ".join(os.path.basename(f) for f in files[:3]) or "no files at all"
        raise NoImagesError(
            f"No file in {store.root!r} matches the pattern {pattern.template!r} "
            f"({len(files)} files found, e.g. {example}); pass the pattern the names follow, "
            "e.g. --pattern '{well}_s{site}_c{channel}_z{z}.tif'.")
    return records


class Pipeline:
    """A list of steps run over every group of images.

    Parameters
    ----------
    steps : sequence of FunctionStep or decorated functions
        Run in order on every group; a bare function becomes ``FunctionStep(func)``.
    pattern : str
        The file-name pattern of the input images (see :mod:`memtype.pipeline.patterns`).
    task_by : sequence of str
        The fields that make one group, one independent task (default: each well).
    output_format : {"zarr", "tiff"}
        Images written as an OME-Zarr plate (``plate.zarr``), or TIFF files named by the
        pattern (``images/``). Materialized steps go beside them under their step name.
    name : str
        Shown in progress and summaries.

    Examples
    --------
    >>> pipeline = Pipeline([FunctionStep(normalize), FunctionStep(project)])  # doctest: +SKIP
    >>> report = pipeline.run("plate/", output="results/", executor="dask", workers=2)  # doctest: +SKIP
    >>> print(report.summary())  # doctest: +SKIP
    """

    def __init__(self, steps: Sequence[FunctionStep | Callable[..., Any]], *,
                 pattern: str = DEFAULT_PATTERN, task_by: Sequence[str] = ("well",),
                 output_format: str = "zarr", name: str = "pipeline") -> None:
        if not steps:
            raise ValueError("A pipeline needs at least one step.")
        if output_format not in ("zarr", "tiff"):
            raise ValueError(f"output_format must be 'zarr' or 'tiff'; received {output_format!r}.")
        self.steps: list[FunctionStep] = [_as_step(s) for s in steps]
        _unique_names(self.steps)
        self.pattern = FilenamePattern(pattern)
        self.task_by = tuple(task_by)
        self.output_format = output_format
        self.name = name

    def __repr__(self) -> str:
        names = ", ".join(s.name for s in self.steps)
        return f"Pipeline([{names}], pattern={self.pattern.template!r}, task_by={self.task_by})"

    def uses_gpu(self) -> bool:
        """Whether a step runs in a memory type that can live on a CUDA GPU, and a GPU exists."""
        cuda = any("cuda" in get_framework(c.input_type).device_kinds
                   for s in self.steps for c in s.all_calls())
        if not cuda:
            return False
        from memtype.gpu import get_gpu_manager

        return get_gpu_manager().count > 0

    def tasks(self, source: PathOrStore, pattern: str | None = None) -> list[GroupTask]:
        """The groups a run over ``source`` would process, in order.

        Raises
        ------
        StoreNotFoundError
            ``source`` is not an existing directory (a ``FileNotFoundError``).
        NoImagesError
            No file matches the pattern (a ``FileNotFoundError``).
        ValueError
            ``task_by`` names a field the pattern does not have.
        """
        compiled = FilenamePattern(pattern) if pattern else self.pattern
        records = _find_images(_input_store(source), compiled)
        return [GroupTask(k, tuple(v)) for k, v in group_records(records, self.task_by).items()]

    def run(self, source: PathOrStore, output: str | os.PathLike[str], *,
            executor: str | Executor = "inline", workers: int | None = None,
            client: Any | None = None, scheduler: str | None = None, resume: bool = False,
            overwrite: bool = False, pattern: str | None = None,
            progress: bool | Progress | None = None,
            intermediate_budget: int | None = None) -> RunReport:
        """Run every step on every group and write the results.

        Parameters
        ----------
        source : path or Store
            The input images: a directory, or any :class:`~memtype.storage.Store`.
        output : path
            The output directory: ``plate.zarr`` (or ``images/``), one ``<table>.csv`` per
            side output, and ``.memtype/`` (the record of finished groups for ``resume``).
        executor : {"inline", "threads", "dask"} or Executor
            Where groups run. ``"dask"`` uses ``client`` (any scheduler), or connects to
            ``scheduler``, or starts a LocalCluster of ``workers`` processes; the workers
            write their results straight to ``output``, which they must be able to reach.
        workers : int, optional
            Threads or worker processes (one per CPU core by default).
        resume : bool
            Keep an existing output and skip the groups it already holds.
        overwrite : bool
            Delete an existing output first.
        pattern : str, optional
            Overrides the pipeline's file-name pattern.
        progress : bool or Progress, optional
            Show a progress bar (default: when stderr is a terminal).
        intermediate_budget : int, optional
            Bytes of intermediates each group keeps on its device before spilling.

        Returns
        -------
        RunReport
            Per-group outcomes (a failed group is recorded, the others go on) and per-step
            figures; ``report.raise_for_failures()`` raises for failures.

        Raises
        ------
        FileNotFoundError
            A missing input directory, or no image matching the pattern.
        FileExistsError
            ``output`` exists and is not empty, without ``resume`` or ``overwrite``.
        """
        start = time.perf_counter()
        tasks = self.tasks(source, pattern)
        compiled = FilenamePattern(pattern) if pattern else self.pattern
        out = OutputSpec(os.fspath(output), self.output_format, compiled.template)
        out.prepare(resume=resume, overwrite=overwrite)
        todo = [t for t in tasks if not (resume and out.is_done(t.key))]
        skipped = [GroupResult(t.key, "skipped") for t in tasks if t not in todo]
        uses_gpu = self.uses_gpu()
        bar = progress if isinstance(progress, Progress) else make_progress(progress)
        ctx = RunContext(tuple(self.steps), compiled, _input_store(source), out, uses_gpu,
                         intermediate_budget, bar.step)
        gpus = _gpu_count() if uses_gpu else 0
        with make_executor(executor, workers, client, scheduler, gpus) as ex:
            results = self._execute(ex, ctx, todo, bar)
        names = ["[load]", *(s.name for s in self.steps), "[write]"]
        outputs = out.finish([t.key for t in tasks])
        return RunReport.collect(names, [*skipped, *results], time.perf_counter() - start,
                                 ex.describe(), outputs)

    def _execute(self, ex: Executor, ctx: RunContext, todo: list[GroupTask],
                 bar: Progress) -> list[GroupResult]:
        """Run the groups on the executor, feeding the progress bar."""
        results: list[GroupResult] = []
        bar.start(len(todo), f"{self.name} [{ex.describe()}]")
        try:
            for result in ex.map_unordered(execute_group, ctx, todo):
                results.append(result)
                bar.group_done(result)
        finally:
            bar.close()
        return results


def _gpu_count() -> int:
    """GPUs the GPU manager sees."""
    from memtype.gpu import get_gpu_manager

    return get_gpu_manager().count
