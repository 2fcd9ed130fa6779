"""A step named by a string: an operation (``"gaussian"``) or a catalog entry
(``"skimage.filters.gaussian"``), resolved when the step is made.

``FunctionStep("gaussian", sigma=2)``, ``FunctionStep(("skimage.filters.gaussian",
{"sigma": 2}))`` and the plain strings or ``(name, kwargs)`` pairs in a
:class:`~memtype.pipeline.Pipeline`'s step list all come here: an operation name gives the
operation's variant step, an entry name the entry's step (run per slice or as a volume as
:func:`~memtype.pipeline.catalog.step` decides). An unknown name, a missing required argument
or an argument the function does not take is an error now, not on the first well.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.pipeline.catalog.calls import CALL_OPTIONS, _check_arguments, _volume, catalog_function
from memtype.pipeline.catalog.entry import _by_name, entries, excluded, get
from memtype.pipeline.catalog.operations import OPERATIONS, _parameters, variants_of

__all__ = ["resolve"]


def _split(spec: str | tuple[str, Any]) -> tuple[str, dict[str, Any]]:
    """The name and its own keyword arguments."""
    if isinstance(spec, str):
        return spec, {}
    name, kwargs = spec
    if not isinstance(kwargs, Mapping):
        raise ArgumentTypeError(f"FunctionStep: a named step is (name, kwargs) with kwargs a "
                                f"dict; received ({name!r}, {type(kwargs).__name__}).")
    return name, dict(kwargs)


def _unknown(name: str) -> InvalidArgumentError:
    """The error for a name that is neither an operation nor an entry, with close matches."""
    import difflib

    names = [*OPERATIONS, *(e.name for e in entries())]
    close = difflib.get_close_matches(name, names, n=3, cutoff=0.6)
    short = [e.name for e in entries() if e.function == name.rsplit(".", 1)[-1]]
    hint = list(dict.fromkeys([*close, *short]))[:5]
    return InvalidArgumentError(
        f"FunctionStep: {name!r} is neither an operation nor a catalog function; expected an "
        f"operation such as 'gaussian' (memtype functions --operations) or a function such "
        f"as 'skimage.filters.gaussian' (memtype functions)."
        + (f" Closest: {', '.join(hint)}." if hint else ""))


def resolve(spec: str | tuple[str, Any], kwargs: Mapping[str, Any],
            variable_components: Sequence[str]) -> tuple[Any, str, dict[str, Any]]:
    """A named step's ``(function, kwargs)`` pair, default name and the step's own options.

    ``kwargs`` are the step's keyword arguments: the memtype call options
    (``dtype_conversion=``...) stay the step's, ``volume=`` chooses how an entry runs, the
    rest are the operation's parameters or the function's arguments (with the pair's own).

    Raises
    ------
    ValueError
        An unknown name (the message names the closest ones), an unknown parameter or
        argument, a missing required argument, ``volume=True`` on a 2D-only function.
    TypeError
        A pair whose second element is not a dict.
    """
    name, own = _split(spec)
    options = {k: v for k, v in kwargs.items() if k in CALL_OPTIONS}
    given = {**{k: v for k, v in kwargs.items() if k not in CALL_OPTIONS}, **own}
    volume = given.pop("volume", None)
    if name in OPERATIONS:
        if volume is not None:
            raise InvalidArgumentError(f"FunctionStep: operation {name!r} takes no volume=; "
                                       "each implementation runs as the operation defines.")
        _parameters(OPERATIONS[name], given)
        return (variants_of(name), given), name, options
    entry = _by_name().get(name)
    if entry is None:
        if any(x.name == name for x in excluded()):
            get(name)  # raises: left out of the catalog, and why
        raise _unknown(name)
    _check_arguments(entry, given)
    func = catalog_function(entry, volume=_volume(entry, volume, variable_components))
    return (func, given), entry.function, options
