"""The ``memtype`` command line: ``info``, ``bench``, ``demo``, ``run``.

User errors end with exit code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
from collections.abc import Callable, Sequence

from memtype.errors import CommandError, MemtypeError

__all__ = ["main", "CommandError"]

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

    Errors memtype raises on purpose and operating-system errors (a missing or existing
    file, a permission, a symlink loop, a full disk) print one line on stderr and give exit
    code 2; anything else is a bug and keeps its traceback. Ctrl-C gives exit code 130.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # the command's own process only
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.func
    try:
        return handler(args)
    except (MemtypeError, OSError) as exc:
        print(f"memtype {args.command}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = getattr(args, "interrupt_hint", "")
        print(f"memtype {args.command}: interrupted{hint}", file=sys.stderr)
        return 130


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (a multi-line message would break the one-line rule)."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


if __name__ == "__main__":  # ``python -m memtype.cli``
    sys.exit(main())
