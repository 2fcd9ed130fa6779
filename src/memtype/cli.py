"""The ``memtype`` command line: ``info``, ``bench``, ``demo``, ``run``.

User errors end with exit code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence

from memtype.errors import MemtypeError

__all__ = ["main", "CommandError"]


class CommandError(MemtypeError):
    """A user error on the command line: printed as one line, exit code 2."""


Handler = Callable[[argparse.Namespace], int]


def _cmd_info(args: argparse.Namespace) -> int:
    from memtype._info import info_report

    print(info_report())
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from memtype._matrix import run_matrix

    print(run_matrix(sizes=args.sizes, repeats=args.repeats, png=args.png))
    return 0


def _cmd_matrix_demo(args: argparse.Namespace) -> int:
    from memtype._info import info_report
    from memtype._matrix import run_matrix

    print(info_report())
    print()
    print(run_matrix(sizes=["1MiB"], repeats=5, png=None))
    return 0


def _add_info_bench(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser("info", help="frameworks, versions, devices, DLPack, what is missing")
    p.set_defaults(func=_cmd_info)
    p = sub.add_parser("bench", help="the conversion matrix on this machine")
    p.add_argument("--sizes", nargs="+", default=["1KiB", "1MiB", "64MiB"],
                   help="array sizes, e.g. 1KiB 1MiB 64MiB 256MiB")
    p.add_argument("--repeats", type=int, default=11, help="timed repeats per cell (median)")
    p.add_argument("--png", default=None, help="also write a heatmap PNG here")
    p.set_defaults(func=_cmd_bench)


def _add_pipeline_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    if importlib.util.find_spec("memtype.pipeline.commands") is not None:
        from memtype.pipeline.commands import register

        register(sub)
        return
    p = sub.add_parser("demo", help="framework report and conversion matrix")
    p.set_defaults(func=_cmd_matrix_demo)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="memtype",
        description="Move arrays between NumPy, CuPy, PyTorch, TensorFlow, JAX and pyclesperanto.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_info_bench(sub)
    _add_pipeline_commands(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memtype`` command; returns the exit code.

    Errors memtype raises on purpose (and missing or existing files) print one line on stderr
    and give exit code 2; anything else is a bug and keeps its traceback.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the command's own process only
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except (MemtypeError, FileNotFoundError, FileExistsError, NotADirectoryError,
            IsADirectoryError) as exc:
        print(f"memtype {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"memtype {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # ``python -m memtype.cli``: run the imported module's main, so
    from memtype.cli import main as _main  # its CommandError is the one handlers raise

    sys.exit(_main())
