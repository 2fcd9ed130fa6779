"""``@mt.array_api``: a function written against the Array API standard, run where its data is.

The function is written once against the standard (``xp.mean``, ``xp.where``...) and runs in
the framework that holds its first array argument, with no conversion, when that framework's
arrays have a namespace that declares the standard (``array_api_compat.array_namespace``
returns one with ``__array_api_version__``: NumPy, CuPy and torch through array-api-compat's
wrappers, JAX natively). Arrays of other frameworks (TensorFlow, pyclesperanto, MLX, whose
``mlx.core`` declares no version of the standard) are converted to the cheapest covered
framework, and the result back to their type. Everything else is a memtype decorated call
(:func:`memtype.memory_types`): conversion of the other array arguments, the contract, the
dtype policy, out-of-memory recovery, streams.

Calling convention (array-api-extra's): a function that declares a parameter named ``xp``
receives the namespace of its arrays as ``xp=``; any other function calls
``array_api_compat.array_namespace(x)`` itself.

The standard's gaps, measured, are handled here:

- writes into an immutable array (``x[0] = 1`` on JAX): :class:`~memtype.errors.ArrayAPIError`
  naming the rule;
- a dtype whose arithmetic kernels the framework lacks (torch 2.x on the CPU: ``+``, ``>``,
  ``max`` of uint16, uint32, uint64): top-level arguments widened to the smallest signed
  integer dtype that holds them (uint16 -> int32), found by probing the framework once per
  dtype and device; the dtype policy brings the result back; no such dtype (uint64):
  :class:`~memtype.errors.ArrayAPIError`;
- an argument the framework would narrow (float64 into JAX without ``jax_enable_x64``):
  :class:`~memtype.errors.MemoryConversionError`, never a silent float32.

A pipeline step of an ``@mt.array_api`` function offers one implementation per covered
framework (:meth:`ArrayAPIFunction.frameworks`): the plan runs it where the data already is.
"""

from __future__ import annotations

import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

from memtype._optional import require
from memtype._renamed import renamed_argument
from memtype.decorators import Contract, MemoryTypeFunction, memory_types
from memtype.decorators.function import THROUGH, copy_metadata
from memtype.detect import framework_of
from memtype.errors import (
    ArgumentTypeError,
    ArrayAPIError,
    DeviceError,
    MemoryConversionError,
    MemtypeError,
)
from memtype.frameworks import (
    CPU,
    Adapter,
    Device,
    DeviceAdapter,
    Framework,
    get_framework,
    is_installed,
    is_loaded,
    iter_frameworks,
    load_adapter,
    on_table_change,
)
from memtype.gpu.oom import is_oom_error
from memtype.types import MemoryType, MemoryTypeLike

__all__ = ["array_api", "ArrayAPIFunction", "covers"]

_covered: dict[str, bool] = {}  # framework name -> whether the standard covers its arrays
_run_in: dict[tuple[str, str], str] = {}  # (framework, device kind) -> where it computes
_kernels: dict[tuple[str, str, str], bool] = {}  # (namespace, device, dtype) -> kernels exist


def _forget() -> None:
    """Forget what was learnt of the table's frameworks (a row was added or removed)."""
    _covered.clear()
    _run_in.clear()


on_table_change(_forget)


_aac: Any = None  # array_api_compat, imported at the first call
_namespaces: dict[type, Any] = {}  # array type -> its standard namespace, or None


def _array_api_compat() -> Any:
    global _aac
    if _aac is None:
        _aac = require("array_api_compat", "@mt.array_api")
    return _aac


def _namespace_of(x: Any) -> Any | None:
    """The Array API namespace of an array argument (cached per type), None for others."""
    cls = type(x)
    try:
        return _namespaces[cls]
    except KeyError:
        aac = _array_api_compat()
        found = (aac.array_namespace(x) if aac.is_array_api_obj(x)
                 and not isinstance(x, (int, float, complex, bool)) else None)
        _namespaces[cls] = found
        return found


def _standard_namespace(x: Any) -> Any | None:
    """The namespace of ``x`` when it declares a version of the Array API standard."""
    try:
        xp = _array_api_compat().array_namespace(x)
    except TypeError:  # array-api-compat does not know the type
        return None
    return xp if getattr(xp, "__array_api_version__", None) else None


def _sample(fw: Framework) -> Any:
    """A one-element array of ``fw`` on its default device (raises where there is none)."""
    adapter = load_adapter(fw.name)
    device = CPU if not fw.gpu_only else Device(str(fw.gpu_kind), 0)
    if device.is_gpu and not (isinstance(adapter, DeviceAdapter) and adapter.gpu_count()):
        raise DeviceError(f"{fw.name} has no {device.kind} device here")
    return adapter.from_numpy(np.zeros(1, np.float32), device)


def covers(memory_type: MemoryTypeLike) -> bool:
    """Whether an ``@mt.array_api`` function runs on ``memory_type``'s arrays as they are.

    True when ``array_api_compat.array_namespace`` gives that framework's arrays a namespace
    declaring a version of the standard (NumPy, CuPy and torch through array-api-compat, JAX
    natively), and the framework imports and has a device here. Decided once per framework
    with a one-element array (this imports the framework).

    Raises
    ------
    MissingPackageError
        array-api-compat is not installed.

    Examples
    --------
    >>> from memtype.array_api_functions import covers
    >>> covers("numpy")
    True
    """
    fw = get_framework(memory_type)
    found = _covered.get(fw.name)
    if found is None:
        _array_api_compat()  # its absence is raised (MissingPackageError), not "uncovered"
        try:
            found = _standard_namespace(_sample(fw)) is not None
        except MemtypeError:  # not installed, or no device for it here
            found = False
        _covered[fw.name] = found
    return found


def _zero_copy(source: Framework, target: Framework, kind: str) -> bool:
    """Whether convert's path from ``source`` to ``target`` on a ``kind`` device can share
    memory (the host hub, or DLPack at both ends): the adapters' facts."""
    src, dst = load_adapter(source.name), load_adapter(target.name)
    if kind == CPU.kind:
        return dst.host_native or (src.dlpack and dst.dlpack and dst.dlpack_on_host)
    return src.dlpack and dst.dlpack


def _cheapest(source: Framework, kind: str) -> str:
    """The covered framework an uncovered one's arrays on a ``kind`` device go to: one on the
    same device whose path shares memory, else one on that device, else one on the host,
    else any; table order within each. Only the frameworks looked at are imported."""
    others = [fw for fw in iter_frameworks() if fw is not source]
    groups = (
        [fw for fw in others if kind in fw.device_kinds],
        [fw for fw in others if kind not in fw.device_kinds and not fw.gpu_only],
        [fw for fw in others if kind not in fw.device_kinds and fw.gpu_only],
    )
    for k, group in enumerate(groups):
        covered = []
        for fw in group:
            if not covers(fw.name):
                continue
            if k > 0 or _zero_copy(source, fw, kind):
                return fw.name
            covered.append(fw.name)
        if covered:
            return covered[0]
    names = ", ".join(fw.name for fw in iter_frameworks())
    raise ArrayAPIError(
        f"@mt.array_api: {source.name} arrays are not covered by the Array API standard here "
        f"and no covered framework is available to run in; expected one of {names} whose "
        "namespace declares the standard (array_api_compat.array_namespace).")


def _where(source: Framework, x: Any) -> str:
    """Where a call whose first array is ``x`` (of ``source``) computes."""
    covered = _covered.get(source.name)
    if covered is None:
        covered = _covered[source.name] = _standard_namespace(x) is not None
    if covered:
        return source.name
    kind = load_adapter(source.name).device_of(x).kind
    found = _run_in.get((source.name, kind))
    if found is None:
        found = _run_in[(source.name, kind)] = _cheapest(source, kind)
    return found


# -- inside the call: the body the decorator runs ------------------------------------------


def _has_kernels(xp: Any, dtype: Any, device: Any) -> bool:
    """Whether ``xp`` computes in ``dtype`` on ``device``: a few element-wise ops, a
    comparison and reductions on a one-element array (torch 2.x has none of these for
    uint16/32/64 on the CPU). Probed once per namespace, device and dtype."""
    key = (xp.__name__, str(device), str(dtype))
    found = _kernels.get(key)
    if found is None:
        one = xp.ones((1,), dtype=dtype, device=device)
        try:
            _ = (one + one, one - one, one * one, one > one, xp.max(one), xp.min(one),
                 xp.maximum(one, one), xp.abs(one), xp.argmax(one),
                 xp.where(one == one, one, one))
            found = True
        except (NotImplementedError, RuntimeError) as exc:  # torch: "max_values_cpu" ...
            if is_oom_error(exc):  # a full device says nothing about kernels
                raise
            found = False
        _kernels[key] = found
    return found


def _widened(x: Any, xp: Any, adapter: Adapter, run: str, label: str) -> Any:
    """``x``, or ``x`` in the smallest signed integer dtype holding its values where the
    framework (``run``, whose adapter is given) has no kernels for its own dtype."""
    dtype = adapter.dtype_of(x)
    if dtype.kind not in "iu":  # the gap is integer kernels (torch's unsigned types)
        return x
    device = _array_api_compat().device(x)
    if _has_kernels(xp, x.dtype, device):
        return x
    wider = np.promote_types(dtype, np.int8) if dtype.kind == "u" else dtype
    if wider.kind != "i" or not _has_kernels(xp, getattr(xp, wider.name), device):
        raise ArrayAPIError(
            f"{label}: {run} has no arithmetic kernels for {dtype} on {device} ('+', '>', "
            f"'max' raise there) and no wider integer dtype holds every {dtype} value; "
            f"expected an array of a dtype {run} computes in. Convert it first (e.g. to "
            "float64, or int64 where the values fit), or call the function with NumPy data.")
    return xp.astype(x, getattr(xp, wider.name))


class _Body:
    """The function as the decorator runs it in one framework: arrays of a dtype without
    kernels widened, ``xp=`` passed where declared, writes into immutable arrays explained."""

    def __init__(self, func: Callable[..., Any], run: str, label: str) -> None:
        self.func, self.run = func, run
        sig = inspect.signature(func)
        self.passes_xp = "xp" in sig.parameters
        self.__signature__ = sig.replace(parameters=[
            p for p in sig.parameters.values() if p.name != "xp"])
        self.__module__ = str(getattr(func, "__module__", None))
        self.__name__ = self.__qualname__ = label
        self.__doc__ = getattr(func, "__doc__", None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        label = self.__qualname__
        adapter = load_adapter(self.run)  # the decorator loaded it: a dict look-up
        xp = None
        new_args = list(args)
        for i, a in enumerate(args):
            ns = _namespace_of(a)
            if ns is not None:
                xp = xp if xp is not None else ns
                new_args[i] = _widened(a, ns, adapter, self.run, label)
        for name, a in kwargs.items():
            ns = _namespace_of(a)
            if ns is not None:
                xp = xp if xp is not None else ns
                kwargs[name] = _widened(a, ns, adapter, self.run, label)
        if self.passes_xp and "xp" not in kwargs:
            kwargs["xp"] = xp
        try:
            return self.func(*new_args, **kwargs)
        except TypeError as exc:
            if adapter.immutable and "immutable" in str(exc).lower():
                raise ArrayAPIError(
                    f"{label} wrote into a {self.run} array in place ({exc}); {self.run} "
                    "arrays are immutable, and the Array API standard leaves in-place writes "
                    "undefined for such libraries. Expected a function that builds new arrays "
                    "(xp.where(mask, value, x), or array_api_extra.at(x, idx).set(value, "
                    "copy=True), which copies on every framework).") from exc
            raise


# -- the decorated function ----------------------------------------------------------------


def _host() -> MemoryType:
    """The host framework's memory type (the adapter that is host-native: NumPy)."""
    fw = next(f for f in iter_frameworks() if not f.gpu_only and load_adapter(f.name).host_native)
    return MemoryType(fw.name)


class ArrayAPIFunction:
    """A function written against the Array API standard (see :func:`array_api`).

    Attributes
    ----------
    runs_in : str or None
        None: each call runs where its first array is (or in the cheapest covered framework).
        A framework name: this is :meth:`implementation` ``(runs_in)``, which converts its
        inputs there.
    input_memory_type, output_memory_type : MemoryType
        For a pipeline step that is not planned (it stacks its input in
        ``input_memory_type``): the host (NumPy) unless pinned; ``output_memory_type`` the
        declared ``output_type``, else the input's.
    keeps_result : bool
        Whether this is a :meth:`computing` variant.
    output_type : str or None
        The declared ``output_type`` (see :meth:`returning`); None: each result is returned
        as the type of the call's first array.
    __wrapped__ : callable
        The undecorated function.
    """

    __wrapped__: Callable[..., Any]
    __qualname__: str  # the function's (copy_metadata)

    def __init__(self, func: Callable[..., Any], output_type: str | None, contract: Contract,
                 options: dict[str, Any], runs_in: str | None = None,
                 keeps_result: bool = False) -> None:
        if not callable(func):
            raise ArgumentTypeError(f"@mt.array_api needs a callable; received {func!r}.")
        copy_metadata(self, func)
        self._name: str = self.__qualname__
        self._func, self._output, self._contract, self._options = func, output_type, contract, \
            options
        self.runs_in, self.keeps_result = runs_in, keeps_result
        self.input_memory_type = MemoryType(runs_in) if runs_in else _host()
        self.output_memory_type = (self.input_memory_type if keeps_result or output_type is None
                                   else MemoryType(output_type))
        self._calls: dict[tuple[str, str], MemoryTypeFunction] = {}
        self._pinned: dict[str, ArrayAPIFunction] = {}
        self._returning: dict[str, ArrayAPIFunction] = {}
        self._computing: ArrayAPIFunction | None = None
        self._frameworks: tuple[tuple[tuple[Framework, bool], ...], tuple[str, ...]] | None = None
        self._declared = self  # the decorated function a pinned or computing variant is of

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        values = (*args, *kwargs.values()) if kwargs else args
        found = [(a, fw) for a in values if (fw := framework_of(a)) is not None]
        if not found:
            raise ArgumentTypeError(
                f"{self._name}: an @mt.array_api function needs an array argument to "
                f"know where to run; received {len(args)} positional and {len(kwargs)} keyword "
                "arguments, none an array of a loaded framework.")
        first, source = found[0]
        run = self.runs_in or _where(source, first)
        out = run if self.keeps_result else (self._output or source.name)
        if len(found) > 1 or source.name != run:
            _refuse_narrowing(run, found, self._name)
        made = self._calls.get((run, out)) or self._call(run, out)
        return made(*args, **kwargs)

    def _call(self, run: str, out: str) -> MemoryTypeFunction:
        """The decorated call computing in ``run`` and returning ``out`` (made once)."""
        made = self._calls.get((run, out))
        if made is None:
            body = _Body(self._func, run, self._name)
            made = memory_types(run, out, self._contract, **self._options)(body)
            self._calls[(run, out)] = made
        return made

    def frameworks(self) -> tuple[str, ...]:
        """The frameworks this function runs in here, in table order with the host (NumPy)
        last: of the imported ones, those :func:`covers` accepts; of the others, those
        installed whose table row says the standard covers their arrays
        (``Framework.array_api``). Imports nothing, so planning a pipeline imports only the
        frameworks its steps use (a plan compares no implementation in a framework nothing
        imported).

        A plan's ties go to the earlier implementation, and the host ties with a device
        framework exactly when the data arrives in that framework (its result reaches the
        host at the write anyway): host last, a tie runs the step where the data is."""
        state = tuple((fw, is_loaded(fw)) for fw in iter_frameworks())
        if self._frameworks is None or self._frameworks[0] != state:
            covered = [fw.name for fw, loaded in state
                       if (covers(fw.name) if loaded else fw.array_api and is_installed(fw))]
            host = _host().value
            self._frameworks = state, tuple(sorted(covered, key=lambda name: name == host))
        return self._frameworks[1]

    def implementation(self, memory_type: MemoryTypeLike) -> ArrayAPIFunction:
        """This function pinned to one framework: its inputs are converted there (like
        ``@mt.<framework>``), and its result returned as that framework's (or the declared
        ``output_type``). A planned pipeline step runs one of these.

        Raises
        ------
        UnknownMemoryTypeError
            Not a memory type.
        """
        name = get_framework(memory_type).name
        made = self._pinned.get(name)
        if made is None:
            made = ArrayAPIFunction(self._func, self._output, self._contract, self._options,
                                    runs_in=name, keeps_result=self.keeps_result)
            made._declared = self._declared
            self._pinned[name] = made
        return made

    @property
    def output_type(self) -> str | None:
        """The declared ``output_type`` (a framework name), or None."""
        return self._output

    def returning(self, memory_type: MemoryTypeLike) -> ArrayAPIFunction:
        """This function returning every result as ``memory_type``, as if declared with
        ``output_type=memory_type`` (it still computes where its data is). ``mt.chain``
        ends with one: a chain returns what the calls one by one would.

        Raises
        ------
        UnknownMemoryTypeError
            Not a memory type.
        """
        name = get_framework(memory_type).name
        if name == self._output and not self.keeps_result:
            return self
        made = self._returning.get(name)
        if made is None:
            made = ArrayAPIFunction(self._func, name, self._contract, self._options,
                                    self.runs_in)
            made._declared = self._declared
            self._returning[name] = made
        return made

    def computing(self) -> ArrayAPIFunction:
        """This function with its result left in the framework it computed in (see
        :meth:`memtype.decorators.MemoryTypeFunction.computing`)."""
        if self.keeps_result:
            return self
        if self._computing is None:
            made = ArrayAPIFunction(self._func, self._output, self._contract, self._options,
                                    self.runs_in, keeps_result=True)
            made._declared = self._declared
            self._computing = made
        return self._computing

    def __get__(self, obj: Any, objtype: type | None = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __repr__(self) -> str:
        where = f"in {self.runs_in}" if self.runs_in else "where its data is"
        kept = ", result kept where computed" if self.keeps_result else ""
        return f"<memtype array_api function {self._name} ({where}{kept})>"

    def __reduce__(self) -> str | tuple[Any, ...]:
        if self._declared is not self:
            output = None if self._output == self._declared._output else self._output
            return (_variant_of, (self._declared, self.runs_in, self.keeps_result, output))
        owner: Any = sys.modules.get(self.__module__)
        for part in self._name.split("."):
            owner = getattr(owner, part, None)
        if owner is self and self.__module__ != "__main__":
            return str(self._name)  # by reference, like a function
        if owner is self:  # __main__: by value for cloudpickle (dask), through us for pickle
            self._func.__qualname__ = f"{self._name}{THROUGH}"
        return (ArrayAPIFunction, (self._func, self._output, self._contract, self._options))



def _variant_of(declared: ArrayAPIFunction, runs_in: str | None, keeps_result: bool,
                output: str | None = None) -> ArrayAPIFunction:
    """Unpickle a pinned, :meth:`~ArrayAPIFunction.returning` or
    :meth:`~ArrayAPIFunction.computing` variant."""
    made = declared.implementation(runs_in) if runs_in else declared
    made = made.returning(output) if output is not None else made
    return made.computing() if keeps_result else made


def _refuse_narrowing(run: str, arrays: list[tuple[Any, Framework]], label: str) -> None:
    """A top-level array the ``run`` framework would narrow (float64 into JAX without x64)
    is refused: an Array API function computes in its inputs' dtypes or not at all."""
    target = load_adapter(run)
    for a, fw in arrays:
        if fw.name == run:
            continue
        dtype = load_adapter(fw.name).dtype_of(a)
        if not target.holds_dtype(dtype):
            raise MemoryConversionError(
                f"{label} would compute in {run}, which holds no {dtype} here (its arrays "
                f"would be narrowed silently); expected {dtype} data to run in a framework "
                f"that holds it. Enable it (mt.gpu.configure(jax_enable_x64=True) for JAX), "
                f"cast the data yourself, or call the function with the {fw.name} array "
                "first so it runs there.", fw.name, run)


def array_api(func: Callable[..., Any] | None = None, *, memory_type: MemoryTypeLike | None = None,
              contract: Contract = None, output_type: MemoryTypeLike | None = None,
              **options: Any) -> Any:
    """Declare a function written against the Array API standard.

    Called with an array of a framework the standard covers (:func:`covers`: NumPy, torch
    and JAX among others) first, the function runs in that framework with no conversion;
    with an array of another framework (TensorFlow, for one), in the cheapest covered one
    (same device and zero-copy first: NumPy on the host), its result converted back. The
    function receives the namespace as ``xp=`` when it declares an ``xp`` parameter;
    otherwise it calls ``array_api_compat.array_namespace`` itself.

    Parameters
    ----------
    func : callable, optional
        The function (``@mt.array_api``), or None (``@mt.array_api(...)``).
    memory_type : MemoryType or str, optional
        The type every result is returned as (as :meth:`ArrayAPIFunction.returning`); None
        (the default): the type of the first array argument.
    contract : None, int, tuple of int, "any" or callable
        What the result must be, as for :func:`memtype.memory_types` (None: a 3D
        ``[Z, Y, X]`` array).
    **options
        Every other parameter of :func:`memtype.memory_types` (``copy_inputs``,
        ``slice_separable``, ``dtype_conversion``, ``oom_recovery``...), with the same
        meaning. ``output_type=`` is the old spelling of ``memory_type=`` (it still works,
        with a ``DeprecationWarning``).

    Returns
    -------
    ArrayAPIFunction
        Or, without ``func``, a decorator making one.

    Raises
    ------
    UnknownMemoryTypeError, CallOptionError, ArgumentTypeError
        At decoration, as :func:`memtype.memory_types` (also: both ``memory_type`` and
        ``output_type``).

    Examples
    --------
    >>> import numpy as np, memtype as mt
    >>> @mt.array_api
    ... def centre(image, xp):
    ...     return image - xp.mean(image)
    >>> centre(np.ones((1, 2, 2), np.float32)).tolist()
    [[[0.0, 0.0], [0.0, 0.0]]]
    """
    if output_type is not None:
        memory_type = renamed_argument("array_api", "output_type", "memory_type", output_type,
                                       memory_type)
    out = None if memory_type is None else get_framework(memory_type).name
    allowed = [p for p in inspect.signature(memory_types).parameters
               if p not in ("input_type", "output_type", "contract")]
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ArgumentTypeError(
            f"mt.array_api() got unknown option(s) {', '.join(unknown)}; expected any of "
            f"memory_type, contract, {', '.join(allowed)} (no input_type: the function runs "
            "where its first array is).")

    memory_types(_host(), _host(), contract, **options)  # options checked at decoration

    def decorate(f: Callable[..., Any]) -> ArrayAPIFunction:
        return ArrayAPIFunction(f, out, contract, dict(options))

    return decorate if func is None else decorate(func)
