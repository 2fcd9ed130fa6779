"""Standard microplate layouts: 96 wells (8 rows x 12 columns) and 384 wells (16 x 24).

Wells are named by row letter and two-digit column, row by row: ``A01 .. A12, B01 .. H12``
on a 96-well plate, ``A01 .. P24`` on a 384-well plate. The synthetic plate names its wells
this way, and a pipeline's OME-Zarr plate declares the rows and columns of the smallest
standard plate that holds every well it writes.
"""

from __future__ import annotations

import string
from collections.abc import Iterable
from dataclasses import dataclass

from memtype.errors import InvalidArgumentError
from memtype.pipeline.io.patterns import split_well

__all__ = ["PlateLayout", "PLATE_SIZES", "MAX_WELLS", "plate_layout", "layout_of"]

_SHAPES = {96: (8, 12), 384: (16, 24)}
PLATE_SIZES = tuple(_SHAPES)
"""The standard plates memtype lays wells out on: ``(96, 384)``."""
MAX_WELLS = max(PLATE_SIZES)


@dataclass(frozen=True)
class PlateLayout:
    """A standard plate: its size, row letters and column numbers.

    Parameters
    ----------
    size : {96, 384}
        Wells on the plate.

    Examples
    --------
    >>> layout = PlateLayout(96)
    >>> layout.well_names(14)[-3:]
    ['A12', 'B01', 'B02']
    >>> layout.rows[-1], layout.columns[-1]
    ('H', 12)
    """

    size: int

    def __post_init__(self) -> None:
        if self.size not in _SHAPES:
            raise InvalidArgumentError(
                f"Unknown plate size {self.size!r}; expected one of {list(PLATE_SIZES)}.")

    @property
    def rows(self) -> tuple[str, ...]:
        """The row letters, ``A`` first."""
        return tuple(string.ascii_uppercase[:_SHAPES[self.size][0]])

    @property
    def columns(self) -> tuple[int, ...]:
        """The column numbers, ``1`` first."""
        return tuple(range(1, _SHAPES[self.size][1] + 1))

    def well_names(self, count: int | None = None) -> list[str]:
        """The first ``count`` wells (all by default), row by row: ``A01, A02, ...``.

        Raises
        ------
        InvalidArgumentError
            ``count`` is below 1 or above the plate's size (a ``ValueError``).
        """
        count = self.size if count is None else count
        if not 1 <= count <= self.size:
            larger = next((s for s in PLATE_SIZES if self.size < s and count <= s), None)
            hint = f"; use a {larger}-well plate" if larger else ""
            raise InvalidArgumentError(
                f"A {self.size}-well plate holds 1 to {self.size} wells; received {count}{hint}.")
        width = len(self.columns)
        return [f"{self.rows[i // width]}{i % width + 1:02d}" for i in range(count)]

    def holds(self, row: str, column: int) -> bool:
        """Whether the plate has this row and column."""
        return row in self.rows and column in self.columns


def plate_layout(wells: int, plate: int | None = None) -> PlateLayout:
    """The layout for ``wells`` wells: the given plate size, or the smallest that holds them.

    Raises
    ------
    InvalidArgumentError
        ``wells`` below 1 or above what the plate (or the largest plate, 384) holds; an
        unknown plate size (a ``ValueError``).
    """
    if plate is not None:
        layout = PlateLayout(plate)
        layout.well_names(wells)  # checks the count against this plate
        return layout
    if not 1 <= wells <= MAX_WELLS:
        raise InvalidArgumentError(
            f"wells must be 1 to {MAX_WELLS} (a {MAX_WELLS}-well plate); received {wells}.")
    return PlateLayout(next(size for size in PLATE_SIZES if wells <= size))


def layout_of(wells: Iterable[str]) -> PlateLayout | None:
    """The smallest standard plate that has every one of these wells, or None.

    Raises
    ------
    InvalidArgumentError
        A name that is not a row letter and column number (a ``ValueError``).
    """
    parts = [split_well(w) for w in wells]
    for size in PLATE_SIZES:
        layout = PlateLayout(size)
        if all(layout.holds(row, column) for row, column in parts):
            return layout
    return None
