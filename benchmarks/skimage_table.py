"""scikit-image as the reference client: what ``mt.numpy`` returns under the default dtype policy.

Wraps 40 common scikit-image functions with ``mt.numpy(contract=2)`` and calls them on 32x32
uint8, uint16, bool and float32 images given as NumPy, torch and JAX arrays, next to the
direct scikit-image call on the NumPy image. Each cell of the table says what the default
(``PRESERVE_INPUT``) gave: the same array, a documented conversion, the native result kept
with a ``DtypePolicyWarning``, or a refusal. ``--cost`` also times the policy's check of the
result against the cast it decides (alternating rounds, medians).

Run: ``python benchmarks/skimage_table.py [--cost]`` (writes docs/scikit-image.md).
``tests/test_skimage_client.py`` takes its cases from here.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch  # noqa: F401  (import order: torch before the others)
from skimage import (
    exposure,
    feature,
    filters,
    measure,
    morphology,
    restoration,
    segmentation,
    transform,
)

import memtype as mt
from memtype.dtypes import DtypePolicyWarning, cast, output_dtype
from memtype.frameworks import load_adapter

DOC = Path(__file__).resolve().parents[1] / "docs" / "scikit-image.md"
DTYPES = ("uint8", "uint16", "bool", "float32")
FRAMEWORKS = ("numpy", "torch", "jax")
TABLE_START, TABLE_END = "<!-- table: start -->", "<!-- table: end -->"
_FP = morphology.disk(1)


@dataclass(frozen=True)
class Case:
    """One scikit-image function, called on a 2D image."""

    name: str
    func: Callable[[np.ndarray], Any]


def _c(name: str, func: Callable[[np.ndarray], Any]) -> Case:
    return Case(name, func)


CASES: tuple[Case, ...] = (
    _c("filters.gaussian", lambda x: filters.gaussian(x, sigma=1)),
    _c("filters.sobel", filters.sobel),
    _c("filters.scharr", filters.scharr),
    _c("filters.prewitt", filters.prewitt),
    _c("filters.roberts", filters.roberts),
    _c("filters.laplace", filters.laplace),
    _c("filters.median", lambda x: filters.median(x, _FP)),
    _c("filters.unsharp_mask", filters.unsharp_mask),
    _c("filters.difference_of_gaussians", lambda x: filters.difference_of_gaussians(x, 1, 2)),
    _c("filters.meijering", filters.meijering),
    _c("filters.sato", filters.sato),
    _c("filters.frangi", filters.frangi),
    _c("filters.threshold_local", lambda x: filters.threshold_local(x, 7)),
    _c("filters.rank.mean", lambda x: filters.rank.mean(x, _FP)),
    _c("morphology.erosion", lambda x: morphology.erosion(x, _FP)),
    _c("morphology.dilation", lambda x: morphology.dilation(x, _FP)),
    _c("morphology.opening", lambda x: morphology.opening(x, _FP)),
    _c("morphology.white_tophat", lambda x: morphology.white_tophat(x, _FP)),
    _c("morphology.area_opening", lambda x: morphology.area_opening(x, 8)),
    _c("morphology.skeletonize", morphology.skeletonize),
    _c("morphology.remove_small_objects", lambda x: morphology.remove_small_objects(x, 8)),
    _c("measure.label", measure.label),
    _c("measure.block_reduce", lambda x: measure.block_reduce(x, (2, 2))),
    _c("segmentation.slic", lambda x: segmentation.slic(x, n_segments=8, channel_axis=None)),
    _c("segmentation.felzenszwalb", segmentation.felzenszwalb),
    _c("segmentation.watershed", segmentation.watershed),
    _c("segmentation.find_boundaries", segmentation.find_boundaries),
    _c("segmentation.clear_border", segmentation.clear_border),
    _c("segmentation.chan_vese", lambda x: segmentation.chan_vese(x, max_num_iter=5)),
    _c("exposure.equalize_hist", exposure.equalize_hist),
    _c("exposure.equalize_adapthist", exposure.equalize_adapthist),
    _c("exposure.rescale_intensity", exposure.rescale_intensity),
    _c("exposure.adjust_gamma", lambda x: exposure.adjust_gamma(x, 2)),
    _c("transform.resize", lambda x: transform.resize(x, (16, 16))),
    _c("transform.rotate", lambda x: transform.rotate(x, 30)),
    _c("transform.downscale_local_mean", lambda x: transform.downscale_local_mean(x, (2, 2))),
    _c("transform.integral_image", transform.integral_image),
    _c("restoration.denoise_tv_chambolle", restoration.denoise_tv_chambolle),
    _c("restoration.denoise_bilateral", restoration.denoise_bilateral),
    _c("restoration.denoise_nl_means", restoration.denoise_nl_means),
    _c("restoration.rolling_ball", lambda x: restoration.rolling_ball(x, radius=5)),
    _c("feature.canny", feature.canny),
    _c("feature.corner_harris", feature.corner_harris),
    _c("feature.hessian_matrix_det", feature.hessian_matrix_det),
    _c("feature.local_binary_pattern", lambda x: feature.local_binary_pattern(x, 8, 1)),
)
CASE_BY_NAME = {case.name: case for case in CASES}


@functools.cache
def image(dtype: str) -> np.ndarray:
    """The 32x32 test image in ``dtype`` (noise plus two bright squares), read-only."""
    base = np.random.default_rng(0).random((32, 32))
    base[8:16, 8:16] += 1.0
    base[20:28, 4:12] += 1.5
    base /= base.max()
    out = base > 0.6 if dtype == "bool" else (
        base.astype(dtype) if dtype == "float32" else (base * np.iinfo(dtype).max).astype(dtype))
    out.flags.writeable = False
    return out


def as_framework(x: np.ndarray, framework: str) -> Any:
    """A private copy of ``x`` as a NumPy, torch or JAX array."""
    return mt.convert(x.copy(), framework)


@functools.cache
def direct(name: str, dtype: str) -> np.ndarray | BaseException:
    """scikit-image's own result on a writable copy of the image (or the error it raised)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # scikit-image's own precision/deprecation notes
        try:
            return np.asarray(CASE_BY_NAME[name].func(image(dtype).copy()))
        except (TypeError, ValueError, ImportError) as exc:  # its refusal, kept as the answer
            return exc


def documented(result: np.ndarray, dtype: str) -> tuple[np.ndarray, str]:
    """The default policy written out in NumPy: what ``mt.numpy`` must return, and the rule."""
    din, src = np.dtype(dtype), result.dtype
    if src == din:
        return result, "same"
    if src.kind == "b":
        return result.astype(din), "exact"
    if din.kind == "b":
        return result, "native"
    if din.kind == "f":
        return result.astype(din), "exact" if src.kind in "iu" else "rounded"
    info = np.iinfo(din)
    low, high = float(np.min(result)), float(np.max(result))
    if src.kind in "iu":
        fits = info.min <= low and high <= info.max
        return (result.astype(din), "exact") if fits else (result, "native")
    if np.isnan(low) or np.isnan(high):
        return result, "native"
    if (low >= 0 if info.min == 0 else low >= -1) and high <= 1:
        return np.clip(np.rint(result * info.max), 0, info.max).astype(din), "unit"
    if max(-low, high) < 2 or low < info.min - 0.5 or high >= info.max + 0.5:
        return result, "native"
    return np.clip(np.rint(result), info.min, info.max).astype(din), "rounded"


@dataclass
class Outcome:
    """What one wrapped call gave."""

    value: Any = None
    error: BaseException | None = None
    policy_warnings: tuple[str, ...] = ()


def wrapped(name: str, dtype: str, framework: str, copy_inputs: bool = False,
            **options: Any) -> Outcome:
    """``mt.numpy(contract=2)(func)`` called on the image given as ``framework``."""
    f = mt.numpy(contract=2, copy_inputs=copy_inputs)(CASE_BY_NAME[name].func)
    x = as_framework(image(dtype), framework)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            value = f(x, **options)
        except (TypeError, ValueError, ImportError) as exc:
            return Outcome(error=exc)
    ours = tuple(str(w.message) for w in caught if issubclass(w.category, DtypePolicyWarning))
    return Outcome(value, None, ours)


def needs_writable(error: BaseException | None) -> bool:
    """scikit-image's Cython code refused the read-only view the decorator passed."""
    return isinstance(error, ValueError) and "read-only" in str(error)


def names_copy_inputs(error: BaseException | None) -> bool:
    """The error carries memtype's note naming the way out (``copy_inputs=True``)."""
    return any("copy_inputs=True" in note for note in getattr(error, "__notes__", ()))


def cell(name: str, dtype: str) -> str:
    """One table cell, checked for every input framework ('MISMATCH' if one differs).

    Immutable input (JAX) reaches the function as a read-only view; a function that writes
    its input then fails with memtype's note naming ``copy_inputs=True``, and with that
    option must give the same result (marked with a footnote)."""
    ref = direct(name, dtype)
    texts, footnote = set(), ""
    for fw in FRAMEWORKS:
        got = wrapped(name, dtype, fw)
        if needs_writable(got.error) and load_adapter(fw).immutable:
            if not names_copy_inputs(got.error):
                return "MISMATCH (the error names no way out)"
            got, footnote = wrapped(name, dtype, fw, copy_inputs=True), " ¹"
        texts.add(_cell_for(ref, got, dtype))
    if len(texts) != 1:
        return "MISMATCH: " + " / ".join(sorted(texts))
    return texts.pop() + footnote


def _cell_for(ref: np.ndarray | BaseException, got: Outcome, dtype: str) -> str:
    if isinstance(ref, BaseException):
        same = got.error is not None and type(got.error) is type(ref)
        return f"refused by scikit-image ({type(ref).__name__})" if same else "MISMATCH"
    expected, rule = documented(ref, dtype)
    if got.error is not None or not _equal(got.value, expected):
        return "MISMATCH"
    if bool(got.policy_warnings) != (rule == "native"):
        return "MISMATCH (warning)"
    if rule == "unit":
        return f"{ref.dtype} [0, 1] → {dtype}, ×{np.iinfo(dtype).max}"
    return {"same": "same", "exact": f"{ref.dtype} → {dtype}, exact",
            "rounded": f"{ref.dtype} → {dtype}, rounded",
            "native": f"kept {ref.dtype} + warning"}[rule]


def _equal(a: Any, b: np.ndarray) -> bool:
    return isinstance(a, np.ndarray) and a.dtype == b.dtype and bool(
        np.array_equal(a, b, equal_nan=True))


def table() -> str:
    """The Markdown table: function x input dtype."""
    lines = ["| function | " + " | ".join(DTYPES) + " |", "|---" * (len(DTYPES) + 1) + "|"]
    for case in CASES:
        lines.append(f"| `{case.name}` | " + " | ".join(cell(case.name, d) for d in DTYPES) + " |")
    return "\n".join(lines)


# -- cost of the check --------------------------------------------------------------------


def cost(rounds: int = 7) -> str:
    """The decision's min/max check against the cast it decides, 2048x2048 float64 results."""
    rng = np.random.default_rng(1)
    results = {"float64 in [0, 1] → uint8 (unit)": rng.random((2048, 2048)),
               "float64 in [0, 255] → uint8 (rounded)": rng.random((2048, 2048)) * 255}
    pres, u8 = mt.DtypeConversion.PRESERVE_INPUT, np.dtype("uint8")
    rows = ["| result | check (output_dtype) | cast | check / cast |", "|---|---|---|---|"]
    for label, r in results.items():
        scaling = output_dtype(r, pres, u8).scaling
        check = lambda r=r: output_dtype(r, pres, u8)  # noqa: E731
        do_cast = lambda r=r, s=scaling: cast(r, u8, scaling=s)  # noqa: E731
        times: dict[str, list[float]] = {"check": [], "cast": []}
        for _ in range(rounds):
            for key, fn in (("check", check), ("cast", do_cast)):
                t = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - t)
        a, b = (statistics.median(times[k]) * 1e3 for k in ("check", "cast"))
        rows.append(f"| {label} | {a:.2f} ms | {b:.2f} ms | {a / b:.2f} |")
    return "\n".join(rows)


HEADER = """# scikit-image under memtype

scikit-image is the image library most users will wrap first. This page is generated by
`benchmarks/skimage_table.py`: each of 45 common functions is wrapped with
`mt.numpy(contract=2)` and called with the **default** options on a 32x32 image given as a
NumPy, a torch and a JAX array (the cell is the same for all three, else it would read
MISMATCH), next to scikit-image called directly on the NumPy image. The rule is in
[the dtype policy](decorators.md#the-dtype-policy).

- **same**: scikit-image returns the input dtype; memtype returns its array unchanged.
- **`float64 [0, 1] → uint8, ×255`**: scikit-image's `img_as_float` scale, scaled back
  (`np.rint(x * 255)`, as `img_as_ubyte`).
- **`… → uint8, rounded` / `exact`**: the result on the input's own scale, rounded half to
  even / held exactly.
- **kept `…` + warning**: the input dtype cannot hold it: the native result, with a
  `DtypePolicyWarning` naming `dtype_conversion=NATIVE_OUTPUT` (or a dtype and a `scaling`).
- **refused by scikit-image**: scikit-image raises on this dtype; so does the wrapped call.
- **¹**: the function writes to its input (Cython code needing a writable buffer). NumPy and
  torch input reaches it as the caller's own writable array; JAX input is immutable, so it
  arrives as a read-only view and the call fails with scikit-image's `ValueError`, to which
  memtype adds a note naming `copy_inputs=True`; with that option the result is as shown.

"""



def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cost", action="store_true", help="time the check against the cast")
    args = parser.parse_args()
    body = table()
    stamp = f"{datetime.date.today()}, {platform.machine()}, Python {sys.version.split()[0]}"
    text = HEADER + f"{TABLE_START}\n{body}\n{TABLE_END}\n"
    if args.cost:
        text += ("\n## Cost of the check\n\n`output_dtype` takes the result's minimum and\n"
                 "maximum where the dtypes alone do not decide; timed against the cast it\n"
                 f"decides, alternating rounds, medians ({stamp}):\n\n{cost()}\n")
    DOC.write_text(text + f"\nGenerated {stamp}, scikit-image "
                   f"{sys.modules['skimage'].__version__}.\n")
    print(body)


if __name__ == "__main__":
    main()
