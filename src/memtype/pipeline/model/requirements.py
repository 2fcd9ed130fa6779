"""Which frameworks a pipeline needs: checked before anything runs.

A step with one implementation (a function, a chain, a dict routed by a field) needs the
framework of every memory type its functions take or return, installed and with a device
to hold arrays (a GPU-only framework without its GPU, pyclesperanto where no OpenCL runtime
compiles); a missing or unusable one fails every group in the same way, so
:func:`check_frameworks` raises once, before the first group runs. A step with several
implementations (:class:`~memtype.pipeline.model.variants.Variants`) loses the implementations
whose frameworks are missing or unusable (the plan says why) and fails only when none is
left.
"""

from __future__ import annotations

from collections.abc import Sequence

from memtype.errors import DeviceError, FrameworkNotInstalledError
from memtype.frameworks import DeviceAdapter, diagnostics, get_framework, is_loaded, load_adapter
from memtype.pipeline.model.steps import FunctionStep, StepCall

__all__ = ["check_frameworks", "missing_reason", "first_runnable"]


Unusable = FrameworkNotInstalledError | DeviceError


def missing_reason(memory_type: str) -> Unusable | None:
    """Why ``memory_type`` cannot hold arrays here (its import fails, or it has only device
    arrays and no device), or None when it can."""
    try:
        adapter = load_adapter(memory_type)
    except FrameworkNotInstalledError as exc:
        return exc
    framework = get_framework(memory_type)
    if framework.gpu_only and not (isinstance(adapter, DeviceAdapter)
                                   and adapter.gpu_count() > 0):
        why = (diagnostics(adapter).no_device_reason()
               or f"no {framework.gpu_kind} device is visible")
        return DeviceError(f"{framework.name} has no device here: {why}")
    return None


def _call_missing(call: StepCall) -> tuple[str, Unusable] | None:
    """The first framework (name, error) a call takes or returns that cannot be imported
    or has no device."""
    for memory_type in dict.fromkeys((call.input_type, call.output_type)):
        error = missing_reason(memory_type)
        if error is not None:
            return memory_type, error
    return None


def _imported(call: StepCall) -> bool:
    """Whether every framework ``call`` takes or returns is imported (asking about it
    imports nothing)."""
    return all(is_loaded(get_framework(m)) for m in (call.input_type, call.output_type))


def first_runnable(step: FunctionStep) -> FunctionStep:
    """The step with its first implementation whose frameworks import, those already
    imported first (itself when it has one implementation, or none imports)."""
    options = step.variants
    if options is None:
        return step
    calls = [(name, StepCall(func, step.chain[0].kwargs))
             for name, func in options.implementations.items()]
    for name, call in sorted(calls, key=lambda nc: not _imported(nc[1])):
        if _call_missing(call) is None:
            return step.with_implementation(name)
    return step


def _refuse(step: FunctionStep, found: Sequence[tuple[str, Unusable]],
            what: str) -> Unusable:
    """The error naming the step, its missing (or device-less) frameworks and the fix."""
    missing = dict(found)
    root = _root(found[0][1])
    if isinstance(found[0][1], DeviceError):
        return DeviceError(
            f"Pipeline step {step.name!r} {what} {', '.join(missing)}, which cannot run "
            f"here: {str(root).rstrip('.')}; expected a framework with a device for each step. "
            "Give the step "
            "an implementation in another framework (mt.variants, or a catalog name), then "
            "those steps use it.")
    hints = "; ".join(get_framework(name).install_hint for name in missing)
    return FrameworkNotInstalledError(
        f"Pipeline step {step.name!r} {what} {', '.join(missing)}, which cannot be imported "
        f"here ({type(root).__name__}: {root}); expected every framework a step runs in to "
        f"be installed. Install with: {hints}; or give the step an implementation in an "
        "installed framework (mt.variants).")


def check_frameworks(steps: Sequence[FunctionStep]) -> None:
    """Raise before a run (or a plan) when a step cannot run for a missing framework.

    Raises
    ------
    FrameworkNotInstalledError
        A step whose only implementation (or every implementation) needs a framework that
        cannot be imported; chained to the import error.
    DeviceError
        The same for a framework that imports but has no device to hold arrays (pyclesperanto
        where no OpenCL runtime compiles, CuPy without a GPU), naming why.
    """
    for step in steps:
        calls = step.all_calls()
        if step.variants is not None and any(_call_missing(c) is None for c in
                                             sorted(calls, key=lambda c: not _imported(c))):
            continue  # one implementation that imports is enough: the others are not imported
        found = [m for call in calls if (m := _call_missing(call)) is not None]
        if not found:
            continue
        if step.variants is None:
            raise _refuse(step, found, "needs") from _root(found[0][1])
        if len(found) == len(step.variants.implementations):
            raise _refuse(step, found, "has no implementation it can run: each needs") \
                from _root(found[0][1])


def _root(error: BaseException) -> BaseException:
    """The import error beneath a FrameworkNotInstalledError (itself when there is none)."""
    return error.__cause__ if error.__cause__ is not None else error
