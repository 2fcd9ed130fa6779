"""Pipeline: steps run over the groups of a plate, by an executor, into an output directory."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Never

from memtype.errors import InvalidArgumentError, MemtypeError
from memtype.frameworks import get_framework, gpu_index
from memtype.gpu import get_gpu_manager
from memtype.omezarr.metadata import SPACE_UNITS
from memtype.pipeline.analysis.fields import IMAGE_TABLE, channel_field
from memtype.pipeline.execution.executors import Executor, make_executor
from memtype.pipeline.execution.progress import Progress, make_progress
from memtype.pipeline.execution.provenance import check_resume, run_record
from memtype.pipeline.execution.report import GroupResult, RunReport
from memtype.pipeline.execution.runner import RunContext, execute_group
from memtype.pipeline.execution.stopping import FailureWatch
from memtype.pipeline.io.outputs import OutputSpec, zarr_roles
from memtype.pipeline.io.patterns import (
    DEFAULT_PATTERN,
    FilenamePattern,
    group_records,
    split_well,
)
from memtype.pipeline.io.plates import PlateLayout, layout_of
from memtype.pipeline.io.sources import PathOrStore, is_store, output_inside_input
from memtype.pipeline.model.options import (
    ExecutionOptions,
    ReadOptions,
    WriteOptions,
    run_options,
)
from memtype.pipeline.model.requirements import check_frameworks
from memtype.pipeline.model.steps import FunctionStep, GroupTask, NamedSpec
from memtype.pipeline.planning import (
    Plan,
    Replanner,
    device_budgets,
    group_shapes,
    image_shapes,
    make_plan,
)
from memtype.storage.remote import is_url

if TYPE_CHECKING:
    from memtype.gpu import GpuId
    from memtype.pipeline.analysis.summaries import Summary
    from memtype.pipeline.readers import PlateMetadata, Reader

__all__ = ["Pipeline"]


def _pixel_size(size: Sequence[float] | None) -> tuple[float, float, float] | None:
    """``(z, y, x)`` from ``(z, y, x)`` or ``(y, x)`` positive numbers (z 1.0), or None."""
    if size is None:
        return None
    values = list(size) if not isinstance(size, (str, bytes)) else []
    if len(values) not in (2, 3) or not all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in values):
        raise InvalidArgumentError(
            "pixel_size must be 2 or 3 positive numbers, (y, x) or (z, y, x); received "
            f"{size!r}.")
    z, y, x = ([1.0] + values)[-3:]
    return float(z), float(y), float(x)


def _as_step(step: FunctionStep | Callable[..., Any] | NamedSpec) -> FunctionStep:
    """A FunctionStep from a step, a bare decorated function or a catalog name."""
    return step if isinstance(step, FunctionStep) else FunctionStep(step)


def _own_steps(steps: Sequence[FunctionStep]) -> list[FunctionStep]:
    """The pipeline's own copies of the steps, named uniquely (names key plans, summaries,
    outputs and tables): a repeated name becomes ``name_2``, ``name_3``..., never a name
    another step has. The caller's steps are left as they are."""
    declared = {step.name for step in steps}
    taken: set[str] = set()
    own = []
    for step in steps:
        name, count = step.name, 1
        while name in taken or (count > 1 and name in declared):
            count += 1
            name = f"{step.name}_{count}"
        taken.add(name)
        own.append(step.with_name(name))
    return own


class Pipeline:
    """A list of steps run over every group of images.

    Parameters
    ----------
    steps : sequence of FunctionStep, decorated functions or catalog names
        Run in order on every group; a bare function becomes ``FunctionStep(func)``, and so
        does a catalog name (``"gaussian"``, ``("skimage.filters.gaussian", {"sigma": 2})``,
        see ``docs/functions.md``). The
        pipeline keeps its own copies (``self.steps``), named uniquely: a repeated name
        becomes ``name_2``, ``name_3``...; the steps passed are never changed.
    pattern : str, optional
        The file-name pattern of the input images (see :mod:`memtype.pipeline.io.patterns`).
        Given (any pattern, the default's text too), the input is read by it, whatever
        vendor metadata its folder holds; not given, the layout is detected (and TIFF
        outputs are named by ``DEFAULT_PATTERN``).
    task_by : sequence of str
        The fields that make one group, one independent task (default: each well).
    output_format : {"zarr", "tiff"}
        Images written as an OME-Zarr plate (``plate.zarr``), or TIFF files named by the
        pattern (``images/``). Materialized steps go beside them under their step name.
    name : str
        Shown in progress and summaries.
    pyramid_levels : int
        Resolution levels of each final OME-Zarr field (default 1): level k halves Y and X
        k times (block means), capped where an image gets too small. Channel names come
        from the pattern's channel field (``"channel 2"``).
    ome_version : {"0.5", "0.4"}
        OME-Zarr version of the plates written (``output_format="zarr"``): 0.5 (zarr v3,
        the default) or 0.4 (zarr v2, what Fiji, MoBIE and OMERO open).
    pixel_size : sequence of float, optional
        Physical size of a voxel, ``(z, y, x)`` or ``(y, x)``, in ``pixel_unit``: the
        scale of each OME-Zarr field (viewers show physical distances).
    pixel_unit : str
        The unit of ``pixel_size`` (default ``"micrometer"``, an OME-NGFF unit name).
    summary : Summary, optional
        A plate map and plate id for the per-well summary (``well_summary.csv``), written
        when steps make object sets or measurements (see ``docs/analysis.md``).

    Examples
    --------
    >>> pipeline = Pipeline([FunctionStep(normalize), FunctionStep(project)])  # doctest: +SKIP
    >>> report = pipeline.run("plate/", "results/", executor="dask")  # doctest: +SKIP
    >>> print(report.summary())  # doctest: +SKIP
    """

    def __init__(self, steps: Sequence[FunctionStep | Callable[..., Any] | NamedSpec], *,
                 pattern: str | None = None, task_by: Sequence[str] = ("well",),
                 output_format: str = "zarr", name: str = "pipeline",
                 pyramid_levels: int = 1, ome_version: str = "0.5",
                 pixel_size: Sequence[float] | None = None,
                 pixel_unit: str = "micrometer", summary: Summary | None = None) -> None:
        if not steps:
            raise InvalidArgumentError("A pipeline needs at least one step.")
        if output_format not in ("zarr", "tiff"):
            raise InvalidArgumentError(
                f"output_format must be 'zarr' or 'tiff'; received {output_format!r}.")
        self.steps: list[FunctionStep] = _own_steps([_as_step(s) for s in steps])
        self.pattern = FilenamePattern(DEFAULT_PATTERN if pattern is None else pattern)
        self._pattern_given = pattern is not None  # else the layout is detected
        self.task_by = tuple(task_by)
        self.output_format = output_format
        self.name = name
        if isinstance(pyramid_levels, bool) or not isinstance(pyramid_levels, int) \
                or pyramid_levels < 1:
            raise InvalidArgumentError(
                f"pyramid_levels must be an int >= 1; received {pyramid_levels!r}.")
        self.pyramid_levels = pyramid_levels
        if ome_version not in ("0.5", "0.4"):
            raise InvalidArgumentError(
                f"ome_version must be '0.5' or '0.4'; received {ome_version!r}.")
        self.ome_version = ome_version
        self.pixel_size = _pixel_size(pixel_size)
        if pixel_unit not in SPACE_UNITS:
            raise InvalidArgumentError(
                f"pixel_unit must be an OME-NGFF space unit such as 'micrometer' or "
                f"'nanometer' (one of {', '.join(SPACE_UNITS)}); received {pixel_unit!r}.")
        self.pixel_unit = pixel_unit
        self.summary = summary
        _check_graph(self.steps)

    def __repr__(self) -> str:
        names = ", ".join(s.name for s in self.steps)
        return f"Pipeline([{names}], pattern={self.pattern.template!r}, task_by={self.task_by})"

    def uses_gpu(self) -> bool:
        """Whether a step runs in a memory type that can live on a CUDA GPU, and a GPU exists."""
        cuda = any(get_framework(c.input_type).managed_gpu
                   for s in self.steps for c in s.all_calls())
        return cuda and _gpu_count() > 0

    def tasks(self, source: PathOrStore, pattern: str | None = None,
              layout: str | None = None) -> list[GroupTask]:
        """The groups a run over ``source`` would process, in order (``pattern`` and
        ``layout`` as in :meth:`run`).

        Raises
        ------
        StoreNotFoundError
            ``source`` is not an existing directory (a ``FileNotFoundError``).
        NoImagesError
            No file matches the pattern (a ``FileNotFoundError``).
        ValueError
            ``task_by`` names a field the pattern does not have.
        """
        return self._tasks(self.reader(source, pattern, layout), None)

    def reader(self, source: PathOrStore, pattern: str | None = None,
               layout: str | None = None) -> Reader:
        """The reader of ``source``: ``layout``'s; with ``pattern`` (or a pipeline made with
        one) the pattern's; else the detected layout's (see :mod:`memtype.pipeline.readers`).

        Raises
        ------
        StoreNotFoundError
            ``source`` is not an existing directory (a ``FileNotFoundError``).
        InvalidArgumentError
            An unknown layout, or ``pattern`` with a vendor layout (a ``ValueError``).
        """
        from memtype.pipeline.readers import open_input  # the readers load on first use

        if pattern:
            return open_input(source, layout, FilenamePattern(pattern))
        given = self._pattern_given and layout in (None, "pattern")
        return open_input(source, layout, self.pattern if given else None)

    def _tasks(self, reader: Reader, exclude: str | None) -> list[GroupTask]:
        """The groups of the reader's images."""
        records = reader.records(exclude)
        return [GroupTask(k, tuple(v)) for k, v in group_records(records, self.task_by).items()]

    def run(self, source: PathOrStore, output: str | os.PathLike[str],
            executor: str | Executor | None = None, *,
            execution: ExecutionOptions | None = None, read: ReadOptions | None = None,
            write: WriteOptions | None = None, **moved: Never) -> RunReport:
        """Run every step on every group and write the results.

        The options are three objects, one per question (see
        :mod:`memtype.pipeline.model.options`): how the input is read (:class:`ReadOptions`,
        a property of the instrument's data), where and how the groups execute
        (:class:`ExecutionOptions`, a property of the machine), what happens to the output
        (:class:`WriteOptions`, a property of this run). Each is built once, reused and
        printed; the ``memtype run`` flags fill them one to one. The common call stays one
        line: ``pipeline.run(source, output)``, ``pipeline.run(source, output, "dask")``.

        Parameters
        ----------
        source : path, Store or Reader
            The input images: a plate directory in any layout memtype reads (detected; see
            ``docs/inputs.md``), any :class:`~memtype.storage.Store` (read by pattern), or a
            reader (:mod:`memtype.pipeline.readers`). ``report.input`` says which layout was
            read and what its metadata holds.
        output : path or str
            The output directory: ``plate.zarr`` (or ``images/``), one ``<table>.csv`` per
            side output, and ``.memtype/`` (the record of finished groups for ``resume``);
            or an ``s3://bucket/prefix`` holding the same objects (see
            :mod:`memtype.pipeline.io.remote_output`).
        executor : {"inline", "threads", "dask"} or Executor, optional
            Shorthand for ``execution=ExecutionOptions(executor=...)`` (default
            ``"inline"``); with ``execution``, it replaces that object's executor, which must
            then be the default.
        execution : ExecutionOptions, optional
            Where and how groups run: executor, workers, client, scheduler, progress,
            max_failures, budgets, intermediate_budget.
        read : ReadOptions, optional
            How the input is read: pattern, layout.
        write : WriteOptions, optional
            What happens to the output: resume, overwrite, overwrite_foreign, plate,
            overview_column.
        **moved
            Refused: the flat keywords of earlier versions (``workers=``, ``resume=``...)
            raise an ``ArgumentTypeError`` naming their new place (typed ``Never``, so a
            type checker flags them before they run).

        Returns
        -------
        RunReport
            Per-group outcomes (a failed group is recorded, the others go on unless the run
            stops, see ``max_failures``) and per-step figures;
            ``report.raise_for_failures()`` raises for failures.

        Raises
        ------
        ArgumentTypeError
            An old flat keyword (``workers=2``: the message names
            ``execution=ExecutionOptions(workers=...)``), an option of the wrong class (a
            ``TypeError``).
        FileNotFoundError
            A missing input directory, or no image matching the pattern.
        FileExistsError
            ``output`` exists and is not empty, without ``resume`` or ``overwrite``; or
            memtype did not write it, without ``overwrite_foreign``.
            With ``resume``, groups of ``output`` are done and were produced by a different
            pipeline (another step, function, option, pattern, pipeline file content or
            memtype version): the error names what changed (see
            :mod:`memtype.pipeline.execution.provenance`).
        ValueError
            The output is (or contains) the input directory; a pattern without the
            ``task_by`` fields; a plate output the grouping cannot fill; a ``plate`` that
            lacks some of the wells.
        FrameworkNotInstalledError
            A step can run only in frameworks that cannot be imported (raised before any
            group runs; a step with several implementations just loses those).

        Examples
        --------
        >>> fast = ExecutionOptions("threads", workers=4, max_failures=0)
        >>> report = pipeline.run("plate/", "results/", execution=fast,
        ...                       write=WriteOptions(resume=True))  # doctest: +SKIP
        """
        start = time.perf_counter()
        execution, read, write = run_options(executor, execution, read, write, moved)
        store = self.reader(source, read.pattern, read.layout)
        tasks = self._tasks(store, output_inside_input(store, os.fspath(output)))
        out = self._output_spec(os.fspath(output), store.pattern, tasks, write.plate,
                                store.metadata)
        out = dataclasses.replace(out, overview_column=write.overview_column)
        self._check_before_run(store, tasks[:1])  # before the output is touched
        todo, skipped = self._start_output(out, store, tasks, write)
        results, stopped, ex, plan, note = self._execute_all(execution, store, out, tasks,
                                                             todo, bool(skipped))
        outputs = out.finish([t.key for t in tasks])
        outputs.update(self._summaries(out.root, tasks, store))
        report = RunReport.collect(["[load]", *(s.name for s in self.steps), "[write]"],
                                   [*skipped, *results], time.perf_counter() - start,
                                   ex, outputs, stopped)
        report.plan, report.plan_note, report.input = plan, note, store.metadata
        return report

    def _check_before_run(self, store: Any, first: Sequence[GroupTask]) -> None:
        """What can fail before any group runs: frameworks, routes, label and named
        channels (checked on the first group)."""
        check_frameworks(self.steps)
        _check_routes(self.steps, first)
        _check_label_channels(self.steps, first, store.pattern, self.output_format)
        _check_channel_inputs(self.steps, first, store.pattern, store.metadata)
        if self.summary is not None:
            self.summary.check()  # its plate map, not first read at the run's end

    def _start_output(self, out: OutputSpec, store: Any, tasks: Sequence[GroupTask],
                      write: WriteOptions) -> tuple[list[GroupTask], list[GroupResult]]:
        """Apply the existing-output rule and, resuming, check the earlier run was this
        pipeline's: the groups to run, and those skipped as done."""
        out.prepare(resume=write.resume, overwrite=write.overwrite,
                    overwrite_foreign=write.overwrite_foreign)
        resumed = write.resume and any(out.is_done(t.key) for t in tasks)
        check_resume(out.root, run_record(self.steps, self._settings(store.pattern, out),
                                          store, tasks), resumed)
        done = {t.key for t in tasks if resumed and out.is_done(t.key)}
        return ([t for t in tasks if t.key not in done],
                [GroupResult(t.key, "skipped") for t in tasks if t.key in done])

    def _execute_all(self, execution: ExecutionOptions, store: Any, out: OutputSpec,
                     tasks: Sequence[GroupTask], todo: list[GroupTask], resumed: bool
                     ) -> tuple[list[GroupResult], str | None, str, Plan | None, str | None]:
        """Run the groups to do on the execution's executor: their results, why the run
        stopped (None: it did not), the executor's description, the plan and its note."""
        uses_gpu = self.uses_gpu()
        ex = make_executor(execution.executor, execution.workers, execution.client,
                           execution.scheduler, _gpu_count() if uses_gpu else 0)
        try:
            declared = self._prepared_steps(ex, store, tasks, out.root, resumed)
            plan, note, replanner = self._run_plan(store, store.pattern, todo, uses_gpu,
                                                   execution.budgets, declared)
            steps = plan.apply(declared) if plan is not None else declared
            progress = execution.progress
            bar = progress if isinstance(progress, Progress) else make_progress(progress)
            ctx = RunContext(tuple(steps), store.pattern, store, out, uses_gpu,
                             execution.intermediate_budget, bar.step, replanner)
            results, stopped = self._execute(ex, ctx, todo, bar,
                                             FailureWatch(execution.max_failures))
        finally:
            if ex is not execution.executor:  # a given Executor stays open for the caller
                ex.close()
        if stopped is not None:  # groups running at the stop may have finished since
            seen = {r.key for r in results}
            results += [GroupResult(t.key, "done" if out.is_done(t.key) else "not_run")
                        for t in todo if t.key not in seen]
        return results, stopped, ex.describe(), plan, note

    def plan(self, source: PathOrStore | Sequence[Any] | Any, *, pattern: str | None = None,
             gpu_id: GpuId | None = None, budgets: Mapping[str, int] | None = None,
             layout: str | None = None) -> Plan:
        """Plan a run: each step's implementation, the conversions, the peak memory.

        Parameters
        ----------
        source : path, Store, 3D array or sequence of 2D arrays
            The input directory (or Store), planned from its first group's stack shapes and
            the first image's dtype; or the images of one stack.
        pattern : str, optional
            Overrides the pipeline's file-name pattern.
        layout : str, optional
            Reads the input as this layout instead of detecting it (see :meth:`run`).
        gpu_id : int, str or Device, optional
            The GPU the run would use: its index, its name (``"cuda:0"``) or its ``Device``
            (``memtype.gpu.GpuId``); checked first (``DeviceError``, a ``ValueError``).
        budgets : dict of str to int, optional
            Room per device in bytes, keyed like ``"cuda:0"`` or ``"opencl:0"`` (e.g. what a
            ``GPUMemoryManager`` has left: ``budget(device) - used_bytes(device)``): an
            implementation whose step input and output do not fit takes no part, and the
            plan says why. A managed GPU also needs the free memory and is refused over
            90% ``memory_pressure``. A key is anything ``memtype.gpu.as_device`` takes (a
            name, a ``Device``, a GPU index), a value an int number of bytes, at least 0:
            checked first (``DeviceError``, ``ArgumentTypeError``, ``InvalidArgumentError``),
            in :meth:`run` too.

        Returns
        -------
        Plan
            Prints as a table; ``plan.choices`` names the implementation of every step that
            offers several (``FunctionStep(mt.variants(torch=f, numpy=g))``).

        Raises
        ------
        FileNotFoundError
            A missing input directory, or no image matching the pattern.
        DeviceError
            ``gpu_id`` names no GPU (a negative index, a bool, another device kind...).
        ValueError
            No chain of available implementations exists.
        FrameworkNotInstalledError
            A step can run only in frameworks that cannot be imported.
        """
        index = gpu_index(gpu_id)
        budgets = device_budgets(budgets)
        check_frameworks(self.steps)
        if isinstance(source, (str, os.PathLike)) or is_store(source) or _is_reader(source):
            store = self.reader(source, pattern, layout)
            first = self._tasks(store, None)[0]
            _check_routes(self.steps, [first])
            _check_label_channels(self.steps, [first], store.pattern, self.output_format)
            _check_channel_inputs(self.steps, [first], store.pattern, store.metadata)
            shapes, dtype = group_shapes(store, first, self.steps[0])
        else:
            shapes, dtype = image_shapes(source)
        return make_plan(self.steps, shapes, dtype, index, budgets=budgets)

    def _run_plan(self, store: Any, pattern: FilenamePattern, todo: Sequence[GroupTask],
                  uses_gpu: bool, budgets: Mapping[str, int] | None,
                  steps: Sequence[FunctionStep] | None = None
                  ) -> tuple[Plan | None, str | None, Replanner | None]:
        """The plan of a run from its first group (and its fallbacks), or why there is none."""
        if not todo:
            return None, "no group to run", None
        steps = self.steps if steps is None else steps
        gpu_id = 0 if uses_gpu else None
        try:
            shapes, dtype = group_shapes(store, todo[0], steps[0])
            plan = make_plan(steps, shapes, dtype, gpu_id, budgets=budgets)
        except (MemtypeError, OSError) as exc:  # the run goes on with declared implementations
            return None, f"no plan ({type(exc).__name__}: {exc}); first implementations run", None
        return plan, None, Replanner(steps, plan, shapes, dtype, gpu_id, budgets)

    def _prepared_steps(self, ex: Executor, store: Any, tasks: Sequence[GroupTask],
                        root: str, resume: bool) -> list[FunctionStep]:
        """The steps with each plate-wide pass computed from every group (or read back from
        an earlier run of this output) and turned into the step applying it."""
        if not any(s.plate_pass for s in self.steps):
            return list(self.steps)
        from memtype.pipeline.analysis import passes  # the analysis passes load on first use

        return passes.run_passes(self.steps, ex, store, tasks,
                          channel_field(store.pattern.fields), root, resume)

    def _summaries(self, root: str, tasks: Sequence[GroupTask], store: Any) -> dict[str, str]:
        """The per-well summary of the object and image tables, when steps made any."""
        if not any(s.inputs for s in self.steps):
            return {}
        from memtype.pipeline.analysis import summaries  # the analysis loads on first use

        tables = [*(s.labels for s in self.steps if s.inputs and s.labels), IMAGE_TABLE]
        wells = sorted({str(r.get("well")) for t in tasks for r in t.records})
        plate = os.path.basename(os.path.normpath(str(getattr(store, "root", "") or "plate")))
        zarr = os.path.join(root, "plate.zarr")
        return summaries.write_summaries(root, self.summary, tables, wells, plate or "plate",
                               zarr if self.output_format == "zarr" and os.path.isdir(zarr)
                               else None)

    def _settings(self, pattern: FilenamePattern, out: OutputSpec) -> dict[str, Any]:
        """The run settings that shape its results (for the resume record)."""
        return {"pattern": pattern.template, "task by": list(self.task_by),
                "output format": self.output_format, "pyramid levels": self.pyramid_levels,
                "plate rows": list(out.rows), "plate columns": list(out.columns),
                "ome version": self.ome_version, "pixel size": self.pixel_size,
                "pixel unit": self.pixel_unit}

    def _output_spec(self, output: str, pattern: FilenamePattern,
                     tasks: Sequence[GroupTask], plate: int | None = None,
                     metadata: PlateMetadata | None = None) -> OutputSpec:
        """Where and how this run writes; for a plate, its rows and columns, and the
        input's channel names and pixel size where the pipeline sets none.

        Raises
        ------
        ValueError
            A plate output whose pattern or ``task_by`` cannot make complete plate fields.
        """
        output_cls = _output_class(output)
        size, unit = self.pixel_size, self.pixel_unit
        if size is None and metadata is not None and metadata.pixel_size_um is not None:
            size, unit = (metadata.z_step_um or 1.0, *metadata.pixel_size_um), "micrometer"
        if self.output_format != "zarr":  # TIFF files carry the pixel size too
            return output_cls(output, "tiff", pattern.template, pixel_size=size,
                              pixel_unit=unit)
        roles = zarr_roles(pattern.fields)
        split = [f for f in self.task_by if roles.get(f) in ("t", "c", "z")]
        if split:
            raise InvalidArgumentError(
                f"task_by={self.task_by} splits plate images along {split}; each OME-Zarr "
                "field is written whole by one group, so group by well (and site) only, "
                "or use output_format='tiff'.")
        wells = {str(r.get("well")) for t in tasks for r in t.records}
        rows, columns = _plate_grid(wells, plate)
        names = tuple((str(k), v) for k, v in metadata.channel_names.items()) if metadata else ()
        return output_cls(output, "zarr", pattern.template, rows, columns, self.pyramid_levels,
                          ome_version=self.ome_version, pixel_size=size, pixel_unit=unit,
                          channel_names=names,
                          label_steps=tuple((s.name, s.labels, s.materialize)
                                            for s in self.steps if s.labels is not None))

    def _execute(self, ex: Executor, ctx: RunContext, todo: list[GroupTask], bar: Progress,
                 watch: FailureWatch) -> tuple[list[GroupResult], str | None]:
        """Run the groups on the executor, feeding the progress bar, until they are all done
        or ``watch`` stops the run: the results, and why it stopped (None: it did not)."""
        results: list[GroupResult] = []
        stopped: str | None = None
        bar.start(len(todo), f"{self.name} [{ex.describe()}]")
        mapped = ex.map_unordered(execute_group, ctx, todo)
        try:
            for result in mapped:
                results.append(result)
                bar.group_done(result)
                stopped = watch.stop_reason(result)
                if stopped is not None:
                    break
        finally:
            if isinstance(mapped, Generator):
                mapped.close()  # the executor cancels the groups that have not started
            bar.close()
        return results, stopped


def _plate_grid(wells: set[str], plate: int | None = None
                ) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The rows and columns an OME-Zarr plate declares for these wells: those of ``plate``
    (96 or 384 wells), else of the smallest standard plate that has them all, else just the
    rows and columns in use.

    Raises
    ------
    InvalidArgumentError
        ``plate`` is not a standard size, or lacks some of the wells (a ``ValueError``).
    """
    if plate is not None:
        given = PlateLayout(plate)
        outside = sorted(w for w in wells if not given.holds(*split_well(w)))
        if outside:
            more = f" and {len(outside) - 5} more" if len(outside) > 5 else ""
            raise InvalidArgumentError(
                f"plate={plate}: a {plate}-well plate has rows {given.rows[0]}-"
                f"{given.rows[-1]} and columns 1-{given.columns[-1]}; received wells outside "
                f"it: {', '.join(outside[:5])}{more}.")
        return given.rows, tuple(str(c) for c in given.columns)
    layout = layout_of(wells)
    if layout is not None:
        return layout.rows, tuple(str(c) for c in layout.columns)
    parts = [split_well(w) for w in wells]
    rows = sorted({r for r, _ in parts}, key=lambda r: (len(r), r))
    return tuple(rows), tuple(str(c) for c in sorted({c for _, c in parts}))


def _is_reader(source: object) -> bool:
    """Whether ``source`` is a plate reader."""
    from memtype.pipeline.readers import Reader  # the readers load on first use

    return isinstance(source, Reader)


def _gpu_count() -> int:
    """GPUs the GPU manager sees."""
    return get_gpu_manager().count


def _check_graph(steps: Sequence[FunctionStep]) -> None:
    """Every named input refers to a channel or to what an earlier step made; plate-wide
    passes come first.

    Raises
    ------
    InvalidArgumentError
        A reference to nothing made before the step (the message lists what was).
    """
    from memtype.pipeline.analysis import passes, summaries  # loaded by the first Pipeline

    passes.pass_steps(steps)
    made: list[str] = []
    for step in steps:
        if step.inputs and step.labels is not None and (
                step.labels in made or step.labels in (IMAGE_TABLE, summaries.WELL_TABLE)):
            taken = "another step's" if step.labels in made else "memtype's own table"
            raise InvalidArgumentError(
                f"step {step.name!r}: labels={step.labels!r} is {taken} name; an object set "
                f"names its table ({step.labels}.csv): choose another name.")
        for item in step.inputs:
            if item.channel is None and item.reference not in made:
                raise InvalidArgumentError(
                    f"step {step.name!r}: inputs[{item.parameter!r}] = {item.reference!r} "
                    f"names nothing made before it; expected 'channel:<name or value>' or "
                    f"one of {made or 'no named values yet (name a channel)'}.")
        if step.inputs:
            made.append(step.name)
            if step.labels is not None:
                made.append(step.labels)


def _check_channel_inputs(steps: Sequence[FunctionStep], tasks: Sequence[GroupTask],
                          pattern: FilenamePattern, metadata: PlateMetadata | None) -> None:
    """Every channel a named input refers to is one of the plate's (its value or name).

    Raises
    ------
    InvalidArgumentError
        A channel the first group does not have (found before any group runs).
    """
    channel = channel_field(pattern.fields)
    if channel is None or not tasks:
        return
    names = {str(k): v for k, v in (metadata.channel_names.items() if metadata else ())}
    values = sorted({str(dict(r.key).get(channel)) for r in tasks[0].records})
    known = set(values) | {names[v] for v in values if v in names}
    for step in steps:
        for item in step.inputs:
            if item.channel is not None and item.channel not in known:
                have = ", ".join(f"{v} ({names[v]})" if v in names else v for v in values)
                raise InvalidArgumentError(
                    f"step {step.name!r}: inputs[{item.parameter!r}] = {item.reference!r}: "
                    f"the plate has no channel {item.channel!r}; it has {have}.")


def _check_routes(steps: Sequence[FunctionStep], tasks: Sequence[GroupTask]) -> None:
    """Every value of a routing step's ``group_by`` field in the first group has a route.

    Raises
    ------
    InvalidArgumentError
        A value without one (every group would fail on it), found before any group runs.
    """
    for step in steps:
        if step.routes is None or step.group_by is None or not tasks:
            continue
        values = sorted({str(dict(r.key).get(step.group_by)) for r in tasks[0].records})
        routed = {str(k) for k in step.routes}
        missing = [v for v in values if v not in routed]
        if missing:
            raise InvalidArgumentError(
                f"step {step.name!r} routes by {step.group_by} and has no function for "
                f"{step.group_by}={', '.join(missing)} (the plate has {', '.join(values)}; "
                f"it has {sorted(routed)}); give every value one, or, to work on one channel "
                "beside the others, name it: inputs={'image': 'channel:"
                f"{sorted(routed)[0]}'}}.")


def _check_label_channels(steps: Sequence[FunctionStep], tasks: Sequence[GroupTask],
                          pattern: FilenamePattern, output_format: str) -> None:
    """A chain step writing labels runs on every channel's stack: on a group of several
    channels it would write a label image of several channels, which no plate holds.

    Raises
    ------
    InvalidArgumentError
        Such a step and a group of more than one channel (found before any group runs).
    """
    channel = channel_field(pattern.fields)
    if output_format != "zarr" or channel is None or not tasks:
        return
    values = sorted({str(dict(r.key).get(channel)) for r in tasks[0].records})
    for step in steps:
        if step.labels is None or step.inputs or channel in step.variable_components \
                or len(values) < 2:
            continue
        raise InvalidArgumentError(
            f"step {step.name!r} writes the labels {step.labels!r} from every channel's "
            f"stack, but each group holds {len(values)} channels ({', '.join(values)}); a "
            "label image has one. Name the channel it segments: FunctionStep(..., "
            f"inputs={{'image': 'channel:{values[0]}'}}, labels={step.labels!r}) (and "
            f"measure with inputs={{'labels': {step.labels!r}, 'intensity': "
            f"'channel:{values[-1]}'}}).")


def _output_class(output: str) -> type[OutputSpec]:
    """The output of a run writing to ``output``: a folder, or an ``s3://`` prefix."""
    if is_url(output):  # the object-storage output (asyncio, obstore) loads only for a URL
        from memtype.pipeline.io.remote_output import ObjectOutputSpec

        return ObjectOutputSpec
    return OutputSpec
