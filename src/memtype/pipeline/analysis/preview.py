"""A preview: one field of a plate through the whole pipeline in seconds, every step's result
kept and shown, so parameters can be tuned before a long run.

``memtype preview PIPELINE --input PLATE --well A01`` (or :func:`preview`) runs the first
site of the well (or ``site``) and writes into the preview folder what a run writes (the
OME-Zarr plate with the object sets as labels, the tables), each chain step's images as
``<step>.zarr`` (napari opens them), and ``preview.png``: a row per step, its image per
channel, object sets in colour with their outlines, and a few measurements. A plate-wide
pass is computed from the previewed field alone (the picture says so).
"""

from __future__ import annotations

import copy
import csv
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis.fields import channel_field
from memtype.pipeline.analysis.passes import run_passes
from memtype.pipeline.analysis.summaries import _well_name
from memtype.pipeline.execution.executors import InlineExecutor
from memtype.pipeline.execution.runner import RunContext, execute_group
from memtype.pipeline.io.patterns import Key, key_label
from memtype.pipeline.model.steps import FunctionStep, GroupTask
from memtype.storage import DiskStore

if TYPE_CHECKING:
    from memtype.pipeline.model.pipeline import Pipeline

__all__ = ["PreviewResult", "preview", "render_preview"]

_TILE = 192
"""Largest side of one image in the picture (pixels)."""
_LABEL_WIDTH = 200
"""Width of the text column naming each row's step."""
_MIN_WIDTH = 900
"""Narrowest picture (room for the lines of measurements)."""


@dataclass(frozen=True)
class PreviewResult:
    """What a preview wrote: the picture, the output folder, and the group it ran."""

    picture: str
    output: str
    group: str
    failed: str | None


def _field_task(pipeline: Pipeline, reader: Any, well: str, site: str | None) -> GroupTask:
    """The records of one field (the well's first site, or ``site``) as one group."""
    wanted = _well_name(well)
    records = [r for r in reader.records(None) if _well_name(str(r.get("well"))) == wanted]
    if not records:
        wells = sorted({str(r.get("well")) for r in reader.records(None)})
        raise InvalidArgumentError(f"preview: the plate has no well {well!r}; it has "
                                   f"{', '.join(wells[:12])}{' ...' if len(wells) > 12 else ''}.")
    site_field = next((f for f in ("site", "field", "s", "fov") if f in dict(records[0].key)),
                      None)
    if site_field is not None:
        sites = sorted({str(r.get(site_field)) for r in records}, key=lambda v: (len(v), v))
        chosen = sites[0] if site is None else str(site)
        if chosen not in sites:
            raise InvalidArgumentError(f"preview: well {well} has no site {site!r}; it has "
                                       f"{', '.join(sites)}.")
        records = [r for r in records if str(r.get(site_field)) == chosen]
    key = tuple((f, dict(records[0].key)[f]) for f in pipeline.task_by
                if f in dict(records[0].key))
    return GroupTask(key, tuple(records))


def _materialized(steps: Sequence[FunctionStep]) -> list[FunctionStep]:
    """Copies of the steps with every chain step written (``<step>.zarr``)."""
    out = []
    for step in steps:
        shown = copy.copy(step)
        if not step.inputs and step.labels is None:
            shown.materialize = True
        out.append(shown)
    return out


def preview(pipeline: Pipeline, source: Any, output: str | os.PathLike[str], *, well: str,
            site: str | None = None, pattern: str | None = None,
            layout: str | None = None) -> PreviewResult:
    """Run one field through ``pipeline`` into ``output`` and draw every step's result.

    Raises
    ------
    InvalidArgumentError
        The plate has no such well or site (the message lists those it has).
    """
    reader = pipeline.reader(source, pattern, layout)
    task = _field_task(pipeline, reader, well, site)
    root = os.fspath(output)
    out = pipeline._output_spec(root, reader.pattern, [task], None, reader.metadata)
    out.prepare(resume=False, overwrite=True)
    steps = run_passes(_materialized(pipeline.steps), InlineExecutor(), reader, [task],
                       channel_field(reader.pattern.fields), root, False)
    captured: dict[str, list[tuple[Key, Any]]] = {}
    ctx = RunContext(tuple(steps), reader.pattern, reader, out, capture=captured)
    result = execute_group(ctx, task)
    out.finish([task.key])
    notes = ["plate-wide passes computed from this field only"] \
        if any(s.plate_pass for s in pipeline.steps) else []
    picture = render_preview([s.name for s in steps], captured, _measurements(root, steps),
                             [*notes, *([result.error] if result.error else [])])
    path = os.path.join(root, "preview.png")
    DiskStore(root).save(picture, "preview.png", overwrite=True)
    return PreviewResult(path, root, key_label(task.key), result.error)


def _measurements(root: str, steps: Sequence[FunctionStep]) -> list[str]:
    """A few lines of numbers: each object set's count and its first measurements' means."""
    lines = []
    for name in [s.labels for s in steps if s.inputs and s.labels]:
        path = os.path.join(root, f"{name}.csv")
        if not os.path.isfile(path):
            continue
        with open(path, newline="", encoding="utf-8") as fh:
            rows = list(csv.DictReader(fh))
        shown = [c for c in (rows[0] if rows else {}) if "_" in c and not c.startswith(
            ("Parent_", "Children_"))][:3]
        means = ", ".join(f"{c} {np.mean([float(r[c]) for r in rows]):.4g}" for c in shown)
        lines.append(f"{name}: {len(rows)} objects" + (f"; mean {means}" if means else ""))
    return lines


def _gray(image: Any) -> np.ndarray[Any, Any]:
    """An image (a stack: its maximum over z) as ``uint8`` grey, 1st to 99.5th percentile."""
    plane = np.asarray(image, dtype=np.float64)
    while plane.ndim > 2:
        plane = plane.max(axis=0)
    low, high = np.percentile(plane, [1.0, 99.5]) if plane.size else (0.0, 1.0)
    scaled = np.clip((plane - low) / max(high - low, 1e-12), 0.0, 1.0)
    return (scaled * 255).astype(np.uint8)


def _colour_labels(labels: Any) -> np.ndarray[Any, Any]:
    """A label image in colour (a fixed hue per object), outlines white, background black."""
    plane = np.asarray(labels)
    while plane.ndim > 2:
        plane = plane[0]
    ids = plane.astype(np.int64)
    rgb = np.stack([(ids * 97) % 200 + 55, (ids * 57) % 200 + 55, (ids * 31) % 200 + 55], -1)
    rgb[ids == 0] = 0
    edge = np.zeros(ids.shape, bool)
    edge[:-1] |= ids[:-1] != ids[1:]
    edge[:, :-1] |= ids[:, :-1] != ids[:, 1:]
    rgb[edge & (ids > 0)] = 255
    return rgb.astype(np.uint8)


def _tile(image: Any, labels: bool) -> np.ndarray[Any, Any]:
    """One image as an RGB tile of at most ``_TILE`` pixels a side."""
    rgb = _colour_labels(image) if labels else np.repeat(_gray(image)[..., None], 3, -1)
    side = max(rgb.shape[:2])
    if side < _TILE // 2:  # a small field, enlarged (nearest pixel) to be seen
        factor = _TILE // (2 * side)
        return np.ascontiguousarray(rgb.repeat(factor, 0).repeat(factor, 1))
    step = max(1, -(-side // _TILE))
    return np.ascontiguousarray(rgb[::step, ::step])


def _is_labels(data: Any) -> bool:
    """Whether a result looks like a label image (integers)."""
    return np.asarray(data).dtype.kind in "iu" and np.asarray(data).dtype.itemsize >= 4


def render_preview(names: Sequence[str], captured: dict[str, list[tuple[Key, Any]]],
                   lines: Sequence[str], notes: Sequence[str]) -> np.ndarray[Any, Any]:
    """The preview picture as an RGB ``uint8`` array: a row per step that made images."""
    from PIL import Image, ImageDraw  # optional (pillow): only a preview draws

    rows = [(n, [_tile(d, _is_labels(d)) for _, d in captured[n]]) for n in names
            if n in captured]
    width = max(_MIN_WIDTH, _LABEL_WIDTH + max(
        (sum(t.shape[1] + 4 for t in tiles) for _, tiles in rows), default=_TILE))
    heights = [max(t.shape[0] for t in tiles) + 6 for _, tiles in rows]
    text_height = 16 * (len(lines) + len(notes)) + 8
    canvas = Image.new("RGB", (width, sum(heights) + text_height), (24, 24, 24))
    draw = ImageDraw.Draw(canvas)
    y = 0
    for (name, tiles), height in zip(rows, heights, strict=True):
        draw.text((6, y + 4), name, fill=(230, 230, 230))
        x = _LABEL_WIDTH
        for tile in tiles:
            canvas.paste(Image.fromarray(tile), (x, y + 3))
            x += tile.shape[1] + 4
        y += height
    for k, line in enumerate([*lines, *notes]):
        draw.text((6, y + 4 + 16 * k), line[:160], fill=(230, 230, 120))
    return np.asarray(canvas)
