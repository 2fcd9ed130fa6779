"""The search: a shortest path over steps x implementations.

A node is one implementation of one step (a step with one function has one node); an edge is
the conversion of the group's stacks from one node's output type to the next node's input
type, its cost measured by :class:`~memtype.pipeline.planning.measurement.Prober` on a sample
of the first group's stacks at that point (shapes and dtypes from one trial of each step,
:func:`~memtype.pipeline.planning.measurement.infer_boundaries`). Ties go to the earlier
declared implementation. The prediction assumes that every implementation of a step returns
the same shape and dtype, and that every step stacks along the same components as the first.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from memtype import capture_conversions
from memtype.errors import InvalidArgumentError, MemtypeError
from memtype.frameworks import (
    data_nbytes,
    get_framework,
    is_installed,
    is_loaded,
    unusable_reason,
)
from memtype.gpu import release_memory
from memtype.pipeline.model.requirements import first_runnable
from memtype.pipeline.model.steps import FunctionStep, writes
from memtype.pipeline.planning.measurement import Probe, Prober, Trials, infer_boundaries
from memtype.pipeline.planning.model import (
    HOST_STACK,
    Boundary,
    Plan,
    PlannedConversion,
    PlannedStep,
    Shape,
)

__all__ = ["make_plan", "NOT_IMPORTED"]

NOT_IMPORTED = ("not imported: no stacks are there, and an implementation in an imported "
                "framework can run")
"""Why a variants step's implementation in a framework nothing imported is not compared."""

@dataclass(frozen=True)
class _Option:
    """One way to run a step: its memory types in and out, and what runs inside it."""

    name: str
    input_type: str
    output_type: str
    inner: tuple[_Inner, ...]  # conversions inside the step (chains, declared outputs)


_Inner = tuple[str, str, bool]
"""A conversion inside a step: source, target, and whether a function's decorator makes it
(into the function: the dtype may narrow, :func:`memtype.dtypes.entry_dtype`)."""


def _calls_inner(types: Sequence[tuple[str, str]], writes: bool) -> tuple[str, tuple[_Inner, ...]]:
    """A chain's output type and inner conversions, from its calls' (input, output) types.

    Every call but the one whose result is written computes lazily
    (:meth:`~memtype.decorators.MemoryTypeFunction.computing`): its result stays in its
    input type, and the next call's decorator converts it once.
    """
    inner: list[_Inner] = []
    prev = types[0][0]
    for k, (source, declared) in enumerate(types):
        if prev != source:
            inner.append((prev, source, True))
        prev = declared if writes and k == len(types) - 1 else source
        if prev != source:
            inner.append((source, prev, False))
    return prev, tuple(inner)


def _options(step: FunctionStep, writes: bool) -> list[_Option]:
    """The step's implementations (one for a step with one function or chain); ``writes``:
    its result is written (declared output type), else it stays where it was computed."""
    options = step.variants
    if options is not None:
        out = []
        for name, func in options.implementations.items():
            i = func.input_memory_type.value
            o, inner = _calls_inner([(i, func.output_memory_type.value)], writes)
            out.append(_Option(name, i, o, inner))
        return out
    calls = step.all_calls() if step.routes is not None else list(step.chain)
    output, inner = _calls_inner([(c.input_type, c.output_type) for c in calls], writes)
    if step.routes is not None:
        inner = ()  # routed chains differ per stack: no prediction inside the step
    return [_Option(calls[0].input_type, calls[0].input_type, output, inner)]


def _not_installed(memory_type: str) -> str:
    """Why a framework cannot run when its module cannot be found, or its runtime is known
    to be unusable ('' when it can run), found without importing it."""
    framework = get_framework(memory_type)
    if is_installed(framework):
        unusable = unusable_reason(framework)
        return f"DeviceError: {unusable}" if unusable else ""
    return (f"FrameworkNotInstalledError: {framework.name} is not installed (no module "
            f"{framework.module!r}); install with: {framework.install_hint}")


class _Planner:
    """Forward and backward shortest paths over steps x options."""

    def __init__(self, steps: Sequence[FunctionStep], bounds: list[Boundary],
                 prober: Prober, avoid: Collection[tuple[str, str]] = (),
                 import_all: bool = False) -> None:
        self.steps, self.bounds, self.prober = steps, bounds, prober
        self.options = [_options(s, self._writes(i)) for i, s in enumerate(steps)]
        self.unavailable: dict[tuple[int, int], str] = {}
        self.notes: list[str] = []
        self._conversions: dict[tuple[str, str, int, bool], PlannedConversion | None] = {}
        for i, opts in enumerate(self.options):
            # a framework nothing has imported holds no stacks: converting into it costs
            # more than staying, so it is not imported only to be compared (unless no
            # implementation in an imported one can run: import_all)
            later = [j for j, o in enumerate(opts) if steps[i].variants is not None
                     and not import_all and not is_loaded(get_framework(o.input_type))]
            for j in range(len(opts)):
                if j not in later:
                    self._check(i, j, avoid)
            runs = any((i, j) not in self.unavailable for j in range(len(opts)) if j not in later)
            for j in later:
                absent = _not_installed(self.options[i][j].input_type)
                if absent or runs:
                    self.unavailable[(i, j)] = absent or NOT_IMPORTED
                else:
                    self._check(i, j, avoid)

    def _check(self, i: int, j: int, avoid: Collection[tuple[str, str]]) -> None:
        """Record why option ``j`` of step ``i`` cannot run, if it cannot. A step with one
        implementation runs it, room or not, unless it ran out of memory in it during the
        run (then there is no plan)."""
        o, step = self.options[i][j], self.steps[i]
        shapes, dtype = self.bounds[0]
        need = _nbytes(self.bounds[i]) + _nbytes(self.bounds[i + 1])
        reason = (f"ran out of memory in {o.name} during the run"
                  if (step.name, o.name) in avoid else
                  self.prober.available(o.input_type, shapes[0], dtype, need)
                  if step.variants is not None else None)
        if reason is not None:
            self.unavailable[(i, j)] = reason

    def conversion(self, source: str, target: str, at: int,
                   into_function: bool = False) -> PlannedConversion | None:
        """The group's stacks before step ``at`` converted (by a function's decorator, or
        directly: loads and writes); None when that fails."""
        key = (source, target, at, into_function)
        if key not in self._conversions:
            self._conversions[key] = self._convert(source, target, *self.bounds[at],
                                                   into_function)
        return self._conversions[key]

    def _convert(self, source: str, target: str, shapes: list[Shape], dtype: np.dtype[Any],
                 into_function: bool) -> PlannedConversion | None:
        """Probe the conversion of every stack shape."""
        probes: list[Probe] = []
        for shape in shapes:
            try:
                self.prober.sample(source, shape, dtype)
            except MemtypeError as exc:  # no stack of the source type: no path through it
                self.notes.append(f"{source} cannot hold the stacks ({shape} {dtype}): "
                                  f"{str(exc).rstrip('.')}")
                return None
            try:
                probes.append(self.prober.probe(source, target, shape, dtype, into_function))
            except MemtypeError as exc:  # an impossible edge: no path through it
                self.notes.append(f"{source} -> {target} is not possible: "
                                  f"{str(exc).rstrip('.')}")
                return None
        first = probes[0]
        return PlannedConversion(source, target, first.source_device, first.target_device,
                                 sum(p.events for p in probes), sum(p.nbytes for p in probes),
                                 all(p.zero_copy for p in probes),
                                 any(p.crosses_host for p in probes))

    def edge(self, source: str, target: str, at: int, into_function: bool = True) -> float:
        conv = self.conversion(source, target, at, into_function)
        return math.inf if conv is None else conv.cost

    def node(self, i: int, j: int) -> float:
        """Cost inside step ``i`` with option ``j``, plus its write when it writes."""
        if (i, j) in self.unavailable:
            return math.inf
        o = self.options[i][j]
        cost = sum(self.edge(s, t, i + 1, f) for s, t, f in o.inner)
        if self._writes(i):
            cost += self.edge(o.output_type, HOST_STACK, i + 1, False)
        return cost

    def _writes(self, i: int) -> bool:
        return writes(self.steps, i)

    def forward(self) -> tuple[list[list[float]], list[list[int]]]:
        """Cheapest cost ending at each node, and its predecessor (ties: declared order).
        No conversion into or out of an unavailable node is probed."""
        cost = [[math.inf if (0, j) in self.unavailable else
                 self.edge(HOST_STACK, o.input_type, 0, False) + self.node(0, j)
                 for j, o in enumerate(self.options[0])]]
        back: list[list[int]] = [[-1] * len(self.options[0])]
        for i in range(1, len(self.steps)):
            row, prev = [], []
            for k, o in enumerate(self.options[i]):
                if (i, k) in self.unavailable:
                    row.append(math.inf)
                    prev.append(0)
                    continue
                here = [math.inf if math.isinf(cost[-1][j]) else
                        cost[-1][j] + self.edge(p.output_type, o.input_type, i)
                        for j, p in enumerate(self.options[i - 1])]
                best = min(range(len(here)), key=lambda j: (here[j], j))
                row.append(here[best] + self.node(i, k))
                prev.append(best)
            cost.append(row)
            back.append(prev)
        return cost, back

    def backward(self) -> list[list[float]]:
        """Cheapest cost from each node (after it) to the end."""
        last = len(self.steps) - 1
        rest = [[0.0] * len(self.options[last])]
        for i in range(last - 1, -1, -1):
            nxt = self.options[i + 1]
            rest.insert(0, [math.inf if (i, j) in self.unavailable else
                            min(math.inf if (i + 1, k) in self.unavailable else
                                self.edge(o.output_type, n.input_type, i + 1)
                                + self.node(i + 1, k) + rest[0][k]
                                for k, n in enumerate(nxt))
                            for j, o in enumerate(self.options[i])])
        return rest


def _explain(planner: _Planner, i: int, chosen: int, through: list[float],
             said: set[str]) -> str:
    """Why step ``i`` runs ``chosen``: every option's best whole-chain cost (a reason
    already given for an earlier step is "as above": a plan says each reason once)."""
    parts = []
    for j, o in enumerate(planner.options[i]):
        if (i, j) in planner.unavailable:
            why = planner.unavailable[(i, j)]
            parts.append(f"{o.name} unavailable ({'as above' if why in said else why})")
            said.add(why)
        else:
            mark = " <- chosen" if j == chosen else ""
            parts.append(f"{o.name} {through[j]:.0f}{mark}")
    return "chain cost with " + ", ".join(parts)


def _unavailable_kind(reason: str) -> str:
    """Why an implementation is out, in words for a plan's reason."""
    if reason.startswith("ran out of memory"):
        return "ran out of memory during the run"
    if reason == NOT_IMPORTED:
        return "not imported"
    if reason.startswith("FrameworkNotInstalledError"):
        return "not installed"
    if reason.split(" ", 1)[0].endswith(":"):  # "<Error>: ..." from the device
        return "cannot run here"
    return "no room in the memory budget"


def _reason(planner: _Planner, i: int, chosen: int, through: list[float], arrives: str) -> str:
    """Why step ``i`` runs option ``chosen``, in a phrase: the data is already there, the
    cheaper measured cost, the only implementation installed (or with room), or the
    declared order among equal costs. ``arrives``: the memory type its input comes in."""
    options = planner.options[i]
    others = [j for j in range(len(options)) if j != chosen]
    out = {j: _unavailable_kind(planner.unavailable[(i, j)]) for j in others
           if (i, j) in planner.unavailable}
    runnable = [j for j in others if j not in out and not math.isinf(through[j])]
    kinds = sorted(set(out.values()) - {"not imported"})
    if options[chosen].input_type == arrives and kinds == ["not installed"]:
        kinds = []  # where the data is, an absent library (a GPU one on a CPU machine) is no reason
    if not runnable and (kinds or options[chosen].input_type != arrives):
        if not kinds:
            if out:
                names = ", ".join(options[j].name for j in out)
                return f"the only implementation in an imported framework ({names}: not imported)"
            return "the only implementation that can take the stacks"
        if kinds == ["not installed"]:
            return "the only implementation installed"
        why = "; ".join(f"{', '.join(options[j].name for j in out if out[j] == k)}: {k}"
                        for k in sorted(set(out.values())))
        return f"the only implementation that can run ({why})"
    if options[chosen].input_type == arrives:
        return f"the data is already there ({arrives})"
    best_other = min(runnable, key=lambda j: through[j])
    if through[best_other] == through[chosen]:
        return (f"declared before {options[best_other].name}, at the same cost "
                f"({through[chosen]:.0f})")
    return (f"cheaper measured cost ({through[chosen]:.0f}; next "
            f"{options[best_other].name} {through[best_other]:.0f})")


def make_plan(steps: Sequence[FunctionStep], shapes: list[Shape], dtype: np.dtype[Any],
              gpu_id: int | None = None, *, budgets: Mapping[str, int] | None = None,
              avoid: Collection[tuple[str, str]] = ()) -> Plan:
    """Plan ``steps`` for one group of stacks of these shapes and dtype.

    The trial conversions and step runs on samples are hidden from the user's conversion
    hooks (:func:`memtype.capture_conversions`). ``budgets`` gives devices' room in bytes
    (``{"opencl:0": 1 << 30}``): an implementation whose step input and output do not fit
    there takes no part. ``avoid`` holds ``(step name, memory type)`` pairs the plan must not
    use: a run's next-best plan after those steps ran out of memory in those types. The
    device memory the samples and trial runs took, cached by the frameworks' allocators, is
    handed back at the end (:func:`memtype.gpu.oom.release_memory`): a run starts on
    devices as planning found them (a full allocator cache would make the run's tiered
    store spill under pressure, which the plan does not predict).

    Raises
    ------
    ValueError
        No chain of available implementations and possible conversions exists.
    """
    try:
        with capture_conversions():
            return _make_plan(steps, shapes, dtype, Prober(gpu_id, budgets), avoid)
    finally:
        release_memory()


def _make_plan(steps: Sequence[FunctionStep], shapes: list[Shape], dtype: np.dtype[Any],
               prober: Prober, avoid: Collection[tuple[str, str]]) -> Plan:
    runs: Trials = {}  # each step runs at most once per plan for each shape it receives
    bounds, trials = infer_boundaries([first_runnable(s) for s in steps], shapes, dtype, runs)
    planner = _Planner(steps, bounds, prober, avoid)
    cost, back = planner.forward()
    last = len(steps) - 1
    end = min(range(len(cost[last])), key=lambda j: (cost[last][j], j))
    if math.isinf(cost[last][end]) and NOT_IMPORTED in planner.unavailable.values():
        planner = _Planner(steps, bounds, prober, avoid, import_all=True)
        cost, back = planner.forward()
        end = min(range(len(cost[last])), key=lambda j: (cost[last][j], j))
    if math.isinf(cost[last][end]):
        planner.notes.extend(trials)
        raise InvalidArgumentError(
            "No plan: every chain of implementations needs a conversion that is not possible "
            f"or an implementation that is unavailable; {'; '.join(_reasons(planner))}.")
    picks = [end]
    for i in range(last, 0, -1):
        picks.insert(0, back[i][picks[0]])
    rest = planner.backward()
    # the chosen implementations' own output shapes and dtypes (numpy may widen where torch
    # does not): the reported conversions are those of the path that will run
    chosen = [s.with_implementation(planner.options[i][j].name) if s.variants is not None
              else s for i, (s, j) in enumerate(zip(steps, picks, strict=True))]
    planner.bounds, trials = infer_boundaries(chosen, shapes, dtype, runs)
    planner.notes.extend(trials)  # the trials of what will run, not of the first guesses
    planner._conversions.clear()
    return _assemble(planner, picks, cost, rest, cost[last][end])


def _assemble(planner: _Planner, picks: list[int], cost: list[list[float]],
              rest: list[list[float]], total: float) -> Plan:
    """The Plan of the chosen path."""
    steps, prober = planner.steps, planner.prober
    shapes, dtype = planner.bounds[0]
    shape = shapes[0]
    chosen = [planner.options[i][j] for i, j in enumerate(picks)]
    convs = planner.conversion
    load = convs(HOST_STACK, chosen[0].input_type, 0, False)
    phases = [PlannedStep("[load]", HOST_STACK, str(prober.device(HOST_STACK, shape, dtype)),
                          (load,) if load is not None else ())]
    writes: list[PlannedConversion] = []
    prev = chosen[0].input_type
    said: set[str] = set()
    for i, o in enumerate(chosen):
        here = [c for c in (convs(prev, o.input_type, i, True),
                            *(convs(s, t, i + 1, f) for s, t, f in o.inner)) if c is not None]
        why = reason = ""
        if steps[i].variants is not None:
            through = [a + b for a, b in zip(cost[i], rest[i])]
            why = _explain(planner, i, picks[i], through, said)
            arrives = HOST_STACK if i == 0 else chosen[i - 1].output_type
            reason = _reason(planner, i, picks[i], through, arrives)
        phases.append(PlannedStep(steps[i].name, o.input_type,
                                  str(prober.device(o.input_type, shape, dtype)), tuple(here), why,
                                  reason))
        if planner._writes(i):
            w = convs(o.output_type, HOST_STACK, i + 1, False)
            writes.extend([w] if w is not None else [])
        prev = o.output_type
    phases.append(PlannedStep("[write]", HOST_STACK, phases[0].device, tuple(writes)))
    choices = {s.name: o.name for s, o in zip(steps, chosen) if s.variants is not None}
    sizes = [_nbytes(b) for b in planner.bounds]
    notes = list(dict.fromkeys(planner.notes))
    if any(s.variable_components != steps[0].variable_components for s in steps):
        notes.append("some steps restack along other components: conversions at those "
                     "boundaries are not predicted exactly")
    return Plan(phases, choices, _peaks(phases[1:-1], sizes), list(shapes), dtype.name,
                total, notes)


def _reasons(planner: _Planner) -> list[str]:
    """Why implementations are unavailable, and the planner's notes."""
    out = [f"step {planner.steps[i].name!r} in {planner.options[i][j].name}: {why}"
           for (i, j), why in sorted(planner.unavailable.items())]
    return list(dict.fromkeys(out + planner.notes)) or ["no reason recorded"]


def _nbytes(bound: Boundary) -> int:
    """Bytes of one boundary's stacks."""
    shapes, dtype = bound
    return sum(data_nbytes(s, dtype) for s in shapes)


def _peaks(phases: list[PlannedStep], sizes: list[int]) -> dict[str, int]:
    """Predicted peak bytes per device: step ``i`` holds the group's input (``sizes[i]``)
    and output (``sizes[i + 1]``) on its device, and a copied input also still on the
    device it came from."""
    peak: dict[str, int] = {}
    for i, p in enumerate(phases):
        held = {p.device: sizes[i] + sizes[i + 1]}
        for c in p.conversions:
            if c.events and not c.zero_copy:
                held[c.source_device] = held.get(c.source_device, 0) + sizes[i]
        for device, nbytes in held.items():
            peak[device] = max(peak.get(device, 0), nbytes)
    return peak
