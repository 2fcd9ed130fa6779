"""Ctrl-C at any moment of ``memtype run``: one line on stderr and exit code 130.

Real processes and real SIGINTs: early (while the ``memtype`` package and the sub-command's
modules are still being imported, found by watching the child map NumPy's extension) and
late (while a step runs, found by a file the step writes).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.pipeline_support import ROOT, write_plate

# the console script pip writes for `memtype = "_memtype_cli:main"`
SCRIPT = "import sys\nfrom _memtype_cli import main\nsys.exit(main())\n"
PROC_MAPS = Path("/proc/self/maps").exists()

SLOW_PIPELINE = """\
import os, time
import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline

@mt.numpy
def slow(stack):
    if stack.shape[-1] > 32:  # the 64 x 64 images, not the planner's 32 x 32 trial sample
        open(os.environ["MEMTYPE_TEST_MARK"], "w").close()
        time.sleep(120)
    return stack

pipeline = Pipeline([FunctionStep(slow)])
"""


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


def _start(argv: list[str], tmp_path: Path, plate_dir: Path, options: list[str] | None = None,
           new_session: bool = False) -> tuple[subprocess.Popen[str], Path]:
    """A ``memtype run`` of the slow pipeline, in a process of its own (with
    ``new_session``, in a process group of its own, as a terminal's foreground job)."""
    pipeline = tmp_path / "slow_pipeline.py"
    pipeline.write_text(SLOW_PIPELINE)
    mark = tmp_path / "step-started"
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "MEMTYPE_TEST_MARK": str(mark)}
    args = [*argv, "run", str(pipeline), "--input", str(plate_dir), "--output",
            str(tmp_path / "out"), *(options or [])]
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT, env=env, start_new_session=new_session), mark


def _wait_for(ready: object, process: subprocess.Popen[str], what: str) -> None:
    deadline = time.monotonic() + 120
    while not ready():  # type: ignore[operator]
        assert process.poll() is None, f"the command ended before {what}"
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.002)


def _numpy_mapped(pid: int) -> bool:
    """Whether the process has NumPy's core extension mapped (it is importing memtype)."""
    try:
        return "_multiarray_umath" in Path(f"/proc/{pid}/maps").read_text()
    except OSError:
        return False


def _interrupted(process: subprocess.Popen[str]) -> str:
    process.send_signal(signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert lines[0].startswith("memtype") and "interrupted" in lines[0], err
    return lines[0]


@pytest.mark.skipif(not PROC_MAPS, reason="needs /proc/<pid>/maps (Linux)")
@pytest.mark.parametrize("delay", [0.0, 0.02, 0.05, 0.1, 0.2, 0.4, 0.8])
@pytest.mark.requires("tifffile")
def test_ctrl_c_early_in_memtype_run_exits_130_with_one_line(
        plate_dir: Path, tmp_path: Path, delay: float) -> None:
    process, _ = _start([sys.executable, "-c", SCRIPT], tmp_path, plate_dir)
    _wait_for(lambda: _numpy_mapped(process.pid), process, "memtype's import")
    time.sleep(delay)
    _interrupted(process)


@pytest.mark.parametrize("argv", [["-c", SCRIPT], ["-m", "memtype"], ["-m", "memtype.cli"]],
                         ids=["script", "python -m memtype", "python -m memtype.cli"])
@pytest.mark.requires("tifffile")
def test_ctrl_c_while_a_step_runs_exits_130_and_says_how_to_resume(
        plate_dir: Path, tmp_path: Path, argv: list[str]) -> None:
    process, mark = _start([sys.executable, *argv], tmp_path, plate_dir)
    _wait_for(mark.exists, process, "the step")
    line = _interrupted(process)
    assert line.startswith("memtype run: interrupted") and "--resume" in line


@pytest.mark.requires("distributed")
def test_ctrl_c_under_dask_is_one_line_without_worker_tracebacks(plate_dir: Path,
                                                                 tmp_path: Path) -> None:
    """Ctrl-C in a terminal reaches the whole process group: the driver and every dask
    worker; the command still ends with its one line, and no worker's traceback or log."""
    process, mark = _start([sys.executable, "-m", "memtype"], tmp_path, plate_dir,
                           ["--executor", "dask", "--workers", "2"], new_session=True)
    _wait_for(mark.exists, process, "the step on a worker")
    os.killpg(process.pid, signal.SIGINT)
    _, err = process.communicate(timeout=120)
    assert process.returncode == 130, err
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    lines = [x for x in err.strip().splitlines() if not x.startswith("memtype: reading")]
    assert len(lines) == 1 and "interrupted" in lines[0], err



DROPPED = """\
import os, signal, sys, time
from memtype.cli import _interrupt, _keep_interrupts
signal.signal(signal.SIGINT, _interrupt)
if sys.argv[1] == "kept":
    _keep_interrupts()
elif sys.argv[1] == "script":  # the memtype script's own, before memtype.cli is imported
    from _memtype_cli import _keep_interrupts as keep
    keep(signal.SIGINT)

class Finalized:
    def __del__(self):  # Ctrl-C arrives while Python runs a finalizer
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.2)

try:
    Finalized()
    time.sleep(2)
    print("went on")
except KeyboardInterrupt:
    print("interrupted")
"""


@pytest.mark.parametrize(("mode", "expected"), [("kept", "interrupted"), ("script", "interrupted"),
                                               ("plain", "went on")])
def test_a_ctrl_c_dropped_in_a_finalizer_is_delivered_again(mode: str, expected: str) -> None:
    """A KeyboardInterrupt raised inside a finalizer goes to sys.unraisablehook and is
    dropped (the plain case: the program went on, as a test's early Ctrl-C once let
    `memtype run` run its pipeline to the end); the command's hook sends SIGINT again."""
    done = subprocess.run([sys.executable, "-c", DROPPED, mode], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, timeout=60)
    assert done.stdout.strip() == expected, done.stderr
