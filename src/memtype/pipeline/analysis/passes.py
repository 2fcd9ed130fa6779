"""Plate-wide passes: a step computed from every group of the plate, then applied to each.

``correct_illumination`` (CellProfiler's CorrectIlluminationCalculate and Apply: the mean
or median of all images of a channel, smoothed, each image divided by it) and
``normalize_plate`` (each channel's mean and standard deviation over the plate; images
become z-scores) run as map -> reduce -> apply on every executor:

map
    a few tasks per worker (in parallel on dask), each a share of the groups: it reads their
    images one at a time and adds each to its channel's accumulator; memory is one image
    plus the accumulators, and each task returns one accumulator per channel (measured on 2
    dask workers, one task per group returned 48 accumulators of 3 MiB and ran at half the
    speed of inline: benchmarks/analysis.py);
reduce
    the driver merges the groups' accumulators as they arrive and computes each channel's
    function, saved as ``passes/<step>/<channel>.npy`` in the output;
apply
    the step becomes a per-channel routing step holding its channel's function.

A pass reads the input images as they are, so it comes before every other step. With
``resume`` the saved functions are read back (the plate is not read twice).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from memtype.errors import InvalidArgumentError, MemtypeError
from memtype.pipeline.catalog.declarations import HOST

if TYPE_CHECKING:
    from memtype.pipeline.execution.executors import Executor

Step = Any
"""A :class:`~memtype.pipeline.FunctionStep` (``steps`` imports this module: no import back)."""
Group = Any
"""A :class:`~memtype.pipeline.model.steps.GroupTask`."""

__all__ = ["PASSES", "PlatePass", "pass_steps", "run_passes", "PASSES_DIR"]

PASSES_DIR = "passes"
"""Where a run keeps each pass's functions: ``passes/<step>/<channel>.npy``."""
_TASKS_PER_WORKER = 2
"""Map tasks per worker: each a share of the groups, read one image at a time."""


class _Moments:
    """Count, sum and sum of squares of every pixel added: a channel's mean and spread."""

    def __init__(self) -> None:
        self.count, self.total, self.squares = 0, 0.0, 0.0

    def add(self, image: np.ndarray[Any, Any]) -> None:
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


@dataclass(frozen=True)
class PlatePass:
    """One kind of plate-wide pass: its parameters, accumulator, function and application."""

    name: str
    parameters: Mapping[str, Any]
    accumulator: Callable[[Mapping[str, Any]], Any]
    finish: Callable[[Any, Mapping[str, Any]], np.ndarray[Any, Any]]
    apply: Callable[[np.ndarray[Any, Any], np.ndarray[Any, Any], Mapping[str, Any]],
                    np.ndarray[Any, Any]]


def _illumination_accumulator(params: Mapping[str, Any]) -> Any:
    """An empty accumulator of a channel's images (a per-pixel histogram for a median)."""
    from memtype.pipeline.analysis.illumination import IlluminationAccumulator

    bins = params["median_bins"] if params["method"] == "median" else None
    return IlluminationAccumulator(median_bins=bins)


def _illumination_function(acc: Any, params: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """A channel's illumination function from its accumulated images."""
    options = {k: params[k] for k in ("method", "smoothing", "sigma", "rescale")}
    return np.asarray(acc.function(**options), dtype=np.float32)


def _illumination_apply(stack: np.ndarray[Any, Any], function: np.ndarray[Any, Any],
                        params: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """Each plane of a stack corrected by its channel's function."""
    from memtype.pipeline.analysis.illumination import apply_illumination

    return np.stack([np.asarray(apply_illumination(p, function, how=params["how"]),
                                dtype=np.float32) for p in stack])


def _moments(params: Mapping[str, Any]) -> _Moments:
    """An empty accumulator of a channel's pixel moments."""
    return _Moments()


def _moments_function(acc: _Moments, params: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """A channel's mean and standard deviation over the plate."""
    mean = acc.total / max(acc.count, 1)
    std = float(np.sqrt(max(acc.squares / max(acc.count, 1) - mean * mean, 0.0)))
    return np.array([mean, std or 1.0], dtype=np.float64)


def _moments_apply(stack: np.ndarray[Any, Any], moments: np.ndarray[Any, Any],
                   params: Mapping[str, Any]) -> np.ndarray[Any, Any]:
    """A stack as z-scores of its channel's plate-wide mean and spread."""
    scores: np.ndarray[Any, Any] = (np.asarray(stack, dtype=np.float64) - moments[0]) / moments[1]
    return scores.astype(np.float32)


PASSES: dict[str, PlatePass] = {p.name: p for p in (
    PlatePass("correct_illumination",
              {"method": "mean", "smoothing": "gaussian", "sigma": None, "rescale": True,
               "how": "divide", "median_bins": 256},
              _illumination_accumulator, _illumination_function, _illumination_apply),
    PlatePass("normalize_plate", {}, _moments, _moments_function, _moments_apply),
)}


def _apply(stack: Any, *, plate_pass: str, function: np.ndarray[Any, Any],
           **params: Any) -> Any:
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
        An unknown parameter.
    """
    spec = PASSES[name]
    unknown = sorted(set(params) - set(spec.parameters))
    if unknown:
        raise InvalidArgumentError(f"plate pass {name!r} takes no parameter "
                                   f"{', '.join(map(repr, unknown))}; expected some of "
                                   f"{sorted(spec.parameters) or 'none'}.")
    from memtype import memory_types

    return memory_types(HOST, HOST)(_unprepared), {
        **spec.parameters, **params, "plate_pass": name}


def pass_steps(steps: Sequence[Step]) -> list[int]:
    """The indices of the plate-wide passes, which must come first.

    Raises
    ------
    InvalidArgumentError
        A pass after another kind of step (it reads the input images as they are).
    """
    indices = [i for i, s in enumerate(steps) if s.plate_pass is not None]
    if indices and indices != list(range(len(indices))):
        late = steps[next(i for k, i in enumerate(indices) if i != k)]
        raise InvalidArgumentError(
            f"step {late.name!r} is a plate-wide pass and reads the input images as they "
            "are; put it before every other step.")
    return indices


@dataclass(frozen=True)
class _MapContext:
    """What each map task needs: the reader, the channel field, the passes."""

    store: Any
    channel: str | None
    passes: tuple[tuple[str, Mapping[str, Any]], ...]
    """Each pass's kind and parameters."""


def _channel_value(key: Any, channel: str | None) -> str:
    """A record's channel value as text ("" without a channel field)."""
    return str(dict(key).get(channel, "")) if channel else ""


def accumulate_groups(ctx: _MapContext, tasks: Sequence[Group]) -> list[dict[str, Any]]:
    """Map: the groups' images, one at a time, added to one accumulator per channel and pass."""
    out: list[dict[str, Any]] = [{} for _ in ctx.passes]
    for task in tasks:
        try:
            for record in task.records:
                image = np.asarray(ctx.store.load_batch([record.path])[0])
                channel = _channel_value(record.key, ctx.channel)
                for k, (name, params) in enumerate(ctx.passes):
                    acc = out[k].get(channel)
                    if acc is None:
                        acc = out[k][channel] = PASSES[name].accumulator(params)
                    acc.add(image)
        except MemtypeError:
            raise
        except Exception as exc:  # named: which group's images the pass could not read
            from memtype.pipeline.io.patterns import key_label

            raise InvalidArgumentError(f"plate-wide pass over group {key_label(task.key)}: "
                                       f"{type(exc).__name__}: {exc}") from exc
    return out


def _batches(tasks: Sequence[Group], workers: int) -> list[list[Group]]:
    """The groups dealt into a few map tasks per worker (each returns one accumulator per
    channel: the fewer results, the less the driver receives and merges; several per
    worker keep the workers evenly busy)."""
    count = max(1, min(len(tasks), _TASKS_PER_WORKER * workers))
    return [list(tasks[i::count]) for i in range(count)]


def _saved(root: str, step: str) -> dict[str, np.ndarray[Any, Any]] | None:
    """A pass's functions saved by an earlier run of this output, or None."""
    folder = os.path.join(root, PASSES_DIR, step)
    if not os.path.isdir(folder):
        return None
    names = sorted(n for n in os.listdir(folder) if n.endswith(".npy"))
    return {n[:-4]: np.load(os.path.join(folder, n)) for n in names} or None


def _save(root: str, step: str, functions: Mapping[str, np.ndarray[Any, Any]]) -> None:
    """Keep a pass's functions in the output (``passes/<step>/<channel>.npy``)."""
    from memtype.pipeline.model.naming import check_path_name
    from memtype.storage import DiskStore

    disk = DiskStore(root)
    for channel, function in functions.items():
        name = check_path_name(channel or "all", f"plate-wide pass {step!r}: channel")
        disk.save(np.asarray(function), f"{PASSES_DIR}/{step}/{name}.npy",
                  overwrite=True, parents=True)


def run_passes(steps: Sequence[Step], executor: Executor, store: Any,
               tasks: Sequence[Group], channel: str | None, root: str,
               resume: bool) -> list[Step]:
    """The steps with each plate-wide pass computed (or read back on resume) and turned
    into the step that applies it to each channel."""
    indices = pass_steps(steps)
    if not indices:
        return list(steps)
    todo = [i for i in indices if not (resume and _saved(root, steps[i].name))]
    merged: list[dict[str, Any]] = [{} for _ in todo]
    if todo:
        ctx = _MapContext(store, channel, tuple((str(steps[i].plate_pass), _params(steps[i]))
                                                for i in todo))
        batches = _batches(tasks, executor.workers)
        for part in executor.map_unordered(accumulate_groups, ctx, batches):
            for k, accumulators in enumerate(part):
                for key, acc in accumulators.items():
                    if key in merged[k]:
                        merged[k][key].merge(acc)
                    else:
                        merged[k][key] = acc
    out = list(steps)
    for i in indices:
        step = steps[i]
        params = _params(step)
        if i in todo:
            spec = PASSES[str(step.plate_pass)]
            functions = {key: spec.finish(acc, params)
                         for key, acc in merged[todo.index(i)].items()}
            _save(root, step.name, functions)
        else:
            functions = _saved(root, step.name) or {}
        out[i] = _applying(step, functions, channel, params)
    return out


def _params(step: Step) -> dict[str, Any]:
    """A pass step's parameters."""
    return {k: v for k, v in step.chain[0].kwargs.items() if k != "plate_pass"}


def _applying(step: Step, functions: Mapping[str, np.ndarray[Any, Any]],
              channel: str | None, params: Mapping[str, Any]) -> Step:
    """The step that applies a pass: one function per channel (routed by the channel)."""
    from memtype import DtypeConversion, memory_types

    apply = memory_types(HOST, HOST, dtype_conversion=DtypeConversion.NATIVE_OUTPUT)(_apply)
    calls = {key: (apply, {**params, "plate_pass": step.plate_pass, "function": f})
             for key, f in functions.items()}
    return step.routed(calls, channel)
