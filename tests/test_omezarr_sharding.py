"""Sharded OME-Zarr 0.5 plates (zarr v3 sharding): each resolution level of a field is one
shard file holding its plane chunks, so a plate is a few objects per field; what is read back
is what was written, by memtype, by zarr itself and by the OME-Zarr input reader."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreFormatError
from memtype.pipeline.io.outputs import OutputSpec
from memtype.pipeline.readers import OmeZarrReader
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")

IMAGE = np.arange(2 * 3 * 16 * 16, dtype=np.uint16).reshape(2, 3, 16, 16)


def _files(level: Path) -> list[str]:
    """The data files of an array (its metadata aside)."""
    return sorted(str(p.relative_to(level)) for p in level.rglob("*")
                  if p.is_file() and p.name != "zarr.json")


@pytest.fixture
def plate(tmp_path: Path) -> ZarrStore:
    store = ZarrStore(tmp_path / "plate.zarr", shards="image")
    store.save(IMAGE, "A/1/0", parents=True, pyramid_levels=2)
    return store


def test_each_level_is_one_shard(plate: ZarrStore) -> None:
    root = Path(plate.root)
    assert [_files(root / "A/1/0" / k) for k in ("0", "1")] == [["c/0/0/0/0"], ["c/0/0/0/0"]]
    codecs = json.loads((root / "A/1/0/0/zarr.json").read_text())["codecs"]
    assert codecs[0]["name"] == "sharding_indexed"
    assert codecs[0]["configuration"]["chunk_shape"] == [1, 1, 16, 16]


def test_a_sharded_plate_reads_back(plate: ZarrStore) -> None:
    np.testing.assert_array_equal(plate.load("A/1/0"), IMAGE)
    np.testing.assert_array_equal(plate.load("A/1/0", index=(1, 2)), IMAGE[1, 2])


def test_zarr_and_the_input_reader_read_the_shards(plate: ZarrStore) -> None:
    import zarr

    np.testing.assert_array_equal(zarr.open_array(f"{plate.root}/A/1/0/0", mode="r")[...],
                                  IMAGE)
    reader = OmeZarrReader(plate.root)
    records = reader.records()
    planes = reader.load_batch([r.path for r in records])
    assert len(planes) == 6
    np.testing.assert_array_equal(np.stack(planes), IMAGE.reshape(6, 16, 16))


def test_labels_of_a_sharded_plate_are_sharded(plate: ZarrStore) -> None:
    labels = (IMAGE[0] % 3).astype(np.uint8)
    plate.save_labels(labels, "A/1/0", "cells")
    assert _files(Path(plate.root) / "A/1/0/labels/cells/0") == ["c/0/0/0"]
    np.testing.assert_array_equal(plate.load_labels("A/1/0", "cells"), labels)


def test_an_explicit_shard_shape(tmp_path: Path) -> None:
    store = ZarrStore(tmp_path / "plate.zarr", shards=(1, 3, 16, 16))
    store.save(IMAGE, "A/1/0", parents=True)
    assert _files(tmp_path / "plate.zarr/A/1/0/0") == ["c/0/0/0/0", "c/1/0/0/0"]
    np.testing.assert_array_equal(store.load("A/1/0"), IMAGE)


@pytest.mark.parametrize("shards", [(1, 2, 15, 16), (1, 3, 16), "planes", (0, 3, 16, 16)],
                         ids=["not-a-multiple", "too-short", "unknown-name", "zero"])
def test_invalid_shards_are_refused(shards: Any, tmp_path: Path) -> None:
    store = ZarrStore(tmp_path / "plate.zarr", shards=shards)
    with pytest.raises(StoreFormatError, match="Invalid shards"):
        store.save(IMAGE, "A/1/0", parents=True)
    assert not (tmp_path / "plate.zarr/A/1/0").exists()


def test_a_04_plate_cannot_be_sharded(tmp_path: Path) -> None:
    with pytest.raises(StoreFormatError, match="0.4 readers"):
        ZarrStore(tmp_path / "plate.zarr", ome_version="0.4", shards="image")


def test_a_run_writes_sharded_fields_and_labels(tmp_path: Path) -> None:
    spec = OutputSpec(str(tmp_path / "out"), "zarr", "{well}_s{site}_w{channel}.tif",
                      label_steps=(("seg", "cells", False),), shards="image")
    spec.prepare(resume=False, overwrite=False)
    keys = [(("well", "A01"), ("site", 1), ("channel", c)) for c in (1, 2)]
    stack = np.ones((2, 8, 8), np.uint16)
    spec.write_images("seg", False, [(keys[:1], stack[:1])], (("well", "A01"),))
    spec.write_images("same", True, [(keys, stack)], (("well", "A01"),))
    field = tmp_path / "out/plate.zarr/A/1/1"
    assert _files(field / "0") == ["c/0/0/0/0"]
    assert _files(field / "labels/cells/0") == ["c/0/0/0"]
