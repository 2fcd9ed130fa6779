"""What a step's name means: a plate-wide pass, an analysis operation or a catalog function.

:mod:`memtype.pipeline.model.steps` loads this module on first use, for a step made from a
name (``FunctionStep("gaussian")``): it imports the catalog and the analysis operations,
which a pipeline of decorated functions never needs (``import memtype.pipeline`` stays
without them).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence
from typing import Any

from memtype.errors import InvalidArgumentError
from memtype.pipeline.analysis.operations import ANALYSIS_OPERATIONS, resolve_analysis
from memtype.pipeline.analysis.passes import PASSES, pass_function
from memtype.pipeline.analysis.references import Input
from memtype.pipeline.catalog.calls import CALL_OPTIONS
from memtype.pipeline.catalog.entry import _by_name
from memtype.pipeline.catalog.naming import _split, resolve
from memtype.pipeline.catalog.operations import OPERATIONS

__all__ = ["split_name", "plate_pass", "resolve_named", "resolve_call"]

Spec = str | tuple[str, Mapping[str, Any]]
"""A name, alone or with its keyword arguments (``steps.NamedSpec``)."""


def split_name(spec: Spec) -> tuple[str, dict[str, Any]]:
    """The name of ``spec`` and the keyword arguments given with it."""
    own, extra = _split(spec)
    return own, dict(extra)


def plate_pass(name: str) -> str | None:
    """``name`` if it names a plate-wide pass, else None."""
    return name if name in PASSES else None


def resolve_call(spec: Spec, variable_components: Sequence[str]) -> tuple[Any, dict[str, Any]]:
    """A catalog name in a chain or route as ``(function, kwargs)``, its options put in."""
    (func, given), _, options = resolve(spec, {}, variable_components)
    return func, {**options, **given}


def resolve_named(spec: Spec, kwargs: Mapping[str, Any], inputs: tuple[Input, ...],
                  variable_components: Sequence[str]
                  ) -> tuple[Any, str, dict[str, Any], tuple[Input, ...]]:
    """A named step's ``(function, kwargs)``, default name, own options and inputs: a plate
    pass's, an analysis operation's (objects, measurements), or the catalog's (an operation
    or entry whose second image, if any, is a named input).

    Raises
    ------
    InvalidArgumentError
        A plate pass given inputs; a name close to an analysis operation (a ``ValueError``).
    """
    name, own = _split(spec)
    if plate_pass(name) is not None:
        if inputs:
            raise InvalidArgumentError(f"FunctionStep: {name!r} is a plate-wide pass over "
                                       "every channel; it takes no inputs=.")
        func, params = pass_function(name, {**kwargs, **own})
        return (func, params), name, {}, ()
    if name in ANALYSIS_OPERATIONS:
        options = {k: v for k, v in kwargs.items() if k in CALL_OPTIONS}
        given = {**{k: v for k, v in kwargs.items() if k not in CALL_OPTIONS}, **own}
        func, arguments, ordered = resolve_analysis(name, given, inputs)
        return (func, arguments), name, options, ordered
    _close_to_analysis(name)
    placeholders = {i.parameter: None for i in inputs[1:]}  # the run gives the values
    func, named, options = resolve(spec, {**kwargs, **placeholders}, variable_components)
    return func, named, options, inputs


def _close_to_analysis(name: str) -> None:
    """Refuse a name that is no catalog name but close to an analysis operation or plate
    pass (``identify_primry``), naming it; any other unknown name is the catalog's to say."""
    if name in OPERATIONS or name in _by_name():
        return
    close = difflib.get_close_matches(name, [*ANALYSIS_OPERATIONS, *PASSES], n=2, cutoff=0.8)
    if close:
        raise InvalidArgumentError(
            f"FunctionStep: {name!r} is no operation or catalog function; expected an "
            f"analysis operation such as {close[0]!r} (docs/analysis.md). Closest: "
            f"{', '.join(close)}.")
