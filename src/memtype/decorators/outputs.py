"""Stage 3 of a decorated call: its result through the contract, the dtype policy and the
conversion to the output type."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import numpy as np

from memtype.conversion import convert
from memtype.conversion.casting import Bounds, cast_in
from memtype.decorators.options import CallOptions
from memtype.detect import KNOWN_TYPES, framework_of
from memtype.dtypes import OutputDtype, cast, holds_dtype, nearest_held_dtype, preserve_input
from memtype.dtypes import result_dtype as _result_dtype
from memtype.errors import CallOptionError, ContractError
from memtype.frameworks import Framework, load_adapter
from memtype.types import DtypeConversion

__all__ = ["Contract", "contract_ndims", "Outputs"]

# type(x) -> framework, bound once: CPython 3.11 calls a method of an imported name (here
# KNOWN_TYPES.get) through a new bound-method object each time (about 0.35k instructions)
_known = KNOWN_TYPES.get

Contract = int | tuple[int, ...] | Literal["any"] | Callable[[Any], bool] | None
"""``None``: a 3D image; an int or ints: allowed dimensions; ``"any"``: unchecked;
a callable: ``contract(image) -> bool``."""


def contract_ndims(contract: Contract) -> tuple[int, ...] | None:
    """The allowed dimensions, ``None`` when the contract is not about dimensions."""
    if contract is None:
        return (3,)
    if isinstance(contract, int) and not isinstance(contract, bool):
        return (contract,)
    if isinstance(contract, tuple) and contract and all(
            isinstance(n, int) and not isinstance(n, bool) for n in contract):
        return contract
    if contract == "any" or (callable(contract) and not isinstance(contract, bool)):
        return None
    raise CallOptionError(
        "contract must be None (a 3D [Z, Y, X] image), an int or tuple of ints (allowed "
        f"dimensions), 'any', or a callable returning a bool; received {contract!r}."
    )


class Outputs:
    """How one decorated function's results are finished (fixed at decoration).

    ``keeps_result``: a :meth:`~memtype.decorators.MemoryTypeFunction.computing` variant's
    results stay in the framework they were computed in (the dtype policy applied there).
    The output framework's adapter is loaded at the first call (:meth:`load`).
    """

    def __init__(self, name: str, out: Framework, contract: Contract,
                 allow_roundtrip: bool, keeps_result: bool = False) -> None:
        self._name = name
        self._out = out
        self._contract = contract
        self._ndims = contract_ndims(contract)
        self._allow_roundtrip = allow_roundtrip
        self.keeps_result = keeps_result
        self._out_adapter: Any = None
        self._in_framework: dict[str, Outputs] = {}

    def load(self) -> None:
        """Load the output framework (first call)."""
        self._out_adapter = load_adapter(self._out.name)

    def _returning(self, fw: Framework) -> Outputs:
        """A kept result in ``fw`` (not the declared type): finished as if ``fw`` were the
        output type (made once per framework)."""
        made = self._in_framework.get(fw.name)
        if made is None:
            made = Outputs(self._name, fw, self._contract, self._allow_roundtrip)
            made.load()
            self._in_framework[fw.name] = made
        return made

    def finish(self, result: Any, dtype: np.dtype[Any] | None, gpu_id: int | None,
               opts: CallOptions) -> Any:
        """Contract, dtype policy and output type; tuple results: the first element.

        ``dtype``: the caller's dtype of the call's first array (what ``PRESERVE_INPUT``
        returns); ``gpu_id``: the call's GPU (None: the result's own device)."""
        if type(result) is tuple:
            if not result:
                raise ContractError(
                    f"{self._name} returned an empty tuple; expected the image first.")
            return (self.output(result[0], dtype, gpu_id, opts), *result[1:])
        return self.output(result, dtype, gpu_id, opts)

    def output(self, image: Any, dtype: np.dtype[Any] | None, gpu_id: int | None,
               opts: CallOptions) -> Any:
        """One image through the contract, the dtype policy and the output conversion."""
        fw = _known(type(image)) or framework_of(image)
        if fw is self._out and self._ndims is not None:  # the common case, kept short
            if len(self._out_adapter.shape_of(image)) not in self._ndims:
                self._check(image, fw)
            if opts.keeps_dtype:
                same = self._out_adapter.dtype_of(image)
                if same is dtype or same == dtype:  # ``is``: the usual case, and the cheaper test
                    return image
        else:
            if self.keeps_result and fw is not None:  # a computing variant: kept in fw
                return self._returning(fw).output(image, dtype, gpu_id, opts)
            self._check(image, fw)
        if fw is None:
            return image
        adapter = self._out_adapter if fw is self._out else load_adapter(fw.name)
        decided, bounds = self._decide(image, fw, adapter, dtype, opts)
        target = decided.dtype
        if fw is self._out and opts.gpu_id is None:
            if target is None or adapter.dtype_of(image) == target:
                return image
        return self._convert_out(image, fw, adapter, decided, bounds, gpu_id)

    def _decide(self, image: Any, fw: Framework, adapter: Any, dtype: np.dtype[Any] | None,
                opts: CallOptions) -> tuple[OutputDtype, Bounds | None]:
        """The dtype policy's decision (``memtype.dtypes.output_dtype``) and its bounds."""
        conversion, scaling = opts.dtype_conversion, opts.scaling
        target = _result_dtype(conversion, dtype)
        if conversion is not DtypeConversion.PRESERVE_INPUT or target is None or (
                scaling != "clip"):
            return OutputDtype(target, scaling), None
        return preserve_input(image, fw.name, adapter, target, self._name)

    def _convert_out(self, image: Any, fw: Framework, adapter: Any, decided: OutputDtype,
                     bounds: Bounds | None, gpu_id: int | None) -> Any:
        """The dtype policy in the result's framework where it can hold the dtype, else after."""
        target, scaling = decided.dtype, decided.scaling
        if target is not None and adapter.dtype_of(image) == target:
            target = None
        if target is not None and holds_dtype(adapter, target):
            image = cast_in(image, fw.name, adapter, target, scaling, bounds)
            if fw is self._out and gpu_id is None:  # convert would return it as it is
                return image
            target = None
        allow = self._allow_roundtrip
        image = convert(image, self._out.name, gpu_id=gpu_id, allow_cpu_roundtrip=allow)
        if target is not None:
            held = nearest_held_dtype(self._out_adapter, target)
            image = cast(image, held, scaling=scaling)
        return image

    def _check(self, image: Any, fw: Framework | None) -> None:
        """The output contract (a clear error naming the function and the shape)."""
        contract = self._contract
        if self._ndims is None:
            if contract != "any" and callable(contract) and not contract(image):
                raise ContractError(
                    f"{self._name} returned a result that its contract {contract!r} rejects: "
                    f"{_describe(image, fw)}."
                )
            return
        if fw is None:
            raise ContractError(
                f"{self._name} must return an array (its image) of {self._dims()}; it returned "
                f"{_describe(image, fw)}. Declare contract='any' to return other objects."
            )
        shape = (self._out_adapter if fw is self._out else load_adapter(fw.name)).shape_of(image)
        if len(shape) not in self._ndims:
            raise ContractError(
                f"{self._name} must return {self._dims()}; it returned shape {tuple(shape)}. "
                "Return image[None] for a single 2D slice, or declare contract=2 (or 'any')."
            )

    def _dims(self) -> str:
        """The contract's dimensions in words."""
        if self._ndims == (3,):
            return "a 3D [Z, Y, X] array"
        return f"an array with {' or '.join(map(str, self._ndims or ()))} dimensions"


def _describe(value: Any, fw: Framework | None) -> str:
    """A short description of a result for error messages."""
    if fw is None:
        return f"an object of type {type(value).__module__}.{type(value).__qualname__}"
    return f"a {fw.name} array of shape {tuple(load_adapter(fw.name).shape_of(value))}"
