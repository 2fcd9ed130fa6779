"""ZarrStore: OME-Zarr layout read back by ome-zarr, chunking, codecs, what a write touches."""

from __future__ import annotations

import importlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreExistsError, StoreFormatError, StorePathError
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")



@pytest.fixture
def plate(tmp_path: Path) -> ZarrStore:
    return ZarrStore(tmp_path / "plate.zarr", rows="ABCDEFGH", columns=range(1, 13))


def czyx(seed: int, shape: tuple[int, ...] = (2, 3, 16, 20), dtype: str = "uint16") -> Any:
    return (np.random.default_rng(seed).random(shape) * 1000).astype(dtype)


def ome(path: Path) -> dict[str, Any]:
    """The ``ome`` attributes of a group."""
    doc = json.loads((path / "zarr.json").read_text())
    return dict(doc["attributes"].get("ome", {}))


def plate_wells(store: ZarrStore) -> list[str]:
    return [w["path"] for w in ome(Path(store.root))["plate"]["wells"]]


# -- OME-Zarr layout, read by the ome-zarr reader ---------------------------------------------
@pytest.mark.requires("ome_zarr")
def test_ome_zarr_reader_reads_plate_and_fields(plate: ZarrStore) -> None:
    reader_mod = importlib.import_module("ome_zarr.reader")
    from ome_zarr.io import parse_url

    images = {"A/1": czyx(1), "B/3": czyx(2), "H/12": czyx(3)}
    for well, image in images.items():
        plate.save(image, f"{well}/0", parents=True)
    nodes = list(reader_mod.Reader(parse_url(plate.root))())
    top = nodes[0]
    assert [a["name"] for a in top.metadata["axes"]] == ["c", "z", "y", "x"]
    stitched = np.asarray(top.data[0])
    assert stitched.shape == (2, 3, 8 * 16, 12 * 20)  # every declared row x column
    np.testing.assert_array_equal(stitched[..., 16:32, 40:60], images["B/3"])
    np.testing.assert_array_equal(stitched[..., 112:128, 220:240], images["H/12"])
    field = list(reader_mod.Reader(parse_url(os.path.join(plate.root, "B/3/0")))())[0]
    np.testing.assert_array_equal(np.asarray(field.data[0]), images["B/3"])


def test_metadata_documents(plate: ZarrStore) -> None:
    plate.save(czyx(1), "B/3/0", parents=True, scale=(1, 2.0, 0.5, 0.5), unit="micrometer")
    root = Path(plate.root)
    meta = ome(root)
    assert meta["version"] == "0.5"
    assert [r["name"] for r in meta["plate"]["rows"]] == list("ABCDEFGH")
    assert [c["name"] for c in meta["plate"]["columns"]] == [str(c) for c in range(1, 13)]
    assert meta["plate"]["wells"] == [{"path": "B/3", "rowIndex": 1, "columnIndex": 2}]
    assert ome(root / "B/3")["well"]["images"] == [{"path": "0"}]
    ms = ome(root / "B/3/0")["multiscales"][0]
    assert [a["name"] for a in ms["axes"]] == ["c", "z", "y", "x"]
    assert ms["axes"][2] == {"name": "y", "type": "space", "unit": "micrometer"}
    assert ms["datasets"] == [{"path": "0", "coordinateTransformations": [
        {"type": "scale", "scale": [1.0, 2.0, 0.5, 0.5]}]}]
    array = json.loads((root / "B/3/0/0/zarr.json").read_text())
    assert array["dimension_names"] == ["c", "z", "y", "x"]
    assert array["chunk_grid"]["configuration"]["chunk_shape"] == [1, 1, 16, 20]


@pytest.mark.parametrize("ndim,axes", [(2, "yx"), (3, "zyx"), (4, "czyx"), (5, "tczyx")])
def test_default_axes(plate: ZarrStore, ndim: int, axes: str) -> None:
    shape = (2, 2, 2, 8, 8)[-ndim:]
    plate.save(np.ones(shape, np.float32), "A/1/0", parents=True)
    ms = ome(Path(plate.root) / "A/1/0")["multiscales"][0]
    assert "".join(a["name"] for a in ms["axes"]) == axes


@pytest.mark.parametrize("axes", ["xy", "zcyx", "czz", "cyxz", "abc", "yx"])
def test_invalid_axes(plate: ZarrStore, axes: str) -> None:
    with pytest.raises(StoreFormatError, match="axes"):
        plate.save(np.ones((2, 4, 4)), "A/1/0", parents=True, axes=axes)
    assert plate.list_files("", recursive=True) == []


def test_custom_axes_round_trip(plate: ZarrStore) -> None:
    plate.save(czyx(4, (3, 8, 8)), "A/1/0", parents=True, axes="cyx")
    ms = ome(Path(plate.root) / "A/1/0")["multiscales"][0]
    assert [a["type"] for a in ms["axes"]] == ["channel", "space", "space"]


# -- codecs and chunks ----------------------------------------------------------------------------
@pytest.mark.parametrize("codec,name", [("none", None), ("blosc-lz4", "blosc"),
                                        ("blosc-zstd", "blosc"), ("zstd", "zstd")])
def test_codecs(tmp_path: Path, codec: str, name: str | None) -> None:
    store = ZarrStore(tmp_path / "p.zarr", codec=codec)
    data = np.zeros((4, 64, 64), np.uint16)
    store.save(data + 3, "A/1/0", parents=True)
    np.testing.assert_array_equal(store.load("A/1/0"), data + 3)
    codecs = json.loads((Path(store.root) / "A/1/0/0/zarr.json").read_text())["codecs"]
    names = [c["name"] for c in codecs]
    assert names == ["bytes"] if name is None else names == ["bytes", name]


def test_unknown_codec(tmp_path: Path) -> None:
    with pytest.raises(StoreFormatError, match="Unknown codec"):
        ZarrStore(tmp_path / "p.zarr", codec="gzip9")
    store = ZarrStore(tmp_path / "p.zarr")
    with pytest.raises(StoreFormatError, match="Unknown codec"):
        store.save(np.ones((4, 4)), "A/1/0", parents=True, codec="lz77")


@pytest.mark.parametrize("chunks,expected", [("plane", [1, 1, 16, 20]), ("image", [2, 3, 16, 20]),
                                             ((1, 3, 8, 10), [1, 3, 8, 10])])
def test_chunks(plate: ZarrStore, chunks: Any, expected: list[int]) -> None:
    plate.save(czyx(5), "A/1/0", parents=True, chunks=chunks)
    meta = json.loads((Path(plate.root) / "A/1/0/0/zarr.json").read_text())
    assert meta["chunk_grid"]["configuration"]["chunk_shape"] == expected
    np.testing.assert_array_equal(plate.load("A/1/0"), czyx(5))


@pytest.mark.parametrize("chunks", [(1, 1), (0, 1, 8, 8), "planes"])
def test_invalid_chunks(plate: ZarrStore, chunks: Any) -> None:
    with pytest.raises(StoreFormatError, match="chunks"):
        plate.save(czyx(5), "A/1/0", parents=True, chunks=chunks)


def test_loading_one_plane_reads_only_its_chunk(tmp_path: Path) -> None:
    store = ZarrStore(tmp_path / "p.zarr", codec="blosc-lz4")
    data = czyx(6)
    store.save(data, "A/1/0", parents=True)
    chunk_dir = Path(store.root) / "A/1/0/0/c"
    wanted = chunk_dir / "1/2/0/0"
    for chunk in chunk_dir.rglob("*"):
        if chunk.is_file() and chunk != wanted:
            chunk.write_bytes(b"not a blosc frame")  # any read of these would fail
    np.testing.assert_array_equal(store.load("A/1/0", index=(1, 2)), data[1, 2])
    np.testing.assert_array_equal(store.load("A/1/0", index=(1, slice(2, 3))), data[1, 2:3])
    with pytest.raises(Exception):  # noqa: B017 -- the codec's own error for a corrupt chunk
        store.load("A/1/0", index=(0, 0))


# -- what a write touches ------------------------------------------------------------------
def snapshot(root: str) -> dict[str, tuple[int, int]]:
    out = {}
    for parent, _, files in os.walk(root):
        for name in files:
            full = os.path.join(parent, name)
            st = os.stat(full)
            out[os.path.relpath(full, root)] = (st.st_ino, st.st_mtime_ns)
    return out


def changed(before: dict[str, tuple[int, int]], after: dict[str, tuple[int, int]]) -> set[str]:
    return {k for k in after if before.get(k) != after[k]} | (set(before) - set(after))


def test_a_new_field_touches_only_its_well(plate: ZarrStore) -> None:
    plate.save(czyx(1), "A/1/0", parents=True)
    plate.save(czyx(2), "B/2/0", parents=True)
    before = snapshot(plate.root)
    plate.save(czyx(3), "A/1/1")
    touched = changed(before, snapshot(plate.root))
    assert touched and all(p.startswith("A/1/") for p in touched)
    assert "A/1/zarr.json" in touched and "zarr.json" not in touched


def test_a_new_well_touches_the_plate_document_once(plate: ZarrStore) -> None:
    plate.save(czyx(1), "A/1/0", parents=True)
    before = snapshot(plate.root)
    plate.save(czyx(2), "C/5/0", parents=True)
    touched = changed(before, snapshot(plate.root))
    outside = {p for p in touched if not p.startswith("C/") and not p.startswith(".memtype")}
    assert outside == {"zarr.json"}
    assert plate_wells(plate) == ["A/1", "C/5"]


def test_plate_lists_only_wells_with_images(plate: ZarrStore) -> None:
    plate.ensure_directory("A/3")
    assert plate.is_dir("A/3") and plate_wells(plate) == []
    plate.save(czyx(1), "A/3/0")
    plate.save(czyx(2), "A/3/1")
    assert plate_wells(plate) == ["A/3"]
    plate.delete("A/3/0")
    assert plate_wells(plate) == ["A/3"]
    assert ome(Path(plate.root) / "A/3")["well"]["images"] == [{"path": "1"}]
    plate.move("A/3", "B/4", parents=True)
    assert plate_wells(plate) == ["B/4"]
    plate.copy("B/4", "B/5")
    assert plate_wells(plate) == ["B/4", "B/5"]
    plate.delete("B/4/1")
    assert plate_wells(plate) == ["B/5"]
    plate.delete_all("B")
    assert plate_wells(plate) == [] and plate.list_dir("") == ["A"]


def test_rows_and_columns_beyond_the_declared_ones(tmp_path: Path) -> None:
    store = ZarrStore(tmp_path / "p.zarr", rows="AB", columns=[1, 2])
    store.save(czyx(1), "C/10/0", parents=True)
    meta = ome(Path(store.root))["plate"]
    assert [r["name"] for r in meta["rows"]] == ["A", "B", "C"]
    assert [c["name"] for c in meta["columns"]] == ["1", "2", "10"]
    assert meta["wells"] == [{"path": "C/10", "rowIndex": 2, "columnIndex": 2}]


def test_reopening_keeps_the_plate(plate: ZarrStore) -> None:
    plate.save(czyx(1), "A/1/0", parents=True)
    again = ZarrStore(plate.root)
    again.save(czyx(2), "A/2/0", parents=True)
    assert [r["name"] for r in ome(Path(plate.root))["plate"]["rows"]] == list("ABCDEFGH")
    assert again.list_files("", recursive=True) == ["A/1/0", "A/2/0"]


def test_overwrite_replaces_the_whole_field(plate: ZarrStore) -> None:
    plate.save(czyx(1, (3, 2, 8, 8)), "A/1/0", parents=True)
    plate.save(czyx(2, (2, 8, 8), "float32"), "A/1/0", overwrite=True)
    out = plate.load("A/1/0")
    assert out.shape == (2, 8, 8) and out.dtype == np.float32
    np.testing.assert_array_equal(out, czyx(2, (2, 8, 8), "float32"))
    assert sorted(os.listdir(Path(plate.root) / "A/1")) == ["0", "zarr.json"]
    assert plate.stat("A/1/0").shape == (2, 8, 8)


def test_temporary_directories_are_hidden(plate: ZarrStore) -> None:
    plate.save(czyx(1), "A/1/0", parents=True)
    plate.copy("A/1/0", "A/1/1")
    crash = Path(plate.root) / "A/1/.2.abcdef012345.memtype-tmp"
    (crash / "0").mkdir(parents=True)
    (crash / "zarr.json").write_text("{}")
    assert plate.list_files("A/1") == ["A/1/0", "A/1/1"]
    assert plate.list_dir("A/1") == ["0", "1"]


# -- bad input -------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", ["A", "A/1", "A/1/0/0", "A-1/1/0", "A/1/f_0", "A/ 1/0"])
def test_bad_field_paths(plate: ZarrStore, path: str) -> None:
    with pytest.raises(StorePathError, match="row/column/field"):
        plate.save(czyx(1), path, parents=True)


def test_field_path_is_not_a_directory(plate: ZarrStore) -> None:
    with pytest.raises(StorePathError):
        plate.ensure_directory("A/1/0")


@pytest.mark.parametrize("data", [np.zeros(5), np.zeros((1,) * 6), np.array([["a"]]),
                                  np.zeros((2, 2), object), {"not": "an array"}])
def test_data_a_plate_cannot_hold(plate: ZarrStore, data: Any) -> None:
    with pytest.raises(StoreFormatError, match="Cannot save"):
        plate.save(data, "A/1/0", parents=True)
    assert plate.list_files("", recursive=True) == []


def test_no_overwrite_race_leaves_the_first(plate: ZarrStore) -> None:
    plate.save(czyx(1), "A/1/0", parents=True)
    with pytest.raises(StoreExistsError):
        plate.save(czyx(2), "A/1/0")
    np.testing.assert_array_equal(plate.load("A/1/0"), czyx(1))


@pytest.mark.requires("torch")
def test_torch_tensor_saved_through_numpy(plate: ZarrStore) -> None:
    torch = importlib.import_module("torch")
    t = torch.arange(2 * 8 * 8, dtype=torch.float32).reshape(2, 8, 8)
    plate.save(t, plate.field_path("D", 4, 1), parents=True)
    np.testing.assert_array_equal(plate.load("D/4/1"), t.numpy())


# -- multiscale pyramids and channel names ------------------------------------------------------
def test_pyramid_levels_halve_y_and_x_with_block_means(plate: ZarrStore) -> None:
    image = czyx(4, (2, 3, 16, 21))
    plate.save(image, "A/1/0", parents=True, pyramid_levels=3, scale=(1, 2.0, 0.5, 0.5))
    level1 = plate.load("A/1/0", resolution=1)
    level2 = plate.load("A/1/0", resolution=2)
    assert level1.shape == (2, 3, 8, 11) and level2.shape == (2, 3, 4, 6)
    assert level1.dtype == image.dtype
    padded = np.pad(image.astype(np.float64), [(0, 0)] * 2 + [(0, 0), (0, 1)], mode="edge")
    expected = np.rint(padded.reshape(2, 3, 8, 2, 11, 2).mean(axis=(3, 5))).astype(image.dtype)
    np.testing.assert_array_equal(level1, expected)
    np.testing.assert_array_equal(plate.load("A/1/0"), image)  # level 0 is the image itself
    datasets = ome(Path(plate.root) / "A/1/0")["multiscales"][0]["datasets"]
    assert [d["path"] for d in datasets] == ["0", "1", "2"]
    assert [d["coordinateTransformations"][0]["scale"] for d in datasets] == [
        [1, 2.0, 0.5, 0.5], [1, 2.0, 1.0, 1.0], [1, 2.0, 2.0, 2.0]]


def test_nearest_pyramid_keeps_label_values(plate: ZarrStore) -> None:
    labels = np.random.default_rng(5).integers(0, 4, (2, 9, 9)).astype(np.uint32)
    plate.save(labels, "A/1/0", parents=True, pyramid_levels=2, downsample="nearest")
    np.testing.assert_array_equal(plate.load("A/1/0", resolution=1), labels[:, ::2, ::2])


@pytest.mark.parametrize("dtype", ["uint8", "int16", "float32", "bool"])
def test_block_mean_stays_in_the_dtype(plate: ZarrStore, dtype: str) -> None:
    image = np.array([[255, 254], [255, 255]]).astype(dtype)
    if dtype == "int16":
        image = -image
    plate.save(image, "A/1/0", parents=True, pyramid_levels=2)
    [[value]] = plate.load("A/1/0", resolution=1)
    assert plate.load("A/1/0", resolution=1).dtype == np.dtype(dtype)
    expected = {"uint8": 255, "int16": -255, "float32": 254.75, "bool": True}[dtype]
    assert value == expected


@pytest.mark.requires("ome_zarr")
def test_ome_zarr_reader_sees_every_level_and_the_channel_names(plate: ZarrStore) -> None:
    reader_mod = importlib.import_module("ome_zarr.reader")
    from ome_zarr.io import parse_url

    image = czyx(6, (2, 1, 32, 32))
    plate.save(image, "B/3/0", parents=True, pyramid_levels=3, channel_names=["DAPI", "GFP"])
    node = list(reader_mod.Reader(parse_url(os.path.join(plate.root, "B/3/0")))())[0]
    assert [np.asarray(level).shape[-1] for level in node.data] == [32, 16, 8]
    assert node.metadata["channel_names"] == ["DAPI", "GFP"]
    assert node.metadata["colormap"][1] == [[0, 0, 0], [0.0, 1.0, 0.0]]  # GFP is green


@pytest.mark.parametrize("options", [
    {"pyramid_levels": 0}, {"pyramid_levels": 7}, {"pyramid_levels": 2.0},
    {"downsample": "max"}, {"channel_names": ["only one"]}, {"channel_names": "DAPI"},
], ids=str)
def test_invalid_pyramid_and_channel_options(plate: ZarrStore, options: dict[str, Any]) -> None:
    with pytest.raises(StoreFormatError):
        plate.save(czyx(7, (2, 1, 16, 20)), "A/1/0", parents=True, **options)
    assert not plate.exists("A/1/0")


def test_channel_names_need_a_channel_axis(plate: ZarrStore) -> None:
    with pytest.raises(StoreFormatError, match="no 'c' axis"):
        plate.save(np.zeros((3, 8, 8), np.uint8), "A/1/0", parents=True, channel_names=["a"])


def test_a_resolution_that_was_not_written(plate: ZarrStore) -> None:
    plate.save(np.zeros((8, 8), np.uint8), "A/1/0", parents=True, pyramid_levels=2)
    with pytest.raises(StoreFormatError, match="levels 0 to 1"):
        plate.load("A/1/0", resolution=2)


@pytest.mark.parametrize("field,value", [
    ("shape", {}), ("shape", ""), ("shape", "24"), ("shape", {"24": 0, "20": 0}),
    ("shape", [24.0, 20]), ("shape", [True, 20]), ("shape", [-1, 20]), ("data_type", None),
], ids=str)
def test_stat_refuses_a_tampered_array_header(plate: ZarrStore, field: str, value: Any) -> None:
    """stat read 'shape' with tuple(int(s) for s in ...) and np.dtype(...): {} and "" gave
    shape (), "24" gave (2, 4), a None data type float64 (found by the tamper fuzz test)."""
    plate.save(np.zeros((24, 20), np.uint16), "A/1/0", parents=True)
    path = os.path.join(plate.root, "A/1/0/0/zarr.json")
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc[field] = value
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    with pytest.raises(StoreFormatError, match="not a valid OME-Zarr document"):
        plate.stat("A/1/0")


# -- dtypes: canonical type codes are equal dtypes; what zarr cannot hold is a format error ----
@pytest.mark.parametrize("dtype", [np.longlong, np.ulonglong], ids=["longlong", "ulonglong"])
def test_platform_integer_types_are_stored_as_their_type_code(plate: ZarrStore,
                                                             dtype: Any) -> None:
    """np.longlong / np.ulonglong (what MLX int64/uint64 exports are) are int64 / uint64."""
    a = np.arange(-6 if dtype is np.longlong else 0, 6 * 5, dtype=dtype)[:30].reshape(5, 6)
    plate.save(a, "A/1/0", parents=True, pyramid_levels=2)
    back = plate.load("A/1/0")
    np.testing.assert_array_equal(back, a)
    assert back.dtype == np.dtype(np.dtype(dtype).str)
    assert plate.stat("A/1/0").dtype == np.dtype(np.dtype(dtype).str).name


def test_canonical_dtype_is_a_view_of_the_same_bytes() -> None:
    from memtype.storage._formats import canonical

    a = np.arange(12, dtype=np.longlong).reshape(3, 4)[:, ::2]
    view = canonical(a)
    assert type(view.dtype) is type(np.dtype("int64")) and view.base is not None
    assert np.shares_memory(view, a)
    b = np.arange(3, dtype=np.int64)
    assert canonical(b) is b


@pytest.mark.parametrize("dtype", [np.longdouble, np.clongdouble],
                         ids=["longdouble", "clongdouble"])
def test_extended_precision_is_a_format_error(plate: ZarrStore, dtype: Any) -> None:
    if np.dtype(dtype).itemsize <= (8 if np.dtype(dtype).kind == "f" else 16):
        # where long double is double (Windows, macOS arm64) it is stored as float64
        plate.save(np.ones((4, 4), dtype), "A/1/0", parents=True)
        return
    with pytest.raises(StoreFormatError, match="cast it to"):
        plate.save(np.ones((4, 4), dtype), "A/1/0", parents=True)
    assert not plate.exists("A/1/0")
