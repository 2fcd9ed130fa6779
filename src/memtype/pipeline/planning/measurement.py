"""What planning measures: the stacks between steps, and what each conversion costs.

The stacks' shapes and dtype after each step come from one trial of the step per plan on a
ramp of the group's real shape (:func:`infer_boundaries`); a conversion's cost from making
it once on a sample of the real shape and dtype (:class:`Prober`). The planner asks
:func:`memtype.convert` itself (capturing its events as the run's hook counts them), so a
prediction is what the run's hook will count: the same routes, the same zero-copy rules,
the same events. The trial conversions are hidden from the user's conversion hooks
(:func:`memtype.capture_conversions`).
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from memtype import capture_conversions, convert, detect_memory_type, gpu
from memtype.dtypes import entry_dtype
from memtype.errors import (
    ArgumentTypeError,
    DeviceError,
    InvalidArgumentError,
    MemoryBudgetError,
    MemtypeError,
    ShapeError,
)
from memtype.frameworks import aligned_copy, load_adapter
from memtype.pipeline.io.patterns import stack_keys
from memtype.pipeline.model.steps import FunctionStep, GroupTask, writes
from memtype.pipeline.planning.model import Boundary, Shape

__all__ = ["Probe", "Prober", "PRESSURE_LIMIT", "device_budgets", "group_shapes",
           "image_shapes", "infer_boundaries", "Trials"]

PRESSURE_LIMIT = 0.9
"""A managed GPU at least this full (``memory_pressure``) takes no planned step."""


@dataclass(frozen=True)
class Probe:
    """One conversion of one stack: events the hook sees, bytes, zero-copy, host crossing."""

    events: int
    nbytes: int
    zero_copy: bool
    crosses_host: bool
    source_device: str
    target_device: str


class Prober:
    """Samples per (memory type, shape, dtype) and the conversions between them, cached."""

    def __init__(self, gpu_id: int | None, budgets: Mapping[Any, Any] | None = None) -> None:
        self.gpu_id = gpu_id
        self.budgets = device_budgets(budgets)
        self._samples: dict[tuple[str, Shape, str], Any] = {}
        self._probes: dict[tuple[str, str, Shape, str], Probe] = {}

    def sample(self, memory_type: str, shape: Shape, dtype: np.dtype[Any]) -> Any:
        """A zero array of this type, shape and dtype on the run's device.

        Raises
        ------
        MemtypeError
            The framework is not installed, or has no device (``DeviceError``), or no
            room for the sample (``MemoryBudgetError``).
        """
        key = (memory_type, shape, dtype.str)
        if key not in self._samples:
            self._samples[key] = _zeros(memory_type, shape, dtype, self.gpu_id)
        return self._samples[key]

    def device(self, memory_type: str, shape: Shape, dtype: np.dtype[Any]) -> Any:
        """The device a sample of this type lives on (a ``Device``)."""
        return load_adapter(memory_type).device_of(self.sample(memory_type, shape, dtype))

    def probe(self, source: str, target: str, shape: Shape, dtype: np.dtype[Any],
              into_function: bool = False) -> Probe:
        """Convert a sample once, counting what the conversion hook reports.

        ``into_function``: the conversion a decorated function of ``target`` makes of its
        input, which first takes the dtype :func:`memtype.dtypes.entry_dtype` decides
        (float64 narrowed for a framework without it); else a direct :func:`memtype.convert`.

        Raises
        ------
        MemtypeError
            The conversion is not possible (a blocked GPU -> GPU path, a dtype the target
            cannot hold, a missing framework).
        """
        if into_function and source != target:
            dtype = entry_dtype(dtype, target)
        key = (source, target, shape, dtype.str)
        if key in self._probes:
            return self._probes[key]
        x = self.sample(source, shape, dtype)
        sdev = load_adapter(source).device_of(x)
        with capture_conversions() as events:
            out = convert(x, target, gpu_id=self.gpu_id)
        ddev = load_adapter(target).device_of(out)
        zero = all(e.zero_copy for e in events)
        result = Probe(len(events), sum(e.nbytes for e in events), zero,
                       bool(events) and not zero and (sdev.is_gpu or ddev.is_gpu),
                       str(sdev), str(ddev))
        self._probes[key] = result
        return result

    def available(self, memory_type: str, shape: Shape, dtype: np.dtype[Any],
                  need: int = 0) -> str | None:
        """None when the type can hold ``need`` bytes on a device with room, else the reason.

        Room is the device's entry in ``budgets`` (bytes, keyed ``"cuda:0"``,
        ``"opencl:0"``...); for a managed GPU also its free memory (the GPU manager) and its
        ``memory_pressure`` (at most :data:`PRESSURE_LIMIT`).
        """
        try:
            device = self.device(memory_type, shape, dtype)
        except MemtypeError as exc:  # not installed, no device: recorded as the reason
            return f"{type(exc).__name__}: {exc}"
        room = self.budgets.get(str(device))
        if room is not None and need > room:
            return (f"{device} has {_mib(room)} of room (budget); the step needs {_mib(need)} "
                    "for its input and output")
        if device.is_managed_gpu:
            return _gpu_room(device.index, need)
        return None


def device_budgets(budgets: object) -> dict[str, int]:
    """``budgets`` checked: device name -> bytes of room (``{"opencl:0": 2 << 30}``).

    A key is anything :func:`memtype.gpu.as_device` takes (``"cuda:0"``, ``"opencl:0"``,
    ``"cpu"``, a ``Device``, a managed GPU's index), named as the device prints; a value is
    an int number of bytes, at least 0. None is no budgets.

    Raises
    ------
    ArgumentTypeError
        ``budgets`` is not a mapping, or a value is not an int (a bool, ``"1GB"``, a float).
    DeviceError
        A key that names no device of a kind the framework table knows (``"opnecl:0"``).
    InvalidArgumentError
        A negative value, or two keys that name one device (``"cuda:0"`` and ``0``).
    """
    if budgets is None:
        return {}
    if not isinstance(budgets, Mapping):
        raise ArgumentTypeError("budgets must be a dict of device -> bytes of room (e.g. "
                                f"{{'opencl:0': 2 << 30}}); received {type(budgets).__name__}.")
    checked: dict[str, int] = {}
    for key, room in budgets.items():
        device = _budget_device(key)
        if isinstance(room, bool) or not isinstance(room, numbers.Integral):
            raise ArgumentTypeError(
                f"budgets[{key!r}] must be an int number of bytes (e.g. 2 << 30 for 2 GiB); "
                f"received {room!r} ({type(room).__name__}).")
        if room < 0:
            raise InvalidArgumentError(f"budgets[{key!r}] must be at least 0 bytes; "
                                       f"received {room}.")
        if device in checked:
            raise InvalidArgumentError(f"budgets: two keys name the device {device}; expected "
                                       f"one entry per device; received {list(budgets)!r}.")
        checked[device] = int(room)
    return checked


def _budget_device(key: object) -> str:
    """The name of the device a budgets key names (DeviceError naming the key otherwise)."""
    try:  # as_device checks the key's type itself: anything else is a DeviceError
        return str(gpu.as_device(cast(gpu.GpuId, key)))
    except DeviceError as exc:
        raise DeviceError(f"budgets: the key {key!r} names no device. {exc}") from None


def _host_zeros(memory_type: str, shape: Shape, dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
    """Host zeros laid out as that framework's own results are, which decides whether a host
    array enters JAX or TensorFlow without a copy: 64-byte aligned for torch's, XLA's and
    TensorFlow's allocators; for the host-native type (a NumPy step's result, a loaded stack)
    16 bytes past a 64-byte boundary, NumPy's usual and worst case (malloc aligns 16; a
    64-byte aligned result, which happens by chance, then shares where a copy was planned).
    An object (or object-holding structured) dtype is NumPy's own allocation: no framework
    but the host holds references, and converting the sample says so (MemoryConversionError)."""
    zeros = np.zeros(shape, dtype)
    if dtype.hasobject:  # references cannot be placed at an address; only the host holds them
        return zeros
    host_native = load_adapter(memory_type).host_native
    return aligned_copy(zeros, past=16 if host_native else 0)


def _zeros(memory_type: str, shape: Shape, dtype: np.dtype[Any], gpu_id: int | None) -> Any:
    """A zero sample; a device without room for it raises MemoryBudgetError."""
    try:
        return convert(_host_zeros(memory_type, shape, dtype), memory_type, gpu_id=gpu_id)
    except Exception as exc:  # an out-of-memory error becomes a memtype error; others go on
        if not gpu.is_oom_error(exc):
            raise
        what = f"{type(exc).__name__}: {exc}"
    raise MemoryBudgetError(f"no room in {memory_type} for a sample of shape {shape} "
                            f"{dtype} ({what}); expected room for the group's stacks.")


def _mib(nbytes: int) -> str:
    return f"{nbytes / (1 << 20):.1f} MiB"


def _gpu_room(index: int, need: int) -> str | None:
    """Why a managed GPU has no room for ``need`` bytes now, or None."""
    pressure = gpu.memory_pressure(index)
    if pressure >= PRESSURE_LIMIT:
        return f"GPU {index} is {pressure:.0%} full (limit {PRESSURE_LIMIT:.0%})"
    free = gpu.get_gpu_manager().mem_get_info(index)[0]
    if need > free:
        return f"GPU {index} has {_mib(free)} free; the step needs {_mib(need)}"
    return None


def group_shapes(store: Any, task: GroupTask,
                 first: FunctionStep) -> tuple[list[Shape], np.dtype[Any]]:
    """The stack shapes of one group (as the first step stacks it) and its first image's dtype.

    Only the group's first image is read: the others are taken to share its shape and dtype.
    """
    image = store.load_batch([task.records[0].path])[0]
    adapter = load_adapter(detect_memory_type(image))
    plane = tuple(adapter.shape_of(image))
    keys = [r.key for r in task.records]
    groups = stack_keys(keys, first.variable_components)
    return [(len(members), *plane) for members in groups.values()], np.dtype(
        adapter.dtype_of(image))


def image_shapes(images: Sequence[Any] | Any) -> tuple[list[Shape], np.dtype[Any]]:
    """One stack: a 3D array, or a sequence of 2D arrays of one shape.

    Raises
    ------
    ShapeError
        An array that is not 3D, or slices that are not 2D.
    ValueError
        An empty sequence.
    """
    if isinstance(images, (list, tuple)):
        if not images:
            raise InvalidArgumentError("Pipeline.plan: expected images; received an empty "
                                       "sequence.")
        adapter = load_adapter(detect_memory_type(images[0]))
        plane = tuple(adapter.shape_of(images[0]))
        if len(plane) != 2:
            raise ShapeError(f"Pipeline.plan: expected 2D images; received shape {plane}.")
        return [(len(images), *plane)], np.dtype(adapter.dtype_of(images[0]))
    adapter = load_adapter(detect_memory_type(images))
    shape = tuple(adapter.shape_of(images))
    if len(shape) != 3:
        raise ShapeError(f"Pipeline.plan: expected a 3D [Z, Y, X] stack or a list of 2D "
                         f"images; received shape {shape}.")
    return [shape], np.dtype(adapter.dtype_of(images))



Trials = dict[tuple[Any, ...], "tuple[Shape, np.dtype[Any]] | BaseException"]
"""One plan's trial runs: each step's result (or error) per input shape, dtype and laziness."""


def infer_boundaries(steps: Sequence[FunctionStep], shapes: list[Shape],
                     dtype: np.dtype[Any], trials: Trials | None = None,
                     ) -> tuple[list[Boundary], list[str]]:
    """The stacks before each step and after the last, and notes on what was assumed.

    Each step runs at most once per plan for each distinct stack shape it receives (``trials``
    keeps the results across the calls of one plan), on a ramp of the group's real shape and
    dtype: the result's shape and dtype are the step's. A step that fails on the sample (or
    routes by a field) is taken to keep its stacks as they are, and the note says so.
    """
    trials = {} if trials is None else trials
    bounds: list[Boundary] = [(list(shapes), dtype)]
    notes: list[str] = []
    for index, step in enumerate(steps):
        current, kind = bounds[-1]
        if step.inputs:  # named inputs: it runs per field and passes the stacks on
            bounds.append((current, kind))
            continue
        lazy = not writes(steps, index)
        out = [_trial_once(trials, step, s, kind, lazy) for s in current]
        failed = next((o for o in out if isinstance(o, BaseException)), None)
        if failed is not None:  # recorded in the plan: the step is assumed to keep them
            notes.append(f"step {step.name!r} was not tried on a sample "
                         f"({type(failed).__name__}: {failed}); its output is assumed to "
                         "keep the shape and dtype")
            bounds.append((current, kind))
            continue
        done = cast(list[tuple[Shape, np.dtype[Any]]], out)
        bounds.append(([s for s, _ in done], done[0][1]))
    return bounds, notes


def _trial_key(step: FunctionStep, shape: Shape, dtype: np.dtype[Any],
               lazy: bool) -> tuple[Any, ...]:
    """What decides a trial's result: the functions and options that run, and the input."""
    calls = tuple((id(c.func), id(c.kwargs)) for c in step.chain)
    return calls, id(step.kwargs), step.routes is not None, shape, dtype.str, lazy


def _trial_once(trials: Trials, step: FunctionStep, shape: Shape, dtype: np.dtype[Any],
                lazy: bool) -> tuple[Shape, np.dtype[Any]] | BaseException:
    """The step's trial on ``shape``, run once per plan (its error, if it failed)."""
    key = _trial_key(step, shape, dtype, lazy)
    if key not in trials:
        try:
            trials[key] = _trial(step, shape, dtype, lazy)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noted in the plan; the step is assumed to keep them
            # SystemExit too: as in the run (runner.execute_group), a step's exit fails its
            # group only, and the run reports it there
            trials[key] = exc
    return trials[key]


def _trial(step: FunctionStep, shape: Shape, dtype: np.dtype[Any],
           lazy: bool) -> tuple[Shape, np.dtype[Any]]:
    """The step's output shape and dtype for stacks of ``shape``, from one ramp of it."""
    if step.routes is not None:
        raise InvalidArgumentError("the step routes by a field value")
    ramp = np.resize(np.arange(1, 98).astype(dtype), shape)  # no float64 copy of the stack
    image, _ = step.run(ramp, (), None, lazy)
    adapter = load_adapter(detect_memory_type(image))
    out = tuple(adapter.shape_of(image))
    if len(out) != 3:
        raise ShapeError(f"it returned shape {out}")
    return out, np.dtype(adapter.dtype_of(image))
