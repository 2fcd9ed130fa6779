"""``memtype run`` and ``memtype demo``: broken pipeline files, symlink loops, foreign output
directories, plate sizes and sys.exit in a step; user errors are one line with exit code 2."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memtype.cli import CommandError, main
from memtype.errors import CommandError as ErrorsCommandError
from memtype.errors import MemtypeError
from tests.pipeline_support import EXAMPLE, ROOT, write_plate


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


def _cli(*args: str, module: str = "memtype.cli") -> subprocess.CompletedProcess[str]:
    """``python -m memtype.cli ...`` (or ``-m memtype``) in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", module, *args], capture_output=True,
                          text=True, cwd=ROOT, env=env, timeout=300)


def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> str:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]
    return lines[0]


def test_command_error_is_one_class_in_memtype_errors() -> None:
    assert CommandError is ErrorsCommandError and issubclass(CommandError, MemtypeError)


# -- pipeline files that fail to import -----------------------------------------------------
@pytest.mark.parametrize(("source", "needles"), [
    ("import memtype\ndef f(:\n    pass\n", ("line 2", "SyntaxError")),
    ("import memtype\nimport no_such_module_here\n",
     ("line 2", "ModuleNotFoundError", "no_such_module_here")),
    ("x = 1\nraise RuntimeError('boom\\nsecond line')\n", ("line 2", "RuntimeError: boom")),
    ("import sys\nsys.exit(4)\n", ("line 2", "SystemExit: 4")),
])
@pytest.mark.parametrize("module", ["memtype.cli", "memtype"])
@pytest.mark.requires("tifffile")
def test_a_pipeline_file_that_fails_to_import_is_a_one_line_usage_error(
        plate_dir: Path, tmp_path: Path, source: str, needles: tuple[str, ...],
        module: str) -> None:
    bad = tmp_path / "broken_pipeline.py"
    bad.write_text(source)
    result = _cli("run", str(bad), "--input", str(plate_dir), "--output",
                  str(tmp_path / "out"), module=module)
    _one_line_error(result, "broken_pipeline.py", "failed to import", *needles)
    assert not (tmp_path / "out").exists()


def test_pipeline_file_errors_are_pipeline_file_errors(tmp_path: Path) -> None:
    from memtype.errors import PipelineFileError
    from memtype.pipeline.model.modules import import_pipeline_file

    bad = tmp_path / "bad.py"
    bad.write_text("1/0\n")
    with pytest.raises(PipelineFileError, match=r"line 1\): ZeroDivisionError") as info:
        import_pipeline_file(bad)
    assert isinstance(info.value, ImportError)
    assert isinstance(info.value.__cause__, ZeroDivisionError)
    latin = tmp_path / "latin.py"
    latin.write_bytes(b"# caf\xe9\n")
    with pytest.raises(PipelineFileError, match="not UTF-8"):
        import_pipeline_file(latin)
    with pytest.raises(PipelineFileError, match=r"not a \.py file"):
        import_pipeline_file(tmp_path / "notes.txt")


@pytest.mark.requires("tifffile")
def test_a_symlink_loop_under_the_input_is_a_one_line_usage_error(plate_dir: Path,
                                                                  tmp_path: Path) -> None:
    src = tmp_path / "in"
    src.mkdir()
    for name in os.listdir(plate_dir):
        os.symlink(plate_dir / name, src / name)
    os.symlink(src / "loop_b", src / "loop_a")
    os.symlink(src / "loop_a", src / "loop_b")
    result = _cli("run", str(EXAMPLE), "--input", str(src), "--output", str(tmp_path / "o"))
    _one_line_error(result, "loop_")


@pytest.mark.requires("torch", "jax")  # the example pipeline runs torch and jax steps
# -- --overwrite deletes only what memtype wrote ------------------------------------------
def test_overwrite_refuses_a_foreign_directory(plate_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("precious")
    args = ("run", str(EXAMPLE), "--input", str(plate_dir), "--output", str(out))
    result = _cli(*args, "--overwrite")
    _one_line_error(result, "memtype did not write", "--overwrite-foreign")
    assert (out / "thesis.txt").read_text() == "precious"
    assert main([*args, "--overwrite-foreign"]) == 0
    assert not (out / "thesis.txt").exists() and (out / "plate.zarr").is_dir()
    assert main([*args, "--overwrite"]) == 0  # memtype's own output now


def test_run_demo_refuses_a_foreign_directory_too(tmp_path: Path) -> None:
    from memtype.pipeline.demo import run_demo
    from memtype.pipeline.synthetic import SyntheticPlate

    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("precious")
    with pytest.raises(FileExistsError, match="does not hold an earlier demo"):
        run_demo(out, SyntheticPlate(wells=1, sites=1, z_planes=2, size=32))
    assert (out / "thesis.txt").read_text() == "precious"


# -- sys.exit in a step: that group fails, exit code 1 -------------------------------------
@pytest.mark.requires("tifffile")
def test_sys_exit_in_a_step_exits_1_and_runs_the_other_groups(plate_dir: Path,
                                                              tmp_path: Path) -> None:
    bad = tmp_path / "exiting_pipeline.py"
    bad.write_text(
        "import sys\n"
        "import memtype as mt\n"
        "from memtype.pipeline import FunctionStep, Pipeline\n"
        "@mt.numpy\n"
        "def leave(stack):\n"
        "    if stack.max() > 0:\n"
        "        sys.exit(3)\n"
        "    return stack\n"
        "pipeline = Pipeline([FunctionStep(leave)])\n")
    result = _cli("run", str(bad), "--input", str(plate_dir), "--output", str(tmp_path / "o"))
    assert result.returncode == 1, (result.stdout, result.stderr)
    assert "0 done, 0 skipped, 2 failed" in result.stdout
    # one distinct error, printed once with its count and groups
    assert result.stderr.count("SystemExit: 3") == 1
    assert "memtype: 2 groups failed (well=A01, well=A02): step 1 'leave'" in result.stderr


# -- memtype demo: plate sizes --------------------------------------------------------------
@pytest.mark.parametrize(("args", "needles"), [
    (("--wells", "385"), ("1 to 384",)),
    (("--wells", "100", "--plate", "96"), ("96-well plate", "384")),
])
def test_demo_wells_over_the_plate_is_a_usage_error(tmp_path: Path, args: tuple[str, ...],
                                                    needles: tuple[str, ...]) -> None:
    result = _cli("demo", "--out", str(tmp_path / "d"), *args)
    _one_line_error(result, *needles)
    assert not (tmp_path / "d").exists()


def test_demo_plate_must_be_96_or_384(tmp_path: Path) -> None:
    result = _cli("demo", "--out", str(tmp_path / "d"), "--plate", "48")
    assert result.returncode == 2 and "invalid choice" in result.stderr


@pytest.mark.requires("torch", "jax", "scipy", "zarr", "tifffile", "PIL")
def test_demo_with_48_wells(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from tests.pipeline_support import read_csv

    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--wells", "48", "--sites", "1", "--z-planes", "2",
                 "--size", "32", "--no-opencl"])
    assert code == 0, capsys.readouterr()
    assert "48 groups: 48 done" in capsys.readouterr().out
    wells = {r["well"] for r in read_csv(out / "results" / "counts.csv")}
    assert wells == {f"{r}{c:02d}" for r in "ABCD" for c in range(1, 13)}


def _declared_grid(plate_zarr: Path) -> tuple[int, int]:
    """(rows, columns) an OME-Zarr plate declares in its metadata."""
    import json

    plate = json.loads((plate_zarr / "zarr.json").read_text())["attributes"]["ome"]["plate"]
    return len(plate["rows"]), len(plate["columns"])


@pytest.mark.requires("torch", "jax", "scipy", "zarr", "tifffile", "PIL")
@pytest.mark.parametrize(("plate", "grid"), [("96", (8, 12)), ("384", (16, 24))])
def test_demo_plate_size_reaches_the_plate_metadata(tmp_path: Path, plate: str,
                                                    grid: tuple[int, int],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    code = main(["demo", "--out", str(out), "--wells", "1", "--plate", plate, "--sites", "1",
                 "--z-planes", "2", "--size", "32", "--no-opencl"])
    assert code == 0, capsys.readouterr()
    assert _declared_grid(out / "results" / "plate.zarr") == grid
