"""Operations: one image operation implemented in several frameworks, as a variant step.

An operation (``"gaussian"``, ``"threshold_otsu"``, ``"label"``, ...) names, for each memory
type, the catalog entry (or plain function) that computes it and how the operation's
parameters map onto that function's arguments.
:func:`~memtype.pipeline.catalog.operation` makes a
:class:`~memtype.pipeline.FunctionStep` over :class:`~memtype.pipeline.Variants`, so the
pipeline's plan runs it where the data already is. The implementations agree within the
tolerance stated per operation and dtype (``TOLERANCES``; checked in
tests/test_catalog_operations.py on scikit-image's bundled images); the known differences
are in ``docs/functions.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from memtype import DtypeConversion, memory_types
from memtype.errors import InvalidArgumentError
from memtype.pipeline.catalog.calls import _library_function, _run
from memtype.pipeline.catalog.declarations import CUPY
from memtype.pipeline.catalog.entry import get
from memtype.pipeline.model.variants import Variants

__all__ = ["Operation", "OPERATIONS", "REQUIRED", "TOLERANCES", "Tolerance", "operations",
           "variants_of"]

Template = Mapping[str, Any]


class _Required:
    """The default of a parameter a step must give."""

    def __repr__(self) -> str:
        return "REQUIRED"


REQUIRED: Any = _Required()
"""The default of an operation parameter without one: a step must give it."""


@dataclass(frozen=True)
class Implementation:
    """One way to compute an operation: a catalog entry or a plain function here, with a
    template of its keyword arguments (``"$sigma"`` is the operation's ``sigma``).

    ``volume``: the function works on the whole stack (a catalog entry runs on the volume;
    a plain function is not separable into slices: a threshold or a count per stack)."""

    target: str
    template: Template = field(default_factory=dict)
    volume: bool = False

    def arguments(self, params: Mapping[str, Any]) -> dict[str, Any]:
        """The function's keyword arguments for these operation parameters."""
        return {k: params[v[1:]] if isinstance(v, str) and v.startswith("$") else v
                for k, v in self.template.items()}


@dataclass(frozen=True)
class Operation:
    """An operation: its parameters (with defaults) and its implementations by memory type.

    Attributes
    ----------
    name : str
        How a step names it (``operation("gaussian", sigma=2)``).
    parameters : mapping of str to object
        Parameter -> default (:data:`REQUIRED`: a step must give it).
    implementations : mapping of str to Implementation
        Memory type -> implementation, the reference (scikit-image or NumPy) first.
    output : str
        The kind of result: ``image``, ``labels``, ``mask`` (the new stack) or ``table``
        (rows beside the stack, which passes on).
    input : str
        What the stack holds: ``image``, ``mask`` or ``labels``.
    keeps_dtype : bool
        An image result returns in the input's dtype (memtype's dtype policy); False: in
        its own (float32 for ``sobel`` and ``rescale_intensity``).
    """

    name: str
    parameters: Mapping[str, Any]
    implementations: Mapping[str, Implementation]
    output: str = "image"
    input: str = "image"
    keeps_dtype: bool = True


def _op(name: str, parameters: Mapping[str, Any], output: str = "image", *,
        input: str = "image", keeps_dtype: bool = True,  # noqa: A002
        **implementations: Implementation) -> Operation:
    """An Operation from keyword implementations."""
    return Operation(name, parameters, implementations, output, input, keeps_dtype)


_IMPL = Implementation
_HERE = "memtype.pipeline.catalog.implementations."
# a plain function's module, by its name's prefix (tensor_sobel: implementations.torch)
_MODULES = {"tensor_": _HERE + "torch:", "jax_": _HERE + "jax:", "cle_": _HERE + "opencl:"}
_CLE_SIGMA = {"sigma_x": "$sigma", "sigma_y": "$sigma", "sigma_z": 0}
_CLE_RADIUS = {"radius_x": "$radius", "radius_y": "$radius", "radius_z": 0}
_CLE_BOX = {**_CLE_RADIUS, "connectivity": "box"}
_RADIUS = {"radius": "$radius"}


def _here(name: str, template: Template | None = None, volume: bool = False) -> Implementation:
    """A plain function of :mod:`~memtype.pipeline.catalog.implementations`."""
    module = _MODULES.get(name.split("_")[0] + "_", _HERE + "host:")
    return Implementation(module + name, template or {}, volume)


def _box_op(name: str, cle: str) -> Operation:
    """A per-plane box filter with a radius: scipy.ndimage, pyclesperanto, torch, JAX."""
    return _op(name, {"radius": 1}, numpy=_here(f"box_{name}", _RADIUS),
               pyclesperanto=_IMPL(f"pyclesperanto.{cle}", _CLE_RADIUS, volume=True),
               torch=_here(f"tensor_{name}", _RADIUS), jax=_here(f"jax_{name}", _RADIUS))


def _threshold_op(method: str) -> Operation:
    """A threshold as a mask: scikit-image's, pyclesperanto's, torch's and JAX's."""
    return _op(f"threshold_{method}", {}, output="mask",
               numpy=_here(f"{method}_mask", volume=True),
               pyclesperanto=_IMPL(f"pyclesperanto.threshold_{method}", volume=True),
               torch=_here(f"tensor_{method}_mask", volume=True),
               jax=_here(f"jax_{method}_mask", volume=True))


def _projection_op(kind: str, cle: str) -> Operation:
    """A projection over z, in each framework that has one."""
    return _op(f"{kind}_projection", {},
               numpy=_here(f"{kind}_projection", volume=True),
               torch=_here(f"tensor_{kind}_projection", volume=True),
               pyclesperanto=_IMPL(f"pyclesperanto.{cle}", volume=True),
               jax=_here(f"jax_{kind}_projection", volume=True))


OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    _op("gaussian", {"sigma": 1.0},
        numpy=_IMPL("skimage.filters.gaussian", {"sigma": "$sigma"}),
        pyclesperanto=_IMPL("pyclesperanto.gaussian_blur", _CLE_SIGMA, volume=True),
        torch=_here("tensor_gaussian", {"sigma": "$sigma"}),
        jax=_here("jax_gaussian", {"sigma": "$sigma"})),
    _box_op("maximum", "maximum_filter"),
    _box_op("minimum", "minimum_filter"),
    _op("opening", {"radius": 1}, numpy=_here("box_opening", _RADIUS),
        pyclesperanto=_IMPL("pyclesperanto.grayscale_opening", _CLE_BOX, volume=True),
        torch=_here("tensor_opening", _RADIUS), jax=_here("jax_opening", _RADIUS)),
    _op("closing", {"radius": 1}, numpy=_here("box_closing", _RADIUS),
        pyclesperanto=_IMPL("pyclesperanto.grayscale_closing", _CLE_BOX, volume=True),
        torch=_here("tensor_closing", _RADIUS), jax=_here("jax_closing", _RADIUS)),
    _box_op("white_tophat", "top_hat"),
    _box_op("black_tophat", "bottom_hat"),
    _op("median", {"radius": 1},
        numpy=_here("box_median", _RADIUS),
        pyclesperanto=_IMPL("pyclesperanto.median", _CLE_RADIUS, volume=True),
        torch=_here("tensor_median", _RADIUS), jax=_here("jax_median", _RADIUS)),
    _op("sobel", {}, keeps_dtype=False,
        numpy=_here("sobel_magnitude"),
        pyclesperanto=_here("cle_sobel"),
        torch=_here("tensor_sobel"), jax=_here("jax_sobel")),
    _threshold_op("otsu"),
    _threshold_op("li"),
    _threshold_op("triangle"),
    _op("label", {}, output="labels", input="mask",
        numpy=_IMPL("skimage.measure.label", volume=True),
        pyclesperanto=_IMPL("pyclesperanto.connected_components_labeling", volume=True)),
    _op("remove_small_objects", {"min_size": 64}, output="labels", input="labels",
        numpy=_here("remove_small_objects", {"min_size": "$min_size"}, volume=True),
        pyclesperanto=_IMPL("pyclesperanto.remove_small_labels",
                            {"minimum_size": "$min_size"}, volume=True),
        torch=_here("tensor_remove_small_objects", {"min_size": "$min_size"}, volume=True),
        jax=_here("jax_remove_small_objects", {"min_size": "$min_size"}, volume=True)),
    _op("rescale_intensity", {}, keeps_dtype=False,
        numpy=_here("rescale_intensity", volume=True),
        pyclesperanto=_here("cle_rescale_intensity", volume=True),
        torch=_here("tensor_rescale_intensity", volume=True),
        jax=_here("jax_rescale_intensity", volume=True)),
    _op("label_statistics", {"intensity": None}, output="table", input="labels",
        numpy=_here("label_statistics", {"intensity": "$intensity"}, volume=True),
        pyclesperanto=_here("cle_label_statistics", {"intensity": "$intensity"}, volume=True)),
    _projection_op("max", "maximum_z_projection"),
    _projection_op("mean", "mean_z_projection"),
    _projection_op("sum", "sum_z_projection"),
)}


# -- on an NVIDIA GPU (memory type cupy): cucim.skimage and cupyx.scipy.ndimage -------------

def _cupy(name: str, template: Template | None = None, volume: bool = False) -> Implementation:
    """A function of :mod:`~memtype.pipeline.catalog.implementations.cupy`."""
    return Implementation(f"{_HERE}cupy:cupy_{name}", template or {}, volume)


# Each operation's CuPy implementation: the cucim.skimage entry mirroring the scikit-image
# reference, or cupyx.scipy.ndimage where the reference is scipy.ndimage; the projections
# are the host's own functions (array methods CuPy has). Declared last: the plan never
# chooses them without a CUDA device (CuPy's adapter says why), and at equal cost the
# declared order keeps the reference first.
_CUPY_IMPLEMENTATIONS: dict[str, Implementation] = {
    "gaussian": _IMPL("cucim.skimage.filters.gaussian", {"sigma": "$sigma"}),
    **{name: _cupy(name, _RADIUS) for name in (
        "maximum", "minimum", "opening", "closing", "white_tophat", "black_tophat", "median")},
    "sobel": _cupy("sobel"),
    **{f"threshold_{m}": _cupy(f"{m}_mask", volume=True) for m in ("otsu", "li", "triangle")},
    "label": _IMPL("cucim.skimage.measure.label", volume=True),
    "remove_small_objects": _cupy("remove_small_objects", {"min_size": "$min_size"},
                                  volume=True),
    "rescale_intensity": _cupy("rescale_intensity", volume=True),
    "label_statistics": _cupy("label_statistics", {"intensity": "$intensity"}, volume=True),
    **{f"{k}_projection": _here(f"{k}_projection", volume=True) for k in ("max", "mean", "sum")},
}
OPERATIONS.update({name: replace(op, implementations={**op.implementations,
                                                      CUPY: _CUPY_IMPLEMENTATIONS[name]})
                   for name, op in OPERATIONS.items() if name in _CUPY_IMPLEMENTATIONS})


@dataclass(frozen=True)
class Tolerance:
    """How far an implementation may be from the reference (the first implementation).

    ``atol``: the largest absolute difference of a pixel; ``fraction``: the largest share of
    pixels that may differ at all (1.0: any). Labels are compared up to renumbering; a
    table's numbers (``label_statistics``) within ``atol``, relative to each value.
    """

    atol: float = 0.0
    fraction: float = 1.0


# Operation -> dtype -> tolerance (checked on scikit-image's coins and camera images). A
# missing entry means exactly equal.
TOLERANCES: dict[str, dict[str, Tolerance]] = {
    # scikit-image works in float64 on [0, 1] and rounds back; OpenCL and torch in float32.
    "gaussian": {"uint8": Tolerance(atol=1, fraction=0.01),
                 "float32": Tolerance(atol=1e-5)},
    # float32 sums in another order; a uint8 image's magnitude reaches ~1440, where one
    # float32 step is 1.2e-4
    "sobel": {"uint8": Tolerance(atol=2e-4), "float32": Tolerance(atol=1e-6)},
    # pyclesperanto's 256-bin histogram of a float image puts the threshold in another bin
    # than scikit-image's: the pixels between the two thresholds differ
    "threshold_triangle": {"float32": Tolerance(atol=1, fraction=0.005)},
    "rescale_intensity": {"uint8": Tolerance(atol=1e-6), "float32": Tolerance(atol=1e-6)},
    # float32 sums (OpenCL) against float64 (scikit-image): mean intensity and centroids
    "label_statistics": {"uint8": Tolerance(atol=1e-5), "float32": Tolerance(atol=1e-5)},
    "mean_projection": {"uint8": Tolerance(atol=1), "float32": Tolerance(atol=1e-6)},
    "sum_projection": {"float32": Tolerance(atol=1e-4)},
}


# -- building steps ----------------------------------------------------------------------

class _Implemented:
    """One implementation, taking the operation's parameters at call time (so a step passes
    them as its keyword arguments and a run's record names them); picklable, named."""

    def __init__(self, impl: Implementation, defaults: Mapping[str, Any]) -> None:
        self.impl, self.defaults = impl, dict(defaults)
        self.__name__ = self.__qualname__ = impl.target.split(":")[-1].split(".")[-1]

    def __call__(self, stack: Any, **params: Any) -> Any:
        arguments = self.impl.arguments({**self.defaults, **params})
        if ":" not in self.impl.target:
            return _run(get(self.impl.target), stack, self.impl.volume, arguments)
        module, name = self.impl.target.split(":")
        return _library_function(module, name)(stack, **arguments)


def _function(memory_type: str, impl: Implementation, op: Operation) -> Callable[..., Any]:
    """One implementation as a memtype function of ``memory_type``."""
    conversion = (DtypeConversion.PRESERVE_INPUT if op.output == "image" and op.keeps_dtype
                  else DtypeConversion.NATIVE_OUTPUT)
    return memory_types(memory_type, memory_type, dtype_conversion=conversion,
                        slice_separable=not impl.volume)(_Implemented(impl, op.parameters))


def operations() -> list[Operation]:
    """Every operation, by name."""
    return [OPERATIONS[name] for name in sorted(OPERATIONS)]


def _parameters(op: Operation, given: Mapping[str, Any]) -> dict[str, Any]:
    """The operation's parameters: defaults, then ``given``; an unknown one is an error."""
    unknown = sorted(set(given) - set(op.parameters))
    if unknown:
        raise InvalidArgumentError(f"operation {op.name!r} takes no parameter "
                                   f"{', '.join(map(repr, unknown))}; expected some of "
                                   f"{sorted(op.parameters) or 'none'}.")
    missing = [k for k, v in op.parameters.items() if v is REQUIRED and k not in given]
    if missing:
        raise InvalidArgumentError(
            f"operation {op.name!r} needs {', '.join(map(repr, missing))}; expected "
            f"operation({op.name!r}, {', '.join(f'{m}=...' for m in missing)}); received "
            f"{sorted(given) or 'no parameters'}.")
    return {**op.parameters, **given}


def _operation(name: str) -> Operation:
    """The operation called ``name``."""
    op = OPERATIONS.get(name)
    if op is None:
        import difflib

        close = difflib.get_close_matches(name, list(OPERATIONS), n=3)
        hint = f" Closest: {', '.join(close)}." if close else ""
        raise InvalidArgumentError(f"no operation {name!r}; expected one of "
                                   f"{sorted(OPERATIONS)}.{hint}")
    return op


def variants_of(name: str) -> Variants:
    """The operation ``name`` as :class:`~memtype.pipeline.Variants` (one per memory type);
    its parameters are keyword arguments of the call (defaults: ``Operation.parameters``)."""
    op = _operation(name)
    return Variants({mt: _function(mt, impl, op) for mt, impl in op.implementations.items()})
