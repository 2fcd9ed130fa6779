"""The ``memtype`` command line: ``info``, ``bench``, ``demo``, ``run``.

User errors end with exit code 2 and one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from types import FrameType

from memtype._info import info_report
from memtype.errors import CommandError, MemtypeError
from memtype.frameworks import iter_frameworks
from memtype.frameworks._startup import QUIET_VARIABLE

__all__ = ["main", "run_command", "CommandError", "INTERRUPTED"]

INTERRUPTED = 130
"""The exit code after Ctrl-C (128 + SIGINT, as a shell reports it)."""

Handler = Callable[[argparse.Namespace], int]


def _cmd_info(args: argparse.Namespace) -> int:
    print(info_report())
    return 0


def _cmd_bench(args: argparse.Namespace) -> int:
    from memtype._bench import run_matrix  # statistics, decimal: for memtype bench only

    print(run_matrix(sizes=args.sizes, repeats=args.repeats, png=args.png))
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
    # the pipeline layer (about 0.2 s) loads inside main(), after run_command's SIGINT
    # handler is installed: a Ctrl-C while it imports gives exit code 130 (python -m memtype)
    from memtype.pipeline.commands import register

    register(sub)


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with every sub-command."""
    parser = argparse.ArgumentParser(
        prog="memtype",
        description="Move arrays between the frameworks of memtype's table: "
                    f"{', '.join(fw.name for fw in iter_frameworks())}.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_info_bench(sub)
    _add_pipeline_commands(sub)
    return parser


_interrupted = threading.Event()
"""Set by :func:`_interrupt` (the SIGINT handler :func:`run_command` installs)."""


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGINT: remember it, then raise KeyboardInterrupt as Python's own handler does.

    The mark tells :func:`main` that an error which follows was caused by the interrupt:
    an import that Ctrl-C broke inside C code comes out as an ``ImportError`` (NumPy's
    ``PyCapsule_Import``), not as ``KeyboardInterrupt``.
    """
    _interrupted.set()
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``memtype`` command; returns the exit code.

    Errors memtype raises on purpose and operating-system errors (a missing or existing
    file, a permission, a symlink loop, a full disk) print one line on stderr and give exit
    code 2; anything else is a bug and keeps its traceback. Ctrl-C at any moment (while the
    parser and the sub-command's modules are imported too) prints one line and gives exit
    code 130.
    """
    command = "memtype"
    args: argparse.Namespace | None = None
    try:
        # frameworks' start-up chatter stays off the command's stderr, warnings do not
        # (memtype.frameworks._startup); the command's own process and its workers only
        os.environ.setdefault(QUIET_VARIABLE, "1")
        args = build_parser().parse_args(argv)
        command = f"memtype {args.command}"
        handler: Handler = args.func
        return handler(args)
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt) or (_interrupted.is_set()
                                                  and not isinstance(exc, SystemExit)):
            hint = getattr(args, "interrupt_hint", "")
            print(f"{command}: interrupted{hint}", file=sys.stderr)
            return INTERRUPTED
        if isinstance(exc, (MemtypeError, OSError)):
            print(f"{command}: error: {_one_line(exc)}", file=sys.stderr)
            return 2
        raise


def run_command() -> int:
    """:func:`main` for a process that ends with it (the ``memtype`` script, ``python -m``).

    Installs a SIGINT handler that marks the interrupt (see :func:`_interrupt`); a Ctrl-C
    after the command returned (while the interpreter shuts down) is ignored, so that the
    exit code stays the command's and no traceback follows its last line.
    """
    code = INTERRUPTED
    on_main = threading.current_thread() is threading.main_thread()
    try:
        if on_main:
            signal.signal(signal.SIGINT, _interrupt)
            _keep_interrupts()
        code = main()
    except KeyboardInterrupt:  # between the handler's install and main's own try
        print("memtype: interrupted", file=sys.stderr)
    finally:
        if on_main:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
    return code


def _keep_interrupts() -> None:
    """Deliver SIGINT again when its KeyboardInterrupt was dropped: one raised while Python
    runs a finalizer or a weakref callback goes to ``sys.unraisablehook`` (printed, and the
    command went on); sent again, it is raised at the next line of plain code. Installed
    once per process (``_memtype_cli`` installs it before this module is imported)."""
    previous = sys.unraisablehook
    if getattr(previous, "keeps_interrupts", False):
        return

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type,
                                                          KeyboardInterrupt):
            # from another thread, a moment later: sent from here, it would be raised
            # inside this hook and dropped again
            threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)).start()
            return
        previous(unraisable)

    hook.keeps_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook


def _one_line(exc: BaseException) -> str:
    """An error's message on one line (a multi-line message would break the one-line rule)."""
    return " ".join(line.strip() for line in str(exc).splitlines() if line.strip())


if __name__ == "__main__":  # ``python -m memtype.cli``
    sys.exit(run_command())
