"""What a plan is: per phase the implementation, its device and the conversions on the way.

The costs: a zero-copy conversion costs 1, a copy its bytes, a copy through host memory
:data:`HOST_WEIGHT` times its bytes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from memtype.pipeline.model.steps import FunctionStep

__all__ = ["Plan", "PlannedConversion", "PlannedStep", "HOST_WEIGHT", "HOST_STACK", "Shape",
           "Boundary"]

Shape = tuple[int, ...]
"""A stack's shape."""

Boundary = tuple[list[Shape], np.dtype[Any]]
"""The stacks between two steps: their shapes and dtype."""

HOST_WEIGHT = 8
"""How much more a copied byte costs when the copy goes through host memory."""

_MIB = 1024 * 1024
HOST_STACK = "numpy"
"""The memory type images are stacked in when read (and written from): the host's."""


@dataclass(frozen=True)
class PlannedConversion:
    """The conversions of one group's stacks from one memory type to another."""

    source: str
    target: str
    source_device: str
    target_device: str
    events: int
    nbytes: int
    zero_copy: bool
    crosses_host: bool

    @property
    def cost(self) -> float:
        """What the planner minimises: 1 per zero-copy event, bytes per copied byte."""
        if not self.events:
            return 0.0
        if self.zero_copy:
            return float(self.events)
        return float(self.nbytes * (HOST_WEIGHT if self.crosses_host else 1) + self.events)

    def describe(self) -> str:
        """``numpy(cpu) -> torch(cpu) 0-copy`` or ``... copy 4.0 MiB via host``."""
        how = "0-copy" if self.zero_copy else f"copy {self.nbytes / _MIB:.1f} MiB"
        host = " via host" if self.crosses_host else ""
        return (f"{self.source}({self.source_device}) -> {self.target}({self.target_device}) "
                f"{how}{host}")


@dataclass(frozen=True)
class PlannedStep:
    """One phase of the plan: ``[load]``, a step, or ``[write]``."""

    name: str
    memory_type: str
    device: str
    conversions: tuple[PlannedConversion, ...]
    explanation: str = ""
    reason: str = ""
    """Why a step with several implementations runs this one (the data is already there,
    the cheaper measured cost, the only one installed or with room, the declared order)."""

    @property
    def events(self) -> int:
        """Conversions the hook will count in this phase, per group."""
        return sum(c.events for c in self.conversions)

    @property
    def nbytes(self) -> int:
        """Bytes those conversions report, per group."""
        return sum(c.nbytes for c in self.conversions)


@dataclass
class Plan:
    """What a run will do per group: implementations, conversions, peak memory.

    Attributes
    ----------
    phases : list of PlannedStep
        ``[load]``, one per step, ``[write]``.
    choices : dict of str to str
        Step name -> chosen memory type, for the steps with several implementations.
    peak_memory : dict of str to int
        Predicted peak bytes of one group's stacks per device.
    stack_shapes : list of tuple
        The first group's stack shapes; ``dtype`` their dtype.
    cost : float
        The chain's total cost (see :data:`HOST_WEIGHT`).
    notes : list of str
        Where the prediction may differ from the run.
    """

    phases: list[PlannedStep]
    choices: dict[str, str]
    peak_memory: dict[str, int]
    stack_shapes: list[Shape]
    dtype: str
    cost: float
    notes: list[str] = field(default_factory=list)

    @property
    def reasons(self) -> dict[str, str]:
        """Step name -> why it runs its chosen implementation (the steps in ``choices``)."""
        return {p.name: p.reason for p in self.phases if p.reason}

    def predicted(self) -> dict[str, tuple[int, int]]:
        """Phase name -> (conversion events, bytes) per group."""
        return {p.name: (p.events, p.nbytes) for p in self.phases}

    def apply(self, steps: Sequence[FunctionStep]) -> list[FunctionStep]:
        """The steps with each multi-implementation step set to its chosen implementation."""
        return [s.with_implementation(self.choices[s.name]) if s.name in self.choices else s
                for s in steps]

    def table(self) -> str:
        """The plan as a plain-text table, then peak memory, choices and notes."""
        shapes = ", ".join(str(s) for s in sorted(set(self.stack_shapes)))
        lines = [f"plan per group: {len(self.stack_shapes)} stacks {shapes} {self.dtype}; "
                 f"cost {self.cost:.0f}",
                 f"{'phase':<18}{'runs in':<24}{'conv':>5}{'MiB':>8}  conversions"]
        lines.append("-" * 100)
        for p in self.phases:
            convs = "; ".join(c.describe() for c in p.conversions if c.events) or "-"
            lines.append(f"{p.name[:17]:<18}{p.memory_type + ' (' + p.device + ')':<24}"
                         f"{p.events:>5}{p.nbytes / _MIB:>8.1f}  {convs}")
        lines.append("-" * 100)
        peak = ", ".join(f"{d} {b / _MIB:.1f} MiB" for d, b in self.peak_memory.items())
        lines.append(f"predicted peak memory: {peak}")
        for p in self.phases:
            if p.reason:
                lines.append(f"{p.name} runs in {p.memory_type}: {p.reason}")
            if p.explanation:
                lines.append(f"{p.name}: {p.explanation}")
        lines.extend(f"note: {n}" for n in self.notes)
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()
