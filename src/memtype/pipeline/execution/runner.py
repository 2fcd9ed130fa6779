"""Running one group (one task) through every step; this is what executors run on workers.

Data flow inside a group: the images are loaded as 2D slices and stacked in the first
step's memory type; each step's output stacks stay in that step's memory type, on its
device, in a :class:`~memtype.storage.TieredStore` until the next step takes them. When the
next step stacks along the same components, the stacks pass as they are (the decorated
function converts them, zero-copy where the frameworks allow); otherwise they are split
into slices and restacked. Only materialized steps and the last step are written out.
"""

from __future__ import annotations

import errno
import os
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memtype import convert, detect_memory_type, stack_slices, unstack_slices
from memtype.errors import ShapeError
from memtype.frameworks import load_adapter
from memtype.gpu import get_gpu_manager, is_oom_error, release_memory
from memtype.pipeline.analysis.fields import (
    FieldValues,
    channel_field,
    field_key,
    field_rows,
    record_result,
    resolve_input,
)
from memtype.pipeline.execution.buffers import BufferPool
from memtype.pipeline.execution.executors import current_worker_index
from memtype.pipeline.execution.failures import record_outcome
from memtype.pipeline.execution.progress import measure
from memtype.pipeline.execution.report import Fallback, GroupResult, StepStats, without_group
from memtype.pipeline.io.outputs import OutputSpec, group_file_label
from memtype.pipeline.io.patterns import FilenamePattern, Key, key_label, stack_keys
from memtype.pipeline.io.tables import side_output_rows
from memtype.pipeline.model.modules import ModuleSpec, ensure_modules, shipped_modules
from memtype.pipeline.model.steps import FunctionStep, GroupTask, writes

if TYPE_CHECKING:
    from memtype.pipeline.planning import Plan, Replanner

__all__ = ["RunContext", "Stack", "execute_group", "DEFAULT_BUDGET"]

DEFAULT_BUDGET = 4 << 30
"""Bytes of intermediates a group keeps on its device before the tiered store spills."""


@dataclass
class RunContext:
    """What every task of a run shares (sent to each dask worker once)."""

    steps: tuple[FunctionStep, ...]
    pattern: FilenamePattern
    input_store: Any
    output: OutputSpec
    uses_gpu: bool = False
    intermediate_budget: int | None = None
    notify: Callable[[str, str], None] | None = field(default=None, compare=False)
    replanner: Replanner | None = None
    """The run's plans, for a group that runs out of memory (None: no plan, no fallback)."""
    buffers: BufferPool | None = field(default_factory=BufferPool, compare=False)
    """Host stacks reused across groups (None: a new one for every stack)."""
    capture: dict[str, list[tuple[Key, Any]]] | None = field(default=None, compare=False)
    """Step name -> every stack (or named result) it produced, as host arrays: a preview
    (:mod:`memtype.pipeline.analysis.preview`) keeps them all; None in a run."""

    def __reduce__(self) -> tuple[Any, ...]:
        # The shipped pipeline files are imported (by _context_shell) before the steps,
        # which refer to their functions by module name, are unpickled.
        state = dict(self.__dict__)
        state["notify"] = None  # progress callbacks stay in the driver process
        return (_context_shell, (shipped_modules(),), state)


def _context_shell(modules: tuple[ModuleSpec, ...]) -> RunContext:
    """An empty RunContext, after importing the pipeline files its steps come from."""
    ensure_modules(modules)
    return RunContext.__new__(RunContext)


@dataclass
class Stack:
    """One stack between steps: fixed field values, per-slice varying values, where its data is.

    ``ref`` is the stack's path in the group's tiered store (the data stays in its memory
    type and on its device there, unless the store spills it).
    """

    fixed: Key
    variable: tuple[str, ...]
    slices: list[Key]
    ref: str

    def slice_keys(self, order: Sequence[str]) -> list[Key]:
        """Every slice's full key, in the pattern's field order."""
        out = []
        for inner in self.slices:
            values = dict(self.fixed) | dict(inner)
            out.append(tuple((name, values[name]) for name in order if name in values))
        return out


class _Tier:
    """The group's intermediates: a tiered store plus a counter for fresh paths."""

    def __init__(self, budget: int | None, spill_dir: str | None) -> None:
        from memtype.storage import TieredStore  # psutil and the memory tiers: first group only

        self.store = TieredStore(DEFAULT_BUDGET if budget is None else budget,
                                 spill_dir=spill_dir)
        self._count = 0

    def put(self, data: Any) -> str:
        """Park an array (by reference, in its own memory type); returns its path."""
        self._count += 1
        path = f"s{self._count}"
        self.store.save(data, path, copy=False)
        return path

    def peek(self, ref: str) -> Any:
        """The array at ``ref``, which stays parked."""
        return self.store.load(ref)

    def take(self, ref: str) -> Any:
        """The array at ``ref``, removed from the store."""
        data = self.store.load(ref)
        self.store.delete(ref)
        return data

    def close(self) -> None:
        """Drop everything still parked."""
        self.store.delete_all("")


def _split_key(key: Key, variable: Sequence[str]) -> tuple[Key, Key]:
    """The fixed and the varying part of a full key."""
    return (tuple(kv for kv in key if kv[0] not in variable),
            tuple(kv for kv in key if kv[0] in variable))


def _shape_of(x: Any) -> tuple[int, ...]:
    """Any array's shape."""
    return load_adapter(detect_memory_type(x)).shape_of(x)


def _assigned_gpu(ctx: RunContext) -> int | None:
    """This worker's GPU from the GPU manager, or None without GPU steps or GPUs."""
    if not ctx.uses_gpu:
        return None
    return get_gpu_manager().assign(current_worker_index())



def _stack(ctx: RunContext, state: _GroupState, stats: StepStats, images: list[Any],
           memory_type: str, gpu_id: int | None) -> Any:
    """Images stacked in ``memory_type``: into a host buffer of the pool (reused from an
    earlier group where one of that shape and dtype is free) when they are NumPy planes."""
    staged = ctx.buffers.stack(images) if ctx.buffers is not None else None
    if staged is None:
        return stack_slices(images, memory_type, gpu_id)
    state.buffers.append(staged[0])
    stats.buffers_reused += staged[1]
    stats.buffers_new += not staged[1]
    return convert(staged[0], memory_type, gpu_id=gpu_id)


def _load(ctx: RunContext, first: FunctionStep, state: _GroupState,
          gpu_id: int | None) -> list[Stack]:
    """Read the group's images and stack them in the first step's memory type (into host
    buffers of earlier groups where the pool has free ones)."""
    task, stats = state.task, state.step_stats("[load]")
    keys = [r.key for r in task.records]
    stacks: list[Stack] = []
    names = [r.path for r in task.records]
    for fixed, members in stack_keys(keys, first.variable_components, names).items():
        images = ctx.input_store.load_batch([task.records[i].path for i in members])
        memory_type = first.calls_for(fixed)[0].input_type
        data = _stack(ctx, state, stats, images, memory_type, gpu_id)
        inner = [_split_key(keys[i], first.variable_components)[1] for i in members]
        stacks.append(Stack(fixed, first.variable_components, inner, state.tier.put(data)))
    return stacks


def _regroup(ctx: RunContext, state: _GroupState, stacks: list[Stack], step: FunctionStep,
             gpu_id: int | None) -> list[Stack]:
    """Restack along the step's variable components (a no-op when they are unchanged); host
    stacks are restacked into the pool's buffers."""
    if all(s.variable == step.variable_components for s in stacks):
        return stacks
    tier, order = state.tier, ctx.pattern.fields
    slices: list[Any] = []
    keys: list[Key] = []
    for s in stacks:
        data = tier.take(s.ref)
        slices.extend(unstack_slices(data, detect_memory_type(data), gpu_id))
        keys.extend(s.slice_keys(order))
    out: list[Stack] = []
    stats = state.step_stats(step.name)
    for fixed, members in stack_keys(keys, step.variable_components).items():
        memory_type = step.calls_for(fixed)[0].input_type
        data = _stack(ctx, state, stats, [slices[i] for i in members], memory_type, gpu_id)
        inner = [_split_key(keys[i], step.variable_components)[1] for i in members]
        out.append(Stack(fixed, step.variable_components, inner, tier.put(data)))
    return out


def _output_slices(step: FunctionStep, stack: Stack, image: Any) -> list[Key]:
    """The slice keys of a step's output: the first Z of its input's (a projection keeps one)."""
    shape = _shape_of(image)
    if len(shape) != 3:
        raise ShapeError(f"step {step.name!r} returned shape {shape}; expected a 3D [Z, Y, X] "
                         "stack (return x[None] for a single 2D image).")
    if shape[0] > len(stack.slices):
        raise ShapeError(
            f"step {step.name!r} returned {shape[0]} slices from a stack of {len(stack.slices)}; "
            "a step may keep or reduce the number of slices, not add to it.")
    return stack.slices[:shape[0]]


@dataclass
class _GroupState:
    """Per-group bookkeeping: figures, tables, and the step being run (for error messages)."""

    task: GroupTask
    tier: _Tier
    stats: dict[str, StepStats] = field(default_factory=dict)
    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    where: str = "loading the input images"
    phase: str = "loading the input images"
    """``where`` without the stack: the same in every group (errors are counted by it)."""
    written: list[tuple[str, str]] = field(default_factory=list)
    """The images this attempt wrote, removed again if it fails."""
    index: int | None = 0
    """The step whose device is in use (0 while loading; None while writing)."""
    buffers: list[Any] = field(default_factory=list)
    """The pool's buffers this group stacked into (given back when it ends)."""
    fields: dict[Key, FieldValues] = field(default_factory=dict)
    """Each field's named values (steps with ``inputs=``)."""

    def step_stats(self, name: str) -> StepStats:
        """The figures of one step of this group."""
        return self.stats.setdefault(name, StepStats(name))


def _run_step(ctx: RunContext, state: _GroupState, steps: Sequence[FunctionStep], index: int,
              stacks: list[Stack], gpu_id: int | None) -> list[Stack]:
    """Run one step over every stack, collecting its side outputs."""
    step = steps[index]
    state.index = index
    out: list[Stack] = []
    produced: list[Stack] = []
    with measure(state.step_stats(step.name)) as stats:
        for stack in _regroup(ctx, state, stacks, step, gpu_id):
            calls = step.calls_for(stack.fixed)
            state.phase = (f"step {index + 1} {step.name!r} (function "
                           f"{', '.join(c.label for c in calls)})")
            state.where = f"{state.phase} on {key_label(stack.fixed)}"
            data = (state.tier.peek if step.passes_input else state.tier.take)(stack.ref)
            image, side = step.run(data, stack.fixed, gpu_id, lazy=not writes(steps, index))
            _keep(ctx, step.name, stack.fixed, image)
            inner = _output_slices(step, stack, image)
            result = Stack(stack.fixed, stack.variable, inner, state.tier.put(image))
            (produced if step.passes_input else out).append(result)
            if step.passes_input:
                out.append(stack)
            for i, value in enumerate(side):
                name = step.side_output_name(i, len(side))
                rows = side_output_rows(stack.fixed, value, ctx.pattern.fields, name)
                state.tables.setdefault(name, []).extend(rows)
            stats.stacks += 1
    if produced and (step.labels is not None or step.materialize):
        _write(ctx, state, step, False, produced)  # a step that passes its input on
    for stack in produced:
        state.tier.take(stack.ref)
    return out


def _run_named(ctx: RunContext, state: _GroupState, step: FunctionStep, index: int,
               stacks: list[Stack], gpu_id: int | None) -> None:
    """Run a step with named inputs once per field; the stacks pass on unchanged. Its
    object sets (``labels=``) and materialized results are written once, for all fields."""
    state.index = index
    channel = channel_field(ctx.pattern.fields)
    names = dict(ctx.output.channel_names)
    by_field: dict[Key, list[Stack]] = {}
    for stack in stacks:
        by_field.setdefault(field_key(stack.fixed, channel), []).append(stack)
    produced: list[Stack] = []
    state.phase = f"step {index + 1} {step.name!r} (inputs {_references(step)})"
    with measure(state.step_stats(step.name)) as stats:
        for key, members in by_field.items():
            state.where = f"{state.phase} on {key_label(key)}"
            values = state.fields.setdefault(key, FieldValues())
            current = [(s.fixed, state.tier.peek(s.ref)) for s in members]
            named = {i.parameter: resolve_input(i, step.name, current, values, channel, names)
                     for i in step.inputs}
            result, side = step.run_named(named, gpu_id)
            record_result(step.name, step.labels, step.inputs, result, values)
            if not isinstance(result, dict):
                _keep(ctx, step.name, key, result)
            if step.labels is not None or step.materialize:
                produced.append(Stack(members[0].fixed, members[0].variable,
                                      members[0].slices[:1], state.tier.put(result)))
            for i, value in enumerate(side):
                name = step.side_output_name(i, len(side))
                rows = side_output_rows(key, value, ctx.pattern.fields, name)
                state.tables.setdefault(name, []).extend(rows)
            stats.stacks += 1
    if produced:
        _write(ctx, state, step, False, produced)
    for stack in produced:
        state.tier.take(stack.ref)


def _keep(ctx: RunContext, name: str, key: Key, data: Any) -> None:
    """Keep a step's result for a preview (a host copy), when the run captures them."""
    if ctx.capture is not None:
        ctx.capture.setdefault(name, []).append((key, convert(data, "numpy").copy()))


def _references(step: FunctionStep) -> str:
    """A named step's inputs, for messages: ``image=channel:1, markers=nuclei``."""
    return ", ".join(f"{i.parameter}={i.reference}" for i in step.inputs)


def _write(ctx: RunContext, state: _GroupState, step: FunctionStep, final: bool,
           stacks: list[Stack]) -> None:
    """Write a step's stacks to the output (as host arrays)."""
    state.where = state.phase = f"writing the output of step {step.name!r}"
    state.index = None
    with measure(state.step_stats("[write]")) as stats:
        items = []
        for s in stacks:
            host = convert(state.tier.peek(s.ref), "numpy")
            items.append((s.slice_keys(ctx.pattern.fields), host))
            stats.stacks += 1
        ctx.output.write_images(step.name, final, items, state.task.key, state.written)


def _process(ctx: RunContext, state: _GroupState, steps: Sequence[FunctionStep],
             gpu_id: int | None) -> None:
    """Load, run every step, write materialized and final outputs, tables and the done mark."""
    with measure(state.step_stats("[load]")) as stats:
        stacks = _load(ctx, steps[0], state, gpu_id)
        stats.stacks += len(stacks)
    last = len(steps) - 1
    for index, step in enumerate(steps):
        if ctx.notify is not None:
            ctx.notify(key_label(state.task.key), step.name)
        if step.inputs:
            _run_named(ctx, state, step, index, stacks, gpu_id)
            if index == last:
                _write(ctx, state, step, True, stacks)
            continue
        stacks = _run_step(ctx, state, steps, index, stacks, gpu_id)
        if writes(steps, index) and (index == last or not step.passes_input):
            _write(ctx, state, step, index == last, stacks)
    state.where = state.phase = "writing the side-output tables"
    for key, values in state.fields.items():
        for name, rows in field_rows(key, values).items():
            state.tables.setdefault(name, []).extend(rows)
    ctx.output.write_tables(state.task.key, state.tables)
    ctx.output.mark_done(state.task.key, [s.name for s in steps])


def execute_group(ctx: RunContext, task: GroupTask) -> GroupResult:
    """Process one group (:func:`_execute_group`); a failure is also written to the run's
    failure log beside the output (:mod:`memtype.pipeline.execution.failures`)."""
    return record_outcome(ctx.output.root, _execute_group(ctx, task),
                          group_file_label(task.key))


def _execute_group(ctx: RunContext, task: GroupTask) -> GroupResult:
    """Process one group; a failure is recorded in the result, never raised.

    Any exception a step raises fails its group only, ``SystemExit`` included; only
    ``KeyboardInterrupt`` propagates (stopping the run, which ``resume`` finishes later).
    A step that runs out of memory (:func:`memtype.gpu.is_oom_error`) makes the group run
    again with the run's next-best plan (see :mod:`memtype.pipeline.planning.replanning`), recorded
    in ``GroupResult.fallbacks``. The error message names the group, the step and the
    function; the traceback is kept as text so that it survives the trip back from a dask
    worker.
    """
    start = time.perf_counter()
    worker = f"worker {current_worker_index()}"
    gpu_id = _assigned_gpu(ctx)
    plan = ctx.replanner.first if ctx.replanner is not None else None
    steps, avoid = ctx.steps, frozenset[tuple[str, str]]()
    fallbacks: list[Fallback] = []
    retried: dict[str, StepStats] = {}  # the attempts that ran out of memory, merged
    while True:
        state, error = _attempt(ctx, task, steps, gpu_id)
        if error is None:
            return GroupResult(task.key, "done", None, None, list(state.stats.values()),
                               time.perf_counter() - start, worker, fallbacks,
                               plan.predicted() if fallbacks and plan is not None else None,
                               list(retried.values()))
        after = _fallback(ctx, plan, state, error, avoid)
        if after is not None:
            fallbacks.append(after[0])
            if after[1] is not None:
                plan, avoid = after[1], after[2]
                steps = ctx.replanner.steps_of(plan)  # type: ignore[union-attr]
                for stats in state.stats.values():
                    retried.setdefault(stats.name, StepStats(stats.name)).merge(stats)
                continue
        notes = "".join(f"; {n}" for n in getattr(error, "__notes__", ()))
        message = (f"group {key_label(task.key)} failed in {state.where}: "
                   f"{type(error).__name__}: {error}{notes}")
        return GroupResult(task.key, "failed", message,
                           "".join(traceback.format_exception(error)),
                           list(state.stats.values()), time.perf_counter() - start, worker,
                           fallbacks, None, list(retried.values()),
                           without_group(f"{state.phase}: {_what(error)}", task.key),
                           disk_full(error))


FULL_DISK = frozenset({errno.ENOSPC, errno.EDQUOT})
"""Errors that fail every later group alike: a run stops at the first one."""


def disk_full(error: BaseException) -> bool:
    """Whether ``error``, or an error it was raised from, is a full disk or quota."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, OSError) and current.errno in FULL_DISK:
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


def _what(error: BaseException) -> str:
    """An error as ``Type: message``; an operating-system error by its errno alone (its
    message names a file of one group, and every group's file fails alike)."""
    code = error.errno if isinstance(error, OSError) else None
    if code:
        return f"{type(error).__name__} [{errno.errorcode.get(code, code)}]: {os.strerror(code)}"
    return f"{type(error).__name__}: {error}"


def _discard(ctx: RunContext, state: _GroupState, error: BaseException) -> None:
    """Remove the images a failed attempt wrote; if that fails too, say so on ``error``."""
    try:
        ctx.output.discard_images(state.written)
    except OSError as exc:  # a note on the group's error: its images stay until a rerun
        error.add_note(f"its partly written images could not be removed ({exc}); "
                       "a resumed run writes them again")
    state.written.clear()


def _attempt(ctx: RunContext, task: GroupTask, steps: Sequence[FunctionStep],
             gpu_id: int | None) -> tuple[_GroupState, BaseException | None]:
    """One run of the group through ``steps``: its state, and the error that ended it."""
    spill = None if ctx.intermediate_budget is None else ctx.output.spill_dir(task.key)
    state = _GroupState(task, _Tier(ctx.intermediate_budget, spill))
    error: BaseException | None = None
    try:
        _process(ctx, state, steps, gpu_id)
    except KeyboardInterrupt as exc:  # the user stops the run (finished groups stay done)
        _discard(ctx, state, exc)
        raise
    except BaseException as exc:  # recorded in the result: the other groups go on
        # sys.exit() in a step (SystemExit), or any other BaseException a step raises,
        # fails its group only; escaping, it would end the whole run (or a dask worker)
        error = exc
        _discard(ctx, state, exc)
    finally:
        state.tier.close()
        if spill is not None:
            ctx.output.remove_spill(task.key)
        if ctx.buffers is not None:
            ctx.buffers.give_back(state.buffers)
        state.buffers.clear()
    return state, error


def _fallback(ctx: RunContext, plan: Plan | None, state: _GroupState, error: BaseException,
              avoid: frozenset[tuple[str, str]]
              ) -> tuple[Fallback, Plan | None, frozenset[tuple[str, str]]] | None:
    """After an out-of-memory error in a step: the record, and the next plan (or None)."""
    if ctx.replanner is None or plan is None or state.index is None \
            or not isinstance(error, Exception) or not is_oom_error(error):
        return None
    traceback.clear_frames(error.__traceback__)  # the failed attempt's arrays can go
    release_memory()
    phase = plan.phases[state.index + 1]
    ran_in = f"{phase.memory_type} ({phase.device})"
    avoid = avoid | {(phase.name, phase.memory_type)}
    nxt = ctx.replanner.plan(avoid)
    what = f"{type(error).__name__}: {error}"
    if isinstance(nxt, str):
        return Fallback(phase.name, ran_in, what, {}, nxt), None, avoid
    return Fallback(phase.name, ran_in, what, dict(nxt.choices)), nxt, avoid
