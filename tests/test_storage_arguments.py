"""Issue 21 item 16 and its siblings: every public constructor and function of
memtype.storage given None or an argument of the wrong type raises ArgumentTypeError (also a
TypeError) naming the argument, what it expected and what it received; never a raw
AttributeError or TypeError from deep inside, and never a silent coercion."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.storage import (
    DiskStore,
    FileManager,
    MemoryStore,
    TieredStore,
    ZarrStore,
    natural_key,
    natural_sorted,
    normalize_path,
)

Call = Callable[[Path], Any]

WRONG_TYPES: dict[str, tuple[Call, str]] = {
    "FileManager(None)": (lambda p: FileManager(None), "FileManager's registry"),  # type: ignore[arg-type]
    "FileManager(5)": (lambda p: FileManager(5), "FileManager's registry"),  # type: ignore[arg-type]
    "FileManager(list of pairs)": (
        lambda p: FileManager([("m", MemoryStore())]), "FileManager's registry"),  # type: ignore[arg-type]
    "FileManager(int name)": (
        lambda p: FileManager({1: MemoryStore()}), "backend name"),  # type: ignore[dict-item]
    "FileManager.from_spec(None)": (lambda p: FileManager.from_spec(None), "spec"),  # type: ignore[arg-type]
    "FileManager.from_spec(entry 5)": (
        lambda p: FileManager.from_spec({"a": 5}), "spec of backend 'a'"),  # type: ignore[dict-item]
    "FileManager.from_spec(params None)": (
        lambda p: FileManager.from_spec({"a": ("memory", None)}), "spec of backend 'a'"),  # type: ignore[dict-item]
    "natural_key(None)": (lambda p: natural_key(None), "text"),  # type: ignore[arg-type]
    "natural_sorted(None)": (lambda p: natural_sorted(None), "items"),  # type: ignore[arg-type]
    "natural_sorted(ints)": (lambda p: natural_sorted([2, 1]), "text"),  # type: ignore[list-item]
    "normalize_path(None)": (lambda p: normalize_path(None, "/"), "store path"),  # type: ignore[arg-type]
    "MemoryStore(read_only='yes')": (lambda p: MemoryStore(read_only="yes"), "read_only"),  # type: ignore[arg-type]
    "DiskStore(None)": (lambda p: DiskStore(None), "store root"),  # type: ignore[arg-type]
    "DiskStore(read_only=None)": (lambda p: DiskStore(p, read_only=None), "read_only"),  # type: ignore[arg-type]
    "DiskStore(fsync='no')": (lambda p: DiskStore(p, fsync="no"), "fsync"),  # type: ignore[arg-type]
    "DiskStore(follow_symlinks_outside=1)": (
        lambda p: DiskStore(p, follow_symlinks_outside=1), "follow_symlinks_outside"),  # type: ignore[arg-type]
    "ZarrStore(None)": (lambda p: ZarrStore(None), "store root"),  # type: ignore[arg-type]
    "TieredStore(None)": (lambda p: TieredStore(None), "budget_bytes"),  # type: ignore[arg-type]
    "TieredStore('1')": (lambda p: TieredStore("1"), "budget_bytes"),  # type: ignore[arg-type]
    "TieredStore(1.5)": (lambda p: TieredStore(1.5), "budget_bytes"),  # type: ignore[arg-type]
    "TieredStore(True)": (lambda p: TieredStore(True), "budget_bytes"),
    "TieredStore(host_budget_bytes='x')": (
        lambda p: TieredStore(1, host_budget_bytes="x"), "host_budget_bytes"),  # type: ignore[arg-type]
    "TieredStore(spill_dir=5)": (lambda p: TieredStore(1, spill_dir=5), "spill_dir"),  # type: ignore[arg-type]
    "TieredStore(pressure=5)": (lambda p: TieredStore(1, pressure=5), "pressure"),  # type: ignore[arg-type]
    "TieredStore(pressure_threshold=None)": (
        lambda p: TieredStore(1, pressure_threshold=None), "pressure_threshold"),  # type: ignore[arg-type]
    "TieredStore(pin_memory=None)": (
        lambda p: TieredStore(1, pin_memory=None), "pin_memory"),  # type: ignore[arg-type]
    "load(None)": (lambda p: MemoryStore().load(None), "store path"),  # type: ignore[arg-type]
    "save(path 5)": (lambda p: DiskStore(p).save(np.ones(2), 5), "store path"),  # type: ignore[arg-type]
    "list_files(pattern=5)": (lambda p: MemoryStore().list_files("", pattern=5), "pattern"),  # type: ignore[arg-type]
    "list_files(extensions=5)": (
        lambda p: DiskStore(p).list_files("", extensions=5), "extensions"),  # type: ignore[arg-type]
    "save_batch(None, None)": (lambda p: MemoryStore().save_batch(None, None), "items"),  # type: ignore[arg-type]
    "load_batch(None)": (lambda p: MemoryStore().load_batch(None), "paths"),  # type: ignore[arg-type]
    "FileManager.transfer(None, ...)": (
        lambda p: FileManager({"m": MemoryStore()}).transfer(None, "m", "b", "m"),  # type: ignore[arg-type]
        "store path"),
}


@pytest.mark.parametrize("case", sorted(WRONG_TYPES))
@pytest.mark.requires("zarr")
def test_a_wrong_type_is_an_argument_type_error(tmp_path: Path, case: str) -> None:
    call, names = WRONG_TYPES[case]
    with pytest.raises(TypeError) as info:
        call(tmp_path / "root")
    assert type(info.value) is ArgumentTypeError
    assert names in str(info.value) and "received" in str(info.value)


def test_file_manager_none_names_what_it_expected() -> None:
    with pytest.raises(ArgumentTypeError, match=r"mapping of backend name .* received NoneType"):
        FileManager(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("threshold", [-0.1, 1.5], ids=["below", "above"])
def test_a_pressure_threshold_outside_zero_one_is_refused(threshold: float) -> None:
    with pytest.raises(InvalidArgumentError, match="pressure_threshold must be in"):
        TieredStore(1, pressure_threshold=threshold)


def test_tiered_store_names_every_framework_of_the_table() -> None:
    from memtype.frameworks import known_names

    with pytest.raises(ValueError) as info:
        TieredStore(1).save(None, "x")
    assert all(name in str(info.value) for name in known_names())
