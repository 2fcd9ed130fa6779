"""Per-object intensity in torch: :func:`~memtype.pipeline.analysis.intensity.measure_intensity`
where the data is a torch tensor on a GPU (a tensor on the CPU is measured by the NumPy code,
zero-copy, unless asked: it is faster there).

The same columns, definitions and rows as the NumPy implementation (CellProfiler 4.2's
MeasureObjectIntensity, ``docs/measurements.md``), written with operations a GPU runs well:
sums by ``bincount``, order statistics from two stable sorts (by value, then by object), the
MAD from one more pair of sorts of the deviations, minima, maxima and the brightest pixel by
``scatter_reduce``; no loop per object. Sums run in float64 (on a GPU in another order, so
their last bits may differ from NumPy's); order statistics, minima, maxima and locations are
the same values. The table comes back as NumPy arrays on the host: a table is host data.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from memtype.pipeline.analysis._inputs import check_field, check_labels, object_count, same_shape
from memtype.pipeline.analysis.intensity import (
    INTENSITY_FEATURES,
    LOCATION_FEATURES,
    measure_intensity,
)

__all__ = ["measure_intensity_torch"]

Tensor = Any
"""A ``torch.Tensor`` (torch is an optional extra: not imported to type this module)."""


def _torch() -> Any:
    """torch, imported on first use: an optional extra, which the planner offers this
    implementation only where it is installed (as the catalog's torch implementations)."""
    import torch  # an optional extra: imported when a tensor is measured, never before

    return torch


def _kind(torch: Any, tensor: Tensor) -> str:
    """The NumPy dtype kind of a tensor's dtype (``b``, ``u``, ``i``, ``f``, ``c``)."""
    dtype = tensor.dtype
    if dtype == torch.bool:
        return "b"
    if dtype.is_floating_point:
        return "f"
    if dtype.is_complex:
        return "c"
    return "i" if dtype.is_signed else "u"


def _as_tensor(torch: Any, array: Any, device: Any = None) -> Tensor:
    """``array`` as a tensor (a NumPy array zero-copy on the CPU), on ``device``."""
    tensor = array if isinstance(array, torch.Tensor) else torch.as_tensor(np.asarray(array))
    return tensor if device is None else tensor.to(device)


def _inner_boundary(torch: Any, labels: Tensor) -> Tensor:
    """Object pixels with a 4-neighbour of another number (the image edge is not one)."""
    edge = torch.zeros_like(labels, dtype=torch.bool)
    for axis in (0, 1):
        size = labels.shape[axis]
        differ = labels.narrow(axis, 1, size - 1) != labels.narrow(axis, 0, size - 1)
        edge.narrow(axis, 1, size - 1).logical_or_(differ)
        edge.narrow(axis, 0, size - 1).logical_or_(differ)
    return edge


class _Pixels:
    """The objects' finite pixels: object number, float64 value and flat index."""

    def __init__(self, torch: Any, label: Tensor, value: Tensor, index: Tensor, n: int) -> None:
        self.torch, self.label, self.value, self.index, self.n = torch, label, value, index, n
        self.count = self.total(torch.ones_like(value))

    def subset(self, keep: Tensor) -> _Pixels:
        """The pixels where ``keep``."""
        return _Pixels(self.torch, self.label[keep], self.value[keep], self.index[keep], self.n)

    def total(self, weights: Tensor) -> Tensor:
        """Per object number 0..n: the sum of ``weights`` (``index_add_``: on the CPU 4x
        faster than torch's weighted ``bincount``)."""
        out = self.torch.zeros(self.n + 1, dtype=self.torch.float64, device=weights.device)
        return out.index_add_(0, self.label, weights.double())

    def sums(self) -> tuple[Tensor, Tensor, Tensor]:
        """Integrated (NaN without pixels), mean and population standard deviation."""
        integrated = self.total(self.value)
        mean = integrated / self.count
        deviation = self.value - mean[self.label]
        std = (self.total(deviation * deviation) / self.count).sqrt()
        return integrated.masked_fill(self.count == 0, float("nan")), mean, std

    def extreme(self, values: Tensor, how: str) -> Tensor:
        """Per object number: ``amin`` or ``amax`` of ``values`` (NaN without pixels)."""
        out = self.torch.full((self.n + 1,), float("nan"), dtype=values.dtype,
                              device=values.device)
        return out.scatter_reduce(0, self.label, values, how, include_self=False)

    def sorted_by_object(self, values: Tensor) -> Tensor:
        """``values`` sorted by object, then by value (two stable sorts)."""
        by_value = self.torch.sort(values, stable=True).indices
        by_object = self.torch.sort(self.label[by_value], stable=True).indices
        return values[by_value[by_object]]


def _quantile(torch: Any, ordered: Tensor, starts: Tensor, count: Tensor,
              fraction: float) -> Tensor:
    """CellProfiler's quantile: position start + count * fraction, linear between neighbours."""
    areas = count.long()
    position = starts.double() + count * fraction
    low = position.floor().long()
    weight = position - low.double()
    last = max(ordered.numel() - 1, 0)
    here = ordered[low.clamp(0, last)] if ordered.numel() else position * float("nan")
    after = ordered[(low + 1).clamp(0, last)] if ordered.numel() else here
    inner = low < starts + areas - 1
    out = torch.where(inner, here * (1 - weight) + after * weight, here)
    return out.masked_fill(areas == 0, float("nan"))


def _order_statistics(torch: Any, pixels: _Pixels) -> dict[str, Tensor]:
    """Quartiles, median and MAD per object number."""
    ordered = pixels.sorted_by_object(pixels.value)
    starts = torch.cumsum(pixels.count.long(), 0) - pixels.count.long()
    stats = {name: _quantile(torch, ordered, starts, pixels.count, fraction)
             for name, fraction in (("LowerQuartileIntensity", 0.25), ("MedianIntensity", 0.5),
                                    ("UpperQuartileIntensity", 0.75))}
    median = stats["MedianIntensity"]
    deviations = pixels.sorted_by_object((pixels.value - median[pixels.label]).abs())
    stats["MADIntensity"] = _quantile(torch, deviations, starts, pixels.count, 0.5)
    return stats


def _locations(torch: Any, pixels: _Pixels, maximum: Tensor, width: int) -> dict[str, Tensor]:
    """The intensity-weighted centroid, the mass displacement and the brightest pixel (the
    first in raster order)."""
    y, x = (pixels.index // width).double(), (pixels.index % width).double()
    integrated = pixels.total(pixels.value)
    mass_x = pixels.total(x * pixels.value) / integrated
    mass_y = pixels.total(y * pixels.value) / integrated
    displacement = torch.hypot(pixels.total(x) / pixels.count - mass_x,
                               pixels.total(y) / pixels.count - mass_y)
    brightest = pixels.subset(pixels.value == maximum[pixels.label])
    first = brightest.extreme(brightest.index.double(), "amin")
    return {"MassDisplacement": displacement, "CenterMassIntensity_X": mass_x,
            "CenterMassIntensity_Y": mass_y, "MaxIntensity_X": first % width,
            "MaxIntensity_Y": (first / width).floor()}


def _statistics(torch: Any, pixels: _Pixels, edge: _Pixels, width: int) -> dict[str, Tensor]:
    """Every statistic per object number 0..n."""
    integrated, mean, std = pixels.sums()
    stats = {"IntegratedIntensity": integrated, "MeanIntensity": mean, "StdIntensity": std,
             "MinIntensity": pixels.extreme(pixels.value, "amin"),
             "MaxIntensity": pixels.extreme(pixels.value, "amax")}
    integrated, mean, std = edge.sums()
    stats.update({"IntegratedIntensityEdge": integrated, "MeanIntensityEdge": mean,
                  "StdIntensityEdge": std, "MinIntensityEdge": edge.extreme(edge.value, "amin"),
                  "MaxIntensityEdge": edge.extreme(edge.value, "amax")})
    stats.update(_order_statistics(torch, pixels))
    stats.update(_locations(torch, pixels, stats["MaxIntensity"], width))
    return stats


def measure_intensity_torch(labels: Any, image: Any, *, image_name: str,
                            cpu_in_torch: bool = False) -> dict[str, np.ndarray]:
    """The intensity of one channel in every object, where the labels are (a torch
    tensor's device): the columns of
    :func:`~memtype.pipeline.analysis.intensity.measure_intensity`.

    Parameters
    ----------
    labels : torch.Tensor or array_like of int
        The objects (2D, or ``[1, Y, X]``); 0 is background.
    image : torch.Tensor or array_like
        The channel, same shape; moved to the labels' device.
    image_name : str
        The channel's name, the suffix of every column.
    cpu_in_torch : bool
        Tensors on the CPU are measured by the NumPy implementation, on their own memory
        (zero-copy): torch's CPU sort and ``bincount`` made this one 10 to 23 times slower on
        this project's 2-core box (``docs/measurements.md``). ``True`` measures them in torch.

    Returns
    -------
    dict of str to numpy.ndarray
        As :func:`~memtype.pipeline.analysis.intensity.measure_intensity`: float64 host
        arrays, row ``i`` for object ``i + 1``.
    """
    torch = _torch()
    lab = _as_tensor(torch, labels)
    lab = check_labels(lab, _kind(torch, lab))
    img = _as_tensor(torch, image, lab.device)
    img = check_field(img, _kind(torch, img), name="image")
    same_shape(lab, img, "`labels` and `image`")
    if lab.device.type == "cpu" and not cpu_in_torch:
        host = img.float() if img.dtype == torch.bfloat16 else img  # NumPy has no bfloat16
        return measure_intensity(lab.numpy(), host.numpy(), image_name=image_name)
    return _measure(torch, lab, img, image_name)


def _measure(torch: Any, lab: Tensor, img: Tensor, image_name: str) -> dict[str, np.ndarray]:
    """Every column, computed in torch on the tensors' device."""
    n = object_count(lab)
    lab = lab.long()
    index = lab.flatten().nonzero().flatten()
    pixels = _Pixels(torch, lab.flatten()[index], img.flatten()[index].double(), index, n)
    if img.dtype.is_floating_point:
        pixels = pixels.subset(pixels.value.isfinite())
    edge = pixels.subset(_inner_boundary(torch, lab).flatten()[pixels.index])
    stats = _statistics(torch, pixels, edge, lab.shape[1])
    columns = {f"Intensity_{key}_{image_name}": stats[key][1:] for key in INTENSITY_FEATURES}
    columns.update({f"Location_{key}_{image_name}": stats[key][1:] for key in LOCATION_FEATURES})
    return {key: values.cpu().numpy() for key, values in columns.items()}
