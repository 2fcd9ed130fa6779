"""A run's own record of its failures: ``OUTPUT/failures.log`` and the failed wells.

Each group that fails appends one entry to ``failures.log`` beside the output (the time, the
group, the error, which names the step, the function and the stack's site and channel, and
the full traceback), written by the worker that ran it, so the record survives a driver
that dies or a terminal that scrolled away. It also leaves ``.memtype/failed/<group>.json``
(which wells failed, for the plate overview: :func:`failed_wells`), removed when a later run
(``resume``) finishes the group. An object-storage output (``s3://``) has no log yet: its
failures are in the report and the summary only.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from memtype.pipeline.execution.report import GroupResult
from memtype.pipeline.io.patterns import Key, key_label, split_well
from memtype.storage import DiskStore
from memtype.storage.remote import is_url

__all__ = ["FAILURE_LOG", "record_outcome", "failed_wells"]

FAILURE_LOG = "failures.log"
"""The log's name in the output directory."""
_FAILED = ".memtype/failed"


def record_outcome(root: str, result: GroupResult, label: str) -> GroupResult:
    """Record a failed group in the log (``result.log`` set to its path), or clear the
    record of a group that is now done; returns ``result``. ``label``: the group's file
    name label (``OutputSpec``'s). A log that cannot be written (a full disk) is said in the
    result's error, never raised over it."""
    if is_url(root):  # an object-storage output: no file beside it to append to
        return result
    relative = f"{_FAILED}/{label}.json"
    record = os.path.join(root, relative)
    if result.status == "done":
        if os.path.lexists(record):
            os.remove(record)
        return result
    if result.status != "failed":
        return result
    try:
        _append(os.path.join(root, FAILURE_LOG), _entry(result))
        _save(root, relative, {"group": key_label(result.key), "well": _well(result.key),
                       "error": result.error})
    except OSError as exc:
        result.error = f"{result.error}; (its failure log could not be written: {exc})"
        return result
    result.log = os.path.join(root, FAILURE_LOG)
    return result


def _entry(result: GroupResult) -> str:
    """One failure as the log shows it."""
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    rule = "-" * 88
    return (f"{rule}\n{stamp}  {result.label}  ({result.worker})\n{result.error}\n\n"
            f"{(result.traceback or '').rstrip()}\n")


def _append(path: str, text: str) -> None:
    """Append ``text`` in one write (workers of one run append to one log)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o644)
    try:
        os.write(fd, text.encode("utf-8", "replace"))
    finally:
        os.close(fd)


def _save(root: str, path: str, doc: dict[str, Any]) -> None:
    """Write a small JSON record atomically at ``path`` under ``root``."""
    DiskStore(root).save(doc, path, overwrite=True, parents=True)


def _well(key: Key) -> str | None:
    """The group's plate well (``"B/3"``), or None when the group is no well."""
    value = dict(key).get("well")
    if value is None:
        return None
    try:
        row, column = split_well(str(value))
    except ValueError:
        return None
    return f"{row}/{column}"


def failed_wells(root: str) -> dict[str, str]:
    """The wells (``"B/3"``) whose groups failed and are not done since, with an error."""
    directory = os.path.join(root, _FAILED)
    if not os.path.isdir(directory):
        return {}
    out: dict[str, str] = {}
    for name in sorted(os.listdir(directory)):
        try:
            with open(os.path.join(directory, name), encoding="utf-8") as fh:
                doc = json.load(fh)
        except (OSError, ValueError):  # a damaged record marks nothing
            continue
        if isinstance(doc, dict) and isinstance(doc.get("well"), str):
            out.setdefault(doc["well"], str(doc.get("error", "")))
    return out
