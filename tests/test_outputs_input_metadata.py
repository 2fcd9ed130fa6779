"""The input's metadata flows into the output plate (issue 24, section 4): the readers'
channel names become the ``omero`` channel names and their pixel size and z step the
``coordinateTransformations``, where the pipeline sets none; the pipeline's own win."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import Pipeline
from memtype.storage import ZarrStore
from tests.readers_support import (
    CHANNEL_NAMES,
    PIXEL_UM,
    Z_STEP_UM,
    write_imagexpress,
    write_phenix,
)

pytestmark = pytest.mark.requires("zarr", "tifffile")


@mt.numpy
def _same(stack: np.ndarray) -> np.ndarray:
    return stack.copy()


def _field_metadata(report_images: str) -> tuple[list[str], dict[str, object]]:
    """The channel names and the multiscale of the first field of a plate."""
    plate = ZarrStore(report_images, read_only=True)
    field = plate.list_files("", recursive=True)[0]
    doc = plate.image_metadata(field)
    names = [c["label"] for c in doc["omero"]["channels"]]
    return names, doc["multiscales"][0]


def _scale(multiscale: dict[str, object]) -> list[float]:
    return multiscale["datasets"][0]["coordinateTransformations"][0]["scale"]  # type: ignore[index, no-any-return]


def test_phenix_channel_names_and_pixel_size_reach_the_plate(tmp_path: Path) -> None:
    src = write_phenix(tmp_path / "in")
    report = Pipeline([_same]).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    names, multiscale = _field_metadata(report.outputs["images"])
    assert names == list(CHANNEL_NAMES)
    assert _scale(multiscale)[-3:] == pytest.approx([Z_STEP_UM, PIXEL_UM, PIXEL_UM])
    assert [a.get("unit") for a in multiscale["axes"]][-3:] == [  # type: ignore[attr-defined]
        "micrometer", "micrometer", "micrometer"]


def test_imagexpress_channel_names_and_pixel_size_reach_the_plate(tmp_path: Path) -> None:
    src = write_imagexpress(tmp_path / "in")
    report = Pipeline([_same]).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    names, multiscale = _field_metadata(report.outputs["images"])
    assert names == list(CHANNEL_NAMES)
    # the HTD has no pixel size; the TIFFs' MetaXpress descriptions do
    assert _scale(multiscale)[-3:] == pytest.approx([Z_STEP_UM, PIXEL_UM, PIXEL_UM])


def test_the_pipelines_pixel_size_wins_over_the_input(tmp_path: Path) -> None:
    src = write_phenix(tmp_path / "in")
    report = Pipeline([_same], pixel_size=(0.1, 0.1), pixel_unit="nanometer").run(
        src, tmp_path / "out")
    assert report.ok, report.summary()
    _, multiscale = _field_metadata(report.outputs["images"])
    assert _scale(multiscale)[-3:] == [1.0, 0.1, 0.1]
    assert multiscale["axes"][-1]["unit"] == "nanometer"  # type: ignore[index]
