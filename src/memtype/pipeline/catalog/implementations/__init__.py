"""Thin implementations of the operations, each computing the operation's one definition.

An operation (:mod:`~memtype.pipeline.catalog.operations`) runs a catalog entry where the
library already computes its definition (``skimage.filters.gaussian``,
``pyclesperanto.gaussian_blur``), and one of these functions where it does not: a box filter
of scipy.ndimage per plane, a threshold as a mask, the Sobel magnitude in the input's units,
per-label statistics as rows with one set of columns, and the plain torch and JAX versions.
One module per framework (``host``: NumPy, scipy.ndimage, scikit-image; ``opencl``:
pyclesperanto; ``torch``; ``jax``; ``cupy``), named in the operations' targets by the
function's prefix (``tensor_``, ``jax_``, ``cle_``, ``cupy_``), and ``histogram``: a
threshold chosen from the counts that torch and JAX make where the stack is. Each function
imports its library when it runs; none is imported by listing the catalog.

Definitions (the tolerances are in ``TOLERANCES``; the differences in ``docs/functions.md``):

- box filters: over a ``(2r+1) x (2r+1)`` square in each plane, edges ``nearest``;
- ``sobel``: ``hypot(sobel_y, sobel_x)`` per plane with scipy.ndimage's unnormalised kernel
  (``[1, 2, 1]`` x ``[-1, 0, 1]``), edges ``nearest``, float32 in the input's units;
- thresholds: the pixels above the stack's threshold (one per stack);
- ``rescale_intensity``: the stack's minimum -> 0, its maximum -> 1, float32;
- ``remove_small_objects``: labels of fewer than ``min_size`` pixels (in the whole stack)
  become 0;
- ``label_statistics``: one row per label of the stack: ``label``, ``area``, ``centroid_*``
  and, given ``intensity=``, ``mean_intensity``, ``min_intensity``, ``max_intensity``.
"""

from __future__ import annotations

__all__: list[str] = []
