"""The operations' JAX implementations (plain ``jax.numpy`` / ``lax`` code, run eagerly)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from memtype.errors import InvalidArgumentError
from memtype.pipeline.catalog.implementations.histogram import (
    li_threshold,
    otsu_threshold,
    triangle_threshold,
)
from memtype.pipeline.catalog.implementations.host import _to_host

__all__ = ["jax_maximum", "jax_minimum", "jax_opening", "jax_closing",
           "jax_white_tophat", "jax_black_tophat", "jax_gaussian", "jax_median",
           "jax_sobel", "jax_otsu_mask", "jax_triangle_mask", "jax_li_mask",
           "jax_remove_small_objects", "jax_rescale_intensity", "jax_max_projection",
           "jax_mean_projection", "jax_sum_projection"]


def _jax_work(stack: Any) -> Any:
    """The stack in the float dtype a JAX filter computes in (float32 unless it is float64)."""
    import jax.numpy as jnp

    return stack if stack.dtype == jnp.float64 else stack.astype(jnp.float32)


def _jax_box(stack: Any, radius: int, maximum: bool) -> Any:
    """A per-plane (2r+1)^2 box maximum (or minimum), edges ``nearest``, in the stack's dtype."""
    import jax.numpy as jnp
    from jax import lax

    pad = jnp.pad(stack, ((0, 0), (radius, radius), (radius, radius)), mode="edge")
    size = 2 * radius + 1
    init = (-jnp.inf if maximum else jnp.inf) if jnp.issubdtype(stack.dtype, jnp.floating) \
        else (np.iinfo(stack.dtype).min if maximum else np.iinfo(stack.dtype).max)
    return lax.reduce_window(pad, jnp.asarray(init, stack.dtype), lax.max if maximum else lax.min,
                             (1, size, size), (1, 1, 1), "VALID")


def jax_maximum(stack: Any, radius: int = 1) -> Any:
    """Per-plane maximum over a (2r+1)^2 box (``lax.reduce_window``)."""
    return _jax_box(stack, radius, True)


def jax_minimum(stack: Any, radius: int = 1) -> Any:
    """Per-plane minimum over a (2r+1)^2 box."""
    return _jax_box(stack, radius, False)


def jax_opening(stack: Any, radius: int = 1) -> Any:
    """Per-plane box opening: the minimum, then the maximum."""
    return _jax_box(_jax_box(stack, radius, False), radius, True)


def jax_closing(stack: Any, radius: int = 1) -> Any:
    """Per-plane box closing: the maximum, then the minimum."""
    return _jax_box(_jax_box(stack, radius, True), radius, False)


def jax_white_tophat(stack: Any, radius: int = 1) -> Any:
    """The stack minus its per-plane box opening."""
    return stack - jax_opening(stack, radius)


def jax_black_tophat(stack: Any, radius: int = 1) -> Any:
    """The per-plane box closing minus the stack."""
    return jax_closing(stack, radius) - stack


def jax_gaussian(stack: Any, sigma: float = 1.0) -> Any:
    """Per-plane Gaussian as scipy.ndimage computes it (4 sigma, edges ``nearest``), as a
    weighted sum of shifted planes along y, then x; float (input units)."""
    import jax.numpy as jnp

    radius = int(4.0 * float(sigma) + 0.5)
    grid = np.arange(-radius, radius + 1, dtype=np.float64)
    weights = np.exp(-0.5 * (grid / float(sigma)) ** 2)
    weights /= weights.sum()
    x = _jax_work(stack)
    height, width = x.shape[1:]
    pad = jnp.pad(x, ((0, 0), (radius, radius), (0, 0)), mode="edge")
    x = sum(float(w) * pad[:, k:k + height, :] for k, w in enumerate(weights))
    pad = jnp.pad(x, ((0, 0), (0, 0), (radius, radius)), mode="edge")
    return sum(float(w) * pad[:, :, k:k + width] for k, w in enumerate(weights))


@functools.cache
def _jit(func: Callable[..., Any], static: tuple[str, ...] = ()) -> Callable[..., Any]:
    """``jax.jit(func)``, made once: one compilation per shape and dtype (run op by op, each
    of JAX's primitives compiles on its own, seconds on a first call)."""
    import jax

    jitted: Callable[..., Any] = jax.jit(func, static_argnames=static)
    return jitted


def _median_plane(plane: Any, radius: int) -> Any:
    """The (2r+1)^2 box median of one plane: the middle of each window's sorted values."""
    import jax.numpy as jnp

    size = 2 * radius + 1
    height, width = plane.shape
    pad = jnp.pad(plane, radius, mode="edge")
    windows = jnp.stack([pad[i:i + height, j:j + width]
                         for i in range(size) for j in range(size)], axis=-1)
    return jnp.sort(windows, axis=-1)[..., size * size // 2]


def jax_median(stack: Any, radius: int = 1) -> Any:
    """Per-plane median over a (2r+1)^2 box (edges ``nearest``), in the stack's dtype: the
    middle of each window's sorted values (an odd count), one plane at a time."""
    import jax.numpy as jnp

    median = _jit(_median_plane, ("radius",))
    return jnp.stack([median(plane, radius=int(radius)) for plane in stack])


def _sobel(stack: Any) -> Any:
    """Per-plane Sobel magnitude, float32."""
    import jax.numpy as jnp

    height, width = stack.shape[1:]
    pad = jnp.pad(stack.astype(jnp.float32), ((0, 0), (1, 1), (1, 1)), mode="edge")

    def at(dy: int, dx: int) -> Any:
        return pad[:, 1 + dy:1 + dy + height, 1 + dx:1 + dx + width]

    gy = sum(w * (at(1, dx) - at(-1, dx)) for dx, w in ((-1, 1.0), (0, 2.0), (1, 1.0)))
    gx = sum(w * (at(dy, 1) - at(dy, -1)) for dy, w in ((-1, 1.0), (0, 2.0), (1, 1.0)))
    return jnp.hypot(gy, gx)


def jax_sobel(stack: Any) -> Any:
    """Per-plane Sobel magnitude (scipy.ndimage's kernel ``[1, 2, 1]`` x ``[-1, 0, 1]``,
    edges ``nearest``), float32 in the input's units."""
    return _jit(_sobel)(stack)


_MAX_SPAN = 1 << 31
"""The most distinct values a 32-bit histogram counts (its int32 count index)."""


def _count_values(flat: Any, length: int) -> Any:
    """How often each value ``0 .. length - 1`` occurs."""
    import jax.numpy as jnp

    return jnp.bincount(flat, length=length)


def _count_bins(flat: Any, edges: Any) -> Any:
    """How many values fall in each of 256 bins (a value on an edge in the upper bin, the
    last edge in the last bin)."""
    import jax.numpy as jnp

    index = jnp.clip(jnp.searchsorted(edges, flat, side="right") - 1, 0, 255)
    return jnp.bincount(index, length=256)


def _jax_histogram(stack: Any) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """Counts (int64) and bin centres on the host, the counting done in JAX, as
    ``skimage.exposure.histogram(x, 256, source_range="image")`` makes them: one bin per
    value of an integer stack, else 256 equal bins from the minimum to the maximum (NumPy's
    float64 edges cast to the stack's dtype). 8- and 16-bit stacks count every value of
    their dtype (one compilation per dtype), then keep the minimum to the maximum."""
    import jax.numpy as jnp

    flat = stack.reshape(-1)
    if jnp.issubdtype(flat.dtype, jnp.integer):
        info = np.iinfo(flat.dtype)
        if info.bits <= 16:
            counts = _to_host(_jit(_count_values, ("length",))(
                flat.astype(jnp.int32) - int(info.min), length=1 << info.bits))
            low, high = (int(i) for i in np.flatnonzero(counts)[[0, -1]])
            return (counts[low:high + 1].astype(np.int64),
                    np.arange(low + int(info.min), high + int(info.min) + 1))
        # 32-bit values: shifted by the minimum in their own dtype (no wrap), then counted in
        # int32 (without x64, JAX has no wider integer): a span of more than 2**31 values
        # has no int32 count index
        low, high = int(flat.min()), int(flat.max())
        if high - low >= _MAX_SPAN:
            raise InvalidArgumentError(
                f"a histogram of a {flat.dtype} stack counts each value from its minimum to its "
                f"maximum; expected at most {_MAX_SPAN:,} values (JAX counts in int32), "
                f"received {low:,} to {high:,}. Rescale the stack or run the threshold in "
                f"another framework.")
        shifted = (flat - jnp.asarray(low, flat.dtype)).astype(jnp.int32)
        counts = _count_values(shifted, high - low + 1)
        return _to_host(counts).astype(np.int64), np.arange(low, high + 1)
    edges = np.linspace(float(flat.min()), float(flat.max()), 257).astype(flat.dtype)
    counts = _jit(_count_bins)(flat, jnp.asarray(edges))
    return _to_host(counts).astype(np.int64), (edges[:-1] + edges[1:]) / 2


def _jax_above(stack: Any, threshold: Any) -> Any:
    """The pixels above ``threshold`` (an integer stack: above its floor)."""
    import math

    import jax.numpy as jnp

    if jnp.issubdtype(stack.dtype, jnp.integer):
        # compared in the stack's dtype (a Python int is int32 to JAX without x64: a uint32
        # floor above 2**31 overflowed); a floor outside the dtype's range decides alone
        floor, info = math.floor(float(threshold)), np.iinfo(stack.dtype)
        if floor < info.min or floor >= info.max:
            return jnp.full(stack.shape, floor < info.min)
        return stack > jnp.asarray(floor, stack.dtype)
    return stack > jnp.asarray(threshold, stack.dtype)


def jax_otsu_mask(stack: Any) -> Any:
    """Pixels above the stack's Otsu threshold (scikit-image's, from a histogram counted in
    JAX)."""
    return _jax_above(stack, otsu_threshold(*_jax_histogram(stack)))


def jax_triangle_mask(stack: Any) -> Any:
    """Pixels above the stack's triangle threshold (scikit-image's, from a histogram counted
    in JAX)."""
    return _jax_above(stack, triangle_threshold(*_jax_histogram(stack)))


def jax_li_mask(stack: Any) -> Any:
    """Pixels above the stack's Li threshold, as ``skimage.filters.threshold_li`` computes it:
    an integer stack's iteration on its histogram (counted in JAX), a float stack's on its
    pixels in their own dtype (one compiled loop)."""
    import jax.numpy as jnp

    if not jnp.issubdtype(stack.dtype, jnp.integer):
        return _jit(_li_float_mask)(stack)
    counts, centers = _jax_histogram(stack)
    if counts.size == 1:
        return jnp.zeros(stack.shape, bool)
    values = np.arange(counts.size, dtype=np.int64)
    return _jax_above(stack, li_threshold(counts, values) + int(centers[0]))


def _li_float_mask(stack: Any) -> Any:
    """Li's iteration over a float stack's finite values (scikit-image's: from their
    minimum, the two classes' means in the stack's dtype until the threshold moves by at
    most half the smallest step between two values; one value: no pixel above)."""
    import jax.numpy as jnp
    from jax import lax

    flat = stack.reshape(-1)
    valid = jnp.isfinite(flat)  # scikit-image drops NaN, then infinities
    low = jnp.min(jnp.where(valid, flat, jnp.inf))
    values = jnp.where(valid, flat - low, 0)
    steps = jnp.diff(jnp.sort(jnp.where(valid, values, jnp.inf)))
    tolerance = jnp.min(jnp.where(steps > 0, steps, jnp.inf)) / 2

    def moving(state: tuple[Any, Any, Any]) -> Any:
        t_next, t_curr, done = state
        return (abs(t_next - t_curr) > tolerance) & ~done

    def step(state: tuple[Any, Any, Any]) -> tuple[Any, Any, Any]:
        t_curr = state[0]
        foreground = values > t_curr
        mean_fore = values.mean(where=valid & foreground)
        mean_back = values.mean(where=valid & ~foreground)
        t_next = (mean_back - mean_fore) / (jnp.log(mean_back) - jnp.log(mean_fore))
        done = mean_back == 0
        return jnp.where(done, t_curr, t_next), t_curr, done

    start = (values.mean(where=valid), -2 * tolerance, jnp.asarray(False))
    threshold = lax.while_loop(moving, step, start)[0] + low
    return stack > threshold


def _remove_small(labels: Any, min_size: Any) -> Any:
    """Labels of objects under ``min_size`` pixels set to 0, each pixel's object size found
    in the sorted ids (static shapes: no count per possible id)."""
    import jax.numpy as jnp

    ids = labels.reshape(-1)
    ordered = jnp.sort(ids)
    size = jnp.searchsorted(ordered, ids, side="right") - jnp.searchsorted(ordered, ids)
    keep = (size >= min_size) & (ids != 0)
    return jnp.where(keep, ids, jnp.zeros((), ids.dtype)).reshape(labels.shape)


def jax_remove_small_objects(labels: Any, min_size: int = 64) -> Any:
    """The labels with every object of fewer than ``min_size`` pixels set to 0 (ids kept)."""
    return _jit(_remove_small)(labels, int(min_size))



def jax_rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] onto [0, 1], float32 (a constant stack: 0)."""
    x = stack.astype("float32")
    low, high = x.min(), x.max()
    span = float(high - low)
    return (x - low) / span if span > 0 else x - low


def jax_max_projection(stack: Any) -> Any:
    """The maximum over z of a JAX array, as one plane."""
    return stack.max(0, keepdims=True)


def jax_mean_projection(stack: Any) -> Any:
    """The mean over z (float32) of a JAX array, as one plane."""
    return stack.astype("float32").mean(0, keepdims=True)


def jax_sum_projection(stack: Any) -> Any:
    """The sum over z (float32) of a JAX array, as one plane."""
    return stack.astype("float32").sum(0, keepdims=True)
