"""A link planted in the output is never written through (issue 31, item 11): the plate's store
is rooted at ``OUTPUT/plate.zarr``, so a symbolic link there would send every image of a
``--resume`` to wherever it points."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.errors import StorePathError
from memtype.pipeline import Pipeline, WriteOptions
from memtype.pipeline.io.outputs import OutputSpec
from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate

pytestmark = pytest.mark.requires("zarr", "tifffile")

PATTERN = "{well}_s{site}_w{channel}.tif"


@mt.numpy
def _same(stack: np.ndarray) -> np.ndarray:
    return stack.copy()


def _tree(root: Path) -> dict[str, int]:
    """Every file under ``root`` and its size."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}


def _plant(out: Path, tmp_path: Path) -> Path:
    """Move ``out/plate.zarr`` elsewhere and leave a link to it in its place."""
    elsewhere = tmp_path / "elsewhere" / "plate.zarr"
    elsewhere.parent.mkdir()
    os.rename(out / "plate.zarr", elsewhere)
    (out / "plate.zarr").symlink_to(elsewhere, target_is_directory=True)
    return elsewhere


def test_resume_refuses_a_plate_that_is_a_link(tmp_path: Path) -> None:
    """Before: the resumed run wrote its wells through the link."""
    src = tmp_path / "in"
    write_synthetic_plate(src, SyntheticPlate(wells=2, sites=1, channels=1, z_planes=1,
                                              size=32))
    out = tmp_path / "out"
    assert Pipeline([_same]).run(src, out).ok
    done = sorted((out / ".memtype" / "done").iterdir())
    done[0].unlink()  # one group left to do
    elsewhere = _plant(out, tmp_path)
    before = _tree(elsewhere)
    with pytest.raises(StorePathError, match="symbolic link"):
        Pipeline([_same]).run(src, out, write=WriteOptions(resume=True))
    assert _tree(elsewhere) == before


@pytest.mark.parametrize("overwrite", [False, True], ids=["resume", "overwrite"])
def test_a_run_state_that_is_a_link_is_refused(overwrite: bool, tmp_path: Path) -> None:
    """Before: ``OUTPUT/.memtype`` linked to another run's state was believed (its done
    markers read from outside the output, its groups skipped)."""
    other = tmp_path / "other"
    OutputSpec(str(other), "zarr", PATTERN).prepare(resume=False, overwrite=False)
    (other / ".memtype" / "done" / "A01.json").write_text("{}")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".memtype").symlink_to(other / ".memtype", target_is_directory=True)
    spec = OutputSpec(str(out), "zarr", PATTERN)
    with pytest.raises(StorePathError, match="symbolic link"):
        spec.prepare(resume=not overwrite, overwrite=overwrite)
    assert sorted(p.name for p in (other / ".memtype" / "done").iterdir()) == ["A01.json"]


def test_a_worker_refuses_a_link_planted_during_the_run(tmp_path: Path) -> None:
    out = tmp_path / "out"
    spec = OutputSpec(str(out), "zarr", PATTERN)
    spec.prepare(resume=False, overwrite=False)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / "plate.zarr").symlink_to(elsewhere, target_is_directory=True)
    keys = [(("well", "A01"), ("site", 1), ("channel", 1))]
    with pytest.raises(StorePathError, match="symbolic link"):
        spec.write_images("same", True, [(keys, np.ones((1, 8, 8), np.uint16))],
                          (("well", "A01"),))
    assert list(elsewhere.iterdir()) == []


@pytest.mark.parametrize("through", ["plate", "folder"])
def test_tables_are_not_written_through_a_link(through: str, tmp_path: Path) -> None:
    """Before: a ``tables`` link in a field sent every table of a resumed run outside."""
    from memtype.omezarr.layout import layout_for
    from memtype.omezarr.paths import PlatePaths
    from memtype.omezarr.tables import ImageGroup, write_roi_table
    from memtype.storage import ZarrStore

    root = tmp_path / "plate.zarr"
    ZarrStore(root).save(np.ones((8, 8), np.uint16), "A/1/0", parents=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (root / "A/1/0/tables").symlink_to(elsewhere, target_is_directory=True)
    field = (ImageGroup(PlatePaths(str(root), False, layout_for("0.5")), "A/1/0")
             if through == "plate" else str(root / "A/1/0"))
    with pytest.raises(StorePathError):
        write_roi_table(field, "FOV_ROI_table", ["FOV_1"], np.zeros((1, 6)))
    assert list(elsewhere.iterdir()) == []
