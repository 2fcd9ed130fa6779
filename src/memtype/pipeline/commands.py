"""The ``memtype demo`` and ``memtype run`` sub-commands (registered by :mod:`memtype.cli`).

User errors raise :class:`memtype.cli.CommandError` (or a ``FileNotFoundError`` /
``FileExistsError``), which the CLI prints as one line with exit code 2. A run in which
some group failed prints the failures and exits with 1.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import TYPE_CHECKING, Any

from memtype.pipeline.executors import EXECUTORS

if TYPE_CHECKING:
    from memtype.pipeline.pipeline import Pipeline
    from memtype.pipeline.report import RunReport

__all__ = ["register", "load_pipeline_file"]


def _command_error(message: str) -> Exception:
    """A CommandError of the CLI module that is running (imported here: it imports us).

    Workaround: under ``python -m memtype.cli`` the running module is ``__main__``, a second
    copy of ``memtype.cli`` whose ``main`` catches only its own ``CommandError`` class.
    """
    running: Any = sys.modules.get("__main__")
    spec = getattr(running, "__spec__", None)
    if spec is not None and spec.name == "memtype.cli":
        error: type[Exception] = running.CommandError
        return error(message)
    from memtype.cli import CommandError

    return CommandError(message)


def _add_executor_options(p: argparse.ArgumentParser) -> None:
    """--executor, --workers, --progress / --no-progress."""
    p.add_argument("--executor", choices=EXECUTORS, default="inline",
                   help="where groups run (default: inline)")
    p.add_argument("--workers", type=int, default=None,
                   help="threads or dask worker processes (default: one per CPU core)")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                   help="progress bar (default: when stderr is a terminal)")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``demo`` and ``run`` to the ``memtype`` command's sub-commands."""
    demo = subparsers.add_parser(
        "demo", help="synthetic plate -> mixed-framework pipeline -> OME-Zarr, CSV, PNG",
        description="Generate a synthetic plate, run the demo pipeline (torch, jax, numpy, "
                    "pyclesperanto) and write an OME-Zarr plate, counts.csv and montage.png.")
    demo.add_argument("--out", default="memtype-demo", help="output directory "
                      "(default: ./memtype-demo; replaced if it holds an earlier demo)")
    _add_executor_options(demo)
    demo.add_argument("--wells", type=int, default=4, help="wells (default 4)")
    demo.add_argument("--sites", type=int, default=4, help="sites per well (default 4)")
    demo.add_argument("--z-planes", type=int, default=8, help="z-planes (default 8)")
    demo.add_argument("--size", type=int, default=512, help="image size in pixels (default 512)")
    demo.add_argument("--no-opencl", action="store_true",
                      help="use scipy instead of pyclesperanto for the median step")
    demo.add_argument("--overwrite", action="store_true",
                      help="replace --out even if it holds something other than a demo")
    demo.set_defaults(func=_cmd_demo)

    run = subparsers.add_parser(
        "run", help="run the pipeline defined in a Python file",
        description="Run the module-level `pipeline` of PIPELINE.py over a directory of images.")
    run.add_argument("pipeline_file", metavar="PIPELINE.py")
    run.add_argument("--input", required=True, help="directory of input images")
    run.add_argument("--output", required=True, help="output directory")
    _add_executor_options(run)
    run.add_argument("--scheduler", default=None,
                     help="address of a dask scheduler (implies --executor dask)")
    run.add_argument("--pattern", default=None,
                     help="file-name pattern, e.g. '{well}_s{site}_c{channel}_z{z}.tif'")
    mode = run.add_mutually_exclusive_group()
    mode.add_argument("--resume", action="store_true",
                      help="keep an existing output and skip the groups it already holds")
    mode.add_argument("--overwrite", action="store_true", help="replace an existing output")
    run.set_defaults(func=_cmd_run)


def _check_workers(args: argparse.Namespace) -> None:
    """Refuse a worker count below 1."""
    if args.workers is not None and args.workers < 1:
        raise _command_error(f"--workers must be at least 1; received {args.workers}.")


def _cmd_demo(args: argparse.Namespace) -> int:
    """``memtype demo``."""
    from memtype.pipeline.demo import DEMO_MARKER, opencl_missing, run_demo
    from memtype.pipeline.synthetic import SyntheticPlate

    _check_workers(args)
    out = os.path.abspath(args.out)
    if os.path.exists(out) and not os.path.isdir(out):
        raise _command_error(f"--out {args.out!r} is a file; expected a directory.")
    if (os.path.isdir(out) and os.listdir(out) and not args.overwrite
            and not os.path.exists(os.path.join(out, DEMO_MARKER))):
        raise _command_error(f"--out {args.out!r} exists and does not hold an earlier demo; "
                             "choose another directory or pass --overwrite.")
    try:
        plate = SyntheticPlate(wells=args.wells, sites=args.sites, z_planes=args.z_planes,
                               size=args.size)
    except ValueError as exc:
        raise _command_error(str(exc)) from None
    missing = "" if args.no_opencl else opencl_missing()
    if missing:
        print(f"memtype: the denoise step runs on scipy, not pyclesperanto: {missing}",
              file=sys.stderr)
    result = run_demo(out, plate, executor=args.executor, workers=args.workers,
                      use_opencl=False if args.no_opencl else not missing,
                      progress=args.progress)
    print(result.report.summary())
    print()
    print(f"plate    {result.plate}")
    print(f"counts   {result.counts}")
    print(f"montage  {result.montage}")
    print(f"nuclei   {result.counted} counted, {result.true_cells} in the synthetic plate")
    return _failures(result.report)


def _failures(report: RunReport) -> int:
    """Exit code of a finished run: 1 (after listing them on stderr) if any group failed."""
    if report.ok:
        return 0
    for group in report.failed:
        print(f"memtype: {group.error}", file=sys.stderr)
    return 1


def load_pipeline_file(path: str) -> Pipeline:
    """The module-level ``pipeline`` of a Python file.

    The file is imported as a module of its own (``importlib``) and shipped with the run,
    so dask workers import it too (see :mod:`memtype.pipeline.modules`).

    Raises
    ------
    CommandError
        The file is missing, is not Python, or has no module-level ``pipeline``.
    """
    from memtype.pipeline.modules import import_pipeline_file
    from memtype.pipeline.pipeline import Pipeline

    if not os.path.isfile(path):
        raise _command_error(f"Pipeline file {path!r} does not exist.")
    try:
        module = import_pipeline_file(path)
    except ImportError as exc:
        if not path.endswith(".py"):
            raise _command_error(str(exc)) from None
        raise
    pipeline = getattr(module, "pipeline", None)
    if not isinstance(pipeline, Pipeline):
        found = "no" if pipeline is None else f"a {type(pipeline).__name__} as"
        raise _command_error(
            f"Pipeline file {path!r} has {found} module-level `pipeline`; expected "
            "`pipeline = Pipeline([...])` (from memtype.pipeline import Pipeline).")
    return pipeline


def _cmd_run(args: argparse.Namespace) -> int:
    """``memtype run``."""
    from memtype.pipeline.patterns import FilenamePattern

    _check_workers(args)
    if args.pattern is not None:
        try:
            FilenamePattern(args.pattern)
        except ValueError as exc:
            raise _command_error(str(exc)) from None
    pipeline = load_pipeline_file(args.pipeline_file)
    executor = "dask" if args.scheduler else args.executor
    try:
        report = pipeline.run(args.input, args.output, executor=executor, workers=args.workers,
                              scheduler=args.scheduler, resume=args.resume,
                              overwrite=args.overwrite, pattern=args.pattern,
                              progress=args.progress)
    except ValueError as exc:  # configuration: pattern fields, task_by, output format
        raise _command_error(str(exc)) from None
    print(report.summary())
    for name, path in report.outputs.items():
        print(f"{name:<8} {path}")
    return _failures(report)
