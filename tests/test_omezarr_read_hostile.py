"""OME-Zarr plates from strangers (issue 31): reading one never reaches outside it (every file,
metadata and chunks alike, is read beneath the plate's root), never trusts its numbers (sizes
bounded by the chunks stored, scales checked) and turns malformed metadata into a
StoreFormatError naming the file and the key, never a bare KeyError, IndexError,
JSONDecodeError, AttributeError or RecursionError."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreFormatError, StorePathError
from memtype.pipeline.readers import OmeZarrReader
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")

VERSIONS = ("0.4", "0.5")


def _plate(root: Path, version: str, shape: tuple[int, ...] = (2, 3, 8, 8),
           **save: Any) -> Path:
    """A memtype plate: wells A/1 and B/2, one field each, CZYX of value 7 (uint16); pixels
    of 0.5 micrometres unless ``save`` gives a scale."""
    if "scale" not in save:
        save = {**save, "scale": (1, 1, 0.5, 0.5), "unit": "micrometer"}
    plate = ZarrStore(root, ome_version=version)
    for well in ("A/1", "B/2"):
        plate.save(np.full(shape, 7, np.uint16), f"{well}/0", parents=True, **save)
    return root


def _attrs_file(root: Path, group: str) -> Path:
    """The file holding a group's OME attributes (0.5: zarr.json, 0.4: .zattrs)."""
    v3 = root / group / "zarr.json"
    return v3 if v3.is_file() else root / group / ".zattrs"


def _edit(root: Path, group: str, change: Callable[[dict[str, Any]], None]) -> Path:
    """Apply ``change`` to a group's OME attributes, in the file that holds them."""
    path = _attrs_file(root, group)
    doc = json.loads(path.read_text())
    change(doc["attributes"]["ome"] if path.name == "zarr.json" else doc)
    path.write_text(json.dumps(doc))
    return path


def _read(root: Path) -> Any:
    """List the plate, read its metadata and every plane."""
    reader = OmeZarrReader(root)
    records = reader.records()
    meta = reader.metadata
    return meta, reader.load_batch([r.path for r in records])


# -- 1. every file is read beneath the plate's root --------------------------------------------
def _outside(tmp_path: Path, data: bytes) -> Path:
    secret = tmp_path / "elsewhere" / "secret"
    secret.parent.mkdir()
    secret.write_bytes(data)
    return secret


def _link_chunk(root: Path, version: str, secret: Path) -> None:
    chunk = root / "A/1/0/0" / ("c/0/0/0/0" if version == "0.5" else "0/0/0/0")
    chunk.unlink()
    chunk.symlink_to(secret)


def _link_metadata(root: Path, name: str, secret: Path) -> None:
    target = root / name
    secret.write_bytes(target.read_bytes())  # the same document, only its place differs
    target.unlink()
    target.symlink_to(secret)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_chunk_linked_outside_is_not_read_as_pixels(version: str, tmp_path: Path) -> None:
    """Before: the link was followed and the outside file's bytes came back as a plane."""
    root = _plate(tmp_path / "plate.zarr", version, codec="none")
    size = 8 * 8 * 2
    _link_chunk(root, version, _outside(tmp_path, b"\xff" * size))
    with pytest.raises(StorePathError):
        _read(root)


@pytest.mark.parametrize(("version", "name"), [
    ("0.5", "A/1/0/zarr.json"), ("0.5", "A/1/0/0/zarr.json"), ("0.5", "A/1/zarr.json"),
    ("0.4", "A/1/0/.zattrs"), ("0.4", "A/1/0/0/.zarray"), ("0.4", "A/1/.zattrs"),
], ids=["0.5-image", "0.5-array", "0.5-well", "0.4-image", "0.4-array", "0.4-well"])
def test_metadata_linked_outside_is_refused(version: str, name: str, tmp_path: Path) -> None:
    """Before: ``.zattrs``, ``.zarray`` and ``zarr.json`` links leading out were read."""
    root = _plate(tmp_path / "plate.zarr", version)
    _link_metadata(root, name, _outside(tmp_path, b""))
    with pytest.raises(StorePathError):
        _read(root)


@pytest.mark.parametrize("version", VERSIONS)
def test_a_link_inside_the_plate_is_followed(version: str, tmp_path: Path) -> None:
    root = _plate(tmp_path / "plate.zarr", version)
    inside = root / "A" / "1" / "0" / "copy"
    chunk = root / "A/1/0/0" / ("c/0/0/0/0" if version == "0.5" else "0/0/0/0")
    inside.write_bytes(chunk.read_bytes())
    chunk.unlink()
    chunk.symlink_to(inside)
    _, planes = _read(root)
    assert all((p == 7).all() for p in planes)


# -- 4. sizes claimed are bounded by what is stored ----------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_an_array_claiming_millions_of_planes_is_refused(version: str, tmp_path: Path) -> None:
    """Before: a few-kB plate claiming [3000, 3000, 8, 8] was expanded into 9e6 records."""
    root = _plate(tmp_path / "plate.zarr", version, shape=(1, 1, 8, 8))
    header = root / "A/1/0/0" / ("zarr.json" if version == "0.5" else ".zarray")
    doc = json.loads(header.read_text())
    doc["shape"] = [3000, 3000, 8, 8]
    header.write_text(json.dumps(doc))
    with pytest.raises(StoreFormatError, match=r"zarr.json|\.zarray") as info:
        OmeZarrReader(root).records()
    assert "'shape'" in str(info.value) and "3000, 3000, 8, 8" in str(info.value)
    assert os.path.basename(header) in str(info.value)


@pytest.mark.parametrize("version", VERSIONS)
def test_many_planes_in_few_chunks_are_no_claim(version: str, tmp_path: Path) -> None:
    """5000 planes in one chunk: the bound counts the planes a chunk holds."""
    root = _plate(tmp_path / "plate.zarr", version, shape=(1, 5000, 2, 2), chunks="image")
    assert len(OmeZarrReader(root).records()) == 2 * 5000


@pytest.mark.parametrize("version", VERSIONS)
def test_an_array_with_planes_left_unwritten_is_read(version: str, tmp_path: Path) -> None:
    """Arrays may leave chunks of fill value unwritten: a few missing planes are no claim."""
    root = _plate(tmp_path / "plate.zarr", version, shape=(2, 3, 8, 8))
    chunk = root / "A/1/0/0" / ("c/1/2/0/0" if version == "0.5" else "1/2/0/0")
    chunk.unlink()
    _, planes = _read(root)
    assert len(planes) == 12 and sum(int((p == 0).all()) for p in planes) == 1


# -- 6. malformed metadata: StoreFormatError naming the file and the key ------------------------
def _wells(change: Callable[[list[dict[str, Any]]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda ome: change(ome["plate"]["wells"])


def _multiscale(change: Callable[[dict[str, Any]], None]) -> Callable[[dict[str, Any]], None]:
    return lambda ome: change(ome["multiscales"][0])


def _scale(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(multiscale: dict[str, Any]) -> None:
        multiscale["datasets"][0]["coordinateTransformations"] = [
            {"type": "scale", "scale": value}]
    return _multiscale(change)


MALFORMED: dict[str, tuple[str, Callable[[dict[str, Any]], None], str]] = {
    "well-path-missing": ("", _wells(lambda w: w[0].pop("path")), "plate.wells[0].path"),
    "well-path-without-slash": ("", _wells(lambda w: w[0].update(path="A1")),
                                "plate.wells[0].path"),
    "wells-not-a-list": ("", lambda ome: ome["plate"].update(wells={"A/1": 1}), "plate.wells"),
    "image-path-missing": ("A/1", lambda ome: ome["well"]["images"][0].pop("path"),
                           "well.images[0].path"),
    "image-not-an-object": ("A/1", lambda ome: ome["well"].update(images=["0"]),
                            "well.images[0]"),
    "acquisition-not-an-id": ("A/1", lambda ome: ome["well"]["images"][0].update(
        acquisition=[1]), "well.images[0].acquisition"),
    "multiscales-empty": ("A/1/0", lambda ome: ome.update(multiscales=[]), "multiscales"),
    "datasets-empty": ("A/1/0", _multiscale(lambda m: m.update(datasets=[])),
                       "multiscales[0].datasets"),
    "dataset-path-missing": ("A/1/0", _multiscale(lambda m: m["datasets"][0].pop("path")),
                             "multiscales[0].datasets[0].path"),
    "more-axes-than-dimensions": ("A/1/0", _multiscale(lambda m: m["axes"].insert(
        0, {"name": "t", "type": "time"})), "multiscales[0].axes"),
    "fewer-axes-than-dimensions": ("A/1/0", _multiscale(lambda m: m["axes"].pop(0)),
                                   "multiscales[0].axes"),
    "axis-without-name": ("A/1/0", _multiscale(lambda m: m["axes"][0].pop("name")),
                          "multiscales[0].axes[0].name"),
    "scale-strings": ("A/1/0", _scale(["1", "1", "0.5", "0.5"]), "scale"),
    "scale-nan": ("A/1/0", _scale([1, 1, float("nan"), 0.5]), "scale"),
    "scale-zero": ("A/1/0", _scale([1, 1, 0, 0.5]), "scale"),
    "scale-too-short": ("A/1/0", _scale([0.5, 0.5]), "scale"),
    "unit-unknown": ("A/1/0", _multiscale(lambda m: m["axes"][-1].update(unit="furlong")),
                     "multiscales[0].axes[3].unit"),
}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", MALFORMED)
def test_malformed_metadata_names_the_file_and_the_key(version: str, case: str,
                                                       tmp_path: Path) -> None:
    group, change, key = MALFORMED[case]
    root = _plate(tmp_path / "plate.zarr", version, scale=(1, 1, 0.5, 0.5), unit="micrometer")
    path = _edit(root, group, change)
    with pytest.raises(StoreFormatError) as info:
        _read(root)
    message = str(info.value)
    assert str(path.relative_to(root)) in message and key in message


@pytest.mark.parametrize("version", VERSIONS)
def test_acquisitions_that_are_not_a_list_name_the_file(version: str, tmp_path: Path) -> None:
    root = _plate(tmp_path / "plate.zarr", version)
    for i, well in enumerate(("A/1", "B/2")):
        _edit(root, well, lambda ome, i=i: ome["well"]["images"][0].update(acquisition=i))
    path = _edit(root, "", lambda ome: ome["plate"].update(acquisitions=5))
    with pytest.raises(StoreFormatError, match="plate.acquisitions") as info:
        _read(root)
    assert path.name in str(info.value)


@pytest.mark.parametrize(("version", "name", "content"), [
    ("0.5", "zarr.json", '{"zarr_format": 3, "node_type": "group", "attributes": null}'),
    ("0.5", "A/1/0/zarr.json", '{"zarr_format": 3, "node_type": "group", "attributes": null}'),
    ("0.5", "A/1/zarr.json", '{"zarr_format": 3, "node_type": "group", "attributes": []}'),
    ("0.5", "A/1/0/zarr.json", "[" * 100_000 + "]" * 100_000),
    ("0.4", "A/1/0/.zattrs", "[" * 100_000 + "]" * 100_000),
    ("0.4", "A/1/.zattrs", "{not json"),
    ("0.4", ".zattrs", '"a string"'),
], ids=["plate-attributes-null", "image-attributes-null", "well-attributes-list",
        "0.5-deep-json", "0.4-deep-json", "0.4-not-json", "0.4-not-an-object"])
def test_broken_documents_name_the_file(version: str, name: str, content: str,
                                        tmp_path: Path) -> None:
    root = _plate(tmp_path / "plate.zarr", version)
    (root / name).write_text(content)
    with pytest.raises(StoreFormatError, match=name.replace(".", r"\.")):
        _read(root)


# -- 7. no unit, no size -----------------------------------------------------------------------
@pytest.mark.parametrize("version", VERSIONS)
def test_a_plate_without_units_has_no_pixel_size(version: str, tmp_path: Path) -> None:
    """Before: a scale without a unit was reported as micrometres (``1 x 1 µm``)."""
    root = _plate(tmp_path / "plate.zarr", version, scale=(1, 1, 0.5, 0.5))
    with pytest.warns(UserWarning, match="name no unit, so it has no pixel size"):
        meta = OmeZarrReader(root).metadata
    assert meta.pixel_size_um is None and meta.z_step_um is None
    assert len(meta.notes) == 1 and "A/1/0/" in meta.notes[0]


@pytest.mark.parametrize(("unit", "um"), [("micrometer", 0.5), ("nanometer", 0.0005),
                                          ("millimeter", 500.0), ("angstrom", 0.00005)])
def test_a_unit_the_plate_names_gives_micrometres(unit: str, um: float, tmp_path: Path) -> None:
    """Before: units other than four were taken for micrometres."""
    root = _plate(tmp_path / "plate.zarr", "0.5", scale=(1, 0.5, 0.5, 0.5), unit=unit)
    meta = OmeZarrReader(root).metadata
    assert meta.pixel_size_um == pytest.approx((um, um))
    assert meta.z_step_um == pytest.approx(um)
