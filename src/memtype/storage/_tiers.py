"""The bookkeeping of a :class:`~memtype.storage.TieredStore`: which entries each tier holds
(least recently used first) and their bytes, the host copies and spill files of spilled
entries, the moves down (device -> host, device or host -> disk) and the counters that
:class:`~memtype.storage.TieredStats` reports.

Every method is called under the store's lock. What moves, and when, is the store's policy
(:mod:`memtype.storage.tiered`); how arrays become host copies and raw files is
:mod:`memtype.storage._spill`.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

import numpy as np

from memtype.storage._spill import Entry, SpillFiles, TieredStats, spillable, to_host
from memtype.storage.memory import MemoryStore

__all__ = ["Tiers", "TIERS"]

TIERS = ("device", "host", "disk")


class Tiers:
    """Entries per tier, their bytes, their spilled copies and the move counters.

    Parameters
    ----------
    spill_dir : str, optional
        Where the disk tier's private directory is made on first use (None: no disk tier).
    """

    def __init__(self, spill_dir: str | None) -> None:
        self.spill_dir = spill_dir
        self.host = MemoryStore()
        self.disk: SpillFiles | None = None
        self.lru: dict[str, OrderedDict[int, Entry]] = {t: OrderedDict() for t in TIERS}
        self.bytes = dict.fromkeys(TIERS, 0)
        self.counts = {"spills_to_host": 0, "spills_to_disk": 0, "reloads": 0,
                       "spill_failures": 0}

    def place(self, entry: Entry, tier: str) -> None:
        """Account ``entry`` in ``tier`` as its most recently used entry."""
        entry.tier = tier
        self.lru[tier][entry.uid] = entry
        self.bytes[tier] += entry.nbytes

    def unplace(self, entry: Entry) -> None:
        """Remove ``entry`` from its tier's accounting."""
        del self.lru[entry.tier][entry.uid]
        self.bytes[entry.tier] -= entry.nbytes

    def move(self, entry: Entry, tier: str, value: Any) -> None:
        """Account ``entry`` in ``tier`` from now on, holding ``value`` (None when spilled)."""
        self.unplace(entry)
        entry.value = value
        self.place(entry, tier)

    def spilled_value(self, entry: Entry) -> Any:
        """The host copy of a host- or disk-tier entry."""
        if entry.tier == "host":
            return self.host.load(str(entry.uid))
        assert self.disk is not None and entry.spilled is not None
        return self.disk.read(entry.spilled)

    def spiller(self) -> SpillFiles | None:
        """The spill files (made on first use), or None without ``spill_dir``."""
        if self.disk is None and self.spill_dir is not None:
            self.disk = SpillFiles(self.spill_dir)
        return self.disk

    def drop_copy(self, entry: Entry, tier: str) -> None:
        """Free an entry's copy in ``tier`` (host or disk; nothing for the device tier)."""
        if tier == "host":
            self.host.delete(str(entry.uid))
        elif tier == "disk" and entry.spilled is not None:
            assert self.disk is not None
            self.disk.delete(entry.spilled)
            entry.spilled = None

    def to_host(self, entry: Entry, pin: bool) -> None:
        """Move a device entry to the host tier (a pinned copy where the framework has one
        and ``pin``)."""
        host = to_host(entry.value, entry.memory_type, entry.device, pin)
        self.host.save(host, str(entry.uid), overwrite=True, copy=False)
        self.move(entry, "host", None)
        self.counts["spills_to_host"] += 1

    def to_disk(self, entry: Entry) -> None:
        """Write a device or host entry to the disk tier; if writing fails the entry is
        untouched. An entry whose host copy holds Python objects is marked to stay put."""
        disk = self.spiller()
        assert disk is not None
        if entry.tier == "host":
            host = self.host.load(str(entry.uid))
        elif isinstance(entry.value, np.ndarray):
            host = entry.value  # host memory already (a masked array keeps its mask)
        else:
            host = to_host(entry.value, entry.memory_type, entry.device, False)
        if not spillable(host):
            entry.disk_ok = False
            return
        spilled = disk.write(entry.uid, host)
        self.drop_copy(entry, entry.tier)
        self.move(entry, "disk", None)
        entry.spilled = spilled
        self.counts["spills_to_disk"] += 1

    def release(self, entry: Entry) -> None:
        """Forget an entry that left the store (its spilled copy freed)."""
        self.drop_copy(entry, entry.tier)
        self.unplace(entry)
        entry.value = None

    def stats(self, in_use: int, budget_bytes: int, host_budget_bytes: int | None) -> TieredStats:
        """A snapshot of the tiers and counters."""
        b, n, c = self.bytes, self.lru, self.counts
        return TieredStats(
            b["device"], b["host"], b["disk"], len(n["device"]), len(n["host"]), len(n["disk"]),
            in_use, c["spills_to_host"], c["spills_to_disk"], c["reloads"], budget_bytes,
            host_budget_bytes, c["spill_failures"])
