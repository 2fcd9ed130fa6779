"""A full disk during ZarrStore.save (issue 31, item 21): the first error is the one raised
(StoreFullError, ENOSPC), and the half-written field is removed only after every chunk write
zarr still had in flight has finished, so nothing is left behind.

The disk fills at the N-th file write of the save (memtype's own atomic writer raising
ENOSPC there, as a full file system does), while the other writes are slowed: when the
error arrives, zarr's other chunk writes are still running. This runs on every machine
(no tmpfs, no root)."""

from __future__ import annotations

import errno
import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreFullError

pytestmark = pytest.mark.requires("zarr")

FAIL_AT = 12
"""The file write that finds the disk full."""


def _filling_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the plate's file writes slow, and the FAIL_AT-th raise ENOSPC."""
    import memtype.omezarr.paths as paths

    real = paths.atomic_write
    counter = itertools.count()
    lock = threading.Lock()

    def atomic_write(name: str, write: Any, **kwargs: Any) -> Any:
        with lock:
            n = next(counter)
        if n == FAIL_AT:
            time.sleep(0.02)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), name)
        if n > 2:  # the field's chunks (after the plate's and the well's documents)
            time.sleep(0.1)  # still writing when the error arrives
        return real(name, write, **kwargs)

    monkeypatch.setattr(paths, "atomic_write", atomic_write)


def _well_after_stragglers(well: Path) -> list[str]:
    """The well folder's entries, once any write still running had time to land."""
    time.sleep(1.0)
    return sorted(os.listdir(well))


@pytest.mark.parametrize("attempt", range(3))
def test_a_full_disk_in_save_raises_store_full_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, attempt: int) -> None:
    from memtype.storage import ZarrStore

    store = ZarrStore(tmp_path / "plate.zarr", codec="none", chunks=(1, 1, 16, 16))
    store.save(np.zeros((1, 1, 16, 16), np.uint16), "A/1/0", parents=True)  # the well exists
    _filling_disk(monkeypatch)
    image = np.arange(1 * 2 * 64 * 64, dtype=np.uint16).reshape(1, 2, 64, 64)  # 32 chunks
    with pytest.raises(StoreFullError) as raised:
        store.save(image, "A/1/1")
    assert raised.value.errno == errno.ENOSPC
    assert _well_after_stragglers(tmp_path / "plate.zarr" / "A" / "1") == ["0", "zarr.json"]


def test_a_full_disk_in_save_labels_raises_store_full_and_leaves_nothing(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.storage import ZarrStore

    store = ZarrStore(tmp_path / "plate.zarr", codec="none", chunks=(1, 1, 16, 16))
    store.save(np.zeros((1, 1, 64, 64), np.uint16), "A/1/0", parents=True)
    store.save_labels(np.zeros((1, 64, 64), np.uint16), "A/1/0", "first", chunks=(1, 16, 16))
    _filling_disk(monkeypatch)
    with pytest.raises(StoreFullError):
        store.save_labels(np.ones((1, 64, 64), np.uint16), "A/1/0", "nuclei",
                          chunks=(1, 16, 16))
    assert _well_after_stragglers(tmp_path / "plate.zarr" / "A" / "1" / "0" / "labels") == [
        "first", "zarr.json"]
