"""Plate-wide passes: a step computed from every group of the plate, then applied to each.

``correct_illumination`` (CellProfiler's CorrectIlluminationCalculate and Apply: the mean
or median of all images of a channel, smoothed, each image divided by it) and
``normalize_plate`` (each channel's mean and standard deviation over the plate; images
become z-scores) run as map -> reduce -> apply on every executor:

map
    over groups: a few tasks per worker (in parallel on dask), each a share of the groups;
    it reads their images one at a time and adds each to its channel's accumulator (memory:
    one image plus the accumulators; a mean's is one uint32 sum per channel for 16-bit
    images), and returns one accumulator per channel. Over tiles, for a pass whose
    accumulator is large per pixel (a median's histogram, ``2 x median_bins`` bytes a
    pixel): each task owns a band of rows of one channel, reads every image of that channel
    and adds the band; it returns the band's per-pixel statistic, so no histogram crosses
    the network and a task holds at most ``tile_bytes`` of histogram (a channel's images
    are read once per band);
reduce
    the driver merges the groups' accumulators (or stitches the bands); each channel's
    function is computed from them (smoothed, rescaled: on several workers, the channels in
    parallel) and saved as ``passes/<step>/<channel>.npy`` in the output;
apply
    the step becomes a per-channel routing step holding its channel's function.

A pass reads the input images as they are, so it comes before every other step. With
``resume`` the saved functions are read back (the plate is not read twice).
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from numbers import Integral, Real
from typing import Any

import numpy as np

from memtype import DtypeConversion, memory_types
from memtype.errors import InvalidArgumentError, MemtypeError, ShapeError
from memtype.pipeline.analysis.illumination import (
    IlluminationAccumulator,
    apply_illumination,
    illumination_function,
)
from memtype.pipeline.catalog.declarations import HOST
from memtype.pipeline.execution.executors import Executor
from memtype.pipeline.io.patterns import key_label
from memtype.pipeline.model.naming import check_path_name
from memtype.storage import DiskStore

Step = Any
"""A :class:`~memtype.pipeline.FunctionStep` (``steps`` imports this module: no import back)."""
Group = Any
"""A :class:`~memtype.pipeline.model.steps.GroupTask`."""
Image = np.ndarray[Any, Any]
_Reduced = tuple[int, str, bool, Any]
"""A pass's index, a channel, whether it was stitched from bands, the merged accumulator or
the stitched per-pixel statistic."""

__all__ = ["PASSES", "PlatePass", "pass_steps", "run_passes", "PASSES_DIR", "TILE_BYTES"]

PASSES_DIR = "passes"
"""Where a run keeps each pass's functions: ``passes/<step>/<channel>.npy``."""
TILE_BYTES = 256 << 20
"""The most accumulator bytes a map task over tiles holds (a median's histogram): a channel
whose histogram is larger is split into bands of rows, and its images are read once per band."""
_TASKS_PER_WORKER = 2
"""Map tasks per worker over groups: each a share of the groups, read one image at a time."""


class _Moments:
    """Count, sum and sum of squares of every pixel added: a channel's mean and spread."""

    def __init__(self) -> None:
        self.count, self.total, self.squares = 0, 0.0, 0.0

    def add(self, image: Image) -> None:
        """Add one image's pixels."""
        values = np.asarray(image, dtype=np.float64)
        self.count += values.size
        self.total += float(values.sum())
        self.squares += float(np.square(values).sum())

    def merge(self, other: _Moments) -> None:
        """Add another accumulator's pixels."""
        self.count += other.count
        self.total += other.total
        self.squares += other.squares


def _never_tiled(params: Mapping[str, Any]) -> int:
    """A pass whose accumulator is small: mapped over groups."""
    return 0


@dataclass(frozen=True)
class PlatePass:
    """One kind of plate-wide pass: its parameters, accumulator, function and application.

    ``tile_bytes_per_pixel`` says, from the parameters, how many bytes a pixel of the
    accumulator takes when it is too large to merge across workers (0: mapped over groups,
    merged with ``merge`` and finished by ``finish``); such a pass is mapped over tiles, each
    tile's accumulator gives ``per_pixel`` (a per-pixel statistic) and ``finish_pixels``
    makes the function from the stitched statistic.
    """

    name: str
    parameters: Mapping[str, Any]
    accumulator: Callable[[Mapping[str, Any]], Any]
    finish: Callable[[Any, Mapping[str, Any]], Image]
    apply: Callable[[Image, Image, Mapping[str, Any]], Image]
    tile_bytes_per_pixel: Callable[[Mapping[str, Any]], int] = _never_tiled
    per_pixel: Callable[[Any, Mapping[str, Any]], Image] | None = None
    finish_pixels: Callable[[Image, Mapping[str, Any]], Image] | None = None
    check: Callable[[str, Mapping[str, Any]], None] = lambda name, params: None
    """Refuses parameters the pass cannot run with, before anything is read."""


_CHOICES = {"method": ("mean", "median"), "smoothing": ("gaussian", "median", "fit_polynomial",
                                                      "none"), "how": ("divide", "subtract")}


def _refuse(name: str, key: str, expected: str, value: Any) -> None:
    """A parameter the pass cannot run with, as the project's errors say it."""
    raise InvalidArgumentError(f"Invalid value for argument `{key}` of plate pass {name!r}. "
                               f"Expected {expected}. Received: {key}={value!r}.")


def _check_illumination(name: str, params: Mapping[str, Any]) -> None:
    """The illumination pass's choices, bins, sigma and rescaling, checked when declared."""
    for key, choices in _CHOICES.items():
        if params[key] not in choices:
            _refuse(name, key, f"one of {list(choices)}", params[key])
    bins = params["median_bins"]
    if isinstance(bins, bool) or not isinstance(bins, Integral) or not 2 <= int(bins) <= 4096:
        _refuse(name, "median_bins", "an integer 2..4096", bins)
    sigma = params["sigma"]
    if sigma is not None and (isinstance(sigma, bool) or not isinstance(sigma, Real)
                              or not float(sigma) > 0):
        _refuse(name, "sigma", "None (automatic) or a number of pixels > 0", sigma)
    given = params["median_range"]
    if given is not None and not (isinstance(given, list | tuple) and len(given) == 2 and all(
            isinstance(v, Real) and not isinstance(v, bool) for v in given)
            and float(given[0]) < float(given[1])):
        _refuse(name, "median_range", "None (the image type's range) or [low, high] with "
                "low < high", given)
    if not isinstance(params["rescale"], bool):
        _refuse(name, "rescale", "true or false", params["rescale"])


def _illumination_accumulator(params: Mapping[str, Any]) -> IlluminationAccumulator:
    """An empty accumulator of a channel's images (a per-pixel histogram for a median)."""
    if params["method"] != "median":
        return IlluminationAccumulator()
    given = params["median_range"]
    return IlluminationAccumulator(median_bins=int(params["median_bins"]),
                                   value_range=None if given is None else
                                   (float(given[0]), float(given[1])))


def _illumination_options(params: Mapping[str, Any]) -> dict[str, Any]:
    """The smoothing and rescaling options of an illumination function."""
    return {k: params[k] for k in ("smoothing", "sigma", "rescale")}


def _illumination_function(acc: IlluminationAccumulator, params: Mapping[str, Any]) -> Image:
    """A channel's illumination function from its accumulated images."""
    return _illumination_from_average(acc.average(params["method"]), params)


def _illumination_from_average(average: Image, params: Mapping[str, Any]) -> Image:
    """A channel's illumination function from its per-pixel average (stitched bands)."""
    function = illumination_function(average, **_illumination_options(params))
    return np.asarray(function, dtype=np.float32)


def _illumination_average(acc: IlluminationAccumulator, params: Mapping[str, Any]) -> Image:
    """A band's per-pixel average of every image of its channel."""
    return acc.average(params["method"])


def _illumination_tile_bytes(params: Mapping[str, Any]) -> int:
    """A median's histogram (uint16 counts) and sum per pixel; 0 for a mean (over groups)."""
    return 2 * int(params["median_bins"]) + 8 if params["method"] == "median" else 0


def _illumination_apply(stack: Image, function: Image, params: Mapping[str, Any]) -> Image:
    """Each plane of a stack corrected by its channel's function."""
    return np.stack([np.asarray(apply_illumination(p, function, how=params["how"]),
                                dtype=np.float32) for p in stack])


def _moments(params: Mapping[str, Any]) -> _Moments:
    """An empty accumulator of a channel's pixel moments."""
    return _Moments()


def _moments_function(acc: _Moments, params: Mapping[str, Any]) -> Image:
    """A channel's mean and standard deviation over the plate."""
    mean = acc.total / max(acc.count, 1)
    std = float(np.sqrt(max(acc.squares / max(acc.count, 1) - mean * mean, 0.0)))
    return np.array([mean, std or 1.0], dtype=np.float64)


def _moments_apply(stack: Image, moments: Image, params: Mapping[str, Any]) -> Image:
    """A stack as z-scores of its channel's plate-wide mean and spread."""
    scores: Image = (np.asarray(stack, dtype=np.float64) - moments[0]) / moments[1]
    return scores.astype(np.float32)


PASSES: dict[str, PlatePass] = {p.name: p for p in (
    PlatePass("correct_illumination",
              {"method": "mean", "smoothing": "gaussian", "sigma": None, "rescale": True,
               "how": "divide", "median_bins": 256, "median_range": None},
              _illumination_accumulator, _illumination_function, _illumination_apply,
              _illumination_tile_bytes, _illumination_average, _illumination_from_average,
              _check_illumination),
    PlatePass("normalize_plate", {}, _moments, _moments_function, _moments_apply),
)}


def _apply(stack: Any, *, plate_pass: str, function: Image, **params: Any) -> Any:
    """A pass applied to one stack (the step a pass becomes)."""
    return PASSES[plate_pass].apply(np.asarray(stack), function, params)


def _unprepared(stack: Any, *, plate_pass: str, **params: Any) -> Any:
    """A pass step run outside Pipeline.run: it has no plate to compute from."""
    raise InvalidArgumentError(
        f"{plate_pass!r} is a plate-wide pass: Pipeline.run computes it from every group of "
        "the plate before the groups run; it cannot run on one stack alone.")


def pass_function(name: str, params: Mapping[str, Any]) -> tuple[Any, dict[str, Any]]:
    """A pass step's placeholder function and its checked parameters.

    Raises
    ------
    InvalidArgumentError
        An unknown parameter, or a value the pass cannot run with (checked here, before a
        run reads the plate).
    """
    spec = PASSES[name]
    unknown = sorted(set(params) - set(spec.parameters))
    if unknown:
        raise InvalidArgumentError(f"plate pass {name!r} takes no parameter "
                                   f"{', '.join(map(repr, unknown))}; expected some of "
                                   f"{sorted(spec.parameters) or 'none'}.")
    checked = {**spec.parameters, **params}
    spec.check(name, checked)
    return memory_types(HOST, HOST)(_unprepared), {**checked, "plate_pass": name}


def pass_steps(steps: Sequence[Step]) -> list[int]:
    """The indices of the plate-wide passes, which must come first.

    Raises
    ------
    InvalidArgumentError
        A pass after another kind of step (it reads the input images as they are): the
        message names the pass, its position and the step before it.
    """
    indices = [i for i, s in enumerate(steps) if s.plate_pass is not None]
    if indices and indices != list(range(len(indices))):
        late = next(i for k, i in enumerate(indices) if i != k)
        raise InvalidArgumentError(
            f"step {steps[late].name!r} (step {late + 1} of {len(steps)}, after "
            f"{steps[late - 1].name!r}) is a plate-wide pass: it is computed from the input "
            "images as they are read, before any other step runs; put it before every other "
            "step (plate-wide passes first, in any order).")
    return indices


@dataclass(frozen=True)
class _MapContext:
    """What each map task needs: the reader, the channel field, the passes."""

    store: Any
    channel: str | None
    passes: tuple[tuple[str, Mapping[str, Any]], ...]
    """Each pass's kind and parameters."""


@dataclass(frozen=True)
class _Tile:
    """A map task over tiles: a band of rows of every image of one channel."""

    channel: str
    rows: tuple[int, int]
    shape: tuple[int, ...]
    """Every image's shape (an image of another shape is refused)."""
    paths: tuple[str, ...]


def _channel_value(key: Any, channel: str | None) -> str:
    """A record's channel value as text ("" without a channel field)."""
    return str(dict(key).get(channel, "")) if channel else ""


def _read(store: Any, path: str, what: str) -> Image:
    """One image, a read error named by what was being read."""
    try:
        return np.asarray(store.load_batch([path])[0])
    except MemtypeError:
        raise
    except Exception as exc:  # named: which image the pass could not read
        raise InvalidArgumentError(f"plate-wide pass over {what}: "
                                   f"{type(exc).__name__}: {exc}") from exc


def accumulate_groups(ctx: _MapContext, tasks: Sequence[Group]) -> list[dict[str, Any]]:
    """Map over groups: their images, one at a time, added to one accumulator per channel
    and pass."""
    out: list[dict[str, Any]] = [{} for _ in ctx.passes]
    for task in tasks:
        for record in task.records:
            image = _read(ctx.store, record.path, f"group {key_label(task.key)}")
            channel = _channel_value(record.key, ctx.channel)
            for k, (name, params) in enumerate(ctx.passes):
                acc = out[k].get(channel)
                if acc is None:
                    acc = out[k][channel] = PASSES[name].accumulator(params)
                acc.add(image)
    return out


def accumulate_tile(ctx: _MapContext, tile: _Tile) -> list[Image]:
    """Map over tiles: a band of rows of every image of one channel added to one accumulator
    per pass; each pass's per-pixel statistic of the band."""
    accumulators = [PASSES[name].accumulator(params) for name, params in ctx.passes]
    start, stop = tile.rows
    for path in tile.paths:
        image = _read(ctx.store, path, f"channel {tile.channel or '(none)'}, file {path!r}")
        if image.shape != tile.shape:
            raise ShapeError(
                f"plate-wide pass over channel {tile.channel or '(none)'}: expected every "
                f"image of the shape {tile.shape}. Received: {image.shape} in {path!r}.")
        band = image[..., start:stop, :]
        for acc in accumulators:
            acc.add(band)
    return [_per_pixel(name)(acc, params)
            for acc, (name, params) in zip(accumulators, ctx.passes, strict=True)]


def _per_pixel(name: str) -> Callable[[Any, Mapping[str, Any]], Image]:
    """A tiled pass's per-pixel statistic of its accumulator."""
    method = PASSES[name].per_pixel
    assert method is not None, f"plate pass {name!r} has no per-pixel statistic"
    return method


def _batches(tasks: Sequence[Group], workers: int) -> list[list[Group]]:
    """The groups dealt into a few map tasks per worker (each returns one accumulator per
    channel: the fewer results, the less the driver receives and merges; several per
    worker keep the workers evenly busy)."""
    count = max(1, min(len(tasks), _TASKS_PER_WORKER * workers))
    return [list(tasks[i::count]) for i in range(count)]


def _bands(height: int, count: int) -> list[tuple[int, int]]:
    """``count`` bands of rows covering ``height`` rows, as even as can be."""
    edges = [round(height * k / count) for k in range(count + 1)]
    return [(a, b) for a, b in zip(edges, edges[1:], strict=False) if b > a]


def _tiles(store: Any, tasks: Sequence[Group], channel: str | None, workers: int,
           bytes_per_pixel: int, tile_bytes: int) -> list[_Tile]:
    """The map tasks over tiles: each channel's rows split so that a band's accumulators
    stay within ``tile_bytes``, and into at least as many tasks as workers."""
    paths: dict[str, list[str]] = {}
    for task in tasks:
        for record in task.records:
            paths.setdefault(_channel_value(record.key, channel), []).append(record.path)
    tiles: list[_Tile] = []
    for value, files in paths.items():
        shape = _read(store, files[0], f"channel {value or '(none)'}").shape  # as loaded
        height, pixels = shape[-2], math.prod(shape)
        count = max(math.ceil(pixels * bytes_per_pixel / max(tile_bytes, 1)),
                    math.ceil(workers / len(paths)))
        tiles += [_Tile(value, rows, shape, tuple(files))
                  for rows in _bands(height, min(count, height))]
    return tiles


def _merged(executor: Executor, ctx: _MapContext, tasks: Sequence[Group]) -> list[_Reduced]:
    """Reduce over groups: the map tasks' accumulators merged per pass and channel."""
    merged: list[dict[str, Any]] = [{} for _ in ctx.passes]
    for part in executor.map_unordered(accumulate_groups, ctx, _batches(tasks, executor.workers)):
        for k, accumulators in enumerate(part):
            for key, acc in accumulators.items():
                if key in merged[k]:
                    merged[k][key].merge(acc)
                else:
                    merged[k][key] = acc
    return [(k, key, False, acc) for k, found in enumerate(merged) for key, acc in found.items()]


def _stitched(executor: Executor, ctx: _MapContext, tiles: Sequence[_Tile]) -> list[_Reduced]:
    """Reduce over tiles: each channel's bands stitched in row order."""
    bands: dict[str, list[tuple[int, list[Image]]]] = {}
    for tile, part in zip(tiles, _tile_results(executor, ctx, tiles), strict=True):
        bands.setdefault(tile.channel, []).append((tile.rows[0], part))
    out: list[_Reduced] = []
    for value, found in bands.items():
        found.sort(key=lambda band: band[0])
        out += [(k, value, True, np.concatenate([part[k] for _, part in found], axis=-2))
                for k in range(len(ctx.passes))]
    return out


def _finished(executor: Executor, ctx: _MapContext, reduced: Sequence[_Reduced]
              ) -> list[dict[str, Image]]:
    """Each pass's function per channel: the channels finished in parallel on a pool of
    workers (smoothing a 1024 x 1024 function takes 0.1-0.5 s, a median filter seconds),
    here otherwise."""
    parallel = executor.workers > 1 and len(reduced) > 1
    done = executor.map_unordered(_finish, ctx, reduced) if parallel \
        else (_finish(ctx, item) for item in reduced)
    out: list[dict[str, Image]] = [{} for _ in ctx.passes]
    for k, channel, function in done:
        out[k][channel] = function
    return out


def _finish(ctx: _MapContext, item: _Reduced) -> tuple[int, str, Image]:
    """One pass's function for one channel, from its merged accumulator or stitched bands."""
    k, channel, stitched, value = item
    name, params = ctx.passes[k]
    finish = PASSES[name].finish_pixels if stitched else PASSES[name].finish
    assert finish is not None, f"plate pass {name!r} has no finish from pixels"
    return k, channel, finish(value, params)


def _tile_results(executor: Executor, ctx: _MapContext, tiles: Sequence[_Tile]
                  ) -> Iterator[list[Image]]:
    """Each tile's results in the tiles' order (the map returns them as they complete)."""
    indexed = list(enumerate(tiles))
    done = dict(executor.map_unordered(_indexed_tile, ctx, indexed))
    return (done[i] for i in range(len(tiles)))


def _indexed_tile(ctx: _MapContext, item: tuple[int, _Tile]) -> tuple[int, list[Image]]:
    """A tile's results with its index (to put completion order back in tile order)."""
    return item[0], accumulate_tile(ctx, item[1])


def _saved(root: str, step: str) -> dict[str, Image] | None:
    """A pass's functions saved by an earlier run of this output, or None."""
    folder = os.path.join(root, PASSES_DIR, step)
    if not os.path.isdir(folder):
        return None
    names = sorted(n for n in os.listdir(folder) if n.endswith(".npy"))
    return {n[:-4]: np.load(os.path.join(folder, n)) for n in names} or None


def _save(root: str, step: str, functions: Mapping[str, Image]) -> None:
    """Keep a pass's functions in the output (``passes/<step>/<channel>.npy``)."""
    disk = DiskStore(root)
    for channel, function in functions.items():
        name = check_path_name(channel or "all", f"plate-wide pass {step!r}: channel")
        disk.save(np.asarray(function), f"{PASSES_DIR}/{step}/{name}.npy",
                  overwrite=True, parents=True)


def _computed(steps: Sequence[Step], todo: Sequence[int], executor: Executor, store: Any,
              tasks: Sequence[Group], channel: str | None, tile_bytes: int
              ) -> dict[int, dict[str, Image]]:
    """Each pass to compute's functions per channel: those with small accumulators in one
    map over groups, the others in one map over tiles."""
    kinds: dict[bool, list[int]] = {False: [], True: []}
    for i in todo:
        params = _params(steps[i])
        kinds[PASSES[str(steps[i].plate_pass)].tile_bytes_per_pixel(params) > 0].append(i)
    found: dict[int, dict[str, Image]] = {}
    for tiled, indices in kinds.items():
        if not indices:
            continue
        ctx = _MapContext(store, channel, tuple((str(steps[i].plate_pass), _params(steps[i]))
                                                for i in indices))
        if tiled:
            per_pixel = sum(PASSES[n].tile_bytes_per_pixel(p) for n, p in ctx.passes)
            tiles = _tiles(store, tasks, channel, executor.workers, per_pixel, tile_bytes)
            reduced = _stitched(executor, ctx, tiles)
        else:
            reduced = _merged(executor, ctx, tasks)
        found.update(zip(indices, _finished(executor, ctx, reduced), strict=True))
    return found


def run_passes(steps: Sequence[Step], executor: Executor, store: Any,
               tasks: Sequence[Group], channel: str | None, root: str,
               resume: bool, *, tile_bytes: int = TILE_BYTES) -> list[Step]:
    """The steps with each plate-wide pass computed (or read back on resume) and turned
    into the step that applies it to each channel.

    ``tile_bytes`` bounds the accumulator a map task over tiles holds (see
    :data:`TILE_BYTES`); the functions do not depend on it.
    """
    indices = pass_steps(steps)
    if not indices:
        return list(steps)
    todo = [i for i in indices if not (resume and _saved(root, steps[i].name))]
    computed = _computed(steps, todo, executor, store, tasks, channel, tile_bytes)
    out = list(steps)
    for i in indices:
        if i in computed:
            functions = computed[i]
            _save(root, steps[i].name, functions)
        else:
            functions = _saved(root, steps[i].name) or {}
        out[i] = _applying(steps[i], functions, channel, _params(steps[i]))
    return out


def _params(step: Step) -> dict[str, Any]:
    """A pass step's parameters."""
    return {k: v for k, v in step.chain[0].kwargs.items() if k != "plate_pass"}


def _applying(step: Step, functions: Mapping[str, Image],
              channel: str | None, params: Mapping[str, Any]) -> Step:
    """The step that applies a pass: one function per channel (routed by the channel)."""
    apply = memory_types(HOST, HOST, dtype_conversion=DtypeConversion.NATIVE_OUTPUT)(_apply)
    calls = {key: (apply, {**params, "plate_pass": step.plate_pass, "function": f})
             for key, f in functions.items()}
    return step.routed(calls, channel)
