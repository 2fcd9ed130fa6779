"""Stage 2 of a decorated call: the function run on the call's device and stream, whole or
slice by slice.

Slice by slice: the first array (a top-level 3D argument) is split with the framework's own
indexing (``image[z]``), each slice's result must be 2D, and the images are stacked by the
result framework's adapter, so a GPU image never visits host memory (pyclesperanto's stack
is the exception: it has no on-device stack). Tuple results: the first elements (the images)
are stacked, every other element is collected into a list with one entry per slice.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtype.decorators.inputs import Inputs, arrays_in
from memtype.detect import framework_of
from memtype.errors import ContractError, ShapeError
from memtype.frameworks import load_adapter
from memtype.gpu.streams import thread_stream
from memtype.stack import stack_slices

__all__ = ["run", "run_by_slice", "can_slice"]


def run(func: Callable[..., Any], inputs: Inputs, framework: str, by_slice: bool,
        name: str) -> Any:
    """``func`` (or its slices) on the call's device, in ``framework``'s stream there (any
    accelerator kind: the adapter's ``stream``, with the hand-off where it has stream
    functions); on the host, a plain call."""
    if not inputs.device.is_gpu:
        if by_slice:
            return run_by_slice(func, inputs, name)
        return func(*inputs.args, **inputs.kwargs)
    with thread_stream(framework, inputs.device.index) as handoff:
        handoff.adopt(inputs.arrays)
        if by_slice:
            result = run_by_slice(func, inputs, name)
        else:
            result = func(*inputs.args, **inputs.kwargs)
        handoff.release(arrays_in(result))
    return result


def can_slice(inputs: Inputs) -> bool:
    """Whether the call's first array is a top-level 3D argument."""
    if inputs.first is None or inputs.first_at is None:
        return False
    fw = framework_of(inputs.first)
    return fw is not None and len(load_adapter(fw.name).shape_of(inputs.first)) == 3


def _check_image(inputs: Inputs, name: str) -> int:
    """The number of slices; a clear error when there is no top-level 3D image."""
    if inputs.first is None or inputs.first_at is None:
        raise ShapeError(
            f"{name}: slice_by_slice=True needs the image as a top-level array argument; "
            "received no such argument."
        )
    fw = framework_of(inputs.first)
    assert fw is not None
    shape = load_adapter(fw.name).shape_of(inputs.first)
    if len(shape) != 3 or shape[0] == 0:
        raise ShapeError(
            f"{name}: slice_by_slice=True needs a 3D [Z, Y, X] image with at least one "
            f"slice; received shape {shape}."
        )
    return shape[0]


def _call_on(func: Callable[..., Any], inputs: Inputs, image: Any) -> Any:
    """``func`` called with ``image`` in place of the first array."""
    at = inputs.first_at
    if isinstance(at, int):
        args = inputs.args[:at] + (image,) + inputs.args[at + 1:]
        return func(*args, **inputs.kwargs)
    kwargs = dict(inputs.kwargs)
    kwargs[str(at)] = image
    return func(*inputs.args, **kwargs)


def run_by_slice(func: Callable[..., Any], inputs: Inputs, name: str) -> Any:
    """``func`` on each 2D slice of the first array, restacked (see the module notes).

    Raises
    ------
    ShapeError
        The first array is not a top-level 3D argument.
    ContractError
        A slice's result is not a 2D array, or tuple and non-tuple results are mixed.
    """
    image = inputs.first
    results = [_call_on(func, inputs, image[z]) for z in range(_check_image(inputs, name))]
    return restack(results, name)


def restack(results: list[Any], name: str) -> Any:
    """Per-slice results as one result: stacked images, other tuple elements in lists."""
    tuples = [type(r) is tuple for r in results]
    if any(tuples) and not all(tuples):
        raise ContractError(
            f"{name} returned a tuple for some slices and not for others; expected the same "
            "kind of result for every slice."
        )
    if not tuples[0]:
        return _stack_images(results, name)
    widths = {len(r) for r in results}
    if len(widths) != 1 or 0 in widths:
        raise ContractError(
            f"{name} returned tuples of lengths {sorted(widths)} across slices; expected one "
            "non-zero length."
        )
    image = _stack_images([r[0] for r in results], name)
    extras = [list(column) for column in zip(*(r[1:] for r in results), strict=True)]
    return (image, *extras)


def _stack_images(images: list[Any], name: str) -> Any:
    """2D images stacked into ``[Z, Y, X]`` by their own framework."""
    for z, image in enumerate(images):
        fw = framework_of(image)
        shape = None if fw is None else load_adapter(fw.name).shape_of(image)
        if shape is None or len(shape) != 2:
            got = f"shape {shape}" if shape is not None else f"a {type(image).__name__}"
            raise ContractError(
                f"{name} with slice_by_slice=True must return a 2D array per slice; slice "
                f"{z} returned {got}."
            )
    fw = framework_of(images[0])
    assert fw is not None
    return stack_slices(images, fw.name)
