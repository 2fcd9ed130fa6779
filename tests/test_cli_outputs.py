"""``memtype run`` output options: --ome-version, --pixel-size, --pixel-unit (issue 24);
and the units an OME-Zarr output accepts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.cli import main
from memtype.errors import InvalidArgumentError, StoreFormatError
from memtype.pipeline import Pipeline
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import write_plate

pytestmark = pytest.mark.requires("zarr", "tifffile")

PIPELINE = ("import memtype as mt\n"
            "from memtype.pipeline import Pipeline\n"
            "@mt.numpy\n"
            "def project(stack):\n"
            "    return stack.max(axis=0, keepdims=True)\n"
            "pipeline = Pipeline([project]{options})\n")


def _run(tmp_path: Path, *flags: str, options: str = "") -> tuple[int, Path]:
    """Run a one-step pipeline file over a one-well plate with ``flags``."""
    plate = SyntheticPlate(wells=1, sites=1, channels=1, z_planes=2, size=32, cells=(1, 1))
    src = write_plate(tmp_path / "in", plate)
    file = tmp_path / "pipe.py"
    file.write_text(PIPELINE.format(options=options))
    out = tmp_path / "out"
    return main(["run", str(file), "--input", str(src), "--output", str(out), *flags]), out


def _multiscale(field: Path) -> dict[str, object]:
    """The field's multiscales entry, in either OME-Zarr version."""
    if (field / "zarr.json").exists():
        attributes = json.loads((field / "zarr.json").read_text())["attributes"]["ome"]
    else:
        attributes = json.loads((field / ".zattrs").read_text())
    doc: dict[str, object] = attributes["multiscales"][0]
    return doc


@pytest.mark.parametrize("version", ["0.4", "0.5"])
def test_run_writes_the_ome_version_asked(tmp_path: Path, version: str) -> None:
    code, out = _run(tmp_path, "--ome-version", version)
    assert code == 0
    plate = out / "plate.zarr"
    assert (plate / ".zgroup").exists() == (version == "0.4")
    assert (plate / "zarr.json").exists() == (version == "0.5")


def test_the_flag_wins_over_the_pipeline_file(tmp_path: Path) -> None:
    code, out = _run(tmp_path, "--ome-version", "0.5", "--pixel-size", "0.5,0.5",
                     options=", ome_version='0.4', pixel_size=(3.0, 0.1, 0.1)")
    assert code == 0
    doc = _multiscale(out / "plate.zarr/A/1/1")
    assert doc["datasets"][0]["coordinateTransformations"][0]["scale"] == [  # type: ignore[index]
        1.0, 1.0, 0.5, 0.5]


@pytest.mark.parametrize("size,expected", [("2,0.325,0.325", [1.0, 2.0, 0.325, 0.325]),
                                           ("0.25,0.25", [1.0, 1.0, 0.25, 0.25])])
def test_run_writes_the_pixel_size_and_unit_asked(tmp_path: Path, size: str,
                                                  expected: list[float]) -> None:
    code, out = _run(tmp_path, "--pixel-size", size, "--pixel-unit", "nanometer")
    assert code == 0
    doc = _multiscale(out / "plate.zarr/A/1/1")
    assert doc["datasets"][0]["coordinateTransformations"][0]["scale"] == expected  # type: ignore[index]
    assert [a.get("unit") for a in doc["axes"]] == [None, "nanometer", "nanometer",  # type: ignore[attr-defined]
                                                    "nanometer"]


def test_the_pipeline_file_keeps_its_options_without_flags(tmp_path: Path) -> None:
    code, out = _run(tmp_path, options=", ome_version='0.4'")
    assert code == 0 and (out / "plate.zarr/.zgroup").exists()


@pytest.mark.parametrize("flags,needle", [
    (("--pixel-size", "1,x"), "--pixel-size must be Z,Y,X or Y,X positive numbers"),
    (("--pixel-size", "0,1,1"), "--pixel-size"),
    (("--pixel-size", "1"), "--pixel-size"),
    (("--pixel-unit", "um"), "--pixel-unit must be an OME-NGFF space unit"),
], ids=["not-a-number", "zero", "one-number", "unknown-unit"])
def test_invalid_output_flags_are_one_line_errors(tmp_path: Path, flags: tuple[str, str],
                                                  needle: str,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, *flags)
    err = capsys.readouterr().err
    assert code == 2 and needle in err and flags[1] in err
    assert not out.exists()  # refused before anything is written


def test_run_refuses_an_unknown_ome_version(tmp_path: Path) -> None:
    with pytest.raises(SystemExit):
        _run(tmp_path, "--ome-version", "0.6")


@mt.numpy
def _project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


def test_a_pipeline_refuses_a_unit_ome_does_not_know() -> None:
    with pytest.raises(InvalidArgumentError, match="pixel_unit must be an OME-NGFF space unit"):
        Pipeline([_project], pixel_unit="um")


def test_zarr_store_refuses_a_unit_ome_does_not_know(tmp_path: Path) -> None:
    from memtype.storage import ZarrStore

    store = ZarrStore(str(tmp_path / "p.zarr"), rows="A", columns=[1])
    with pytest.raises(StoreFormatError, match="Invalid unit 'um'.*micrometer"):
        store.save(np.zeros((1, 1, 8, 8), np.uint8), "A/1/0", parents=True,
                   scale=(1, 1, 0.5, 0.5), unit="um")
