"""End to end: ``memtype demo`` and ``memtype run``, and their user errors."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memtype.cli import main
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import (
    EXAMPLE,
    ROOT,
    SMALL,
    demo_reference,
    example_reference,
    load_field,
    read_csv,
    stacks,
    write_plate,
)

DEMO_PLATE = ["--wells", "2", "--sites", "2", "--z-planes", "4", "--size", "128"]
DEMO = SyntheticPlate(wells=2, sites=2, z_planes=4, size=128)


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


def _cli(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """``python -m memtype.cli ...`` in a fresh process."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "memtype.cli", *args], capture_output=True,
                           text=True, cwd=cwd, env=env, timeout=300)


# -- memtype demo ------------------------------------------------------------------------
def _check_demo_output(out: Path) -> None:
    """Plate values and counts equal the NumPy/scipy recomputation; PNG and CSV complete."""
    rows = read_csv(out / "results" / "counts.csv")
    assert len(rows) == 2 * 2 * 2
    counts = {(r["well"], int(r["site"]), int(r["channel"])): int(r["count"]) for r in rows}
    for key, stack in stacks(DEMO).items():
        projection, count = demo_reference(stack)
        field = load_field(out / "results" / "plate.zarr", key[0], key[1])
        assert field.shape == (2, 1, 128, 128) and field.dtype == np.float32
        np.testing.assert_allclose(field[key[2] - 1, 0], projection, atol=2e-5)
        assert counts[key] == count
        if key[2] == 1:  # nuclei are separate blobs: every synthetic cell is found
            assert count == DEMO.cell_counts[(key[0], key[1])]
            _check_nuclei(out, key[0], key[1], projection, count)
    from PIL import Image

    with Image.open(out / "results" / "montage.png") as png:
        assert png.size == (2 * 128, 2 * 128) and png.mode == "RGB"


def _check_nuclei(out: Path, well: str, site: int, projection: np.ndarray, count: int) -> None:
    """The field's nuclei labels: ids 1..count on the nuclei channel's blobs, one row each
    in nuclei.csv whose area is the id's pixel count."""
    import zarr

    group = zarr.open_group(str(out / "results" / "plate.zarr"), mode="r")
    labels = np.asarray(group[f"{well[0]}/{int(well[1:])}/{site}/labels/nuclei/0"][...])
    assert labels.shape == (1, 128, 128) and labels.dtype == np.uint16
    assert set(np.unique(labels)) == set(range(count + 1))
    assert ((labels[0] > 0) <= (projection > 0.2)).all()  # ids only on thresholded pixels
    rows = [r for r in read_csv(out / "results" / "nuclei.csv")
            if (r["well"], int(r["site"])) == (well, site)]
    assert [int(r["label"]) for r in rows] == list(range(1, count + 1))
    assert [int(r["area"]) for r in rows] == np.bincount(labels.ravel())[1:].tolist()


@pytest.mark.requires("torch", "jax", "scipy", "zarr", "tifffile", "PIL", "ome_zarr")
def test_demo_writes_plate_counts_and_montage(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    assert main(["demo", "--out", str(out), *DEMO_PLATE]) == 0
    printed = capsys.readouterr().out
    assert "normalize" in printed and "subtract_background" in printed
    assert "2 groups: 2 done, 0 skipped, 0 failed" in printed
    total = sum(DEMO.cell_counts.values())
    assert f"nuclei   {total} counted, {total} in the synthetic plate" in printed
    _check_demo_output(out)
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Plate, Reader

    nodes = list(Reader(parse_url(str(out / "results" / "plate.zarr")))())
    assert nodes and any(isinstance(spec, Plate) for n in nodes for spec in n.specs)
    # a second run replaces the earlier demo without asking
    assert main(["demo", "--out", str(out), *DEMO_PLATE, "--no-opencl",
                 "--executor", "threads", "--workers", "2"]) == 0
    _check_demo_output(out)


def test_demo_refuses_a_directory_that_is_not_a_demo(tmp_path: Path) -> None:
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.txt").write_text("precious")
    result = _cli("demo", "--out", str(out), *DEMO_PLATE)
    assert result.returncode == 2 and "--overwrite" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr
    assert (out / "thesis.txt").exists()


# -- memtype run -------------------------------------------------------------------------
def _check_example_output(out: Path) -> None:
    stats = {(r["well"], int(r["site"]), int(r["channel"])): r
             for r in read_csv(out / "stats.csv")}
    assert len(stats) == 8
    for key, stack in stacks(SMALL).items():
        expected, measured = example_reference(stack)
        np.testing.assert_array_equal(load_field(out / "plate.zarr", key[0], key[1])[key[2] - 1, 0],
                                      expected)
        assert float(stats[key]["max"]) == pytest.approx(measured["max"], rel=1e-6)
        assert float(stats[key]["area_fraction"]) == measured["area_fraction"]


@pytest.mark.requires("torch", "jax")  # the example pipeline runs torch and jax steps
@pytest.mark.parametrize("executor", ["inline", "threads", "dask"])
def test_run_example_pipeline(plate_dir: Path, tmp_path: Path, executor: str,
                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    code = main(["run", str(EXAMPLE), "--input", str(plate_dir), "--output", str(out),
                 "--executor", executor, "--workers", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "2 done, 0 skipped, 0 failed" in printed and f"on {executor}" in printed
    _check_example_output(out)


@pytest.mark.requires("torch", "jax")  # the example pipeline runs torch and jax steps
def test_run_resume_and_overwrite(plate_dir: Path, tmp_path: Path,
                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    args = ["run", str(EXAMPLE), "--input", str(plate_dir), "--output", str(out)]
    assert main(args) == 0
    assert main([*args, "--resume"]) == 0
    assert "0 done, 2 skipped, 0 failed" in capsys.readouterr().out
    _check_example_output(out)  # tables rebuilt from the earlier run's parts
    assert main([*args, "--overwrite"]) == 0
    assert "2 done, 0 skipped" in capsys.readouterr().out
    _check_example_output(out)


@pytest.mark.requires("torch", "jax")  # the example pipeline runs torch and jax steps
def test_run_with_a_user_pattern(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    plate = SyntheticPlate(wells=1, sites=1, channels=1, z_planes=2, size=32, cells=(2, 2),
                           pattern="{well}_s{site}_c{channel}_z{z}.tif")
    src = write_plate(tmp_path / "in", plate)
    out = tmp_path / "out"
    code = main(["run", str(EXAMPLE), "--input", str(src), "--output", str(out),
                 "--pattern", "{well}_s{site}_c{channel}_z{z}.tif"])
    assert code == 0
    expected, _ = example_reference(plate.stack(0, 1, 1))
    np.testing.assert_array_equal(load_field(out / "plate.zarr", "A01", 1)[0, 0], expected)


@pytest.mark.requires("tifffile")
def test_a_failing_group_exits_1_and_names_it(plate_dir: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad_pipeline.py"
    bad.write_text(
        "import memtype as mt\n"
        "from memtype.pipeline import FunctionStep, Pipeline\n"
        "@mt.numpy\n"
        "def explode(stack):\n"
        "    raise ValueError('no good')\n"
        "pipeline = Pipeline([FunctionStep(explode, name='kaboom')])\n")
    result = _cli("run", str(bad), "--input", str(plate_dir), "--output", str(tmp_path / "o"))
    assert result.returncode == 1
    assert "0 done, 0 skipped, 2 failed" in result.stdout
    assert "'kaboom' (function explode)" in result.stderr and "no good" in result.stderr
    assert "Traceback" not in result.stderr


# -- user errors: exit code 2, one line, no traceback ---------------------------------------
def _one_line_error(result: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert result.returncode == 2, (result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in lines[0]


def test_missing_input_directory(tmp_path: Path) -> None:
    result = _cli("run", str(EXAMPLE), "--input", str(tmp_path / "nowhere"),
                  "--output", str(tmp_path / "out"))
    _one_line_error(result, "nowhere", "does not exist")


@pytest.mark.requires("tifffile")
def test_pattern_matching_nothing(plate_dir: Path, tmp_path: Path) -> None:
    result = _cli("run", str(EXAMPLE), "--input", str(plate_dir), "--output",
                  str(tmp_path / "out"), "--pattern", "{well}_c{channel}.png")
    _one_line_error(result, "matches the pattern", "{well}_c{channel}.png")


@pytest.mark.requires("torch", "jax")  # the example pipeline runs torch and jax steps
def test_existing_output_without_resume_or_overwrite(plate_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    result = _cli("run", str(EXAMPLE), "--input", str(plate_dir), "--output", str(out))
    _one_line_error(result, "already exists", "--resume", "--overwrite")
    assert (out / "keep.txt").exists()


@pytest.mark.requires("tifffile")
def test_pipeline_file_without_pipeline(plate_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "nothing_here.py"
    empty.write_text("steps = []\n")
    result = _cli("run", str(empty), "--input", str(plate_dir), "--output", str(tmp_path / "o"))
    _one_line_error(result, "nothing_here.py", "module-level `pipeline`")
    result = _cli("run", str(tmp_path / "missing.py"), "--input", str(plate_dir),
                  "--output", str(tmp_path / "o"))
    _one_line_error(result, "missing.py", "does not exist")


@pytest.mark.requires("tifffile")
def test_bad_pattern_and_worker_count(plate_dir: Path, tmp_path: Path) -> None:
    result = _cli("run", str(EXAMPLE), "--input", str(plate_dir), "--output",
                  str(tmp_path / "o"), "--pattern", "no_fields.tif")
    _one_line_error(result, "no {field}")
    result = _cli("run", str(EXAMPLE), "--input", str(plate_dir), "--output",
                  str(tmp_path / "o"), "--workers", "0")
    _one_line_error(result, "--workers")
