"""Named values of a run: how a step names what it takes (one spelling, checked when declared).

Inside one field (a well's site) a run holds named values: the channels of the field as the
earlier steps left them, each named step's result, and the object sets (label images with a
name). A step declares what it takes with ``inputs={parameter: reference}``:

``"channel:DAPI"`` / ``"channel:1"``
    The field's channel by its name in the plate's metadata, or by the value of the
    pattern's channel field (``1`` for ImageXpress ``w1``), as the earlier chain steps left
    it (illumination-corrected, projected...).
``"nuclei"``
    An object set (a step's ``labels=``) or an earlier step's result, by name.

The first input is the step's image (given positionally); the others are keyword arguments
of its function. A reference to nothing made earlier is an error when the pipeline is built.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from memtype.errors import ArgumentTypeError, InvalidArgumentError

__all__ = ["CHANNEL_PREFIX", "Input", "parse_inputs"]

CHANNEL_PREFIX = "channel:"
"""How a reference names a channel of the field."""


@dataclass(frozen=True)
class Input:
    """A named input of a step: what ``parameter`` receives when the step runs."""

    parameter: str
    reference: str

    @property
    def channel(self) -> str | None:
        """The channel named (its name or field value), or None for a step's result."""
        if self.reference.startswith(CHANNEL_PREFIX):
            return self.reference[len(CHANNEL_PREFIX):]
        return None

    def __repr__(self) -> str:  # stable across runs: part of the resume record
        return f"Input({self.parameter!r}, {self.reference!r})"


def _check_reference(parameter: str, reference: object, where: str) -> str:
    """One reference, checked: a non-empty text, a channel with a name after the colon."""
    if not isinstance(reference, str) or not reference.strip():
        raise ArgumentTypeError(
            f"{where}: inputs[{parameter!r}] must be a reference such as 'channel:DAPI', "
            f"'channel:1' or an object set's name like 'nuclei'; received {reference!r}.")
    if reference.startswith(CHANNEL_PREFIX) and not reference[len(CHANNEL_PREFIX):].strip():
        raise InvalidArgumentError(
            f"{where}: inputs[{parameter!r}] = {reference!r} names no channel; expected "
            "'channel:<name or value>', e.g. 'channel:DAPI' or 'channel:1'.")
    return reference


def parse_inputs(inputs: Mapping[str, Any] | None, where: str) -> tuple[Input, ...]:
    """A step's ``inputs=`` as :class:`Input` s, in order (the first is the step's image).

    Raises
    ------
    ArgumentTypeError
        ``inputs`` is not a mapping of parameter names to references.
    InvalidArgumentError
        An empty mapping, a parameter that is not an identifier, a channel reference without
        a channel.
    """
    if inputs is None:
        return ()
    if not isinstance(inputs, Mapping):
        raise ArgumentTypeError(
            f"{where}: inputs must map parameter names to references, e.g. "
            f"{{'image': 'channel:DAPI', 'markers': 'nuclei'}}; received "
            f"{type(inputs).__name__}.")
    if not inputs:
        raise InvalidArgumentError(f"{where}: inputs is empty; expected at least one, e.g. "
                                   "{'image': 'channel:1'}.")
    out = []
    for parameter, reference in inputs.items():
        if not isinstance(parameter, str) or not parameter.isidentifier():
            raise InvalidArgumentError(f"{where}: inputs keys are the function's parameter "
                                       f"names; received {parameter!r}.")
        out.append(Input(parameter, _check_reference(parameter, reference, where)))
    return tuple(out)
