"""What polystore 0.6.3's own test suite found in memtype's stores and FileManager: errors that
were not the builtin the peer (and the file system) raises.

Each test is written in memtype's terms; the comment names the peer test that found the gap
(docs/api.md, "Against the peers' suites").
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import (
    StoreIsADirectoryError,
    StoreKeyError,
    StoreNotADirectoryError,
    StorePathError,
)
from memtype.storage import (
    DiskStore,
    FileManager,
    MemoryStore,
    Store,
    ZarrStore,
    get_store_class,
)
from memtype.storage._oserrors import translate

STORES: dict[str, Callable[[Path], Store]] = {
    "disk": lambda tmp: DiskStore(tmp),
    "memory": lambda tmp: MemoryStore(),
}


@pytest.fixture(params=list(STORES), ids=list(STORES))
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Store:
    made = STORES[request.param](tmp_path)
    made.save(np.zeros(2), "d/a.npy", parents=True)
    return made


# polystore tests/test_disk_coverage.py::TestDiskListingOperations::test_list_dir_on_file_path,
# tests/test_memory_coverage.py::TestMemoryListingOperations::test_list_dir_on_file_raises_error
LIST_CALLS: dict[str, Callable[[Store], Any]] = {
    "list_dir": lambda s: s.list_dir("d/a.npy"),
    "list_files": lambda s: s.list_files("d/a.npy"),
    "save under a file": lambda s: s.save(np.zeros(2), "d/a.npy/b.npy", parents=True),
    "ensure_directory": lambda s: s.ensure_directory("d/a.npy"),
}


@pytest.mark.parametrize("call", LIST_CALLS.values(), ids=LIST_CALLS.keys())
def test_a_file_where_a_directory_is_expected_is_not_a_directory_error(
        store: Store, call: Callable[[Store], Any]) -> None:
    with pytest.raises(NotADirectoryError) as info:
        call(store)
    assert isinstance(info.value, StoreNotADirectoryError)
    assert isinstance(info.value, StorePathError)  # and so a ValueError, as before


# polystore tests/test_memory_backend.py::TestMemoryBackend::test_load_directory,
# tests/test_disk_coverage.py::TestDiskDeleteOperations::
#     test_delete_non_empty_directory_raises_error
DIRECTORY_CALLS: dict[str, Callable[[Store], Any]] = {
    "load": lambda s: s.load("d"),
    "save over a directory": lambda s: s.save(np.zeros(2), "d", overwrite=True),
    "delete of a non-empty directory": lambda s: s.delete("d"),
}


@pytest.mark.parametrize("call", DIRECTORY_CALLS.values(), ids=DIRECTORY_CALLS.keys())
def test_a_directory_where_a_file_is_expected_is_an_is_a_directory_error(
        store: Store, call: Callable[[Store], Any]) -> None:
    with pytest.raises(IsADirectoryError) as info:
        call(store)
    assert isinstance(info.value, StoreIsADirectoryError)
    assert isinstance(info.value, ValueError)


def test_the_directory_is_still_there_after_the_refused_delete(store: Store) -> None:
    with pytest.raises(IsADirectoryError):
        store.delete("d")
    assert store.list_files("d") == ["d/a.npy"]


# polystore tests/test_filemanager_extended.py::TestFileManagerLoadErrors::
#     test_load_with_invalid_backend
FILE_MANAGER_CALLS: dict[str, Callable[[FileManager], Any]] = {
    "load": lambda fm: fm.load("a.npy", "invalid_backend"),
    "save": lambda fm: fm.save(np.zeros(2), "a.npy", "invalid_backend"),
    "load_batch": lambda fm: fm.load_batch(["a.npy"], "invalid_backend"),
    "exists": lambda fm: fm.exists("a.npy", "invalid_backend"),
}


@pytest.mark.parametrize("call", FILE_MANAGER_CALLS.values(), ids=FILE_MANAGER_CALLS.keys())
def test_an_unknown_file_manager_backend_is_a_value_error(
        call: Callable[[FileManager], Any]) -> None:
    fm = FileManager({"memory": MemoryStore()})
    with pytest.raises(ValueError, match="invalid_backend"):
        call(fm)


def test_an_unknown_store_name_is_a_value_error_and_still_a_key_error() -> None:
    with pytest.raises(ValueError) as info:
        get_store_class("no-such-store")
    assert isinstance(info.value, KeyError)
    assert isinstance(info.value, StoreKeyError)


# The same mechanism where the operating system, not memtype, finds the wrong kind of path.
OS_ERRORS = {"ENOTDIR": (errno.ENOTDIR, NotADirectoryError),
             "EISDIR": (errno.EISDIR, IsADirectoryError),
             "ENOTEMPTY": (errno.ENOTEMPTY, IsADirectoryError)}


@pytest.mark.parametrize("code,builtin", OS_ERRORS.values(), ids=OS_ERRORS.keys())
def test_an_os_error_of_the_wrong_kind_of_path_keeps_its_builtin_and_errno(
        code: int, builtin: type[OSError]) -> None:
    error = translate(OSError(code, os.strerror(code)), "list 'a' in DiskStore('/data')")
    assert isinstance(error, builtin) and isinstance(error, StorePathError)
    assert isinstance(error, OSError) and error.errno == code


@pytest.mark.requires("zarr")
def test_a_field_path_is_not_a_directory_of_the_plate(tmp_path: Path) -> None:
    plate = ZarrStore(tmp_path / "plate.zarr")
    with pytest.raises(NotADirectoryError):
        plate.ensure_directory("A/1/0")


@pytest.mark.requires("zarr")
def test_a_well_is_a_directory_not_a_field(tmp_path: Path) -> None:
    plate = ZarrStore(tmp_path / "plate.zarr")
    plate.save(np.zeros((1, 1, 1, 4, 4), np.uint16), "A/1/0", parents=True)
    with pytest.raises(IsADirectoryError):
        plate.load("A/1")
