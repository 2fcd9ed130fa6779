"""Side outputs as tables: the extra elements of tuple results become CSV rows.

A side output may be a number (one row, column ``value``), a dict (one row, its keys as
columns), a list of dicts (one row each), a 1D or 2D array of any framework (one row per
element or per row: ``index``, ``value`` or ``c0, c1, ...``), or a pandas DataFrame. Every
row starts with the stack's field values (``well, site, channel``); a column named like a
pattern field is refused (:class:`~memtype.errors.SideOutputError`), never overwritten.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from memtype import convert, detect_memory_type
from memtype.errors import ArgumentTypeError, SideOutputError, UnsupportedArrayError
from memtype.pipeline.io.patterns import Key
from memtype.pipeline.model.naming import check_table_name

__all__ = ["side_output_rows", "rows_to_table", "parse_table"]

Row = dict[str, Any]


def _as_array(value: Any) -> np.ndarray[Any, Any] | None:
    """``value`` as a host array if it is an array of any loaded framework, else None."""
    if isinstance(value, np.ndarray):
        return value
    try:
        detect_memory_type(value)
    except UnsupportedArrayError:
        return None

    return np.asarray(convert(value, "numpy"))


def _plain(value: Any) -> Any:
    """NumPy scalars as Python numbers, for clean CSV text."""
    return value.item() if isinstance(value, np.generic) else value


def _array_rows(a: np.ndarray[Any, Any]) -> list[Row]:
    """Rows of a 0D, 1D or 2D array."""
    if a.ndim == 0:
        return [{"value": _plain(a[()])}]
    if a.ndim == 1:
        return [{"index": i, "value": _plain(v)} for i, v in enumerate(a)]
    if a.ndim == 2:
        return [{"index": i, **{f"c{j}": _plain(v) for j, v in enumerate(row)}}
                for i, row in enumerate(a)]
    raise ArgumentTypeError(f"A side-output array must be 0D, 1D or 2D to become a table; "
                    f"received shape {a.shape}.")


def _mapping_row(mapping: Mapping[Any, Any]) -> Row:
    """One row from a mapping, its keys as column names (text).

    Raises
    ------
    SideOutputError
        Two keys that are the same text (``1`` and ``"1"``): one value would be lost.
    """
    row = {str(k): _plain(v) for k, v in mapping.items()}
    if len(row) != len(mapping):
        keys = [k for k in mapping if sum(str(o) == str(k) for o in mapping) > 1]
        raise SideOutputError(f"A side output has keys {keys!r} that name the same column; "
                              "expected distinct column names (one value would be lost).")
    return row


def _frame_rows(frame: Any) -> list[Row]:
    """The rows of a pandas DataFrame (refused when two columns share a name)."""
    columns = [str(c) for c in frame.columns]
    if len(set(columns)) != len(columns):
        raise SideOutputError(f"A side-output DataFrame has repeated columns {columns}; "
                              "expected distinct column names (one value would be lost).")
    return [dict(zip(columns, map(_plain, r), strict=True))
            for r in frame.itertuples(index=False, name=None)]


def _value_rows(value: Any) -> list[Row]:
    """The rows of one side-output value, without the stack's fields."""
    if value is None:
        return []
    if isinstance(value, Mapping):
        return [_mapping_row(value)]
    if isinstance(value, (bool, int, float, str, np.generic)):
        return [{"value": _plain(value)}]
    if hasattr(value, "to_dict") and hasattr(value, "columns"):  # a pandas DataFrame
        return _frame_rows(value)
    array = _as_array(value)
    if array is not None:
        return _array_rows(array)
    if isinstance(value, Sequence) and all(isinstance(v, Mapping) for v in value):
        return [_mapping_row(row) for row in value]
    raise ArgumentTypeError(
        f"Cannot turn a side output of type {type(value).__name__} into table rows; expected "
        "a number, a dict, a list of dicts, a 1D/2D array or a pandas DataFrame.")


def side_output_rows(fixed: Key, value: Any, fields: Sequence[str] = (),
                     table: str = "") -> list[Row]:
    """The CSV rows of one side output of one stack, each starting with the stack's fields.

    Parameters
    ----------
    fixed : Key
        The stack's field values; every row starts with them.
    value : object
        The side output (see the module docstring).
    fields : sequence of str
        The pattern's fields: no column of the value may be named like one (nor like a
        field of ``fixed``), else that field's column would be overwritten in every row.
    table : str
        The table's name, for messages.

    Raises
    ------
    TypeError
        A value that cannot become rows (see the module docstring).
    SideOutputError
        A column named like a pattern field, or two columns with the same name
        (a ``ValueError``).
    InvalidArgumentError
        ``table`` is no file name, or one of memtype's ROI tables
        (:func:`~memtype.pipeline.model.naming.check_table_name`).
    """
    if table:  # a default name (the step's) is first checked here, before it is written
        check_table_name(table, "A side output's table name (the step's name unless "
                                "the step names it with outputs=(...))")
    rows = _value_rows(value)
    reserved = set(fields) | {k for k, _ in fixed}
    clash = sorted({c for row in rows for c in row if c in reserved})
    if clash:
        where = f"Side output {table!r}" if table else "A side output"
        raise SideOutputError(
            f"{where} has column(s) {clash} named like pattern fields {sorted(reserved)}; "
            "every row already starts with the stack's field values, which these would "
            f"overwrite. Rename the key(s), e.g. {clash[0] + '_value'!r}.")
    return [dict(fixed) | row for row in rows]


def rows_to_table(rows: Iterable[Row]) -> list[list[Any]]:
    """A header row (every column, in first-seen order) followed by one list per row."""
    rows = list(rows)
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    header = list(columns)
    return [header] + [[row.get(c, "") for c in header] for row in rows]


def parse_table(text: str) -> list[Row]:
    """Rows of a CSV text with a header (values stay text)."""
    return [dict(r) for r in csv.DictReader(io.StringIO(text))]
