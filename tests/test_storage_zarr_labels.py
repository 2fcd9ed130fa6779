"""OME-Zarr labels beside an image: layout, pyramids that keep ids, colours, validation by
ome-zarr-models and ome-zarr-py's reader, in both OME-Zarr versions (issue 24, section 1)."""

from __future__ import annotations

import importlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreExistsError, StoreFormatError, StoreNotFoundError, StorePathError
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")

VERSIONS = ["0.5", "0.4"]
IMAGE = (np.random.default_rng(0).random((2, 3, 16, 20)) * 1000).astype(np.uint16)


def nuclei() -> np.ndarray:
    labels = np.zeros((3, 16, 20), np.uint32)
    labels[:, 2:6, 3:9] = 1
    labels[:, 9:14, 10:18] = 7
    labels[1, 0, 0] = 3  # one pixel: an id the coarse level loses
    return labels


@pytest.fixture(params=VERSIONS)
def plate(request: pytest.FixtureRequest, tmp_path: Path) -> ZarrStore:
    store = ZarrStore(tmp_path / "p.zarr", ome_version=request.param)
    store.save(IMAGE, "A/1/0", parents=True, pyramid_levels=2, channel_names=["DAPI", "GFP"])
    return store


def test_labels_round_trip_with_the_image_levels(plate: ZarrStore) -> None:
    plate.save_labels(nuclei(), "A/1/0", "nuclei")
    assert plate.list_labels("A/1/0") == ["nuclei"]
    np.testing.assert_array_equal(plate.load_labels("A/1/0", "nuclei"), nuclei())
    coarse = plate.load_labels("A/1/0", "nuclei", resolution=1)
    np.testing.assert_array_equal(coarse, nuclei()[..., ::2, ::2])  # nearest: ids stay ids
    np.testing.assert_array_equal(plate.load_labels("A/1/0", "nuclei", index=(1, 0)),
                                  nuclei()[1, 0])
    np.testing.assert_array_equal(plate.load("A/1/0"), IMAGE)  # the image is untouched


@pytest.mark.requires("ome_zarr_models")
def test_labels_validate_with_ome_zarr_models(plate: ZarrStore) -> None:
    import zarr

    version = f"v0{plate.ome_version[-1]}"
    labels = importlib.import_module(f"ome_zarr_models.{version}.labels")
    image_label = importlib.import_module(f"ome_zarr_models.{version}.image_label")
    hcs = importlib.import_module(f"ome_zarr_models.{version}.hcs")
    plate.save_labels(nuclei(), "A/1/0", "nuclei")
    plate.save_labels(nuclei().astype(np.uint8), "A/1/0", "cells")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        group = zarr.open_group(os.path.join(plate.root, "A/1/0/labels"), mode="r")
        model = labels.Labels.from_zarr(group)
        attributes = model.attributes.ome if version == "v05" else model.attributes
        assert attributes.labels == ["nuclei", "cells"]
        image_label.ImageLabel.from_zarr(
            zarr.open_group(os.path.join(plate.root, "A/1/0/labels/nuclei"), mode="r"))
        hcs.HCS.from_zarr(zarr.open_group(plate.root, mode="r"))


@pytest.mark.requires("ome_zarr")
def test_the_ome_zarr_reader_finds_the_labels_and_their_colours(plate: ZarrStore) -> None:
    from ome_zarr.io import parse_url
    from ome_zarr.reader import Reader

    plate.save_labels(nuclei(), "A/1/0", "nuclei")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the reader logs the format it detected
        nodes = list(Reader(parse_url(os.path.join(plate.root, "A/1/0")))())
    label = next(n for n in nodes if any(type(s).__name__ == "Label" for s in n.specs))
    assert [np.asarray(level).shape for level in label.data] == [(3, 16, 20), (3, 8, 10)]
    assert label.metadata["name"] == "nuclei"
    colors = label.metadata["color"]
    assert set(colors) == {0, 1, 3, 7} and colors[0] == [0.0, 0.0, 0.0, 0.0]
    assert len({tuple(c) for c in colors.values()}) == 4  # one colour per id


def test_colours_given(plate: ZarrStore) -> None:
    plate.save_labels(nuclei(), "A/1/0", "nuclei", colors={1: (255, 0, 0), 7: (0, 0, 255, 128)})
    group = Path(plate.root, "A/1/0/labels/nuclei")
    doc = (group / "zarr.json") if plate.ome_version == "0.5" else (group / ".zattrs")
    attrs = json.loads(doc.read_text())
    attrs = attrs["attributes"]["ome"] if plate.ome_version == "0.5" else attrs
    assert attrs["image-label"]["colors"] == [{"label-value": 1, "rgba": [255, 0, 0, 255]},
                                              {"label-value": 7, "rgba": [0, 0, 255, 128]}]
    assert attrs["image-label"]["source"] == {"image": "../../"}


@pytest.mark.parametrize(("labels", "kwargs", "error", "match"), [
    (nuclei().astype(np.float32), {}, StoreFormatError, "labels are integer object ids"),
    (nuclei()[0], {}, StoreFormatError, "without its channel axis"),
    (nuclei(), {"name": "../x"}, StoreFormatError, "Invalid label name"),
    (nuclei(), {"name": ".hidden"}, StoreFormatError, "Invalid label name"),
    (nuclei(), {"colors": {1: (256, 0, 0)}}, StoreFormatError, "Invalid label colour"),
    (nuclei(), {"colors": {1: "red"}}, StoreFormatError, "Invalid label colour"),
    (nuclei(), {"path": "A/1/5"}, StoreNotFoundError, "save the image first"),
], ids=["float", "shape", "dots", "hidden", "colour range", "colour name", "no image"])
def test_labels_a_plate_cannot_hold(plate: ZarrStore, labels: Any, kwargs: dict[str, Any],
                                    error: type[Exception], match: str) -> None:
    args = {"path": "A/1/0", "name": "nuclei", **kwargs}
    with pytest.raises(error, match=match):
        plate.save_labels(labels, args.pop("path"), args.pop("name"), **args)
    assert plate.list_labels("A/1/0") == []


def test_existing_labels_need_overwrite(plate: ZarrStore) -> None:
    plate.save_labels(nuclei(), "A/1/0", "nuclei")
    with pytest.raises(StoreExistsError, match="overwrite=True"):
        plate.save_labels(nuclei() * 2, "A/1/0", "nuclei")
    np.testing.assert_array_equal(plate.load_labels("A/1/0", "nuclei"), nuclei())
    plate.save_labels(nuclei() * 2, "A/1/0", "nuclei", overwrite=True)
    np.testing.assert_array_equal(plate.load_labels("A/1/0", "nuclei"), nuclei() * 2)
    assert plate.list_labels("A/1/0") == ["nuclei"]
    with pytest.raises(StoreNotFoundError, match="No labels 'cells'"):
        plate.load_labels("A/1/0", "cells")


def test_a_labels_directory_linked_outside_is_refused(plate: ZarrStore, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    os.symlink(elsewhere, Path(plate.root, "A/1/0/labels"))
    with pytest.raises(StorePathError, match="outside"):
        plate.save_labels(nuclei(), "A/1/0", "nuclei")
    assert os.listdir(elsewhere) == []
