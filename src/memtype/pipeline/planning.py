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
from memtype.pipeline.runner import GroupTask
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
