"""The operations' pyclesperanto implementations, where its own functions compute another
definition (a 3D Sobel, percentiles, another table)."""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype import convert
from memtype.pipeline.catalog.declarations import CLE
from memtype.pipeline.catalog.implementations.host import Row, _centroid_names, _rows

__all__ = ["cle_sobel", "cle_rescale_intensity", "cle_label_statistics"]


def cle_sobel(stack: Any) -> Any:
    """Per-plane Sobel magnitude with ``pyclesperanto.sobel`` (float32, input units): a 3D
    stack's ``sobel`` would add the z gradient, so each plane runs as a 2D image."""
    import pyclesperanto as cle

    planes = [cle.sobel(stack[i]) for i in range(stack.shape[0])]
    out = cle.create((len(planes), *stack.shape[1:]), dtype=np.float32)
    for i, plane in enumerate(planes):
        cle.paste(plane, out, 0, 0, i)
    return out


def cle_rescale_intensity(stack: Any) -> Any:
    """The stack's [minimum, maximum] onto [0, 1], float32, with ``pyclesperanto.normalize``
    (its default percentiles are the minimum and maximum)."""
    import pyclesperanto as cle

    return cle.normalize(stack)


def cle_label_statistics(labels: Any, intensity: Any = None) -> tuple[Any, list[Row]]:
    """:func:`label_statistics` with ``pyclesperanto.statistics_of_labelled_pixels``."""
    import warnings

    import pyclesperanto as cle

    given = intensity is not None
    source = convert(intensity, CLE) if given else labels
    with warnings.catch_warnings():  # deprecated for labels_statistics, absent in 0.25.1
        warnings.simplefilter("ignore", DeprecationWarning)
        stats = cle.statistics_of_labelled_pixels(source, labels)
    axes = ("z", "y", "x")[3 - len(labels.shape):]
    names = _centroid_names(len(labels.shape))
    columns: dict[str, Any] = {"label": stats["label"], "area": stats["area"]}
    columns.update({n: stats[f"centroid_{a}"] for n, a in zip(names, axes, strict=True)})
    if given:
        columns.update({f"{s}_intensity": stats[f"{s}_intensity"] for s in ("mean", "min", "max")})
    return labels, _rows(columns)


