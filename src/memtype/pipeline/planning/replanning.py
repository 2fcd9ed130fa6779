"""Run-time fallback: a group that runs out of memory re-runs with the next-best plan.

When a step of a group raises an out-of-memory error (:func:`memtype.gpu.is_oom_error`),
the group runs again from its images with the next-best plan: the cheapest chain in which
that step does not run the implementation that ran out. Each fallback takes one more
implementation away and the cheapest remaining chain runs next, so a step that keeps
running out ends on its host implementation (a device copy costs the plan more than
staying on the device, so host implementations come last where a device one is left); a
step left without any implementation (it had only that one) fails the group with the
error. The plans are made
once per set of avoided implementations and shared by the groups.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from memtype.errors import InvalidArgumentError
from memtype.pipeline.model.steps import FunctionStep
from memtype.pipeline.planning.model import Plan, Shape
from memtype.pipeline.planning.search import make_plan

__all__ = ["Replanner"]

Avoid = frozenset[tuple[str, str]]


class Replanner:
    """The plans of a run: the first, and the next-best ones made on demand, once each.

    Parameters
    ----------
    steps : sequence of FunctionStep
        The pipeline's steps as declared (with all their implementations).
    first : Plan
        The run's plan.
    shapes, dtype, gpu_id, budgets
        What the first plan was made for (see :func:`~memtype.pipeline.planning.make_plan`).
    """

    def __init__(self, steps: Sequence[FunctionStep], first: Plan, shapes: list[Shape],
                 dtype: np.dtype[Any], gpu_id: int | None,
                 budgets: Mapping[str, int] | None) -> None:
        self.steps = tuple(steps)
        self.first = first
        self._args = (list(shapes), dtype, gpu_id, dict(budgets or {}))
        self._plans: dict[Avoid, Plan | str] = {frozenset(): first}
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_lock"] = None
        state["_plans"] = {frozenset(): self.first}
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def plan(self, avoid: Avoid) -> Plan | str:
        """The plan avoiding these places, or why there is none."""
        with self._lock:
            known = self._plans.get(avoid)
        if known is not None:
            return known
        shapes, dtype, gpu_id, budgets = self._args
        made: Plan | str
        try:
            made = make_plan(self.steps, shapes, dtype, gpu_id, budgets=budgets, avoid=avoid)
        except InvalidArgumentError as exc:  # no chain avoids them: the group fails
            made = str(exc)
        with self._lock:
            return self._plans.setdefault(avoid, made)

    def steps_of(self, plan: Plan) -> tuple[FunctionStep, ...]:
        """The steps as ``plan`` runs them."""
        return tuple(plan.apply(self.steps))
