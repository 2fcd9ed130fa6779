"""``memtype inspect``: what a plate holds, checked before a long run, reading one image header.

>>> summary = inspect_plate("plate/")  # doctest: +SKIP
>>> print(summary.table())             # doctest: +SKIP
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memtype.pipeline.io.patterns import FieldValue, ImageRecord, field_sort_key, key_label
from memtype.pipeline.readers import PlateMetadata, Reader, open_input

__all__ = ["PlateSummary", "inspect_plate"]

_SHOWN = 8
"""Missing images listed by name; the rest are counted."""
_SITES_SHOWN = 4
"""Field positions shown, of the first well's sites."""


@dataclass(frozen=True)
class PlateSummary:
    """What ``memtype inspect`` shows.

    Attributes
    ----------
    root : str
        The plate folder.
    metadata : PlateMetadata
        Layout, what showed it, channel names, pixel size, plate size, field positions.
    values : dict of str to list
        Every field's values present, in natural order (``{"site": [1, 2], ...}``).
    images : int
        Images listed.
    shape, dtype : tuple of int, str
        Of the first image (its header alone is read).
    missing : list of str
        Images absent: those the metadata announces, else the gaps in the grid of the
        values present (every field's values combined).
    nbytes : int or None
        Bytes of the image files, where the layout knows them.
    """

    root: str
    metadata: PlateMetadata
    values: dict[str, list[FieldValue]]
    images: int
    shape: tuple[int, ...]
    dtype: str
    missing: list[str]
    nbytes: int | None

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) rows of the table."""
        meta = self.metadata
        plate = ("unknown" if meta.plate_size is None else
                 f"{meta.plate_size} wells ({meta.rows} rows x {meta.columns} columns)")
        out = [("layout", f"{meta.layout} (from {meta.detected_from})"), ("plate", plate)]
        for name, values in self.values.items():
            out.append((_label(name), self._describe(name, values)))
        size = meta.pixel_size_um
        out += [("images", str(self.images)), ("image shape", " x ".join(map(str, self.shape))),
                ("dtype", self.dtype),
                ("pixel size", "unknown" if size is None else f"{size[0]:g} x {size[1]:g} µm"
                 + ("" if meta.z_step_um is None else f", z step {meta.z_step_um:g} µm")),
                *self._positions(),
                ("missing", self._missing()),
                *(("note", note) for note in meta.notes),
                ("total size", "unknown" if self.nbytes is None else _bytes(self.nbytes))]
        return out

    def _describe(self, name: str, values: Sequence[FieldValue]) -> str:
        """A field's values: listed when few, else counted with the first and last."""
        names = self.metadata.channel_names if name == "channel" else {}
        shown = [f"{v} ({names[v]})" if isinstance(v, int) and v in names else str(v)
                 for v in values]
        if len(shown) <= 12:
            return f"{len(shown)}: {', '.join(shown)}"
        return f"{len(shown)}: {', '.join(shown[:6])} ... {', '.join(shown[-2:])}"

    def _positions(self) -> list[tuple[str, str]]:
        """The ``field positions`` row, where the metadata has them: how many, and the first
        well's sites (at most :data:`_SITES_SHOWN`)."""
        positions = self.metadata.field_positions
        if not positions:
            return []
        wells = sorted({w for w, _ in positions}, key=field_sort_key)
        sites = sorted(s for w, s in positions if w == wells[0])
        shown = "; ".join(f"site {s} at x {positions[(wells[0], s)].x_um:g}, "
                          f"y {positions[(wells[0], s)].y_um:g} µm"
                          for s in sites[:_SITES_SHOWN])
        more = "; ..." if len(sites) > _SITES_SHOWN else ""
        count = len({s for _, s in positions})
        return [("field positions", f"{len(positions)} fields ({len(wells)} wells x {count} "
                 f"sites); {shown}{more}")]

    def _missing(self) -> str:
        """The missing images: none, or a count and the first few."""
        if not self.missing:
            return "none"
        more = len(self.missing) - _SHOWN
        listed = "; ".join(self.missing[:_SHOWN]) + (f"; and {more} more" if more > 0 else "")
        return f"{len(self.missing)}: {listed}"

    def table(self) -> str:
        """The summary as plain aligned text."""
        width = max(len(label) for label, _ in self.rows())
        return "\n".join(f"{label:<{width}}  {value}" for label, value in self.rows())

    def rich_table(self) -> Any:
        """The summary as a ``rich.table.Table``."""
        from rich.table import Table

        table = Table(title=self.root, show_header=False)
        table.add_column(style="bold")
        table.add_column()
        for label, value in self.rows():
            table.add_row(label, value)
        return table


def _label(name: str) -> str:
    """A field's row label: ``wells``, ``sites``, ``channels``..."""
    return {"well": "wells", "site": "sites", "channel": "channels", "z": "z planes",
            "t": "time points"}.get(name, name)


def _bytes(n: int) -> str:
    """``1.5 MiB``."""
    if n < 1024:
        return f"{n} B"
    size = n / 1024
    for unit in ("KiB", "MiB"):
        if size < 1024:
            return f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def _grid_gaps(records: Sequence[ImageRecord], fields: Sequence[str]) -> list[str]:
    """The combinations of present field values that no record has."""
    values = [sorted({r.fields[f] for r in records}, key=field_sort_key) for f in fields]
    present = {r.key for r in records}
    total = 1
    for v in values:
        total *= len(v)
    if total > 10 * len(records) + 1000:  # a sparse plate by design: not a grid
        return []
    return [key_label(tuple(zip(fields, combo, strict=True)))
            for combo in itertools.product(*values)
            if tuple(zip(fields, combo, strict=True)) not in present]


def inspect_plate(source: str | os.PathLike[str] | Reader, layout: str | None = None,
                  pattern: str | None = None) -> PlateSummary:
    """Summarise a plate: its listing and metadata, and one image's header.

    Parameters
    ----------
    source : path or Reader
        The plate folder (its layout detected unless ``layout`` is given), or a reader.
    layout, pattern : str, optional
        As ``Pipeline.run`` takes them.

    Raises
    ------
    NoImagesError
        The plate holds no image (a ``FileNotFoundError``).
    """
    reader = open_input(source, layout, pattern)
    records = reader.records()
    fields = records[0].fields.keys()
    values = {f: sorted({r.fields[f] for r in records}, key=field_sort_key) for f in fields}
    shape, dtype = reader.header(records[0].path)
    meta = reader.metadata
    missing = list(meta.missing) or _grid_gaps(records, list(fields))
    return PlateSummary(reader.root, meta, values, len(records), tuple(shape), str(dtype),
                        missing, reader.nbytes())
