"""What produced an output's finished groups, so that ``resume`` never mixes two pipelines.

A run records, in ``OUTPUT/.memtype/run.json`` before any group runs, what makes its
results what they are: memtype's version; the pattern, grouping, output format, pyramid
levels and plate grid; every step (its name, position, options, variable components,
routing, materialization, side outputs) and every function a step can run (module and
qualified name, memory types, options); and the SHA-256 of the source of every module that
defines a step function (for a pipeline file, that file's content); and the input's
identity: its resolved path, its layout, and the number and SHA-256 of its images' paths
(its listing).

``resume=True`` compares the record with the pipeline about to run. Where groups are done
and anything differs, the run is refused with a :class:`~memtype.errors.StoreExistsError`
naming each difference and how to start over; with no group done there is nothing to mix,
and the record is replaced. An input other than the one that produced the finished groups
(another folder, layout or listing) is refused by its own message, naming both: resuming
would mix two plates' wells in one output.
"""

from __future__ import annotations

import hashlib
import inspect
import json
import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from memtype import __version__
from memtype.errors import StoreExistsError, StoreNotFoundError
from memtype.pipeline.model.modules import shipped_modules
from memtype.storage import DiskStore
from memtype.storage.remote import ObjectLocation, is_url

if TYPE_CHECKING:
    from memtype.pipeline.model.steps import FunctionStep, GroupTask, StepCall
    from memtype.pipeline.readers import Reader

__all__ = ["run_record", "input_identity", "check_resume", "differences", "RECORD"]

RECORD = ".memtype/run.json"
"""The record's path inside the output directory."""

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


def _value(value: Any) -> Any:
    """An option as JSON that is the same for the same value in every process."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, np.ndarray):
        digest = hashlib.sha256(np.ascontiguousarray(value).tobytes()).hexdigest()[:16]
        return f"array{value.shape} {value.dtype} sha256:{digest}"
    if isinstance(value, Mapping):
        return {str(k): _value(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=repr) if isinstance(value, (set, frozenset)) else value
        return [_value(v) for v in items]
    if callable(value) and hasattr(value, "__qualname__"):
        return _function(value)
    kind = f"{type(value).__module__}.{type(value).__qualname__}"
    return f"{kind}: {_ADDRESS.sub('', repr(value))}"  # no memory address: same every run


def _pipeline_files() -> dict[str, tuple[str, str]]:
    """Module name -> (file name, source) of the pipeline files imported in this process."""
    return {name: (os.path.basename(path), source) for name, path, source in shipped_modules()}


def _module_label(module: str) -> str:
    """A module's name, or a pipeline file's name (its module name changes with its path)."""
    shipped = _pipeline_files().get(module)
    return shipped[0] if shipped else module


def _function(func: Any) -> str:
    """``module:qualified.name`` of a step function."""
    return f"{_module_label(str(func.__module__))}:{func.__qualname__}"


def _source_digest(module: str) -> tuple[str, str] | None:
    """(label, SHA-256 of its source) of a module, or None without a source file."""
    shipped = _pipeline_files().get(module)
    if shipped is not None:
        return shipped[0], hashlib.sha256(shipped[1].encode()).hexdigest()
    loaded = sys.modules.get(module)
    try:
        path = inspect.getsourcefile(loaded) if loaded is not None else None
    except TypeError:  # a built-in module
        return None
    if path is None or not os.path.isfile(path):
        return None
    with open(path, "rb") as fh:
        return module, hashlib.sha256(fh.read()).hexdigest()


def _call(call: StepCall) -> dict[str, Any]:
    """One function of a step."""
    return {"function": _function(call.func),
            "memory types": f"{call.input_type} -> {call.output_type}",
            "options": _value(dict(call.kwargs))}


def _step(step: FunctionStep) -> dict[str, Any]:
    """One step, as what makes its results."""
    if step.routes is not None:
        calls = {f"{step.group_by}={k}": [_call(c) for c in chain]
                 for k, chain in step.routes.items()}
    else:
        calls = {"all stacks": [_call(c) for c in step.all_calls()]}
    return {"options": _value(step.kwargs), "variable components": list(step.variable_components),
            "materialize": step.materialize,
            "side outputs": list(step.output_names) if step.output_names else None,
            **({"labels": step.labels} if step.labels is not None else {}),
            **({"passes input": True} if step.passes_input else {}),
            **({"inputs": {i.parameter: i.reference for i in step.inputs}}
               if getattr(step, "inputs", ()) else {}),
            "functions": calls}


def run_record(steps: Sequence[FunctionStep], settings: Mapping[str, Any],
               source: Reader | None = None, tasks: Iterable[GroupTask] = ()) -> dict[str, Any]:
    """What produces a run's results: memtype's version, the run's ``settings`` (pattern,
    grouping, output format...), every step and function, and their modules' sources; with
    ``source``, the identity of the input whose images ``tasks`` hold
    (:func:`input_identity`)."""
    modules = sorted({str(c.func.__module__) for s in steps for c in s.all_calls()})
    digests = [d for d in map(_source_digest, modules) if d is not None]
    record = {"memtype": __version__, "settings": _value(dict(settings)),
              "steps": {f"{i + 1} {s.name!r}": _step(s) for i, s in enumerate(steps)},
              "sources (sha256)": dict(sorted(digests))}
    if source is not None:
        record["input"] = input_identity(source, [r.path for t in tasks for r in t.records])
    return record


def input_identity(source: Reader, paths: Iterable[str]) -> dict[str, Any]:
    """The input as a run's record keeps it: its resolved path, layout, and how many images
    it lists with the SHA-256 of their sorted paths (relative to the input)."""
    listed = sorted(paths)
    digest = hashlib.sha256("\n".join(listed).encode()).hexdigest()
    where = (source.root if is_url(source.root) else os.path.realpath(source.root)) \
        if source.root else repr(source)
    return {"path": where, "layout": source.layout, "images": len(listed),
            "listing (sha256)": digest}


def differences(old: Any, new: Any, path: str = "") -> list[str]:
    """What differs between two records, one line each: ``path: old -> new`` (``added``,
    ``removed`` for a whole part, such as a step, that one of them lacks)."""
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return [] if old == new else [f"{path}: {json.dumps(old)} -> {json.dumps(new)}"]
    lines: list[str] = []
    for key in [*old, *(k for k in new if k not in old)]:
        where = f"{path} > {key}" if path else str(key)
        if key not in new:
            lines.append(f"{where}: removed")
        elif key not in old:
            lines.append(f"{where}: added")
        else:
            lines.extend(differences(old[key], new[key], where))
    return lines


def check_resume(root: str, record: Mapping[str, Any], any_done: bool) -> None:
    """Refuse to resume an output whose finished groups another pipeline produced; else
    (re)write the record.

    Raises
    ------
    StoreExistsError
        Groups are done and the output's record differs from ``record`` or is missing
        (a ``FileExistsError``).
    """
    path = os.path.join(root, RECORD)
    if any_done:
        old = _read(path)
        _check_same_input(root, old, record)
        changed = (differences(old, dict(record)) if old is not None
                   else [f"no record of the pipeline that wrote them ({RECORD} is missing)"])
        if changed:
            shown = "; ".join(changed[:6]) + (f"; and {len(changed) - 6} more"
                                              if len(changed) > 6 else "")
            raise StoreExistsError(
                f"Cannot resume {root!r}: its finished groups were produced by a different "
                f"pipeline, and resuming would mix their results with this one's. Changed: "
                f"{shown}. Start over with WriteOptions(overwrite=True) (--overwrite), or "
                "write to a new output directory.")
    _write(path, record)


def _check_same_input(root: str, old: Mapping[str, Any] | None,
                      record: Mapping[str, Any]) -> None:
    """Refuse to resume with an input other than the one that produced the done groups."""
    before, now = (old or {}).get("input"), record.get("input")
    if not isinstance(before, dict) or now is None or before == now:
        return
    digest = "listing (sha256)"
    changed = "; ".join(differences({k: v for k, v in before.items() if k != digest},
                                    {k: v for k, v in now.items() if k != digest}, "input")
                        + (["input > listing: other image files"]
                           if before.get(digest) != now.get(digest) else []))
    same_place = before.get("path") == now.get("path")
    raise StoreExistsError(
        f"Cannot resume {root!r} with input {_describe(now)}: its finished groups were read "
        f"from {_describe(before)}{' (the folder changed since)' if same_place else ''}, and "
        f"resuming would mix two plates' wells in one output. Changed: {changed}. Resume "
        "with the input that wrote it, or start over with WriteOptions(overwrite=True) "
        "(--overwrite) or a new output directory.")


def _describe(identity: Mapping[str, Any]) -> str:
    """An input identity in a few words: ``'/data/plateA' (imagexpress, 96 images)``."""
    return (f"{identity.get('path')!r} ({identity.get('layout')}, "
            f"{identity.get('images')} images)")


def _read(path: str) -> dict[str, Any] | None:
    """The record at ``path``, or None if there is none (or it is not a record)."""
    try:
        loaded = json.loads(_read_text(path))
    except FileNotFoundError:
        return None
    except ValueError:  # a damaged record says nothing about what produced the groups
        return {"record": "unreadable"}
    return loaded if isinstance(loaded, dict) else {"record": "unreadable"}


def _write(path: str, record: Mapping[str, Any]) -> None:
    """Write the record (atomically: a crash leaves the old one or the new one)."""
    directory, name = os.path.split(path)
    if is_url(directory):  # one PUT: an object is replaced whole
        ObjectLocation.parse(directory).put(name, json.dumps(dict(record), indent=2).encode())
        return
    DiskStore(directory).save(dict(record), name, overwrite=True)


def _read_text(path: str) -> str:
    """The text of the file (or object, for an ``s3://`` path) at ``path``.

    Raises
    ------
    FileNotFoundError
        There is none (a StoreNotFoundError for an object).
    """
    if is_url(path):
        directory, name = path.rsplit("/", 1)
        raw = ObjectLocation.parse(directory).get(name)
        if raw is None:
            raise StoreNotFoundError(f"No run record at {path!r}.")
        return raw.decode("utf-8", errors="replace")
    with open(path, encoding="utf-8") as fh:
        return fh.read()
