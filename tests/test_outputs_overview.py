"""The plate overview PNG a run writes (issue 24, section 5)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.pipeline import Pipeline
from memtype.pipeline.io.overview import render_overview
from memtype.pipeline.synthetic import SyntheticPlate
from memtype.storage import ZarrStore
from tests.pipeline_support import write_plate

pytestmark = pytest.mark.requires("zarr", "PIL")

EMPTY = (40, 40, 40)
TILE, GAP, MARGIN, TOP = 96, 2, 22, 34  # the layout of a 96-well overview


def tile_at(picture: np.ndarray, row: int, column: int, tile: int = TILE,
            left: int = 0) -> np.ndarray:
    y, x = TOP + row * (tile + GAP), left + MARGIN + column * (tile + GAP)
    return picture[y:y + tile, x:x + tile]


@mt.numpy
def _count(stack: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    projected = stack.max(axis=0, keepdims=True)
    return projected, {"count": float((projected > projected.mean()).sum())}


def test_a_run_writes_a_plate_shaped_overview_with_a_heatmap(tmp_path: Path) -> None:
    from PIL import Image

    plate = SyntheticPlate(wells=3, sites=1, channels=2, z_planes=2, size=64, cells=(2, 6))
    src = write_plate(tmp_path / "in", plate)
    report = Pipeline([_count]).run(src, tmp_path / "out")
    assert report.ok, report.summary()
    picture = np.asarray(Image.open(report.outputs["overview"]).convert("RGB"))
    assert picture.shape[0] < 900 and picture.shape[1] < 2000  # bounded
    for column in range(3):  # A01..A03 hold thumbnails, A04 and B01 are empty wells
        assert len(np.unique(tile_at(picture, 0, column).reshape(-1, 3), axis=0)) > 10
    assert (tile_at(picture, 0, 3) == EMPTY).all() and (tile_at(picture, 1, 0) == EMPTY).all()
    heat_left = MARGIN + 12 * (TILE + GAP) + 16
    heat = [tuple(tile_at(picture, 0, c, TILE // 3, heat_left)[5, 5]) for c in range(3)]
    assert len(set(heat)) > 1 and (68, 1, 84) in heat and (253, 231, 37) in heat  # low, high


def test_label_outlines_are_drawn(tmp_path: Path) -> None:
    plate = ZarrStore(tmp_path / "p.zarr", rows="ABCDEFGH", columns=range(1, 13))
    plate.save(np.full((1, 1, 64, 64), 100, np.uint16), "B/2/0", parents=True)
    labels = np.zeros((1, 64, 64), np.uint16)
    labels[0, 16:48, 16:48] = 5
    plate.save_labels(labels, "B/2/0", "nuclei")
    picture = render_overview(plate.root)
    assert ((tile_at(picture, 1, 1) == (255, 255, 0)).all(axis=-1)).sum() > 50


def test_384_wells_stay_bounded(tmp_path: Path) -> None:
    rows = [chr(ord("A") + i) for i in range(16)]
    plate = ZarrStore(tmp_path / "p.zarr", rows=rows, columns=range(1, 25))
    plate.save(np.zeros((1, 1, 512, 512), np.uint16), "P/24/0", parents=True)
    picture = render_overview(plate.root, {"P/24": 3.0}, "count")
    assert picture.shape[0] <= 1100 and picture.shape[1] <= 2200
