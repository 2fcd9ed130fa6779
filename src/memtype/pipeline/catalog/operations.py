"""Operations: one image operation implemented in several frameworks, as a variant step.

An operation (``"gaussian"``, ``"threshold_otsu"``, ``"label"``, ...) names, for each memory
type, the catalog entry (or plain function) that computes it and how the operation's
parameters map onto that function's arguments. :func:`operation` makes a
:class:`~memtype.pipeline.FunctionStep` over :class:`~memtype.pipeline.Variants`, so the
pipeline's plan runs it where the data already is. The implementations agree within the
tolerance stated per operation and dtype (``TOLERANCES``; checked in
tests/test_catalog_operations.py on scikit-image's bundled images); the known differences
are in ``docs/functions.md``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from memtype.errors import InvalidArgumentError
from memtype.pipeline.catalog.entry import get
from memtype.pipeline.steps import FunctionStep
from memtype.pipeline.variants import Variants

__all__ = ["Operation", "OPERATIONS", "TOLERANCES", "Tolerance", "operation", "operations",
           "variants_of"]

Template = Mapping[str, Any]


@dataclass(frozen=True)
class Implementation:
    """One way to compute an operation: a catalog entry or a plain function here, with a
    template of its keyword arguments (``"$sigma"`` is the operation's ``sigma``)."""

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
        Parameter -> default (``None``: required).
    implementations : mapping of str to Implementation
        Memory type -> implementation, the reference (scikit-image or NumPy) first.
    output : str
        The kind of result: ``image``, ``labels`` or ``mask``.
    """

    name: str
    parameters: Mapping[str, Any]
    implementations: Mapping[str, Implementation]
    output: str = "image"


def _op(name: str, parameters: Mapping[str, Any], output: str = "image",
        **implementations: Implementation) -> Operation:
    """An Operation from keyword implementations."""
    return Operation(name, parameters, implementations, output)


_IMPL = Implementation
_CLE_SIGMA = {"sigma_x": "$sigma", "sigma_y": "$sigma", "sigma_z": 0}
_CLE_RADIUS = {"radius_x": "$radius", "radius_y": "$radius", "radius_z": 0}

OPERATIONS: dict[str, Operation] = {op.name: op for op in (
    _op("gaussian", {"sigma": 1.0},
        numpy=_IMPL("skimage.filters.gaussian", {"sigma": "$sigma"}),
        pyclesperanto=_IMPL("pyclesperanto.gaussian_blur", _CLE_SIGMA, volume=True)),
    _op("maximum", {"radius": 1},
        numpy=_IMPL("memtype.pipeline.catalog.operations:box_maximum", {"radius": "$radius"}),
        pyclesperanto=_IMPL("pyclesperanto.maximum_filter", _CLE_RADIUS, volume=True)),
    _op("minimum", {"radius": 1},
        numpy=_IMPL("memtype.pipeline.catalog.operations:box_minimum", {"radius": "$radius"}),
        pyclesperanto=_IMPL("pyclesperanto.minimum_filter", _CLE_RADIUS, volume=True)),
    _op("white_tophat", {"radius": 1},
        numpy=_IMPL("memtype.pipeline.catalog.operations:box_white_tophat",
                    {"radius": "$radius"}),
        pyclesperanto=_IMPL("pyclesperanto.top_hat", _CLE_RADIUS, volume=True)),
    _op("black_tophat", {"radius": 1},
        numpy=_IMPL("memtype.pipeline.catalog.operations:box_black_tophat",
                    {"radius": "$radius"}),
        pyclesperanto=_IMPL("pyclesperanto.bottom_hat", _CLE_RADIUS, volume=True)),
    _op("median", {"radius": 1},
        numpy=_IMPL("memtype.pipeline.catalog.operations:box_median", {"radius": "$radius"}),
        pyclesperanto=_IMPL("pyclesperanto.median", _CLE_RADIUS, volume=True)),
    _op("threshold_otsu", {}, output="mask",
        numpy=_IMPL("memtype.pipeline.catalog.operations:otsu_mask"),
        pyclesperanto=_IMPL("pyclesperanto.threshold_otsu", volume=True)),
    _op("label", {}, output="labels",
        numpy=_IMPL("skimage.measure.label", volume=True),
        pyclesperanto=_IMPL("pyclesperanto.connected_components_labeling", volume=True)),
    _op("max_projection", {},
        numpy=_IMPL("memtype.pipeline.catalog.operations:max_projection"),
        torch=_IMPL("memtype.pipeline.catalog.operations:tensor_max_projection"),
        pyclesperanto=_IMPL("pyclesperanto.maximum_z_projection", volume=True)),
    _op("mean_projection", {},
        numpy=_IMPL("memtype.pipeline.catalog.operations:mean_projection"),
        torch=_IMPL("memtype.pipeline.catalog.operations:tensor_mean_projection"),
        pyclesperanto=_IMPL("pyclesperanto.mean_z_projection", volume=True)),
    _op("sum_projection", {},
        numpy=_IMPL("memtype.pipeline.catalog.operations:sum_projection"),
        torch=_IMPL("memtype.pipeline.catalog.operations:tensor_sum_projection"),
        pyclesperanto=_IMPL("pyclesperanto.sum_z_projection", volume=True)),
)}




@dataclass(frozen=True)
class Tolerance:
    """How far an implementation may be from the reference (the first implementation).

    ``atol``: the largest absolute difference of a pixel; ``fraction``: the largest share of
    pixels that may differ at all (1.0: any). Labels are compared up to renumbering.
    """

    atol: float = 0.0
    fraction: float = 1.0


# Operation -> dtype -> tolerance (checked on scikit-image's coins and camera images). A
# missing entry means exactly equal.
TOLERANCES: dict[str, dict[str, Tolerance]] = {
    # scikit-image works in float64 on [0, 1] and rounds back; OpenCL in float32.
    "gaussian": {"uint8": Tolerance(atol=1, fraction=0.01),
                 "float32": Tolerance(atol=1e-5)},
    "mean_projection": {"uint8": Tolerance(atol=1), "float32": Tolerance(atol=1e-6)},
    "sum_projection": {"float32": Tolerance(atol=1e-4)},
}


# -- plain implementations (NumPy and torch share the array methods they use) -------------

def _box(stack: Any, radius: int, name: str) -> Any:
    """A per-plane (2r+1)^2 box filter of scipy.ndimage (edges: nearest)."""
    from scipy import ndimage

    size = (1, 2 * radius + 1, 2 * radius + 1)
    return getattr(ndimage, name)(stack, size=size, mode="nearest")


def box_maximum(stack: Any, radius: int = 1) -> Any:
    """Per-plane maximum over a (2r+1)^2 box."""
    return _box(stack, radius, "maximum_filter")


def box_minimum(stack: Any, radius: int = 1) -> Any:
    """Per-plane minimum over a (2r+1)^2 box."""
    return _box(stack, radius, "minimum_filter")


def box_white_tophat(stack: Any, radius: int = 1) -> Any:
    """The stack minus its per-plane box opening (minimum, then maximum)."""
    opened = _box(_box(stack, radius, "minimum_filter"), radius, "maximum_filter")
    return stack - opened


def box_black_tophat(stack: Any, radius: int = 1) -> Any:
    """The per-plane box closing (maximum, then minimum) minus the stack."""
    closed = _box(_box(stack, radius, "maximum_filter"), radius, "minimum_filter")
    return closed - stack


def box_median(stack: Any, radius: int = 1) -> Any:
    """Per-plane median over a (2r+1)^2 box."""
    return _box(stack, radius, "median_filter")


def otsu_mask(stack: Any) -> Any:
    """Pixels above the stack's Otsu threshold (scikit-image's, one per stack)."""
    from skimage.filters import threshold_otsu

    return stack > threshold_otsu(stack)  # type: ignore[no-untyped-call]


def max_projection(stack: Any) -> Any:
    """The maximum over z, as one plane."""
    return stack.max(0, keepdims=True)


def mean_projection(stack: Any) -> Any:
    """The mean over z (float32), as one plane."""
    return stack.mean(0, keepdims=True, dtype="float32")


def sum_projection(stack: Any) -> Any:
    """The sum over z (float32), as one plane."""
    return stack.sum(0, keepdims=True, dtype="float32")


def tensor_max_projection(stack: Any) -> Any:
    """The maximum over z of a tensor, as one plane."""
    return stack.amax(0, keepdim=True)


def tensor_mean_projection(stack: Any) -> Any:
    """The mean over z (float32) of a tensor, as one plane."""
    return stack.float().mean(0, keepdim=True)


def tensor_sum_projection(stack: Any) -> Any:
    """The sum over z (float32) of a tensor, as one plane."""
    return stack.float().sum(0, keepdim=True)


# -- building steps ----------------------------------------------------------------------

class _Implemented:
    """One implementation, taking the operation's parameters at call time (so a step passes
    them as its keyword arguments and a run's record names them); picklable, named."""

    def __init__(self, impl: Implementation, defaults: Mapping[str, Any]) -> None:
        self.impl, self.defaults = impl, dict(defaults)
        self.__name__ = self.__qualname__ = impl.target.split(":")[-1].split(".")[-1]

    def __call__(self, stack: Any, **params: Any) -> Any:
        from memtype.pipeline.catalog.calls import _library_function, _run

        arguments = self.impl.arguments({**self.defaults, **params})
        if ":" not in self.impl.target:
            return _run(get(self.impl.target), stack, self.impl.volume, arguments)
        module, name = self.impl.target.split(":")
        return _library_function(module, name)(stack, **arguments)


def _function(memory_type: str, impl: Implementation, op: Operation) -> Callable[..., Any]:
    """One implementation as a memtype function of ``memory_type``."""
    from memtype import DtypeConversion, memory_types

    conversion = (DtypeConversion.PRESERVE_INPUT if op.output == "image"
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
    return {**op.parameters, **given}


def _operation(name: str) -> Operation:
    """The operation called ``name``."""
    op = OPERATIONS.get(name)
    if op is None:
        raise InvalidArgumentError(f"no operation {name!r}; expected one of "
                                   f"{sorted(OPERATIONS)}.")
    return op


def variants_of(name: str) -> Variants:
    """The operation ``name`` as :class:`~memtype.pipeline.Variants` (one per memory type);
    its parameters are keyword arguments of the call (defaults: ``Operation.parameters``)."""
    op = _operation(name)
    return Variants({mt: _function(mt, impl, op) for mt, impl in op.implementations.items()})


def operation(name: str, /, *, step_name: str | None = None,
              variable_components: tuple[str, ...] = ("z",), materialize: bool = False,
              **params: Any) -> FunctionStep:
    """A step computing the operation ``name`` in whichever framework the plan picks.

    Parameters
    ----------
    name : str
        An operation of :data:`OPERATIONS` (``memtype functions --operations`` lists them).
    step_name, variable_components, materialize
        As ``name``, ``variable_components`` and ``materialize`` of
        :class:`~memtype.pipeline.FunctionStep`.
    **params
        The operation's parameters (``sigma=``, ``radius=``).

    Returns
    -------
    FunctionStep
        Over :class:`~memtype.pipeline.Variants`, one implementation per memory type.

    Raises
    ------
    ValueError
        An unknown operation or parameter.

    Examples
    --------
    >>> from memtype.pipeline import catalog
    >>> blur = catalog.operation("gaussian", sigma=2)
    >>> list(blur.variants)
    ['numpy', 'pyclesperanto']
    """
    _parameters(_operation(name), params)
    return FunctionStep((variants_of(name), params), step_name or name,
                        variable_components=variable_components, materialize=materialize)
