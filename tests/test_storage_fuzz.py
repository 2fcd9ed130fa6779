"""Issue 12: fuzzing the stores with hostile keys and damaged files. The property, every
time: a memtype error (also a builtin), or exactly the data that was saved; never a raw
library exception, never silently different data."""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memtype.errors import MemtypeError
from memtype.storage import DiskStore, MemoryStore, Store, TieredStore, ZarrStore

IMAGE = (np.arange(24 * 20, dtype=np.uint16).reshape(24, 20) * 37) % 4099
FUZZ = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


def memtype_error_or_exact(load: Callable[[], Any], expected: Any) -> None:
    """The property: ``load()`` raises a memtype error or returns ``expected`` exactly."""
    try:
        got = load()
    except MemtypeError as exc:
        assert isinstance(exc, (ValueError, TypeError, KeyError, IndexError, OSError)), exc
        return
    if isinstance(expected, np.ndarray):
        got = np.asarray(got)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
    else:
        assert got == expected


# -- keys ------------------------------------------------------------------------------------
KEY_PARTS = st.one_of(
    st.sampled_from(["", ".", "..", "...", "a", "A", "0", " ", "a b", "x" * 255, "y" * 300,
                     "\\", "~", "-", "é", "\x00", "\n", "*", "?"]),
    st.text(min_size=0, max_size=12))
KEYS = st.lists(KEY_PARTS, min_size=1, max_size=6).map("/".join) | st.text(max_size=40)


def stores(root: Path) -> list[Store]:
    return [MemoryStore(), TieredStore(1 << 20), DiskStore(root / "disk")]


@FUZZ
@given(key=KEYS, parents=st.booleans())
def test_any_key_saves_and_loads_exactly_or_raises_a_memtype_error(key: str,
                                                                   parents: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        for store in stores(Path(tmp)):
            target = key + ".npy" if isinstance(store, DiskStore) else key
            try:
                store.save(IMAGE, target, parents=parents)
            except MemtypeError:
                memtype_error_or_exact(lambda s=store, t=target: s.load(t), IMAGE)
                continue
            memtype_error_or_exact(lambda s=store, t=target: s.load(t), IMAGE)
            memtype_error_or_exact(lambda s=store, t=target: s.stat(t).shape, IMAGE.shape)
            store.delete_all("")


@FUZZ
@given(key=KEYS)
@pytest.mark.requires("zarr")
def test_any_key_on_a_plate_raises_a_memtype_error_or_works(key: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plate = ZarrStore(Path(tmp) / "p.zarr")
        try:
            plate.save(IMAGE, key, parents=True)
        except MemtypeError:
            return
        memtype_error_or_exact(lambda: plate.load(key), IMAGE)


# -- file contents -----------------------------------------------------------------------------
FORMATS = {
    "a.npy": IMAGE, "a.tif": IMAGE, "a.png": IMAGE, "b.png": IMAGE.astype(np.uint8),
    "c.npy": IMAGE.astype(np.float32)[::2], "a.json": {"a": [1, 2.5, None], "b": "text"},
}


def saved(root: Path, name: str) -> tuple[DiskStore, bytes]:
    store = DiskStore(root)
    store.save(FORMATS[name], name)
    return store, Path(store.path_of(name)).read_bytes()


@FUZZ
@given(name=st.sampled_from(sorted(FORMATS)), data=st.data())
@pytest.mark.requires("PIL")
def test_truncated_file_loads_exactly_or_raises(name: str, data: st.DataObject) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store, raw = saved(Path(tmp), name)
        cut = data.draw(st.integers(0, len(raw)))
        Path(store.path_of(name)).write_bytes(raw[:cut])
        memtype_error_or_exact(lambda: store.load(name), FORMATS[name])


@FUZZ
@given(name=st.sampled_from([n for n in sorted(FORMATS) if not n.endswith(".json")]),
       junk=st.binary(max_size=300), keep=st.integers(0, 64))
@pytest.mark.requires("PIL")
def test_random_bytes_load_exactly_or_raise(name: str, junk: bytes, keep: int) -> None:
    """Random bytes, alone or after the file's own first bytes (its magic and header)."""
    with tempfile.TemporaryDirectory() as tmp:
        store, raw = saved(Path(tmp), name)
        Path(store.path_of(name)).write_bytes(raw[:keep] + junk)
        memtype_error_or_exact(lambda: store.load(name), FORMATS[name])
        memtype_error_or_exact(lambda: store.stat(name).size, keep + len(junk))


@FUZZ
@given(junk=st.binary(max_size=200))
def test_random_bytes_as_text_formats_raise_memtype_errors_only(junk: bytes) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        store = DiskStore(tmp)
        for name in ("a.json", "a.txt", "a.csv"):
            Path(store.path_of(name)).write_bytes(junk)
            try:
                store.load(name)
            except MemtypeError:
                pass


# -- tampered zarr metadata ---------------------------------------------------------------------
JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 1 << 40) | st.floats(allow_nan=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                max_size=3),
    max_leaves=6)


def tamper(doc: Any, data: st.DataObject) -> Any:
    """Delete a key of some object in ``doc``, or replace a value with one of another type."""
    nodes: list[tuple[Any, Any]] = []

    def walk(node: Any) -> None:
        items = node.items() if isinstance(node, dict) else enumerate(node)
        for k, v in list(items):
            nodes.append((node, k))
            if isinstance(v, (dict, list)):
                walk(v)

    walk(doc)
    parent, k = data.draw(st.sampled_from(nodes))
    if isinstance(parent, dict) and data.draw(st.booleans()):
        del parent[k]
        return doc
    old = parent[k]
    parent[k] = data.draw(JSON_VALUES.filter(
        lambda v: type(v) is not type(old) and not (isinstance(v, (int, float))
                                                    and isinstance(old, (int, float)))))
    return doc


@FUZZ
@given(which=st.sampled_from(["0/zarr.json", "zarr.json", "../zarr.json"]), data=st.data(),
       truncate=st.booleans())
@pytest.mark.requires("zarr")
def test_tampered_zarr_metadata_loads_exactly_or_raises(which: str, data: st.DataObject,
                                                        truncate: bool) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plate = ZarrStore(Path(tmp) / "p.zarr")
        plate.save(IMAGE, "A/1/0", parents=True)
        path = os.path.normpath(os.path.join(plate.root, "A/1/0", which))
        text = Path(path).read_text()
        if truncate:
            text = text[:data.draw(st.integers(0, len(text) - 2))]
        else:
            text = json.dumps(tamper(json.loads(text), data))
        Path(path).write_text(text)
        memtype_error_or_exact(lambda: plate.load("A/1/0"), IMAGE)
        memtype_error_or_exact(lambda: plate.load("A/1/0", index=(3,)), IMAGE[3])
        memtype_error_or_exact(lambda: plate.stat("A/1/0").shape, IMAGE.shape)


@FUZZ
@given(chunk=st.binary(max_size=200), keep=st.integers(0, 40))
@pytest.mark.requires("zarr")
def test_damaged_zarr_chunk_loads_exactly_or_raises(chunk: bytes, keep: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        plate = ZarrStore(Path(tmp) / "p.zarr", codec="zstd")
        plate.save(IMAGE, "A/1/0", parents=True)
        path = Path(plate.root, "A/1/0/0/c/0/0")
        path.write_bytes(path.read_bytes()[:keep] + chunk)
        memtype_error_or_exact(lambda: plate.load("A/1/0"), IMAGE)
