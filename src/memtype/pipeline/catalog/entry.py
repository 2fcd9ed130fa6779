"""Catalog entries: what each library function is, read from the generated data file.

Reading the catalog imports no image library: the entries come from ``entries.json`` and
``cucim_entries.json`` (written by :mod:`memtype.pipeline.catalog.generate` from the
libraries' signatures and :mod:`~memtype.pipeline.catalog.declarations`); a function is
imported on first use.
"""

from __future__ import annotations

import functools
import json
import os
from dataclasses import dataclass
from typing import Any

from memtype.errors import InvalidArgumentError

__all__ = ["Entry", "Exclusion", "OUTPUT_KINDS", "entries", "excluded", "get", "search", "versions"]

DATA_FILE = os.path.join(os.path.dirname(__file__), "entries.json")
# cucim.skimage's entries (memory type cupy), generated where cucim imports
CUCIM_DATA_FILE = os.path.join(os.path.dirname(__file__), "cucim_entries.json")
OUTPUT_KINDS = ("image", "labels", "mask", "scalar", "coordinates", "table")
# Kinds whose result replaces the stack; the others are side outputs (the stack passes on).
STACK_KINDS = frozenset({"image", "labels", "mask"})


@dataclass(frozen=True)
class Entry:
    """One library function as a pipeline step.

    Attributes
    ----------
    name : str
        ``"<module>.<function>"`` as the user writes it (``"skimage.filters.gaussian"``).
    module, function : str
        Where the function is imported from, on first use.
    memory_type : str
        The framework it runs in (``"numpy"``, ``"pyclesperanto"``, ``"cupy"`` for
        cucim.skimage).
    dimensions : str
        ``"2d"`` (runs per slice), ``"nd"`` (per slice or as one volume) or ``"3d"`` (the
        stack as one volume: a projection).
    output : str
        ``image``, ``labels``, ``mask`` (the step's result), or ``scalar``,
        ``coordinates``, ``table`` (a side output; the stack passes on unchanged).
    required : tuple of str
        Arguments a step must give as keywords.
    keywords : tuple of str
        Every keyword argument the function takes.
    var_keywords : bool
        The function also takes ``**kwargs``.
    summary : str
        The first line of its docstring.
    needs : str
        An optional module it needs beyond its library ('' when none).
    images : tuple of str
        Arguments that are a second image (markers, a reference, a point-spread
        function): a step gives them as named inputs (``inputs={"image": "channel:1",
        "markers": "nuclei"}``, see :mod:`memtype.pipeline.analysis.references`).
    """

    name: str
    module: str
    function: str
    memory_type: str
    dimensions: str
    output: str
    required: tuple[str, ...]
    keywords: tuple[str, ...]
    var_keywords: bool
    summary: str
    needs: str = ""
    images: tuple[str, ...] = ()

    @property
    def library(self) -> str:
        """The top-level package: ``skimage``, ``scipy``, ``pyclesperanto`` or ``cucim``."""
        return self.module.split(".")[0]

    @property
    def installed(self) -> bool:
        """Its library is installed (found without importing it)."""
        return _installed(self.library)

    @property
    def side_output(self) -> bool:
        """True when the result is a table beside the stack, not the stack."""
        return self.output not in STACK_KINDS


@functools.cache
def _installed(library: str) -> bool:
    """``library`` can be imported here (``find_spec`` of a top-level name imports nothing)."""
    import importlib.util

    return importlib.util.find_spec(library) is not None


@dataclass(frozen=True)
class Exclusion:
    """A function of a covered module that is not in the catalog, and why."""

    name: str
    reason: str


def _read(path: str) -> dict[str, Any]:
    """One parsed data file."""
    with open(path, encoding="utf-8") as f:
        data: dict[str, Any] = json.load(f)
    return data


@functools.cache
def _data() -> dict[str, Any]:
    """The data files as one: versions, entries and exclusions of every library."""
    parts = [_read(DATA_FILE), _read(CUCIM_DATA_FILE)]
    return {"versions": {k: v for p in parts for k, v in p["versions"].items()},
            "entries": [r for p in parts for r in p["entries"]],
            "excluded": [r for p in parts for r in p["excluded"]]}


@functools.cache
def _by_name() -> dict[str, Entry]:
    """Every entry by name."""
    out = {}
    for row in _data()["entries"]:
        row = dict(row, required=tuple(row["required"]), keywords=tuple(row["keywords"]),
                   images=tuple(row.get("images", ())))
        out[row["name"]] = Entry(**row)
    return out


def entries() -> list[Entry]:
    """Every catalog entry, sorted by name."""
    return sorted(_by_name().values(), key=lambda e: e.name)


def excluded() -> list[Exclusion]:
    """Every function of a covered module left out of the catalog, with the reason."""
    return [Exclusion(r["name"], r["excluded"]) for r in _data()["excluded"]]


def versions() -> dict[str, str]:
    """The library versions the data file was generated from."""
    return dict(_data()["versions"])


def get(name: str) -> Entry:
    """The entry called ``name`` (``"skimage.filters.gaussian"``).

    Raises
    ------
    ValueError
        No such entry; the message names the closest ones, or why it was left out.
    """
    found = _by_name().get(name)
    if found is not None:
        return found
    reasons = {x.name: x.reason for x in excluded()}
    if name in reasons:
        raise InvalidArgumentError(f"catalog: {name!r} is left out of the catalog: "
                                   f"{reasons[name]}.")
    import difflib

    close = difflib.get_close_matches(name, list(_by_name()), n=3)
    hint = f" Closest: {', '.join(close)}." if close else ""
    raise InvalidArgumentError(f"catalog: no entry {name!r}; expected a name such as "
                               f"'skimage.filters.gaussian' (see `memtype functions`).{hint}")


def search(query: str = "") -> list[Entry]:
    """Entries whose name, framework, output kind or summary contains every word of ``query``."""
    words = query.lower().split()
    return [e for e in entries()
            if all(w in f"{e.name} {e.memory_type} {e.output} {e.summary}".lower()
                   for w in words)]
