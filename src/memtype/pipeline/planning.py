"""The stack shapes and dtype a plan is made for: from a group's files, or from given images."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from memtype.detect import detect_framework
from memtype.errors import InvalidArgumentError, ShapeError
from memtype.frameworks import load_adapter
from memtype.pipeline.patterns import stack_keys
from memtype.pipeline.probe import Shape
from memtype.pipeline.runner import GroupTask, writes
from memtype.pipeline.steps import FunctionStep

__all__ = ["group_shapes", "image_shapes"]


def group_shapes(store: Any, task: GroupTask,
                 first: FunctionStep) -> tuple[list[Shape], np.dtype[Any]]:
    """The stack shapes of one group (as the first step stacks it) and its first image's dtype.

    Only the group's first image is read: the others are taken to share its shape and dtype.
    """
    image = store.load_batch([task.records[0].path])[0]
    adapter = load_adapter(detect_framework(image).name)
    plane = tuple(adapter.shape_of(image))
    keys = [r.key for r in task.records]
    groups = stack_keys(keys, first.variable_components)
    return [(len(members), *plane) for members in groups.values()], np.dtype(
        adapter.dtype_of(image))


def image_shapes(images: Sequence[Any] | Any) -> tuple[list[Shape], np.dtype[Any]]:
    """One stack: a 3D array, or a sequence of 2D arrays of one shape.

    Raises
    ------
    ShapeError
        An array that is not 3D, or slices that are not 2D.
    ValueError
        An empty sequence.
    """
    if isinstance(images, (list, tuple)):
        if not images:
            raise InvalidArgumentError("Pipeline.plan: expected images; received an empty "
                                       "sequence.")
        adapter = load_adapter(detect_framework(images[0]).name)
        plane = tuple(adapter.shape_of(images[0]))
        if len(plane) != 2:
            raise ShapeError(f"Pipeline.plan: expected 2D images; received shape {plane}.")
        return [(len(images), *plane)], np.dtype(adapter.dtype_of(images[0]))
    adapter = load_adapter(detect_framework(images).name)
    shape = tuple(adapter.shape_of(images))
    if len(shape) != 3:
        raise ShapeError(f"Pipeline.plan: expected a 3D [Z, Y, X] stack or a list of 2D "
                         f"images; received shape {shape}.")
    return [shape], np.dtype(adapter.dtype_of(images))


Boundary = tuple[list[Shape], np.dtype[Any]]
"""The stacks between two steps: their shapes and dtype."""

_TRIAL_PLANE = 32


def infer_boundaries(steps: Sequence[FunctionStep], shapes: list[Shape],
                     dtype: np.dtype[Any]) -> tuple[list[Boundary], list[str]]:
    """The stacks before each step and after the last, and notes on what was assumed.

    Each step runs once (its first implementation) on a small ramp of the real Z and dtype
    and at most 32 x 32 pixels: the result's Z and dtype are taken as the step's, Y and X
    scaled in proportion. A step that fails on the sample (or routes by a field) is taken
    to keep its stacks as they are, and the note says so.
    """
    bounds: list[Boundary] = [(list(shapes), dtype)]
    notes: list[str] = []
    for index, step in enumerate(steps):
        current, kind = bounds[-1]
        lazy = not writes(steps, index)
        try:
            out = [_trial(step, s, kind, lazy) for s in current]
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # recorded in the plan: the step is assumed to keep them
            # SystemExit too: as in the run (runner.execute_group), a step's exit fails its
            # group only, and the run reports it there
            notes.append(f"step {step.name!r} was not tried on a sample ({type(exc).__name__}: "
                         f"{exc}); its output is assumed to keep the shape and dtype")
            bounds.append((current, kind))
            continue
        bounds.append(([s for s, _ in out], out[0][1]))
    return bounds, notes


def _trial(step: FunctionStep, shape: Shape, dtype: np.dtype[Any],
           lazy: bool) -> tuple[Shape, np.dtype[Any]]:
    """The step's output shape and dtype for stacks of ``shape``, from one small sample."""
    if step.routes is not None:
        raise InvalidArgumentError("the step routes by a field value")
    z, y, x = shape
    small = (z, min(y, _TRIAL_PLANE), min(x, _TRIAL_PLANE))
    ramp = (np.arange(int(np.prod(small)), dtype=np.float64) % 97 + 1).reshape(small)
    image, _ = step.run(ramp.astype(dtype), (), None, lazy)
    adapter = load_adapter(detect_framework(image).name)
    out = tuple(adapter.shape_of(image))
    if len(out) != 3:
        raise ShapeError(f"it returned shape {out}")
    scaled = (out[0], _scale(out[1], y, small[1]), _scale(out[2], x, small[2]))
    return scaled, np.dtype(adapter.dtype_of(image))


def _scale(size: int, real: int, sample: int) -> int:
    """A sample's output size scaled back to the real input's (as it is for an empty axis)."""
    return size * real // sample if sample else size
