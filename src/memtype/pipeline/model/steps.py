"""The step model: FunctionStep (a decorated function, or a chain of them, applied to stacks),
the groups steps run on (GroupTask), and which steps write their output (:func:`writes`)."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memtype import convert
from memtype.errors import ArgumentTypeError, FieldError, InvalidArgumentError
from memtype.frameworks import get_framework, is_registered, iter_frameworks
from memtype.pipeline.analysis.references import Input, parse_inputs
from memtype.pipeline.io.patterns import FieldValue, ImageRecord, Key
from memtype.pipeline.model.naming import check_labels_name, check_path_name, check_table_name
from memtype.pipeline.model.variants import Variants, offered

if TYPE_CHECKING:
    from memtype.gpu import GpuId

__all__ = ["FunctionStep", "FuncSpec", "StepCall", "GroupTask", "writes"]

_Pair = tuple[Callable[..., Any], Mapping[str, Any]]
FuncSpec = Callable[..., Any] | _Pair | Sequence[Callable[..., Any] | _Pair]
"""A function, a ``(function, kwargs)`` pair, or a list of those (a chain)."""
NamedSpec = str | tuple[str, Mapping[str, Any]]
"""A catalog operation or function by name, alone or with its keyword arguments."""


def _named(spec: object) -> bool:
    """Whether a step's ``func`` names a catalog operation or function."""
    return isinstance(spec, str) or (isinstance(spec, tuple) and len(spec) == 2
                                     and isinstance(spec[0], str))


@dataclass(frozen=True)
class StepCall:
    """One function of a step with its keyword arguments."""

    func: Callable[..., Any]
    kwargs: Mapping[str, Any]

    @property
    def label(self) -> str:
        """The function's qualified name, for messages."""
        return str(getattr(self.func, "__qualname__", None) or repr(self.func))

    @property
    def input_type(self) -> str:
        """The memory type the function takes its input in."""
        func: Any = self.func  # a MemoryTypeFunction (checked by FunctionStep)
        return get_framework(func.input_memory_type).name

    @property
    def output_type(self) -> str:
        """The memory type the function returns."""
        func: Any = self.func
        return get_framework(func.output_memory_type).name


def _one_call(spec: Any, where: str, variable_components: Sequence[str] = ("z",)) -> StepCall:
    """A :class:`StepCall` from a function, a ``(function, kwargs)`` pair, or a catalog name
    (alone or with its kwargs, as in a step of its own)."""
    if _named(spec):
        from memtype.pipeline.model import named  # the catalog: only for a step made from a name

        return StepCall(*named.resolve_call(spec, variable_components))
    if isinstance(spec, tuple):
        if len(spec) != 2 or not callable(spec[0]) or not isinstance(spec[1], Mapping):
            raise ArgumentTypeError(
                f"{where}: a tuple must be (function, kwargs); received {spec!r}.")
        func, kwargs = spec[0], dict(spec[1])
    elif callable(spec):
        func, kwargs = spec, {}
    else:
        raise ArgumentTypeError(
            f"{where}: expected a decorated function; received {type(spec).__name__}.")
    if not hasattr(func, "input_memory_type") or not hasattr(func, "output_memory_type"):
        name = getattr(func, "__qualname__", repr(func))
        raise ArgumentTypeError(
            f"{where}: {name} has no memory type; decorate it with a memtype decorator "
            "(@mt.numpy, @mt.torch, @mt.jax, @mt.memory_types(...)) so the step knows how to "
            "stack its input."
        )
    return StepCall(func, kwargs)


def _chain(spec: Any, where: str,
           variable_components: Sequence[str] = ("z",)) -> tuple[StepCall, ...]:
    """A chain of calls from a function, a pair, a name, or a list of those."""
    if isinstance(spec, list):
        if not spec:
            raise InvalidArgumentError(f"{where}: an empty list of functions.")
        return tuple(_one_call(s, f"{where}[{i}]", variable_components)
                     for i, s in enumerate(spec))
    return (_one_call(spec, where, variable_components),)


def _missing_group_by(func: Mapping[Any, Any]) -> str:
    """Why a dict of functions without ``group_by`` is refused; for keys that name (or were
    meant to name) memory types, how to declare implementations, and the unknown names."""
    keys = [getattr(k, "value", k) for k in func]
    message = ("FunctionStep: a dict of functions routes each stack by the value of a field "
               "and needs group_by= (the field, e.g. group_by='channel'); received a dict "
               f"keyed {keys!r} and no group_by")
    names = [k for k in keys if isinstance(k, str)]
    if not names:
        return message + "."
    message += (". To offer one operation in several frameworks, declare it: "
                "mt.variants(torch=f, numpy=g)")
    unknown = [k for k in names if not is_registered(k)]
    if unknown:
        known = ", ".join(fw.name for fw in iter_frameworks())
        message += f"; {', '.join(map(repr, unknown))}: not a memory type (expected one of {known})"
    return message + "."


class FunctionStep:
    """One step of a pipeline: a decorated function applied to every stack of a group.

    Parameters
    ----------
    func : function, (function, kwargs), list of those, dict of those, Variants, or a name
        A memtype-decorated function; a pair adds keyword arguments; a list is a chain run
        in order with nothing stored between its functions; a dict maps values of the
        ``group_by`` component to what runs on stacks with that value (e.g. one function
        per channel). Implementations of one operation in several frameworks are declared
        with :func:`memtype.variants` (``mt.variants(torch=blur_t, numpy=blur_np)``); the
        pipeline's plan picks one (see ``Pipeline.plan``). A string (or a ``(string,
        kwargs)`` pair) names a catalog operation (``"gaussian"``: its variant step) or
        function (``"skimage.filters.gaussian"``); ``**kwargs`` are then its parameters or
        arguments (and ``volume=``, see :func:`memtype.pipeline.catalog.step`), checked now.
    name : str, optional
        Shown in progress and summaries; the first function's name by default.
    variable_components : sequence of str
        The pattern fields that vary inside one stack (default ``("z",)``: z-planes of one
        well, site and channel form a ``[Z, Y, X]`` stack).
    group_by : str, optional
        The field whose value picks the function when ``func`` is a dict.
    materialize : bool
        Write this step's output to the output store (the last step always does).
    labels : str, optional
        The step's output is a label image (integer object ids) named ``labels``: it is
        written as OME-Zarr labels (``<field>/labels/<name>/``) beside the final plate's
        images, whether or not the step is materialized.
    passes_input : bool
        The step's input, not its output, goes on to the next step: its output is written
        (as ``labels``, or materialized) and its side outputs are tables, but the next step
        works on what this one received (e.g. a segmentation beside the intensity images).
    inputs : dict of str to str, optional
        Named inputs (see :mod:`memtype.pipeline.analysis.references`): parameter ->
        ``"channel:DAPI"``, ``"channel:1"`` or the name of an object set or an earlier
        step. The step then runs once per field (a well's site) on those values, the first
        as its image, the others as keyword arguments of its first function; its result
        becomes a named value (an object set with ``labels=``; a dict of measurements goes
        to the tables), and the channels pass on unchanged to the next step.
    outputs : sequence of str, optional
        Names of the side outputs (the extra elements of tuple results), written as CSV
        tables ``<name>.csv``. By default ``<step name>`` (one) or ``<step name>_<i>``.
    **kwargs
        Passed to every function of the step (for example ``dtype_conversion=`` or
        ``slice_by_slice=True``); a pair's own kwargs take precedence.

    Raises
    ------
    TypeError
        A function without a memtype decorator, or a malformed spec.
    ValueError
        An empty chain, a dict without ``group_by``, ``group_by`` among the variable
        components; an unknown catalog name (the message names the closest), or a missing
        or unknown argument of a named one.

    Examples
    --------
    >>> import memtype as mt
    >>> @mt.numpy
    ... def project(stack):
    ...     return stack.max(axis=0, keepdims=True)
    >>> step = FunctionStep(project, materialize=True)
    >>> step.name
    'project'
    """

    def __init__(self, func: FuncSpec | NamedSpec | Mapping[FieldValue, FuncSpec],
                 name: str | None = None,
                 *, variable_components: Sequence[str] = ("z",), group_by: str | None = None,
                 materialize: bool = False, outputs: Sequence[str] | None = None,
                 labels: str | None = None, passes_input: bool = False,
                 inputs: Mapping[str, str] | None = None,
                 **kwargs: Any) -> None:
        self.variable_components: tuple[str, ...] = tuple(variable_components)
        self.group_by = group_by
        self.materialize = bool(materialize)
        self.kwargs: dict[str, Any] = dict(kwargs)
        self.routes: dict[FieldValue, tuple[StepCall, ...]] | None = None
        self.chain: tuple[StepCall, ...] = ()
        self.inputs: tuple[Input, ...] = parse_inputs(inputs, "FunctionStep")
        self.plate_pass: str | None = None
        """The kind of plate-wide pass (``correct_illumination``...), or None."""
        self.spec: tuple[str, dict[str, Any]] | None = None
        """The operation's name and the parameters given, for a step made from a name."""
        if _named(func):  # the catalog resolves it (catalog.naming builds no step: no cycle)
            from memtype.pipeline.model import named  # the catalog, for a named step only

            own, extra = named.split_name(func)  # type: ignore[arg-type]
            self.spec = (own, {**kwargs, **extra})
            self.plate_pass = named.plate_pass(own)
            func, default, self.kwargs, self.inputs = named.resolve_named(
                func, kwargs, self.inputs, self.variable_components)  # type: ignore[arg-type]
            name = name or default
        if isinstance(func, Mapping):
            if self.inputs:
                raise InvalidArgumentError(
                    "FunctionStep: a step with inputs= runs once per field on the values it "
                    "names, so it cannot also route stacks by group_by; name the channel in "
                    "inputs= instead (e.g. inputs={'image': 'channel:1'}).")
            self._set_routes(func)
        else:
            self.chain = _chain(func, "FunctionStep", self.variable_components)
        self.name = _path_name(name or self._default_name(), "FunctionStep: name",
                               materialize or self.inputs != () or self.plate_pass is not None)
        self.output_names: tuple[str, ...] | None = _table_names(outputs) if outputs else None
        if labels is not None and (not isinstance(labels, str) or not labels[:1].isalnum()
                                   or not labels.replace("_", "").replace("-", "").isalnum()):
            raise InvalidArgumentError(
                f"FunctionStep: labels must be a name of letters, digits, '_' or '-' "
                f"(e.g. 'nuclei'); received {labels!r}.")
        self.labels = labels if labels is None else _labels_name(labels)
        if self.inputs and passes_input:
            raise InvalidArgumentError(
                "FunctionStep: a step with inputs= always passes the channels on; "
                "passes_input=True says nothing more (leave it out).")
        self.passes_input = bool(passes_input)

    def run_named(self, values: Mapping[str, Any], gpu_id: GpuId | None
                  ) -> tuple[Any, list[Any]]:
        """Run the step on one field's named inputs (parameter -> value, the step's image
        first: see ``inputs``); returns its result and side outputs. The other inputs go to
        the first function as keyword arguments, in its memory type."""
        first, *others = (values[i.parameter] for i in self.inputs)
        calls = self.chain
        extra: dict[str, Any] = {}
        if others:
            target = calls[0].input_type
            extra = {i.parameter: convert(v, target) if hasattr(v, "shape") else v
                     for i, v in zip(self.inputs[1:], others, strict=True)}
        named = FunctionStep.__new__(FunctionStep)
        named.__dict__.update(self.__dict__)
        named.chain = (StepCall(calls[0].func, {**calls[0].kwargs, **extra}), *calls[1:])
        named.routes = None
        return named.run(first, (), gpu_id)

    def routed(self, calls: Mapping[str, _Pair], field: str | None) -> FunctionStep:
        """A step of this one's name running ``calls[value]`` on the stacks whose ``field``
        has that value (one call for all when ``field`` is None): a plate-wide pass once
        computed, one function per channel."""
        func: Any = dict(calls) if field is not None else next(iter(calls.values()))
        return FunctionStep(func, name=self.name, group_by=field, materialize=self.materialize,
                            variable_components=self.variable_components)

    def _set_routes(self, func: Mapping[FieldValue, FuncSpec]) -> None:
        """Check and store a dict of per-value chains."""
        if self.group_by is None:
            raise InvalidArgumentError(_missing_group_by(func))
        if self.group_by in self.variable_components:
            raise InvalidArgumentError(f"FunctionStep: group_by={self.group_by!r} cannot also be a "
                             f"variable component {self.variable_components}.")
        if not func:
            raise InvalidArgumentError("FunctionStep: an empty dict of functions.")
        self.routes = {k: _chain(v, f"FunctionStep[{k!r}]", self.variable_components)
                       for k, v in func.items()}

    def _default_name(self) -> str:
        """The first function's name."""
        first = self.chain[0] if self.chain else next(iter(self.routes.values()))[0]  # type: ignore[union-attr]
        return str(getattr(first.func, "__name__", "step"))

    def __repr__(self) -> str:
        return (f"FunctionStep({self.name!r}, variable_components={self.variable_components}, "
                f"materialize={self.materialize})")

    @property
    def variants(self) -> Variants | None:
        """The step's implementations when it offers several (one call: a Variants, or an
        ``@mt.array_api`` function, offered in every framework it runs in)."""
        if self.routes is None and len(self.chain) == 1:
            return offered(self.chain[0].func)
        return None

    def with_name(self, name: str) -> FunctionStep:
        """A copy of this step named ``name``; the step itself is left as it is."""
        named = copy.copy(self)
        named.name = name
        named.kwargs = dict(self.kwargs)
        return named

    def with_implementation(self, memory_type: str) -> FunctionStep:
        """A copy of this step that runs its ``memory_type`` implementation.

        Raises
        ------
        ValueError
            The step has no implementation for ``memory_type``.
        """
        options = self.variants
        if options is None or memory_type not in options.implementations:
            offered = list(options) if options is not None else []
            raise InvalidArgumentError(f"step {self.name!r} has no {memory_type!r} "
                                       f"implementation; it offers {offered}.")
        chosen = copy.copy(self)
        chosen.chain = (StepCall(options[memory_type], self.chain[0].kwargs),)
        return chosen

    def calls_for(self, key: Key) -> tuple[StepCall, ...]:
        """The chain that runs on the stack with these fixed field values.

        Raises
        ------
        KeyError
            ``group_by`` routing finds no function for the stack's value.
        """
        if self.routes is None:
            return self.chain
        assert self.group_by is not None
        values = dict(key)
        if self.group_by not in values:
            raise FieldError(f"step {self.name!r}: group_by={self.group_by!r} is not a field of "
                           f"the stack {values}.")
        value = values[self.group_by]
        for candidate in (value, str(value)):
            if candidate in self.routes:
                return self.routes[candidate]
        raise FieldError(f"step {self.name!r} has no function for {self.group_by}={value!r}; "
                       f"it has {sorted(map(str, self.routes))}.")

    def all_calls(self) -> list[StepCall]:
        """Every function the step can run (each implementation of a Variants step)."""
        options = self.variants
        if options is not None:
            kwargs = self.chain[0].kwargs
            return [StepCall(f, kwargs) for f in options.implementations.values()]
        if self.routes is None:
            return list(self.chain)
        return [c for chain in self.routes.values() for c in chain]

    def side_output_name(self, index: int, count: int) -> str:
        """The table name of side output ``index`` of ``count``."""
        if self.output_names is not None and index < len(self.output_names):
            return self.output_names[index]
        return self.name if count == 1 else f"{self.name}_{index + 1}"

    def run(self, stack: Any, key: Key, gpu_id: GpuId | None,
            lazy: bool = False) -> tuple[Any, list[Any]]:
        """Run the step's chain on one stack; returns the image and the side outputs.

        Each function's result but the last stays in the framework it was computed in
        (:meth:`~memtype.decorators.MemoryTypeFunction.computing`): the next function's
        decorator converts it once. ``lazy``: the last one's too (the next consumer is
        another step); otherwise it takes its declared output type (it is written).
        ``gpu_id`` (an index, ``"cuda:0"`` or a ``Device``: ``memtype.gpu.GpuId``) goes to
        every function whose keyword arguments name none.
        """
        side: list[Any] = []
        data = stack
        calls = self.calls_for(key)
        for k, call in enumerate(calls):
            kwargs = {**self.kwargs, **call.kwargs}
            if gpu_id is not None:
                kwargs.setdefault("gpu_id", gpu_id)
            func = call.func
            computing = getattr(func, "computing", None)  # a Variants has none: as declared
            if computing is not None and (lazy or k < len(calls) - 1):
                func = computing()
            result = func(data, **kwargs)
            if isinstance(result, tuple):
                data, extra = result[0], list(result[1:])
                side.extend(extra)
            else:
                data = result
        return data, side


def _labels_name(labels: str) -> str:
    """A label image's name, checked (:func:`~memtype.pipeline.model.naming.check_labels_name`:
    its ROI table never replaces a field's own)."""
    return check_labels_name(labels, "FunctionStep: labels")


def _table_names(outputs: Sequence[str]) -> tuple[str, ...]:
    """The side outputs' table names, each checked (:func:`~memtype.pipeline.model.naming.
    check_table_name`: a file name, never one of memtype's ROI tables)."""
    if isinstance(outputs, str):
        raise ArgumentTypeError(f"FunctionStep: outputs must be a sequence of table names, "
                                f"e.g. outputs=({outputs!r},); received the str {outputs!r}.")
    return tuple(check_table_name(n, f"FunctionStep: outputs[{i}]")
                 for i, n in enumerate(outputs))


def _path_name(name: str, what: str, is_path: bool) -> str:
    """A step's name, checked where it becomes a folder of the output (a materialized
    step's ``<name>.zarr``, a named value's table columns and preview files)."""
    if not is_path:
        return name
    return check_path_name(name, what)


@dataclass(frozen=True)
class GroupTask:
    """One group to process: its key and its input images."""

    key: Key
    records: tuple[ImageRecord, ...]


def writes(steps: Sequence[FunctionStep], index: int) -> bool:
    """Whether step ``index``'s output is written (the last step, or materialized): its
    result takes the declared output type; any other step's stays where it was computed."""
    step = steps[index]
    return step.materialize or step.labels is not None or index == len(steps) - 1
