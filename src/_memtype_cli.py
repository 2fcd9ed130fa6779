"""The ``memtype`` script's entry point, outside the ``memtype`` package.

Importing ``memtype.cli`` imports the ``memtype`` package first (NumPy and the core, about
0.2 s). A Ctrl-C in that time would escape any handler inside the package and end the
process with Python's traceback; from here it is caught like every later Ctrl-C: one
line on stderr and exit code 130 (see :func:`memtype.cli.main`). This module imports
nothing until :func:`main` runs, inside its handler.
"""


def main() -> int:
    """Import the command line and run it; Ctrl-C while importing gives exit code 130."""
    seen: list[int] = []
    try:
        import signal

        def interrupt(signum: int, frame: object) -> None:
            seen.append(signum)  # an import that Ctrl-C broke in C code is an ImportError
            raise KeyboardInterrupt

        signal.signal(signal.SIGINT, interrupt)
        _keep_interrupts(signal.SIGINT)
        from memtype.cli import run_command

        return run_command()  # handles its own Ctrl-C from its first line on
    except BaseException as exc:
        if not (seen or isinstance(exc, KeyboardInterrupt)) or isinstance(exc, SystemExit):
            raise
        import signal
        import sys

        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the process ends here
        print("memtype: interrupted", file=sys.stderr)
        return 130


def _keep_interrupts(signum: int) -> None:
    """Deliver ``signum`` again when its KeyboardInterrupt was dropped: one raised while
    Python runs a finalizer or a weakref callback (frequent while modules import) goes to
    ``sys.unraisablehook`` and the command went on (a test's Ctrl-C 0.02 s into the imports
    ran the pipeline to its end); sent again, it is raised at the next line of plain code.
    :func:`memtype.cli.run_command` keeps the hook."""
    import os
    import sys
    import threading

    previous = sys.unraisablehook

    def hook(unraisable: "sys.UnraisableHookArgs") -> None:
        if unraisable.exc_type is not None and issubclass(unraisable.exc_type,
                                                          KeyboardInterrupt):
            # from another thread, a moment later: sent from here, it would be raised
            # inside this hook and dropped again
            threading.Timer(0.05, os.kill, (os.getpid(), signum)).start()
            return
        previous(unraisable)

    hook.keeps_interrupts = True  # type: ignore[attr-defined]
    sys.unraisablehook = hook
