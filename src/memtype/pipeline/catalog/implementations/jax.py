"""The operations' JAX implementations (plain ``jax.numpy`` / ``lax`` code, run eagerly)."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["jax_maximum", "jax_minimum", "jax_opening", "jax_closing",
           "jax_white_tophat", "jax_black_tophat", "jax_gaussian",
           "jax_rescale_intensity", "jax_max_projection", "jax_mean_projection",
           "jax_sum_projection"]


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
