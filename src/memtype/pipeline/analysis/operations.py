"""Objects and measurements as operations: named like the catalog's, with named inputs.

``identify_primary``, ``identify_secondary``, ``identify_tertiary`` make object sets (label
images); ``measure_intensity``, ``measure_size_shape``, ``measure_image_quality`` and
``measure_neighbors`` measure them (CellProfiler 4.2's definitions and column names). Each
is a :class:`~memtype.pipeline.Variants` over its implementations, so a pipeline names the
operation and the plan chooses where it runs, as for the catalog's operations; today each has
its NumPy/scipy implementation (:mod:`memtype.pipeline.analysis`'s algorithm modules), and
``measure_intensity`` one in torch (for tensors on a GPU; declared after NumPy's, so the plan
takes it only where the data already is a tensor).

An operation's inputs are named (see :mod:`~memtype.pipeline.analysis.references`): the
first is the step's image, the rest keyword arguments, e.g.
``FunctionStep("identify_secondary", inputs={"primary": "nuclei", "image": "channel:2"},
labels="cells")``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype import DtypeConversion, memory_types
from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis.references import Input
from memtype.pipeline.catalog.declarations import HOST
from memtype.pipeline.model.variants import Variants

__all__ = ["AnalysisOperation", "ANALYSIS_OPERATIONS", "analysis_variants", "resolve_analysis"]

_HERE = "memtype.pipeline.analysis."


@dataclass(frozen=True)
class AnalysisOperation:
    """An operation over named inputs.

    Attributes
    ----------
    name : str
        How a step names it.
    inputs : tuple of str
        Its named inputs, the step's image first (a step's ``inputs=`` gives each one).
    parameters : mapping of str to object
        Parameter -> default.
    output : str
        ``labels`` (an object set: the step needs ``labels=``) or ``measurements`` (columns
        per object of its first input, or values per image when it takes no object set).
    implementations : mapping of str to str
        Memory type -> ``module:function``.
    """

    name: str
    inputs: tuple[str, ...]
    parameters: Mapping[str, Any]
    output: str
    implementations: Mapping[str, str]


def _op(name: str, inputs: tuple[str, ...], output: str, module: str, *,
        also: Mapping[str, str] | None = None, **parameters: Any) -> AnalysisOperation:
    """An operation implemented in NumPy by ``analysis.<module>.<name>``, and in the memory
    types of ``also`` (memory type -> ``<module>:<function>`` of ``analysis``), in order."""
    implementations = {HOST: f"{_HERE}{module}:{name}"}
    implementations.update({key: _HERE + target for key, target in (also or {}).items()})
    return AnalysisOperation(name, inputs, parameters, output, implementations)


ANALYSIS_OPERATIONS: dict[str, AnalysisOperation] = {op.name: op for op in (
    _op("identify_primary", ("image",), "labels", "objects", smoothing_sigma=1.0,
        threshold="otsu", threshold_correction=1.0, declump="intensity", min_diameter=None,
        max_diameter=None, exclude_border=True, fill_holes=True),
    _op("identify_secondary", ("primary", "image"), "labels", "objects",
        method="propagation", threshold="otsu", threshold_correction=1.0,
        regularization=0.05, distance=10),
    _op("identify_tertiary", ("larger", "smaller"), "labels", "objects", shrink_smaller=True),
    _op("measure_intensity", ("labels", "image"), "measurements", "intensity",
        also=dict(torch="intensity_torch:measure_intensity_torch"), image_name=None),
    _op("measure_size_shape", ("labels",), "measurements", "shape"),
    _op("measure_image_quality", ("image",), "measurements", "quality", image_name=None,
        saturation_value=None),
    _op("measure_neighbors", ("labels",), "measurements", "neighbors", distance=5),
)}


class _Call:
    """One implementation, imported on first call; picklable (it holds only names)."""

    def __init__(self, target: str, output: str) -> None:
        self.target, self.output = target, output
        self.__name__ = self.__qualname__ = target.split(":")[-1]

    def __call__(self, first: Any, /, **arguments: Any) -> Any:
        module, name = self.target.split(":")
        func: Callable[..., Any] = getattr(importlib.import_module(module), name)
        result = func(first, **arguments)
        if self.output == "labels":
            labels = np.asarray(result)
            return labels[None] if labels.ndim == 2 else labels
        return result


def analysis_variants(name: str) -> Variants:
    """The operation ``name`` as :class:`~memtype.pipeline.Variants` (one per memory type)."""
    op = ANALYSIS_OPERATIONS[name]
    return Variants({
        memory_type: memory_types(memory_type, memory_type, "any",
                                  dtype_conversion=DtypeConversion.NATIVE_OUTPUT)(
            _Call(target, op.output))
        for memory_type, target in op.implementations.items()})


def _image_name(op: AnalysisOperation, given: dict[str, Any],
                inputs: Sequence[Input]) -> None:
    """Name the measured image after its reference (``channel:DAPI`` -> ``DAPI``) where
    the step names none."""
    if "image_name" in op.parameters and given.get("image_name") is None:
        image = next((i for i in inputs if i.parameter == "image"), None)
        if image is not None:
            given["image_name"] = image.channel or image.reference


def resolve_analysis(name: str, given: Mapping[str, Any], inputs: Sequence[Input]
                     ) -> tuple[Variants, dict[str, Any], tuple[Input, ...]]:
    """An analysis operation's variants, its arguments and its inputs in its own order
    (the step's image first), checked.

    Raises
    ------
    InvalidArgumentError
        An unknown parameter, or inputs that are not exactly the operation's.
    """
    op = ANALYSIS_OPERATIONS[name]
    where = f"operation {name!r}"
    unknown = sorted(set(given) - set(op.parameters))
    if unknown:
        raise InvalidArgumentError(f"{where} takes no parameter {', '.join(map(repr, unknown))}; "
                                   f"expected some of {sorted(op.parameters) or 'none'}.")
    named = {i.parameter: i for i in inputs}
    if set(named) != set(op.inputs):
        example = ", ".join(f"{p!r}: ..." for p in op.inputs)
        raise InvalidArgumentError(
            f"{where} takes the inputs {list(op.inputs)}; expected inputs={{{example}}}; "
            f"received {sorted(named) or 'none'}.")
    arguments = {**op.parameters, **given}
    _image_name(op, arguments, inputs)
    return analysis_variants(name), arguments, tuple(named[p] for p in op.inputs)
