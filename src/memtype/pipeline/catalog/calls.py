"""A catalog entry as a memtype function and as a pipeline step.

The function runs the library call on the whole stack (a volume) or on each 2D slice,
and turns what the library returns into what a step gives back: the new stack (image,
labels, mask) or the stack unchanged plus rows of a side output (scalar, coordinates,
table).
"""

from __future__ import annotations

import functools
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from memtype import DtypeConversion, convert, memory_types, stack_slices
from memtype.errors import InvalidArgumentError
from memtype.pipeline.catalog.declarations import HOST
from memtype.pipeline.catalog.entry import Entry, get

__all__ = ["catalog_function", "CALL_OPTIONS"]

Row = dict[str, Any]
# Options of the memtype decorator, passed to the step, never to the library function.
CALL_OPTIONS = frozenset({"dtype_conversion", "scaling", "gpu_id", "oom_fallback",
                          "oom_recovery"})
_AXES = {1: ("x",), 2: ("y", "x"), 3: ("plane", "y", "x")}
_COORDINATE_EXTRAS = {"blob_log": ("sigma",), "blob_dog": ("sigma",), "blob_doh": ("sigma",)}


@functools.cache
def _library_function(module: str, function: str) -> Callable[..., Any]:
    """The library function, imported on first use."""
    func: Callable[..., Any] = getattr(importlib.import_module(module), function)
    return func


def _plain(value: Any) -> Any:
    """A number as a Python number (NumPy scalars, 0-d arrays, other frameworks' scalars)."""
    if isinstance(value, (bool, int, float, str)):
        return value
    return np.asarray(value).item()


def _coordinate_rows(entry: Entry, value: Any, ndim: int) -> list[Row]:
    """Rows of a coordinate list: one per point, a column per axis (then sigma, ...)."""
    points = np.atleast_2d(np.asarray(value, dtype=float)) if np.size(value) else \
        np.zeros((0, ndim))
    names = list(_AXES.get(ndim, tuple(f"axis{i}" for i in range(ndim))))
    names += list(_COORDINATE_EXTRAS.get(entry.function, ()))
    names += [f"c{j}" for j in range(len(names), points.shape[1])]
    return [{n: float(v) for n, v in zip(names, p, strict=False)} for p in points]


def _table_rows(value: Any) -> list[Row]:
    """Rows of a table-like result: regionprops objects, a dict of columns, an array."""
    if isinstance(value, Mapping):
        columns = {str(k): np.asarray(v).ravel() for k, v in value.items()}
        length = max((len(c) for c in columns.values()), default=0)
        return [{k: _plain(c[i]) for k, c in columns.items() if len(c) == length}
                for i in range(length)]
    if isinstance(value, list) and value and hasattr(value[0], "label"):
        return [_region_row(region) for region in value]
    array = np.asarray(value)
    if array.ndim <= 1:
        return [{"index": i, "value": _plain(v)} for i, v in enumerate(array.ravel())]
    flat = array.reshape(array.shape[0], -1)
    return [{"index": i, **{f"c{j}": _plain(v) for j, v in enumerate(row)}}
            for i, row in enumerate(flat)]


def _region_row(region: Any) -> Row:
    """One regionprops region: label, area, centroid, bounding box."""
    names = _AXES.get(len(region.centroid), ())
    row: Row = {"label": int(region.label), "area": float(region.area)}
    row.update({f"centroid_{n}": float(c) for n, c in zip(names, region.centroid, strict=True)})
    half = len(region.bbox) // 2
    row.update({f"bbox_{n}_min": int(region.bbox[i]) for i, n in enumerate(names)})
    row.update({f"bbox_{n}_max": int(region.bbox[half + i]) for i, n in enumerate(names)})
    return row


def _on_host(value: Any) -> Any:
    """A side result with its arrays as NumPy (a CuPy array refuses ``np.asarray``); a
    dict's columns and a tuple's items each, regionprops objects as they are."""
    if isinstance(value, Mapping):
        return {k: _on_host(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return tuple(_on_host(v) for v in value)
    if isinstance(value, np.ndarray) or not hasattr(value, "shape"):
        return value

    return convert(value, HOST)


def _side_rows(entry: Entry, value: Any, ndim: int) -> list[Row]:
    """A side output's rows, by the entry's output kind."""
    if entry.memory_type != HOST:
        value = _on_host(value)
    if entry.output == "scalar":
        return [{"value": _plain(value)}]
    if entry.output == "coordinates":
        return _coordinate_rows(entry, value, ndim)
    return _table_rows(value)


def _first(result: Any) -> Any:
    """An image result given with extras (``scipy.ndimage.label``: labels, count): the image."""
    return result[0] if isinstance(result, tuple) else result


def _as_stack(result: Any, memory_type: str) -> Any:
    """A result as a 3D stack (a 2D one, e.g. a projection, as one plane)."""
    result = _first(result)
    if len(result.shape) == 2:
        return stack_slices([result], memory_type, None)
    return result


def _run(entry: Entry, stack: Any, volume: bool, kwargs: Mapping[str, Any]) -> Any:
    """The library call on the volume or per slice, as a stack or (stack, rows)."""
    func = _library_function(entry.module, entry.function)
    if volume:
        result = func(stack, **kwargs)
        if entry.side_output:
            return stack, _side_rows(entry, result, len(stack.shape))
        return _as_stack(result, entry.memory_type)
    results = [func(stack[i], **kwargs) for i in range(stack.shape[0])]
    if not entry.side_output:
        results = [_first(r) for r in results]
    if entry.side_output:
        rows = [{"slice": i, **row} for i, r in enumerate(results)
                for row in _side_rows(entry, r, len(stack.shape) - 1)]
        return stack, rows

    return stack_slices(results, entry.memory_type, None)


class _CatalogCall:
    """The call a catalog function makes: picklable (dask workers), named after the entry."""

    def __init__(self, name: str, volume: bool, kwargs: Mapping[str, Any]) -> None:
        entry = get(name)
        self.name, self.volume, self.kwargs = name, volume, dict(kwargs)
        self.__name__ = self.__qualname__ = entry.function
        self.__module__ = entry.module
        self.__doc__ = entry.summary

    def __call__(self, stack: Any, **call: Any) -> Any:
        return _run(get(self.name), stack, self.volume, {**self.kwargs, **call})


def catalog_function(entry: Entry, *, volume: bool, **kwargs: Any) -> Any:
    """``entry`` as a memtype function of one stack (``[Z, Y, X]``).

    Parameters
    ----------
    entry : Entry
        The catalog entry.
    volume : bool
        Run on the whole stack at once (``"nd"`` and ``"3d"`` entries) instead of per slice.
    **kwargs
        The library function's keyword arguments.

    Returns
    -------
    MemoryTypeFunction
        Takes and returns ``entry.memory_type``; labels and masks keep the library's dtype,
        images follow memtype's dtype policy (``docs/scikit-image.md``).
    """
    conversion = (DtypeConversion.PRESERVE_INPUT if entry.output == "image"
                  else DtypeConversion.NATIVE_OUTPUT)
    return memory_types(entry.memory_type, entry.memory_type, dtype_conversion=conversion,
                        slice_separable=not volume)(_CatalogCall(entry.name, volume, kwargs))


def _check_arguments(entry: Entry, kwargs: Mapping[str, Any]) -> None:
    """A missing required argument or an unknown one is an error now, not on the first well."""
    missing = [r for r in entry.required if r not in kwargs]
    if missing:
        raise InvalidArgumentError(
            f"catalog: {entry.name} needs {', '.join(map(repr, missing))}; expected "
            f"step({entry.name!r}, {', '.join(f'{m}=...' for m in missing)}); received "
            f"{sorted(kwargs) or 'no arguments'}.")
    unknown = [k for k in kwargs if k not in entry.keywords]
    if unknown and not entry.var_keywords:
        raise InvalidArgumentError(
            f"catalog: {entry.name} takes no argument {', '.join(map(repr, unknown))}; "
            f"expected some of {list(entry.keywords)}.")


def _volume(entry: Entry, volume: bool | None, variable_components: Sequence[str]) -> bool:
    """Whether the step runs on the whole stack: by default when only z varies in it."""
    if entry.dimensions == "3d":
        return True
    if volume and entry.dimensions == "2d":
        raise InvalidArgumentError(f"catalog: {entry.name} works on 2D images only; "
                                   "expected volume=False or None; received volume=True.")
    if volume is None:
        return entry.dimensions == "nd" and set(variable_components) <= {"z"}
    return bool(volume)
