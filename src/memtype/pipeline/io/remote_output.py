"""A run's output on object storage (``s3://bucket/prefix``): the same layout as on disk.

``Pipeline.run(source, "s3://bucket/run1")`` writes what a local output holds (``plate.zarr``
with its images, pyramid levels, labels and tables; ``<table>.csv``; ``.memtype/``), through
:mod:`memtype.storage.remote` (obstore), with the rules an object store allows:

* **No rename.** A group is written on the worker that ran it, into a staging folder on that
  worker's local disk, by the same code a local output uses (:class:`OutputSpec`); when the
  group is complete its objects are uploaded straight from the worker (the driver moves no
  pixels), the field prefixes first emptied of what a killed attempt left, and its
  done-marker ``.memtype/done/<group>.json`` is the group's last object (a PUT is atomic: a
  marker is there or not). A group killed half-way is not done: ``resume`` writes it again.
* **Documents the groups share are written once, by the driver, at the end.** The plate's,
  rows' and wells' group documents list exactly the fields of the finished groups (read from
  their markers), so two groups of one well never race on the well's image list, and a
  plate lists no field of an unfinished group. The ``<table>.csv`` files are merged there
  too; the plate overview picture is not drawn for an object-store output.
* **One run at a time.** ``.memtype/lease.json`` is created with ``If-None-Match: *`` (only
  one creator wins), renewed every :data:`RENEW_S` seconds with ``If-Match`` on its ETag,
  and deleted at the end (or, by its renewing thread, once a run that raised is gone). A
  second run finds it and is refused, naming the holder; a lease
  left by a process that died (same host and a pid no longer running, or not renewed for
  :data:`LEASE_TTL_S` seconds) is taken over with ``If-Match``, so of two runs taking over
  one wins.
* The run record (``.memtype/run.json``, :mod:`memtype.pipeline.execution.provenance`) is
  one object.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import tempfile
import threading
import time
import uuid
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from typing import Any

from memtype.errors import StoreExistsError, StoreFormatError
from memtype.omezarr import assemble
from memtype.omezarr.layout import layout_for
from memtype.omezarr.metadata import plate_doc, plate_with_wells, well_doc
from memtype.pipeline.io.outputs import OutputSpec, empties_existing_output, group_file_label
from memtype.pipeline.io.patterns import Key, key_label
from memtype.pipeline.io.tables import parse_table, rows_to_table
from memtype.storage import natural_key
from memtype.storage.remote import ObjectLocation, translated

__all__ = ["ObjectOutputSpec", "LEASE", "LEASE_TTL_S", "RENEW_S"]

_STATE = ".memtype"
LEASE = f"{_STATE}/lease.json"
"""The run lease's key inside the output."""
LEASE_TTL_S = 120.0
"""A lease not renewed for this long belongs to a run that stopped (clocks of the hosts
are assumed to agree within a few seconds)."""
RENEW_S = 30.0
"""How often a running run renews its lease."""
_UPLOADS = 16
"""Objects uploaded at once by a worker."""
_SKIPPED = (f"{_STATE}/labels/", f"{_STATE}/spill/", f"{_STATE}/done/")


@dataclass(frozen=True)
class ObjectOutputSpec(OutputSpec):
    """An :class:`OutputSpec` whose ``root`` is an ``s3://`` URL (see the module)."""

    def _where(self) -> ObjectLocation:
        """The output's location."""
        return ObjectLocation.parse(self.root)

    def _local(self, group: Key) -> OutputSpec:
        """The same output, rooted at this process's staging folder for ``group``."""
        values = {f.name: getattr(self, f.name) for f in fields(OutputSpec)}
        return OutputSpec(**{**values, "root": _staging(self.root, group)})

    # -- driver side -----------------------------------------------------------------
    def written_by_memtype(self) -> bool:
        """Whether the output holds an earlier run (a run record or a done-marker)."""
        where = self._where()
        return where.head(f"{_STATE}/run.json") is not None or where.any(f"{_STATE}/done")

    def prepare(self, *, resume: bool, overwrite: bool, overwrite_foreign: bool = False) -> None:
        """Take the run lease, then apply the existing-output rule (as on disk).

        Raises
        ------
        StoreExistsError
            Another run holds the output's lease; or the rule refuses (see
            :meth:`OutputSpec.prepare`).
        """
        where = self._where()
        _Lease.take(where, self)
        try:
            self._apply_rule(where, resume, overwrite, overwrite_foreign)
        except BaseException:
            _Lease.release(where)
            raise

    def _apply_rule(self, where: ObjectLocation, resume: bool, overwrite: bool,
                    overwrite_foreign: bool) -> None:
        """:meth:`prepare`'s existing-output rule (the lease held)."""
        if not [k for k in where.list_some("", 2) if k != LEASE]:
            return
        if empties_existing_output(self.root, resume, overwrite, overwrite_foreign,
                                   self.written_by_memtype, "objects", "prefix",
                                   f"{_STATE}/run.json"):
            where.delete_all("", keep=(LEASE,))

    def is_done(self, key: Key) -> bool:
        """Whether an earlier run finished this group (its marker exists)."""
        return self._where().head(_marker(key)) is not None

    def finish(self, keys: Sequence[Key]) -> dict[str, str]:
        """Write the plates' group documents and the merged tables from the finished groups'
        markers; release the lease. Returns what the output holds."""
        where = self._where()
        found = [(group_file_label(k), _load_json(where, _marker(k))) for k in keys]
        labelled = [(label, m) for label, m in found if m is not None]  # label: from the key
        markers = [m for _, m in labelled]
        outputs: dict[str, str] = {}
        plates: dict[str, set[str]] = {}
        for marker in markers:
            for location, paths in marker.get("fields", {}).items():
                plates.setdefault(location, set()).update(paths)
        for location, paths in plates.items():
            _write_plate_documents(where.child(location), self, paths)
        final = self.image_location("", True)
        if final in plates or any(m.get("images") for m in markers):
            outputs["images"] = where.child(final).url
        for name in sorted({n for m in markers for n in m.get("tables", [])}):
            rows = []
            for label, marker in labelled:
                if name in marker.get("tables", []):
                    part = where.get(f"{_STATE}/tables/{name}/{label}.csv") or b""
                    rows.extend(parse_table(part.decode("utf-8")))
            where.put(f"{name}.csv", _csv(rows_to_table(rows)))
            outputs[name] = where.child(f"{name}.csv").url
        _Lease.release(where)
        return outputs

    # -- worker side -----------------------------------------------------------------
    def write_images(self, step: str, final: bool, items: Sequence[Any], group: Key,
                     written: list[tuple[str, str]] | None = None) -> None:
        """Write one group's stacks of one step into its staging folder (uploaded when the
        group is done)."""
        local = self._local(group)
        staged: list[tuple[str, str]] = []
        try:
            local.write_images(step, final, items, group, staged)
        finally:
            if written is not None:  # absolute: discard_images finds the staging folder
                written.extend((os.path.join(local.root, loc), p) for loc, p in staged)

    def discard_images(self, written: Sequence[tuple[str, str]]) -> None:
        """Forget a failed group's staged images (nothing of it was uploaded)."""
        for location, _ in written:
            shutil.rmtree(os.path.dirname(location), ignore_errors=True)

    def write_tables(self, group: Key, tables: dict[str, list[dict[str, Any]]]) -> None:
        """Stage one group's part of every side-output table."""
        self._local(group).write_tables(group, tables)

    def spill_dir(self, group: Key) -> str:
        """A group's spill folder, on the worker's local disk."""
        return self._local(group).spill_dir(group)

    def remove_spill(self, group: Key) -> None:
        """Remove a group's (emptied) spill folder."""
        self._local(group).remove_spill(group)

    def mark_done(self, group: Key, steps: Sequence[str]) -> None:
        """Upload the group's staged objects, then its done-marker (the last object)."""
        local = self._local(group)
        where = self._where()
        tables = _table_names(local.root)
        if self.image_format == "zarr":
            _tables_into_plate(local, tables)
        files, found = _staged_files(local.root)
        for location, paths in found.items():
            for path in paths:  # what a killed attempt left of the field
                where.child(location).delete_all(path)
        _upload(where, local.root, files)
        marker = {"group": key_label(group), "label": group_file_label(group),
                  "steps": list(steps), "fields": {k: sorted(v) for k, v in found.items()},
                  "tables": tables, "images": self.image_format != "zarr" and bool(files)}
        where.put(_marker(group), json.dumps(marker, indent=2).encode("utf-8"))
        shutil.rmtree(local.root, ignore_errors=True)


def _csv(table: list[list[Any]]) -> bytes:
    """A table as CSV bytes (as DiskStore writes a ``.csv``)."""
    import csv
    import io

    text = io.StringIO()
    csv.writer(text, lineterminator="\n").writerows(table)
    return text.getvalue().encode("utf-8")


def _marker(key: Key) -> str:
    """The done-marker's key of a group."""
    return f"{_STATE}/done/{group_file_label(key)}.json"


def _load_json(where: ObjectLocation, key: str) -> dict[str, Any] | None:
    """The JSON object at ``key``, or None when there is no such object.

    Raises
    ------
    StoreFormatError
        The object is not a JSON object (a ``ValueError``), naming it.
    """
    raw = where.get(key)
    if raw is None:
        return None
    try:
        doc = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        doc = exc
    if not isinstance(doc, dict):
        shown = f"{type(doc).__name__}: {doc}" if isinstance(doc, Exception) else \
            type(doc).__name__
        raise StoreFormatError(
            f"{where.child(key).url!r} is not the JSON object memtype writes there; "
            f"received {raw[:80]!r} ({shown[:200]}). Delete it if no run is writing this "
            "output, or choose another prefix.")
    return doc


_STAGING: dict[int, tempfile.TemporaryDirectory[str]] = {}
_STAGING_LOCK = threading.Lock()


def _staging(url: str, group: Key) -> str:
    """This process's staging folder for one group of the output at ``url`` (created;
    the process's staging area is removed when it exits)."""
    with _STAGING_LOCK:
        area = _STAGING.get(os.getpid())
        if area is None:
            area = _STAGING[os.getpid()] = tempfile.TemporaryDirectory(prefix="memtype-stage-")
    folder = os.path.join(area.name, uuid.uuid5(uuid.NAMESPACE_URL, url).hex,
                          group_file_label(group))
    os.makedirs(folder, exist_ok=True)
    return folder


def _table_names(root: str) -> list[str]:
    """The side-output tables a group staged."""
    tables = os.path.join(root, _STATE, "tables")
    return sorted(os.listdir(tables)) if os.path.isdir(tables) else []


def _tables_into_plate(local: OutputSpec, tables: list[str]) -> None:
    """Write a group's table rows into its staged plate's fields (as the local run does at
    its end for every field)."""
    plate = os.path.join(local.root, local.image_location("", True))
    if not os.path.isdir(plate):
        return
    for name in tables:
        folder = os.path.join(local.root, _STATE, "tables", name)
        rows = []
        for part in sorted(os.listdir(folder)):
            with open(os.path.join(folder, part), encoding="utf-8") as fh:
                rows.extend(parse_table(fh.read()))
        assemble.write_tables(plate, local._grid(), name, rows)


def _staged_files(root: str) -> tuple[list[str], dict[str, set[str]]]:
    """(every staged file to upload, relative; the fields of each ``*.zarr`` plate). A plate's
    own, its rows' and its wells' group documents stay behind (the driver writes them)."""
    out: list[str] = []
    plates: dict[str, set[str]] = {}
    for folder, _, names in os.walk(root):
        rel = os.path.relpath(folder, root).replace(os.sep, "/")
        parts = [] if rel == "." else rel.split("/")
        for name in names:
            key = "/".join([*parts, name])
            if key.startswith(_SKIPPED) or name.startswith(".memtype-tmp"):
                continue
            plate = next((i for i, p in enumerate(parts) if p.endswith(".zarr")), None)
            if plate is not None and len(parts) - plate <= 3:
                continue  # plate, row or well document: written by the driver
            if plate is not None:
                plates.setdefault("/".join(parts[:plate + 1]), set()).add(
                    "/".join(parts[plate + 1:plate + 4]))
            out.append(key)
    return out, plates


def _upload(where: ObjectLocation, root: str, keys: list[str]) -> None:
    """Upload staged files (``_UPLOADS`` at a time), straight from this process; a file is
    read only once its upload starts, so memory holds ``_UPLOADS`` files, not the group.

    Threads, each a blocking ``put`` (obstore lets go of the GIL while it waits): obstore's
    ``put_async`` under ``asyncio.run`` aborted the interpreter at exit (SIGABRT, "Fatal
    Python error: Aborted", in about 1 run in 6 here), after every upload had succeeded.
    """
    def one(key: str) -> None:
        with open(os.path.join(root, key), "rb") as fh:
            data = fh.read()
        where.put(key, data)

    with translated(where, f"upload {len(keys)} objects to"), \
            ThreadPoolExecutor(_UPLOADS, thread_name_prefix="memtype-upload") as pool:
        for _ in pool.map(one, keys):  # the first failure raises here
            pass


def _write_plate_documents(plate: ObjectLocation, spec: OutputSpec, paths: set[str]) -> None:
    """The plate's, its rows' and its wells' group documents, listing exactly the fields
    ``paths`` (``row/column/field``)."""
    layout = layout_for(spec.ome_version)
    files = _ObjectFiles(plate)
    wells: dict[str, list[str]] = {}
    for path in paths:
        well, _, field = path.rpartition("/")
        wells.setdefault(well, []).append(field)
    groups: list[tuple[str, dict[str, Any]]] = [
        (row, {}) for row in sorted({w.split("/")[0] for w in wells})]
    groups += [(well, well_doc(sorted(images, key=natural_key)))
               for well, images in wells.items()]
    doc = plate_doc(plate.name, spec.rows, spec.columns, layout.version)
    doc["plate"] = plate_with_wells(doc["plate"], set(wells), layout.version)
    for key, ome in [*groups, ("", doc)]:  # the plate's own document last
        layout.write_ome(files, key, ome, fsync=False)
        if layout.zarr_format == 2:
            files.write_json(f"{key}/.zgroup" if key else ".zgroup", {"zarr_format": 2},
                             overwrite=True, fsync=False)


class _ObjectFiles:
    """The file operations :class:`~memtype.omezarr.layout.Layout` writes group documents
    with, on an object store (the driver is the only writer: no lock is needed)."""

    def __init__(self, where: ObjectLocation) -> None:
        self.where = where

    def is_file(self, key: str) -> bool:
        """Whether object ``key`` exists."""
        return self.where.head(key) is not None

    def read_json(self, key: str) -> dict[str, Any]:
        """The JSON object at ``key`` ({} when there is none)."""
        return _load_json(self.where, key) or {}

    def write_json(self, key: str, doc: dict[str, Any], *, overwrite: bool, fsync: bool,
                   indent: int | None = 2) -> bool:
        """Write ``doc`` at ``key``: replaced, or (``overwrite=False``) only where there is
        none, returning whether it was written (``fsync`` means nothing for an object)."""
        data = json.dumps(doc, indent=indent).encode("utf-8")
        if not overwrite:
            return self.where.create(key, data)
        self.where.put(key, data)
        return True

    def lock(self, name: str, *, shared: bool = False) -> Any:
        """No lock: the driver is the only writer."""
        from contextlib import nullcontext

        return nullcontext()


class _Lease:
    """The run lease ``.memtype/lease.json`` of one output (see the module)."""

    _held: dict[str, _Lease] = {}

    def __init__(self, where: ObjectLocation, owner: object) -> None:
        self.where, self.tag = where, ""
        self.body = {"run": uuid.uuid4().hex, "host": socket.gethostname(),
                     "pid": os.getpid()}
        self.owner = weakref.ref(owner)
        self.stop = threading.Event()

    @classmethod
    def take(cls, where: ObjectLocation, owner: object) -> None:
        """Take the output's lease, or raise StoreExistsError naming its live holder."""
        old = cls._held.pop(where.url, None)
        if old is not None:
            old.end()
        lease = cls(where, owner)
        tag = where.create_tagged(LEASE, lease._bytes())
        # the tag the write answered: a look-up after it could see a run that took over since
        lease.tag = lease._take_over() if tag is None else tag
        cls._held[where.url] = lease
        threading.Thread(target=lease._renew, daemon=True, name="memtype-lease").start()

    @classmethod
    def release(cls, where: ObjectLocation) -> None:
        """Give the lease back (delete it)."""
        lease = cls._held.pop(where.url, None)
        if lease is not None:
            lease.end()
            where.delete(LEASE)

    def end(self) -> None:
        """Stop renewing."""
        self.stop.set()

    def _bytes(self) -> bytes:
        """The lease's body, renewed now."""
        return json.dumps({**self.body, "renewed": time.time()}).encode("utf-8")

    def _take_over(self) -> str:
        """Replace a dead run's lease (If-Match), else StoreExistsError; the new ETag."""
        head = self.where.head(LEASE) or {}
        held = _load_json(self.where, LEASE) or {}
        if not _is_dead(held):
            age = time.time() - float(held.get("renewed", 0.0))
            raise StoreExistsError(
                f"Output {self.where.url!r} is being written by another run (host "
                f"{held.get('host')!r}, pid {held.get('pid')}, lease renewed {age:.0f} s ago); "
                "expected no run in progress. Wait for it to finish; a run that died frees "
                f"its lease after {LEASE_TTL_S:.0f} s (or at once on its own host).")
        return self.where.put(LEASE, self._bytes(), if_match=str(head.get("e_tag", "")))

    def _renew(self) -> None:
        """Renew the lease until the run ends; a run gone without finishing (it raised,
        its output object was freed) gives the lease back if it still holds it."""
        while not self.stop.wait(RENEW_S):
            if self.owner() is None:
                self._give_back()
                return
            try:
                self.tag = self.where.put(LEASE, self._bytes(), if_match=self.tag)
            except OSError:  # taken over, or the store is unreachable: stop renewing
                return

    def _give_back(self) -> None:
        """Delete the lease if it is still this run's (its ETag unchanged)."""
        try:
            if str((self.where.head(LEASE) or {}).get("e_tag", "")) == self.tag:
                self.where.delete(LEASE)
        except OSError:  # unreachable: the lease expires after LEASE_TTL_S
            return
        if _Lease._held.get(self.where.url) is self:
            _Lease._held.pop(self.where.url, None)


def _is_dead(held: dict[str, Any]) -> bool:
    """Whether the run that wrote lease ``held`` has stopped."""
    renewed = held.get("renewed")
    if not isinstance(renewed, (int, float)) or time.time() - renewed > LEASE_TTL_S:
        return True
    if held.get("host") != socket.gethostname() or not isinstance(held.get("pid"), int):
        return False
    if held["pid"] == os.getpid():
        return True  # this process: an earlier run of it that stopped (take() ended it)
    try:
        os.kill(held["pid"], 0)
    except ProcessLookupError:
        return True
    except PermissionError:  # another user's live process
        return False
    return False
