"""Sample images and arguments for running every catalog entry once (tests/test_catalog*.py)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from memtype.pipeline.catalog import Entry
from memtype.pipeline.catalog.declarations import CUPY, mirrored

__all__ = ["arguments_for", "sample_stack", "ARGUMENTS", "SLOW", "SMALL_ARGUMENTS", "BINARY"]

# A value for each required argument, by parameter name (first), then by entry.
ARGUMENTS: dict[str, Any] = {
    "sigma": 1.0, "low_sigma": 1.0, "kernel": np.ones((1, 3, 3)) / 9, "frequency": 0.2,
    "low": 50, "high": 100, "seed_point": (0, 0, 0), "new_value": 0, "h": 10, "radius": 2,
    "min_distance": 2, "factors": (1, 2, 2), "scale": 0.5, "output_shape": (2, 12, 12),
    "angle": 15.0, "src": (0, 0), "dst": (10, 10), "P": 8, "R": 1.0, "r": 0, "c": 0,
    "width": 4, "height": 4, "weights": np.ones((1, 3, 3)) / 9, "size": 3, "shift": 1.0,
    "percentile": 50, "rank": 1, "zoom": 0.5, "matrix": np.eye(3), "mask": None,
    "num_iter": 2, "snake": np.array([[5.0, 5.0], [5.0, 15.0], [15.0, 15.0]]),
    "corners": np.array([[5, 5], [10, 10]]), "coordinates": np.array([[0, 1], [1, 2], [2, 3]]),
    "footprint": None, "labels": None, "values": None, "position": None, "properties": None,
    "label_img": None, "balance": 0.1,
}


# Entries whose cost grows too fast with the image size for the 24x24 crops.
SLOW = frozenset({"skimage.transform.hough_ellipse"})


@functools.cache
def _coins() -> np.ndarray[Any, Any]:
    """Two 24x24 crops of scikit-image's bundled coins picture (uint8), as a [2, Y, X] stack."""
    from skimage import data

    image = data.coins()
    return np.ascontiguousarray(np.stack([image[40:64, 40:64], image[100:124, 100:124]]))


def sample_stack(entry: Entry) -> Any:
    """A small real stack for ``entry``: labels for label functions, else the coins crops."""
    image = _coins()
    name = mirrored(entry.name)  # a cucim entry is sampled as the scikit-image one it mirrors
    if name in SLOW:  # a tiny edge image: these are cubic in the number of pixels
        image = np.zeros((2, 10, 10), np.uint8)
        image[:, 3:7, 3] = image[:, 3:7, 6] = 1
    if name in BINARY:
        image = image > 100
    if "label" in entry.function and "labeling" not in entry.function:
        from skimage.measure import label

        image = label(image > 100).astype(np.uint32)
    if entry.memory_type == "pyclesperanto":
        import pyclesperanto as cle

        return cle.push(image)
    if entry.memory_type == CUPY:
        import cupy

        return cupy.asarray(image)
    return image.copy()


# Arguments that keep a test small (not required), by entry.
SMALL_ARGUMENTS: dict[str, dict[str, Any]] = {
    "skimage.restoration.rolling_ball": {"radius": 3},
}
# Inputs that must be binary.
BINARY = frozenset({"skimage.measure.perimeter", "skimage.measure.perimeter_crofton"})


def _second_image(name: str, entry: Entry) -> Any:
    """A second image (a step's named input) of the coins crops' shape, as the argument
    ``name`` of ``entry`` takes it: labels, a mask, a small kernel or a reference image."""
    from skimage.measure import label

    image = _coins()
    if name in ("labels", "markers", "label_img"):
        return label(image > 100).astype(np.int32)
    if name == "mask":
        return image > 100
    if name in ("psf", "template"):
        kernel = np.ones((1, 3, 3)) / 9 if name == "psf" else image[:, 4:12, 4:12]
        return kernel[0] if entry.dimensions == "2d" else kernel
    return image


def arguments_for(entry: Entry) -> dict[str, Any]:
    """Values for ``entry``'s required arguments (kernels shaped for how it runs) and for
    its second images (what a step gives as named inputs)."""
    found = {name: ARGUMENTS[name] for name in entry.required if name not in entry.images}
    found.update({name: _second_image(name, entry) for name in entry.images})
    if entry.dimensions == "2d":
        found.update({k: v[0] for k, v in found.items()
                      if k in ("kernel", "weights") and np.ndim(v) == 3})
    if entry.function.endswith("1d") and "weights" in found:
        found["weights"] = np.ones(3) / 3
    found = {**found, **SMALL_ARGUMENTS.get(mirrored(entry.name), {})}
    if entry.memory_type == CUPY:  # cucim takes its kernels and coordinates as CuPy arrays
        import cupy

        found = {k: cupy.asarray(v) if isinstance(v, np.ndarray) else v
                 for k, v in found.items()}
    return found
