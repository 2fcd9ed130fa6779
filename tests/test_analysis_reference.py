"""The reference screen analysis (examples/screen_analysis.yaml) end to end: from the command
line inline and on 2 dask workers, with identical tables; and its preview of one field."""

from __future__ import annotations

import csv
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from memtype.pipeline import ExecutionOptions
from memtype.pipeline.analysis.preview import preview
from memtype.pipeline.model.pipeline_file import load_pipeline_spec
from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate
from tests.pipeline_support import ROOT

# the reference analysis: a YAML file (pyyaml), run over a written plate (tifffile, zarr) by the
# analysis operations (scipy, scikit-image); its preview draws with pillow
pytestmark = pytest.mark.requires("yaml", "tifffile", "zarr", "scipy", "skimage", "PIL")

EXAMPLE = ROOT / "examples" / "screen_analysis.yaml"
PLATE = SyntheticPlate(wells=2, sites=2, channels=2, z_planes=2, size=64, cells=(3, 5))
TABLES = ("nuclei", "cells", "cytoplasm", "image", "well_summary", "qc")


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plate")
    write_synthetic_plate(path, PLATE)
    return path


@pytest.fixture(scope="module")
def inline(plate_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("inline") / "out"
    done = subprocess.run([sys.executable, "-m", "memtype", "run", str(EXAMPLE), "--input",
                           str(plate_dir), "--output", str(out)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    return out


def _rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


def test_the_example_is_a_short_file_without_python() -> None:
    lines = [ln for ln in EXAMPLE.read_text().splitlines() if ln.strip()]
    assert len(lines) <= 30
    assert len(load_pipeline_spec(EXAMPLE).steps) == 16


@pytest.fixture(scope="module")
def on_dask(plate_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dask") / "out"
    report = load_pipeline_spec(EXAMPLE).run(plate_dir, out, executor="dask",
                                             execution=ExecutionOptions(workers=2))
    report.raise_for_failures()
    return out


@pytest.mark.parametrize("table", TABLES)
@pytest.mark.requires("distributed")
def test_dask_writes_the_same_tables_as_inline(inline: Path, on_dask: Path, table: str) -> None:
    assert sorted(map(str, _rows(on_dask / f"{table}.csv"))) == \
        sorted(map(str, _rows(inline / f"{table}.csv")))


def test_every_cell_has_its_nucleus_and_the_well_summary_its_conditions(inline: Path) -> None:
    cells = _rows(inline / "cells.csv")
    nuclei = {(r["well"], r["site"], r["ObjectNumber"]) for r in _rows(inline / "nuclei.csv")}
    assert cells and all((r["well"], r["site"], r["Parent_nuclei"]) in nuclei for r in cells)
    wells = {r["well"]: r for r in _rows(inline / "well_summary.csv")}
    assert wells["A02"]["compound"] == "nocodazole" and wells["A02"]["Plate"] == "plate-1"
    in_a02 = [r for r in cells if r["well"] == "A02"]
    assert int(wells["A02"]["cells_Count"]) == len(in_a02)
    areas = [float(r["AreaShape_Area"]) for r in in_a02]
    assert float(wells["A02"]["cells_Median_AreaShape_Area"]) == pytest.approx(np.median(areas))


def test_every_field_has_its_quality_verdict(inline: Path) -> None:
    qc = _rows(inline / "qc.csv")
    assert sorted((r["well"], r["site"]) for r in qc) == \
        sorted((r["well"], r["site"]) for r in _rows(inline / "image.csv"))
    wells = {r["well"]: r for r in _rows(inline / "well_summary.csv")}
    assert all(int(wells[w]["QC_FlaggedFields"]) == sum(int(r["Flagged"]) for r in qc
                                                        if r["well"] == w) for w in wells)


def test_the_illumination_functions_are_kept_in_the_output(inline: Path) -> None:
    saved = sorted(p.name for p in (inline / "passes" / "correct_illumination").iterdir())
    assert saved == ["1.npy", "2.npy"]


def test_a_preview_draws_every_step_of_one_field(plate_dir: Path, tmp_path: Path) -> None:
    result = preview(load_pipeline_spec(EXAMPLE), plate_dir, tmp_path / "p", well="A02")
    assert result.failed is None and result.group == "well=A02"
    from PIL import Image

    with Image.open(result.picture) as picture:
        assert picture.size[0] >= 900 and picture.size[1] > 5 * PLATE.size  # a row per step
    nuclei = _rows(tmp_path / "p" / "nuclei.csv")
    assert {r["site"] for r in nuclei} == {"1"}
    assert (tmp_path / "p" / "max_projection.zarr").is_dir()


@pytest.mark.parametrize(("argv", "code", "said"), [
    (["preview", "{example}", "--input", "{plate}", "--well", "A02", "--output", "{out}"], 0,
     "preview  well=A02"),
    (["run", "{example}", "--input", "{plate}", "--output", "{out}", "--preview", "A01"], 0,
     "preview  well=A01"),
    (["preview", "{example}", "--input", "{plate}", "--well", "H12", "--output", "{out}"], 2,
     "the plate has no well 'H12'; it has A01, A02"),
])
def test_preview_from_the_command_line(plate_dir: Path, tmp_path: Path, argv: list[str],
                                       code: int, said: str) -> None:
    values = {"example": str(EXAMPLE), "plate": str(plate_dir), "out": str(tmp_path / "p")}
    done = subprocess.run([sys.executable, "-m", "memtype", *(a.format(**values) for a in argv)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == code, done.stderr
    assert said in done.stdout + done.stderr
    assert (tmp_path / "p" / "preview.png").is_file() == (code == 0)
