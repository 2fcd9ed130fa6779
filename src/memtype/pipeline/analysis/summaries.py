"""Summaries of a run's tables: per well (count, mean, median of every measurement), joined
with a plate map (a CSV of well -> condition columns) and carrying a plate id, so the tables
of several plates concatenate.

Written after the groups finish, from the per-object tables (one per object set) and the
per-image table ``image`` the run wrote (see :mod:`~memtype.pipeline.analysis.fields`):
``well_summary.csv`` has one row per well: ``Plate``, ``well``, the plate map's columns,
``<set>_Count`` and ``<set>_Mean_<column>``, ``<set>_Median_<column>`` of every numeric
column of each object set, and ``image_Mean_<column>`` of the per-image table.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype.errors import InvalidArgumentError, StoreFormatError, StoreNotFoundError
from memtype.omezarr.tables import write_table
from memtype.pipeline.analysis.quality import flag_fields
from memtype.pipeline.io.patterns import split_well
from memtype.pipeline.io.tables import rows_to_table

__all__ = ["Summary", "WELL_TABLE", "QC_TABLE", "read_plate_map", "well_summary",
           "quality_flags", "write_summaries"]

WELL_TABLE = "well_summary"
"""The per-well table's name (``well_summary.csv``)."""
QC_TABLE = "qc"
"""The fields flagged by image quality (``qc.csv``: one row per field, ``Flagged``,
``Reasons``), written when the per-image table has ``ImageQuality_`` columns."""
_QUALITY = "ImageQuality_"

_KEYS = frozenset({"well", "site", "field", "s", "fov", "ObjectNumber", "label", "Plate", "t",
                   "time", "timepoint", "z", "channel", "c", "w"})


@dataclass(frozen=True)
class Summary:
    """How a run's tables are summarised.

    Parameters
    ----------
    plate_map : str, optional
        A CSV file with a ``well`` column (``A01`` or ``A1``) and one column per condition
        (compound, dose...), joined to every well's row.
    plate_id : str, optional
        The plate's identifier, the ``Plate`` column of every summary row (default: the
        input folder's name).
    """

    plate_map: str | None = None
    plate_id: str | None = None

    def __post_init__(self) -> None:
        for name in ("plate_map", "plate_id"):
            value = getattr(self, name)
            if value is not None and not isinstance(value, str):
                raise InvalidArgumentError(f"summary {name} must be a text; received "
                                           f"{value!r}.")

    def check(self) -> None:
        """Read the plate map now (a run calls this before any group: a bad map is found
        before the plate is read, not when the summary is written at the end)."""
        if self.plate_map is not None:
            read_plate_map(self.plate_map)

    def as_data(self) -> dict[str, str]:
        """The options as plain data (for a pipeline file)."""
        return {k: v for k, v in (("plate_map", self.plate_map),
                                  ("plate_id", self.plate_id)) if v is not None}


def _well_name(value: str) -> str:
    """``A1`` and ``a01`` as ``A01``."""
    row, column = split_well(value.strip().upper())
    return f"{row}{int(column):02d}"


def read_plate_map(path: str) -> dict[str, dict[str, str]]:
    """Well -> its condition columns, from a CSV with a ``well`` column.

    Raises
    ------
    StoreNotFoundError
        The file does not exist.
    StoreFormatError
        No ``well`` column, a well named twice, or a well name that is not one.
    """
    header, rows = _plate_map_rows(path)
    out: dict[str, dict[str, str]] = {}
    for line, values in rows:
        if len(values) != len(header):
            raise StoreFormatError(
                f"plate map {path!r} line {line}: {len(values)} values; expected one per "
                f"column of the header ({len(header)}: {header}).")
        row = dict(zip(header, values, strict=True))
        try:
            well = _well_name(row["well"])
        except (ValueError, KeyError):
            raise StoreFormatError(f"plate map {path!r} line {line}: well {row['well']!r} is "
                                   "not a well name (expected e.g. A01).") from None
        if well in out:
            raise StoreFormatError(f"plate map {path!r} line {line}: well {well} is named "
                                   "twice; expected one row per well.")
        out[well] = {k: v for k, v in row.items() if k != "well"}
    return out


def _plate_map_rows(path: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """A plate map's header (a ``well`` column, each name once) and its non-empty rows with
    their line numbers; UTF-8 text, with or without the byte-order mark Excel writes."""
    if not os.path.isfile(path):
        raise StoreNotFoundError(f"plate map {path!r} does not exist; expected a CSV file "
                                 "with a 'well' column and one column per condition.")
    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh, strict=True)
            lines = [(reader.line_num, row) for row in reader if any(v.strip() for v in row)]
    except UnicodeDecodeError as exc:
        raise StoreFormatError(f"plate map {path!r} is not UTF-8 text ({exc}); expected a "
                               "CSV file in UTF-8 (a spreadsheet's 'CSV UTF-8').") from exc
    except csv.Error as exc:
        raise StoreFormatError(f"plate map {path!r} is not valid CSV ({exc}, near line "
                               f"{reader.line_num}); expected quotes closed on each row.") from exc
    header = [name.strip() for name in lines[0][1]] if lines else []
    if "well" not in header:
        raise StoreFormatError(f"plate map {path!r}: expected a 'well' column (A01, B12...); "
                               f"received columns {header or 'none (the file is empty)'}.")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise StoreFormatError(f"plate map {path!r}: the header names {repeated} more than "
                               "once; expected each column once.")
    return header, lines[1:]


def _read_rows(path: str) -> list[dict[str, str]]:
    """A CSV table's rows (values as text)."""
    with open(path, newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _numeric(rows: Sequence[Mapping[str, str]]) -> dict[str, np.ndarray[Any, Any]]:
    """Every measurement column whose values are all numbers, as floats."""
    out: dict[str, np.ndarray[Any, Any]] = {}
    for column in (rows[0] if rows else {}):
        if column in _KEYS or column.startswith(("Parent_", "Children_")):
            continue
        try:
            out[column] = np.array([float(r[column]) for r in rows], dtype=np.float64)
        except (TypeError, ValueError):
            continue
    return out


def _by_well(rows: Sequence[Mapping[str, Any]]) -> dict[str, list[Mapping[str, Any]]]:
    """Rows grouped by their well."""
    out: dict[str, list[Mapping[str, Any]]] = {}
    for row in rows:
        out.setdefault(_well_name(str(row["well"])), []).append(row)
    return out


def well_summary(tables: Mapping[str, Sequence[Mapping[str, str]]], wells: Sequence[str],
                 plate_id: str, conditions: Mapping[str, Mapping[str, str]]
                 ) -> list[dict[str, Any]]:
    """One row per well: plate, well, conditions, then per object set its count and the
    mean and median of each measurement; per-image columns as means (``image`` table)."""
    rows = []
    grouped = {name: _by_well(table) for name, table in tables.items()}
    for well in sorted(_well_name(w) for w in wells):
        row: dict[str, Any] = {"Plate": plate_id, "well": well, **conditions.get(well, {})}
        for name, by_well in grouped.items():
            part = by_well.get(well, [])
            columns = _numeric(part)
            if name == "image":
                row.update({f"image_Mean_{c}": float(a.mean()) for c, a in columns.items()})
                continue
            row[f"{name}_Count"] = len(part)
            for column, values in columns.items():
                row[f"{name}_Mean_{column}"] = float(values.mean())
                row[f"{name}_Median_{column}"] = float(np.median(values))
        rows.append(row)
    return rows


def quality_flags(image: Sequence[Mapping[str, str]]) -> list[dict[str, Any]]:
    """Per field, whether its image quality stands out from the plate's (blur, saturation:
    :func:`memtype.pipeline.analysis.quality.flag_fields`) and why; [] without quality
    columns."""
    columns = [c for c in (image[0] if image else {}) if c.startswith(_QUALITY)]
    if not columns:
        return []
    values = [{c: float(row[c]) for c in columns if row[c] != ""} for row in image]
    keys = [c for c in image[0] if c in _KEYS]
    return [{**{k: row[k] for k in keys}, "Flagged": int(bool(why)), "Reasons": "; ".join(why)}
            for row, why in zip(image, flag_fields(values), strict=True)]


def write_summaries(root: str, summary: Summary | None, tables: Sequence[str],
                    wells: Sequence[str], default_plate: str,
                    plate_path: str | None = None) -> dict[str, str]:
    """Write ``well_summary.csv`` (and ``qc.csv``) from the run's tables in ``root``;
    returns ``{name: path}``.

    ``tables``: the object sets' and the per-image table's names (those written);
    ``plate_path``: the run's OME-Zarr plate, which gets the well summary as its table
    ``tables/well_summary`` (the plate map's conditions as text columns).
    """
    summary = summary or Summary()
    conditions = read_plate_map(summary.plate_map) if summary.plate_map else {}
    read = {name: _read_rows(os.path.join(root, f"{name}.csv")) for name in tables
            if os.path.isfile(os.path.join(root, f"{name}.csv"))}
    plate = summary.plate_id or default_plate
    rows = well_summary(read, wells, plate, conditions)
    flags = quality_flags(read.get("image", []))
    flagged = {w: sum(int(f["Flagged"]) for f in fields)
               for w, fields in _by_well(flags).items()}
    for row in rows if flags else ():
        row["QC_FlaggedFields"] = flagged.get(row["well"], 0)
    written = {WELL_TABLE: _write(root, WELL_TABLE, rows)}
    if plate_path is not None and rows:
        text = ["Plate", "well", *next(iter(conditions.values()), {})]
        write_table(plate_path, WELL_TABLE, rows, keys=text)
    if flags:
        written[QC_TABLE] = _write(root, QC_TABLE, flags)
    return written


def _write(root: str, name: str, rows: Sequence[Mapping[str, Any]]) -> str:
    """Write ``<name>.csv`` in ``root``; its path."""
    path = os.path.join(root, f"{name}.csv")
    with open(path, "w", newline="", encoding="utf-8") as fh:
        csv.writer(fh).writerows(rows_to_table(dict(r) for r in rows))
    return path
