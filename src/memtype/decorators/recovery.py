"""Stage 4 of a decorated call: out-of-memory recovery, the attempts after a failed first one
(retry, slice by slice, on the CPU), each converting the caller's arguments afresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtype.decorators.inputs import (
    Inputs,
    Policy,
    check_guarded,
    check_unwritten,
    prepare,
)
from memtype.decorators.options import CallOptions
from memtype.decorators.run import can_slice, run
from memtype.errors import CallOptionError
from memtype.gpu.oom import is_oom_error

__all__ = ["Recovery"]

Stage = tuple[str, Callable[[], tuple[Inputs, Any]]]


class Recovery:
    """The recovery of one call: the function, its conversion policy and the caller's
    arguments (stages run by :func:`memtype.gpu.oom.recover`)."""

    __slots__ = ("func", "policy", "name", "args", "kwargs", "opts")

    def __init__(self, func: Callable[..., Any], policy: Policy, name: str,
                 args: tuple[Any, ...], kwargs: dict[str, Any], opts: CallOptions) -> None:
        self.func = func
        self.policy = policy
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.opts = opts

    def attempt(self, by_slice: bool, host: bool = False) -> tuple[Inputs, Any]:
        """One recovery attempt on the caller's arguments, converted afresh.

        Fresh conversions (uploads, ``copy_inputs=True`` copies) hold the caller's original
        values again; an input passed as the caller's own array is retried only if the
        failed attempt did not write to it (:func:`check_unwritten`).
        """
        opts = self.opts
        inputs = prepare(self.args, self.kwargs, self.policy, None if host else opts.gpu_id,
                         host=host)
        try:
            result = run(self.func, inputs, self.policy.framework.name, by_slice, self.name)
        except Exception as exc:  # an out-of-memory error after a write is not retried
            if is_oom_error(exc):
                check_unwritten(inputs, exc, self.name)
            raise
        if inputs.guarded:
            check_guarded(inputs, self.name)
        return inputs, result

    def on_cpu(self) -> tuple[Inputs, Any]:
        """The call again with every array on the host."""
        framework = self.policy.framework
        if framework.gpu_only:
            raise CallOptionError(
                f"oom_fallback='cpu': {self.name} runs in {framework.name}, which has no host "
                "arrays; expected a framework with a CPU device (numpy, torch, jax, tensorflow)."
            )
        return self.attempt(self.opts.slice_by_slice, host=True)

    def stages(self, failed: Inputs) -> list[Stage]:
        """Retry, slice by slice, then (if asked for) on the CPU (``failed``: the first try)."""
        opts = self.opts
        stages: list[Stage] = [("retry", lambda: self.attempt(opts.slice_by_slice))]
        if not opts.slice_by_slice and can_slice(failed):
            stages.append(("slice by slice", lambda: self.attempt(True)))
        if opts.oom_fallback == "cpu" and failed.device.is_gpu:
            stages.append(("on the CPU", self.on_cpu))
        return stages

