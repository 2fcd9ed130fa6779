"""The ``memtype demo`` and ``memtype run`` sub-commands (registered by :mod:`memtype.cli`).

User errors raise :class:`memtype.errors.CommandError` (or another memtype error, or an
``OSError``), which the CLI prints as one line with exit code 2. A run in which
some group failed prints the failures and exits with 1.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from memtype.errors import CommandError, PipelineSpecError
from memtype.frameworks import NO_OPENCL_VARIABLE
from memtype.omezarr.metadata import SPACE_UNITS
from memtype.pipeline.catalog.listing import add_functions_command
from memtype.pipeline.execution.executors import EXECUTORS
from memtype.pipeline.execution.stopping import DEFAULT_MAX_FAILURES
from memtype.pipeline.io.inspection import inspect_plate
from memtype.pipeline.io.plates import PLATE_SIZES
from memtype.pipeline.model.modules import import_pipeline_file
from memtype.pipeline.model.options import ExecutionOptions, ReadOptions, WriteOptions
from memtype.pipeline.model.pipeline import Pipeline, _pixel_size
from memtype.pipeline.readers import LAYOUTS
from memtype.storage.remote import local_path

if TYPE_CHECKING:
    from memtype.pipeline.execution.report import RunReport

__all__ = ["register", "load_pipeline_file", "run_options_from"]


def _add_executor_options(p: argparse.ArgumentParser) -> None:
    """--executor, --workers, --progress / --no-progress."""
    p.add_argument("--executor", choices=EXECUTORS, default="inline",
                   help="where groups run (default: inline)")
    p.add_argument("--workers", type=int, default=None,
                   help="threads or dask worker processes (default: one per CPU core)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")


class _BudgetAction(argparse.Action):
    """``--budget DEVICE=BYTES``, repeated: a dict of device -> bytes (checked by
    :class:`~memtype.pipeline.model.options.ExecutionOptions`)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        device, _, size = str(values).rpartition("=")
        if not device or not size.strip().isdigit():
            raise CommandError(f"--budget must be DEVICE=BYTES, e.g. opencl:0=2147483648; "
                               f"received {values!r}.")
        budgets = dict(getattr(namespace, self.dest) or {})
        budgets[device] = int(size)
        setattr(namespace, self.dest, budgets)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo`` and ``run`` to the ``memtype`` command's sub-commands."""
    demo = subparsers.add_parser(
        "demo", help="synthetic plate -> mixed-framework pipeline -> OME-Zarr, CSV, PNG",
        description="Generate a synthetic plate, run the demo's mixed-framework pipeline "
                    "and write an OME-Zarr plate, counts.csv and montage.png.")
    demo.add_argument("--out", default="memtype-demo", help="output directory "
                      "(default: ./memtype-demo; replaced if it holds an earlier demo)")
    _add_executor_options(demo)
    demo.add_argument("--wells", type=int, default=4,
                      help="wells, 1 to 384, laid out as on a real plate: A01..H12 up to 96, "
                           "A01..P24 up to 384 (default 4)")
    demo.add_argument("--plate", type=int, choices=PLATE_SIZES, default=None,
                      help="plate layout: 96 (8 x 12) or 384 (16 x 24) wells "
                           "(default: the smallest that holds --wells)")
    demo.add_argument("--sites", type=int, default=4, help="sites per well (default 4)")
    demo.add_argument("--z-planes", type=int, default=8, help="z-planes (default 8)")
    demo.add_argument("--size", type=int, default=512, help="image size in pixels (default 512)")
    demo.add_argument("--no-opencl", action="store_true",
                      help="use scipy instead of pyclesperanto for the median step "
                           "(MEMTYPE_NO_OPENCL=1)")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace --out even if it holds something other than a demo")
    demo.set_defaults(func=_cmd_demo)

    run = subparsers.add_parser(
        "run", help="run the pipeline defined in a Python or YAML file",
        description="Run the module-level `pipeline` of PIPELINE.py, or the pipeline "
                    "PIPELINE.yaml says (docs/analysis.md), over a directory of images.")
    run.add_argument("pipeline_file", metavar="PIPELINE.py|PIPELINE.yaml")
    run.add_argument("--input", required=True, help="directory of input images, or the URL "
                     "of an OME-Zarr plate (s3://, https://)")
    run.add_argument("--output", required=True, help="output directory, or an s3:// prefix")
    _add_executor_options(run)
    _add_preview_command(subparsers)
    run.add_argument("--scheduler", default=None,
                     help="address of a dask scheduler (implies --executor dask)")
    run.add_argument("--pattern", default=None,
                     help="file-name pattern, e.g. '{well}_s{site}_c{channel}_z{z}.tif'")
    _add_layout_option(run)
    run.add_argument("--max-failures", type=int, default=DEFAULT_MAX_FAILURES, metavar="N",
                     help="stop when the first N groups all fail with the same error "
                          f"(default {DEFAULT_MAX_FAILURES}; 0: never stop early); a full "
                          "disk stops the run at once")
    run.add_argument("--budget", dest="budgets", action=_BudgetAction, default=None,
                     metavar="DEVICE=BYTES", help="room on a device for the plan, in bytes, "
                     "e.g. opencl:0=2147483648 (repeat for several devices)")
    run.add_argument("--intermediate-budget", type=int, default=None, metavar="BYTES",
                     help="bytes of intermediates each group keeps on its device before "
                          "spilling (default: no limit)")
    run.add_argument("--plate", type=int, choices=PLATE_SIZES, default=None,
                     help="the plate the OME-Zarr output declares: 96 (8 x 12) or 384 "
                          "(16 x 24) wells (default: the smallest that has every well)")
    run.add_argument("--overview-column", default=None, metavar="[TABLE:]COLUMN",
                     help="what plate_overview.png's heatmap shows: a side-output column's "
                          "mean per well, e.g. area or nuclei:area (default: a table's "
                          "count, else its rows per well)")
    run.add_argument("--ome-version", choices=("0.5", "0.4"), default=None,
                     help="OME-Zarr version of the output: 0.5 (zarr v3) or 0.4 (zarr v2, "
                          "for Fiji/MoBIE/OMERO); default: the pipeline file's (0.5)")
    run.add_argument("--pixel-size", default=None, metavar="Z,Y,X|Y,X",
                     help="physical size of a voxel, e.g. 2,0.325,0.325 (default: the "
                          "pipeline file's, else the input's metadata)")
    run.add_argument("--pixel-unit", default=None, metavar="UNIT",
                     help="unit of --pixel-size, an OME-NGFF name (default: the pipeline "
                          "file's, micrometer)")
    run.add_argument("--no-opencl", action="store_true",
                     help="leave OpenCL (pyclesperanto) out: steps with another "
                          "implementation use it (MEMTYPE_NO_OPENCL=1)")
    run.add_argument("--plan", action="store_true",
                     help="print the plan (implementations, conversions, peak memory) and exit "
                          "without running")
    run.add_argument("--preview", default=None, metavar="WELL",
                     help="run only the first site of WELL into --output, drawing what each "
                          "step made (as memtype preview)")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true",
                      help="keep an existing output and skip the groups it already holds")
    mode.add_argument("--overwrite", action="store_true",
                      help="replace an existing output of an earlier run")
    mode.add_argument("--overwrite-foreign", action="store_true",
                      help="replace --output even if memtype did not write it "
                           "(deletes everything in it)")
    run.set_defaults(func=_cmd_run)

    inspect = subparsers.add_parser(
        "inspect", help="what a plate holds: layout, wells, sites, channels, z, t, missing",
        description="Summarise a plate folder before a run: its layout, plate size, wells, "
                    "sites, channels (names), z, t, image dtype and shape, pixel size, images "
                    "missing and total size. Reads one image's header, no pixel data.")
    inspect.add_argument("input", metavar="DIR", help="the plate folder, or the URL of an "
                         "OME-Zarr plate (s3://, https://)")
    inspect.add_argument("--pattern", default=None,
                         help="file-name pattern (reads the folder by pattern)")
    _add_layout_option(inspect)
    inspect.set_defaults(func=_cmd_inspect)

    add_functions_command(subparsers)


def _add_preview_command(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]
                         ) -> None:
    """``memtype preview``: one field through a pipeline, every step's result drawn."""
    preview = subparsers.add_parser(
        "preview", help="run one field through a pipeline and draw what each step made",
        description="Run the first site of --well (or --site) through PIPELINE and write "
                    "what each step produced: preview.png, the OME-Zarr plate with the object "
                    "sets as labels, each step's images as <step>.zarr, and the tables.")
    preview.add_argument("pipeline_file", metavar="PIPELINE.py|PIPELINE.yaml")
    preview.add_argument("--input", required=True, help="directory of input images")
    preview.add_argument("--well", required=True, help="the well to preview, e.g. A01")
    preview.add_argument("--site", default=None, help="its site (default: the first)")
    preview.add_argument("--output", default="preview",
                         help="where the preview goes (default ./preview; replaced)")
    preview.add_argument("--pattern", default=None, help="file-name pattern (as for run)")
    _add_layout_option(preview)
    preview.set_defaults(func=_cmd_preview)


def _cmd_preview(args: argparse.Namespace) -> int:
    """``memtype preview``."""
    pipeline = load_pipeline_file(args.pipeline_file)
    try:
        reader = pipeline.reader(args.input, args.pattern, args.layout)
    except ValueError as exc:  # an unknown layout, or --pattern with a vendor layout
        raise CommandError(str(exc)) from None
    return _preview(pipeline, reader, args.output, args.well, args.site)


def _preview(pipeline: Pipeline, reader: Any, output: str, well: str,
             site: str | None) -> int:
    """Run one field of ``reader`` through ``pipeline`` into ``output``; print what it wrote."""
    from memtype.pipeline.analysis import preview  # about 0.1 s: for memtype preview only

    try:
        result = preview.preview(pipeline, reader, output, well=well, site=site)
    except ValueError as exc:  # no such well or site, a configuration error
        raise CommandError(str(exc)) from None
    print(f"preview  {result.group}: {result.picture}")
    print(f"output   {result.output} (open plate.zarr and <step>.zarr in napari)")
    if result.failed:
        print(f"memtype: {result.failed}", file=sys.stderr)
        return 1
    return 0


def _add_layout_option(p: argparse.ArgumentParser) -> None:
    """--layout."""
    p.add_argument("--layout", choices=list(LAYOUTS), default=None,
                   help="read the input as this layout (default: detected)")


def _cmd_inspect(args: argparse.Namespace) -> int:
    """``memtype inspect``."""
    summary = inspect_plate(args.input, layout=args.layout, pattern=args.pattern)
    try:
        from rich.console import Console
    except ImportError:  # rich is optional (memtype[all]): plain text then
        print(summary.table())
    else:
        Console(soft_wrap=True).print(summary.rich_table())
    return 0


def _check_workers(args: argparse.Namespace) -> None:
    """Refuse a worker count below 1."""
    if args.workers is not None and args.workers < 1:
        raise CommandError(f"--workers must be at least 1; received {args.workers}.")


def _cmd_demo(args: argparse.Namespace) -> int:
    """``memtype demo``."""
    with _opencl_off(args.no_opencl):
        return _demo(args)


def _demo(args: argparse.Namespace) -> int:
    """``memtype demo``'s work."""
    # the demo, an application of the library, loads for memtype demo only
    from memtype.pipeline import demo, synthetic

    _check_workers(args)
    demo.check_demo_output(args.out, overwrite=args.overwrite)
    try:
        plate = synthetic.SyntheticPlate(wells=args.wells, sites=args.sites, z_planes=args.z_planes,
                               size=args.size, plate=args.plate)
    except ValueError as exc:
        raise CommandError(str(exc)) from None
    missing = "" if args.no_opencl else demo.opencl_missing()
    if missing:
        print(f"memtype: the denoise step runs on scipy, not pyclesperanto: {missing}",
              file=sys.stderr)
    execution = ExecutionOptions(**_flags_of(args, ExecutionOptions))
    result = demo.run_demo(args.out, plate, execution=execution,
                      use_opencl=False if args.no_opencl else not missing,
                      overwrite=args.overwrite)
    print(result.report.summary())
    print()
    print(f"plate    {result.plate}")
    print(f"counts   {result.counts}")
    print(f"montage  {result.montage}")
    print(f"nuclei   {result.counted} counted, {result.true_cells} in the synthetic plate")
    return _failures(result.report)


def _failures(report: RunReport) -> int:
    """Exit code of a finished run: 1 if any group failed or the run stopped, after
    printing each distinct error once (with how many groups and which) and why it stopped
    on stderr."""
    if report.ok:
        return 0
    for line in report.error_lines():
        print(f"memtype: {line}", file=sys.stderr)
    if report.stopped:
        print(f"memtype: stopped: {report.stopped}", file=sys.stderr)
    return 1


def load_pipeline_file(path: str) -> Pipeline:
    """The module-level ``pipeline`` of a Python file, or the pipeline a YAML file says
    (:mod:`memtype.pipeline.model.pipeline_file`).

    The Python file is imported as a module of its own (``importlib``) and shipped with the run,
    so dask workers import it too (see :mod:`memtype.pipeline.model.modules`).

    Raises
    ------
    CommandError
        The file is missing or has no module-level ``pipeline``; a YAML file that does not
        say a valid pipeline (the message starts with ``file:line:``).
    PipelineFileError
        It is not a ``.py`` file, or importing it failed.
    """
    # pipelines written as YAML (and the summaries they name) load for run and preview only
    from memtype.pipeline.model import pipeline_file

    if not os.path.isfile(path):
        raise CommandError(f"Pipeline file {path!r} does not exist.")
    if pipeline_file.is_pipeline_spec(path):  # a pipeline written as data (YAML)
        try:
            return pipeline_file.load_pipeline_spec(path)
        except PipelineSpecError as exc:
            raise CommandError(str(exc)) from None
    module = import_pipeline_file(path)
    pipeline = getattr(module, "pipeline", None)
    if not isinstance(pipeline, Pipeline):
        found = "no" if pipeline is None else f"a {type(pipeline).__name__} as"
        raise CommandError(
            f"Pipeline file {path!r} has {found} module-level `pipeline`; expected "
            "`pipeline = Pipeline([...])` (from memtype.pipeline import Pipeline).")
    return pipeline


def _with_output_options(pipeline: Pipeline, args: argparse.Namespace) -> Pipeline:
    """The pipeline with the output options given on the command line (the file's
    pipeline itself is left as it is).

    Raises
    ------
    CommandError
        ``--pixel-size`` is not 2 or 3 positive numbers, or ``--pixel-unit`` is not an
        OME-NGFF space unit.
    """
    chosen = copy.copy(pipeline)
    chosen.ome_version = args.ome_version or pipeline.ome_version
    if args.pixel_size is not None:
        try:
            chosen.pixel_size = _pixel_size([float(v) for v in args.pixel_size.split(",")])
        except ValueError:
            raise CommandError(f"--pixel-size must be Z,Y,X or Y,X positive numbers (e.g. "
                               f"2,0.325,0.325); received {args.pixel_size!r}.") from None
    if args.pixel_unit is not None:
        if args.pixel_unit not in SPACE_UNITS:
            raise CommandError(f"--pixel-unit must be an OME-NGFF space unit such as "
                               f"micrometer or nanometer (one of {', '.join(SPACE_UNITS)}); "
                               f"received {args.pixel_unit!r}.")
        chosen.pixel_unit = args.pixel_unit
    return chosen


def run_options_from(args: argparse.Namespace
                     ) -> tuple[ExecutionOptions, ReadOptions, WriteOptions]:
    """:meth:`Pipeline.run`'s options from a command's flags: a flag fills the field of its
    name (``--max-failures`` -> ``ExecutionOptions.max_failures``); a command without a
    field's flag leaves its default.

    Raises
    ------
    CommandError
        A flag's value the option refuses (e.g. a ``--pattern`` that is no pattern).
    """
    try:
        return (ExecutionOptions(**_flags_of(args, ExecutionOptions)),
                ReadOptions(**_flags_of(args, ReadOptions)),
                WriteOptions(**_flags_of(args, WriteOptions)))
    except ValueError as exc:
        raise CommandError(str(exc)) from None


def _flags_of(args: argparse.Namespace, options: Any) -> dict[str, Any]:
    """The flags of ``args`` named as fields of the dataclass ``options``."""
    given = vars(args)
    return {f.name: given[f.name] for f in dataclasses.fields(options) if f.name in given}


def _cmd_run(args: argparse.Namespace) -> int:
    """``memtype run``."""
    with _opencl_off(args.no_opencl):
        return _run(args)


@contextmanager
def _opencl_off(off: bool) -> Iterator[None]:
    """``--no-opencl``: ``MEMTYPE_NO_OPENCL=1`` for the command (dask workers it starts
    inherit it), the caller's value back afterwards (a command run in-process ends)."""
    if not off:
        yield
        return
    saved = os.environ.get(NO_OPENCL_VARIABLE)
    os.environ[NO_OPENCL_VARIABLE] = "1"
    try:
        yield
    finally:
        if saved is None:
            os.environ.pop(NO_OPENCL_VARIABLE, None)
        else:
            os.environ[NO_OPENCL_VARIABLE] = saved


def _run(args: argparse.Namespace) -> int:
    """``memtype run``'s work."""
    _check_workers(args)
    if args.max_failures < 0:
        raise CommandError(f"--max-failures must be 0 (never stop early) or more; received "
                           f"{args.max_failures}.")
    execution, read, write = run_options_from(args)
    pipeline = _with_output_options(load_pipeline_file(args.pipeline_file), args)
    try:
        reader = pipeline.reader(args.input, read.pattern, read.layout)
    except ValueError as exc:  # an unknown layout, or --pattern with a vendor layout
        raise CommandError(str(exc)) from None
    print(f"input    {args.input} read as {reader.layout} (from "
          f"{reader.metadata.detected_from})", flush=True)
    if args.plan:
        try:
            print(pipeline.plan(reader).table())
        except ValueError as exc:  # configuration, or no chain of implementations
            raise CommandError(str(exc)) from None
        return 0
    if args.preview is not None:
        return _preview(pipeline, reader, args.output, args.preview, None)
    args.interrupt_hint = ("; the groups that finished are kept: run again with --resume "
                           "to do the rest")
    try:
        report = pipeline.run(reader, local_path(args.output), execution=execution,
                              write=write)
    except ValueError as exc:  # configuration: pattern fields, task_by, output format
        raise CommandError(str(exc)) from None
    print(report.summary())
    for name, path in report.outputs.items():
        print(f"{name:<8} {path}")
    return _failures(report)
