"""Planning a run: which implementation each step runs, and the conversions on the way.

One concept, four modules, each importing only those listed before it:

``model``
    What a plan is: :class:`Plan`, its phases and conversions, the cost weights.
``measurement``
    What planning measures: the stacks between steps (one trial of each step on a small
    sample) and each conversion's cost (made once on a sample, :class:`~.measurement.Prober`).
``search``
    The shortest path over steps x implementations: :func:`make_plan`.
``replanning``
    A run's next-best plans after out-of-memory errors: :class:`Replanner`.
"""

from __future__ import annotations

from memtype.pipeline.planning.measurement import device_budgets, group_shapes, image_shapes
from memtype.pipeline.planning.model import (
    HOST_STACK,
    HOST_WEIGHT,
    Plan,
    PlannedConversion,
    PlannedStep,
)
from memtype.pipeline.planning.replanning import Replanner
from memtype.pipeline.planning.search import make_plan

__all__ = ["Plan", "PlannedConversion", "PlannedStep", "HOST_WEIGHT", "HOST_STACK",
           "make_plan", "Replanner", "device_budgets", "group_shapes", "image_shapes"]
