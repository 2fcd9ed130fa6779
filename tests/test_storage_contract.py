"""One test suite for every store: the same behaviour asserted for all (subclassed per store)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import (
    MemtypeError,
    ShapeError,
    StoreExistsError,
    StoreNotFoundError,
    StorePathError,
    StoreReadOnlyError,
)
from memtype.storage import (
    BACKENDS,
    DiskStore,
    MemoryStore,
    Store,
    TieredStore,
    ZarrStore,
    get_store_class,
)


class StoreContract:
    """The behaviour every store shares. Subclasses say how to build one and name paths."""

    def make_store(self, tmp_path: Path) -> Store:
        raise NotImplementedError

    def group(self, k: int) -> str:
        """A directory that can hold files."""
        return f"g{k}"

    def name(self, i: int) -> str:
        """A file name."""
        return f"f{i}"

    def file(self, i: int, k: int = 1) -> str:
        return f"{self.group(k)}/{self.name(i)}"

    def sample(self, i: int) -> np.ndarray:
        return np.arange(2 * 8 * 8, dtype=np.uint16).reshape(2, 8, 8) + i

    def loaded(self, value: Any) -> np.ndarray:
        """A loaded value as NumPy (stores may return other array types)."""
        return np.asarray(value)

    @pytest.fixture
    def store(self, tmp_path: Path) -> Store:
        return self.make_store(tmp_path)

    @pytest.fixture
    def filled(self, store: Store) -> Store:
        store.ensure_directory(self.group(1))
        for i in (1, 2, 10):
            store.save(self.sample(i), self.file(i))
        return store

    # -- identity ------------------------------------------------------------------------
    def test_capabilities(self, store: Store) -> None:
        assert store.supports_writes is True and store.supports_deletes is True
        assert store.device in ("host", "disk", "device")
        assert get_store_class(store.registry_name) is type(store)
        assert store.registry_name in BACKENDS

    def test_pickle_recreates_same_kind_and_params(self, store: Store) -> None:
        clone = pickle.loads(pickle.dumps(store))
        assert type(clone) is type(store)
        assert clone.params() == store.params()

    # -- save / load -------------------------------------------------------------------------
    def test_round_trip_keeps_values_and_dtype(self, filled: Store) -> None:
        out = self.loaded(filled.load(self.file(2)))
        assert out.dtype == np.uint16
        np.testing.assert_array_equal(out, self.sample(2))

    def test_load_missing_is_file_not_found(self, filled: Store) -> None:
        with pytest.raises(FileNotFoundError) as info:
            filled.load(self.file(99))
        assert isinstance(info.value, StoreNotFoundError)
        assert isinstance(info.value, MemtypeError)

    # -- one message per situation (issue 21 item 17) ------------------------------------------
    # What each store says for a missing file, a missing file-or-directory and a missing
    # directory; the zarr store speaks of fields, rows and the plate.
    missing_file = "No file at"
    missing_path = "No file or directory at"
    missing_dir = "No directory at"

    @pytest.mark.parametrize("call", ["copy", "move", "delete", "stat"])
    def test_a_missing_source_says_no_file_or_directory(self, filled: Store, call: str) -> None:
        path = self.file(99)
        args = (path, self.file(98)) if call in ("copy", "move") else (path,)
        with pytest.raises(StoreNotFoundError) as info:
            getattr(filled, call)(*args)
        assert f"{self.missing_path} {path!r}" in str(info.value)
        assert "parents" not in str(info.value)

    def test_a_missing_file_says_no_file(self, filled: Store) -> None:
        path = self.file(99)
        with pytest.raises(StoreNotFoundError) as info:
            filled.load(path)
        assert f"{self.missing_file} {path!r}" in str(info.value)

    @pytest.mark.parametrize("call", ["load", "list_files", "list_dir"])
    def test_a_read_in_a_missing_directory_never_suggests_parents(self, filled: Store,
                                                                  call: str) -> None:
        """Read calls take no ``parents``: their message must not suggest it."""
        path = self.file(1, 7) if call == "load" else self.group(7)
        with pytest.raises(StoreNotFoundError) as info:
            getattr(filled, call)(path)
        assert "parents" not in str(info.value)
        said = self.missing_file if call == "load" else self.missing_dir
        assert said in str(info.value)

    @pytest.mark.parametrize("call", ["save", "copy", "move"])
    def test_a_write_in_a_missing_directory_says_how_to_create_it(self, filled: Store,
                                                                  call: str) -> None:
        target = self.file(1, 7)
        with pytest.raises(StoreNotFoundError) as info:
            if call == "save":
                filled.save(self.sample(1), target)
            else:
                getattr(filled, call)(self.file(1), target)
        assert f"{self.missing_dir} {self.group(7)!r}" in str(info.value)
        assert "pass parents=True" in str(info.value)

    def test_existing_path_without_overwrite_keeps_original(self, filled: Store) -> None:
        with pytest.raises(FileExistsError) as info:
            filled.save(self.sample(50), self.file(1))
        assert isinstance(info.value, StoreExistsError)
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(1))), self.sample(1))

    def test_overwrite_replaces(self, filled: Store) -> None:
        filled.save(self.sample(50), self.file(1), overwrite=True)
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(1))), self.sample(50))

    def test_missing_parent_needs_parents(self, store: Store) -> None:
        with pytest.raises(FileNotFoundError):
            store.save(self.sample(1), self.file(1, k=7))
        assert not store.exists(self.file(1, k=7))
        store.save(self.sample(1), self.file(1, k=7), parents=True)
        assert store.is_dir(self.group(7)) and store.is_file(self.file(1, k=7))

    def test_callers_later_writes_do_not_change_stored_data(self, store: Store) -> None:
        data = self.sample(3)
        store.save(data, self.file(3), parents=True)
        data[...] = 0
        np.testing.assert_array_equal(self.loaded(store.load(self.file(3))), self.sample(3))

    def test_unknown_option_is_type_error(self, store: Store) -> None:
        with pytest.raises(TypeError):
            store.save(self.sample(1), self.file(1), parents=True, no_such_option=1)

    def test_save_onto_a_directory_is_path_error(self, filled: Store) -> None:
        with pytest.raises(StorePathError):
            filled.save(self.sample(1), self.group(1), overwrite=True)

    def test_file_where_directory_expected_is_path_error(self, filled: Store) -> None:
        with pytest.raises(StorePathError):
            filled.save(self.sample(1), f"{self.file(1)}/{self.name(3)}", parents=True)
        with pytest.raises(StorePathError):
            filled.list_files(self.file(1))

    # -- queries -------------------------------------------------------------------------
    def test_exists_is_file_is_dir(self, filled: Store) -> None:
        assert filled.exists(self.file(1)) and filled.is_file(self.file(1))
        assert not filled.is_dir(self.file(1))
        assert filled.exists(self.group(1)) and filled.is_dir(self.group(1))
        assert not filled.is_file(self.group(1))
        assert not filled.exists(self.file(99)) and not filled.is_file(self.file(99))

    def test_list_files_in_natural_order(self, filled: Store) -> None:
        assert filled.list_files(self.group(1)) == [self.file(i) for i in (1, 2, 10)]

    def test_list_files_pattern(self, filled: Store) -> None:
        pattern = self.name(1).replace("1", "1*", 1)
        assert filled.list_files(self.group(1), pattern=pattern) == [self.file(1), self.file(10)]

    def test_list_files_recursive(self, filled: Store) -> None:
        filled.save(self.sample(4), self.file(4, k=2), parents=True)
        assert filled.list_files("") == []
        everything = filled.list_files("", recursive=True)
        assert everything == [self.file(i) for i in (1, 2, 10)] + [self.file(4, k=2)]

    def test_absolute_directory_lists_absolute_paths(self, filled: Store) -> None:
        absolute = os.path.join(filled.root, self.group(1))
        listed = filled.list_files(absolute)
        assert listed == [os.path.join(filled.root, self.file(i)) for i in (1, 2, 10)]
        np.testing.assert_array_equal(self.loaded(filled.load(listed[0])), self.sample(1))

    def test_list_dir(self, filled: Store) -> None:
        filled.ensure_directory(self.group(2))
        assert filled.list_dir(self.group(1)) == [self.name(i) for i in (1, 2, 10)]
        assert self.group(2).rsplit("/", 1)[-1] in filled.list_dir(self.group(2).rpartition("/")[0])

    def test_list_missing_directory_is_file_not_found(self, store: Store) -> None:
        with pytest.raises(FileNotFoundError):
            store.list_files(self.group(8))

    def test_stat(self, filled: Store) -> None:
        info = filled.stat(self.file(1))
        assert not info.is_dir and info.size > 0
        assert filled.stat(self.group(1)).is_dir
        with pytest.raises(FileNotFoundError):
            filled.stat(self.file(99))

    # -- directories -------------------------------------------------------------------------
    def test_ensure_directory_is_idempotent(self, store: Store) -> None:
        store.ensure_directory(self.group(3))
        store.ensure_directory(self.group(3))
        assert store.is_dir(self.group(3)) and store.list_files(self.group(3)) == []

    def test_ensure_directory_on_a_file_is_path_error(self, filled: Store) -> None:
        with pytest.raises(StorePathError):
            filled.ensure_directory(self.file(1))

    # -- deletes -------------------------------------------------------------------------
    def test_delete_file(self, filled: Store) -> None:
        filled.delete(self.file(1))
        assert not filled.exists(self.file(1))
        assert filled.list_files(self.group(1)) == [self.file(2), self.file(10)]
        with pytest.raises(FileNotFoundError):
            filled.delete(self.file(1))

    def test_delete_non_empty_directory_is_refused(self, filled: Store) -> None:
        with pytest.raises(StorePathError):
            filled.delete(self.group(1))
        assert filled.is_file(self.file(1))

    def test_delete_empty_directory(self, store: Store) -> None:
        store.ensure_directory(self.group(4))
        store.delete(self.group(4))
        assert not store.exists(self.group(4))

    def test_delete_all(self, filled: Store) -> None:
        filled.delete_all(self.group(1))
        assert not filled.exists(self.group(1)) and not filled.exists(self.file(1))
        with pytest.raises(FileNotFoundError):
            filled.delete_all(self.group(1))

    def test_delete_all_root_clears_the_store(self, filled: Store) -> None:
        filled.delete_all("")
        assert filled.list_files("", recursive=True) == []

    # -- move / copy -------------------------------------------------------------------------
    def test_move_file(self, filled: Store) -> None:
        filled.move(self.file(1), self.file(5))
        assert not filled.exists(self.file(1))
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(5))), self.sample(1))

    def test_move_onto_existing_needs_overwrite(self, filled: Store) -> None:
        with pytest.raises(FileExistsError):
            filled.move(self.file(1), self.file(2))
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(2))), self.sample(2))
        filled.move(self.file(1), self.file(2), overwrite=True)
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(2))), self.sample(1))
        assert not filled.exists(self.file(1))

    def test_move_directory(self, filled: Store) -> None:
        filled.move(self.group(1), self.group(6))
        assert not filled.exists(self.group(1))
        assert filled.list_files(self.group(6)) == [self.file(i, k=6) for i in (1, 2, 10)]
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(10, k=6))),
                                      self.sample(10))

    def test_copy_file_and_directory(self, filled: Store) -> None:
        filled.copy(self.file(1), self.file(7))
        np.testing.assert_array_equal(self.loaded(filled.load(self.file(7))), self.sample(1))
        assert filled.exists(self.file(1))
        filled.copy(self.group(1), self.group(5))
        assert filled.list_files(self.group(5)) == [self.file(i, k=5) for i in (1, 2, 7, 10)]
        with pytest.raises(FileExistsError):
            filled.copy(self.file(1), self.file(2))

    def test_move_missing_is_file_not_found(self, filled: Store) -> None:
        with pytest.raises(FileNotFoundError):
            filled.move(self.file(99), self.file(98))

    # -- batches -------------------------------------------------------------------------
    def test_batch_round_trip_with_the_same_keywords(self, store: Store) -> None:
        paths = [self.file(i, k=3) for i in range(4)]
        store.save_batch([self.sample(i) for i in range(4)], paths, parents=True)
        store.save_batch([self.sample(9)] * 4, paths, overwrite=True, parents=True)
        for out in store.load_batch(paths):
            np.testing.assert_array_equal(self.loaded(out), self.sample(9))

    def test_batch_length_mismatch_writes_nothing(self, store: Store) -> None:
        with pytest.raises(ShapeError):
            store.save_batch([self.sample(1)], [self.file(1), self.file(2)], parents=True)
        assert not store.exists(self.file(1))

    # -- paths ----------------------------------------------------------------------------
    @pytest.mark.parametrize("bad", ["../x", "a/../../x", "g1/../../../etc"])
    def test_escaping_the_root_is_path_error(self, store: Store, bad: str) -> None:
        with pytest.raises(StorePathError) as info:
            store.save(self.sample(1), bad, parents=True)
        assert isinstance(info.value, ValueError)
        with pytest.raises(StorePathError):
            store.load(bad)
        with pytest.raises(StorePathError):
            store.exists(bad)

    def test_absolute_path_outside_the_root_is_path_error(self, store: Store) -> None:
        """Outside the root: a StorePathError. A store rooted at '/' has no outside: there an
        absolute path is an ordinary key, saved and loaded as such."""
        if store.root == "/":
            key = os.path.join("/", "elsewhere", self.name(1))
            store.save(self.sample(1), key, parents=True)
            np.testing.assert_array_equal(self.loaded(store.load(key)), self.sample(1))
            return
        outside = os.path.join(os.path.dirname(store.root), "elsewhere", self.name(1))
        with pytest.raises(StorePathError):
            store.save(self.sample(1), outside, parents=True)

    def test_dot_segments_are_normalised(self, filled: Store) -> None:
        g = self.group(1)
        same = f"./{g}/../{g.rpartition('/')[2]}/./{self.name(2)}"
        np.testing.assert_array_equal(self.loaded(filled.load(same)), self.sample(2))

    # -- read-only -----------------------------------------------------------------------
    def test_read_only_instance_refuses_writes(self, filled: Store) -> None:
        ro = type(filled)(**{**filled.params(), "read_only": True})
        assert ro.supports_writes is False and ro.supports_deletes is False
        with pytest.raises(PermissionError) as info:
            ro.save(self.sample(1), self.file(30), parents=True)
        assert isinstance(info.value, StoreReadOnlyError)
        with pytest.raises(PermissionError):
            ro.delete_all(self.group(1))


class TestMemoryStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return MemoryStore()


class TestDiskStoreNpy(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return DiskStore(tmp_path / "disk")

    def name(self, i: int) -> str:
        return f"f{i}.npy"


@pytest.mark.requires("tifffile")
class TestDiskStoreTiff(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return DiskStore(tmp_path / "disk", fsync=True)

    def name(self, i: int) -> str:
        return f"f{i}.tif"


@pytest.mark.requires("zarr")
class TestZarrStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return ZarrStore(tmp_path / "plate.zarr", rows="AB", columns=range(1, 13))

    def group(self, k: int) -> str:
        return f"A/{k}"

    missing_file = "No field at"
    missing_path = "Nothing at"
    missing_dir = "No well at"


@pytest.mark.requires("zarr")
class TestZarrStoreUncompressedImageChunks(TestZarrStore):
    def make_store(self, tmp_path: Path) -> Store:
        return ZarrStore(tmp_path / "plate.zarr", codec="none", chunks="image")


@pytest.mark.requires("zarr")
class TestZarrStoreOmeZarr04(TestZarrStore):
    """The same plate in OME-Zarr 0.4 (zarr v2)."""

    def make_store(self, tmp_path: Path) -> Store:
        return ZarrStore(tmp_path / "plate.zarr", rows="AB", columns=range(1, 13),
                         ome_version="0.4")


class TestTieredStore(StoreContract):
    def make_store(self, tmp_path: Path) -> Store:
        return TieredStore(budget_bytes=1 << 30, spill_dir=str(tmp_path / "spill"))


class TestTieredStoreAlwaysSpilling(StoreContract):
    """A budget of 0: every entry but the one just used lives on disk."""

    def make_store(self, tmp_path: Path) -> Store:
        return TieredStore(budget_bytes=0, spill_dir=str(tmp_path / "spill"))


def test_importing_and_using_storage_loads_no_heavy_module(tmp_path: Path) -> None:
    """memtype.storage imports zarr, tifffile, pillow and frameworks only when they are used."""
    code = (
        "import sys, numpy as np\n"
        "from memtype.storage import BACKENDS, DiskStore, FileManager, MemoryStore\n"
        "d = DiskStore(sys.argv[1])\n"
        "d.save(np.zeros(3), 'a.npy'); d.load('a.npy'); d.save({'a': 1}, 'm.json')\n"
        "m = MemoryStore(); m.save(np.zeros(3), 'a'); m.load('a')\n"
        "FileManager({'d': d, 'm': m}).list_files('', 'd')\n"
        "heavy = ('torch', 'jax', 'tensorflow', 'cupy', 'pyclesperanto', 'zarr', 'tifffile',\n"
        "         'PIL', 'numcodecs', 'ome_zarr')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy))\n"
    )
    done = subprocess.run([sys.executable, "-c", code, str(tmp_path / "d")],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
