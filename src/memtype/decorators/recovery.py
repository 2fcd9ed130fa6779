"""Stage 4 of a decorated call: out-of-memory recovery, the attempts after a failed first one,
each converting the caller's arguments afresh.

Defaults never change a result: the first stage retries the same computation (after the
caches are freed). Slice by slice only for a function declared ``slice_separable=True`` at
decoration (its result on a 3D image equals its per-slice results stacked); on the CPU only
with ``oom_fallback="cpu"``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtype.decorators.inputs import (
    Inputs,
    Policy,
    check_guarded,
    check_unwritten,
    inputs_of,
    prepare,
)
from memtype.decorators.options import CallOptions
from memtype.decorators.run import can_slice, run
from memtype.errors import CallOptionError
from memtype.frameworks import iter_frameworks
from memtype.gpu.oom import is_oom_error

__all__ = ["Recovery"]

Stage = tuple[str, Callable[[], tuple[Inputs, Any]]]


class Recovery:
    """The recovery of one call: the function, its conversion policy and the caller's
    arguments (stages run by :func:`memtype.gpu.oom.recover`)."""

    __slots__ = ("func", "policy", "name", "args", "kwargs", "opts", "separable", "on_gpu")

    def __init__(self, func: Callable[..., Any], policy: Policy, name: str,
                 args: tuple[Any, ...], kwargs: dict[str, Any], opts: CallOptions,
                 separable: bool = False) -> None:
        self.func = func
        self.policy = policy
        self.name = name
        self.args = args
        self.kwargs = kwargs
        self.opts = opts
        self.separable = separable
        self.on_gpu = False  # whether the first attempt ran on a GPU (set by stages)

    def attempt(self, by_slice: bool, host: bool = False) -> tuple[Inputs, Any]:
        """One recovery attempt on the caller's arguments, converted afresh.

        Fresh conversions (uploads, ``copy_inputs=True`` copies) hold the caller's original
        values again; an input passed as the caller's own array is retried only if the
        failed attempt did not write to it (:func:`check_unwritten`).
        """
        opts = self.opts
        inputs = inputs_of(prepare(self.args, self.kwargs, self.policy,
                                   None if host else opts.gpu_id, host=host), self.args)
        try:
            result = run(self.func, inputs, self.policy.framework.name, by_slice, self.name)
        except Exception as exc:  # an out-of-memory error after a write is not retried
            if is_oom_error(exc):
                check_unwritten(inputs, self.policy, exc, self.name)
            raise
        if inputs.guarded:
            check_guarded(inputs, self.policy, self.name)
        return inputs, result

    def on_cpu(self) -> tuple[Inputs, Any]:
        """The call again with every array on the host."""
        framework = self.policy.framework
        if framework.gpu_only:
            hosts = ", ".join(fw.name for fw in iter_frameworks() if not fw.gpu_only)
            raise CallOptionError(
                f"oom_fallback='cpu': {self.name} runs in {framework.name}, which has no host "
                f"arrays; expected a framework with a CPU device ({hosts})."
            )
        return self.attempt(self.opts.slice_by_slice, host=True)

    def stages(self, failed: Inputs) -> list[Stage]:
        """Retry; slice by slice (a slice-separable function); on the CPU (if asked for).

        ``failed``: the inputs of the first attempt."""
        opts = self.opts
        self.on_gpu = failed.device.is_gpu
        stages: list[Stage] = [("retry", lambda: self.attempt(opts.slice_by_slice))]
        if self.separable and not opts.slice_by_slice and can_slice(failed):
            stages.append(("slice by slice", lambda: self.attempt(True)))
        if opts.oom_fallback == "cpu" and self.on_gpu:
            stages.append(("on the CPU", self.on_cpu))
        return stages

    def explain(self, error: BaseException) -> None:
        """Note on a call's last out-of-memory error what else could have been tried."""
        if not is_oom_error(error):
            return
        tried = "freed the framework caches and retried the same call"
        hints = []
        if not self.separable and not self.opts.slice_by_slice:
            hints.append("declare the function slice_separable=True (if its result on a 3D "
                         "image equals its 2D slices' results stacked) to let recovery run it "
                         "slice by slice, or call it with slice_by_slice=True")
        if self.opts.oom_fallback is None and self.on_gpu and not self.policy.framework.gpu_only:
            hints.append('pass oom_fallback="cpu" to run it on the host after that')
        if hints:
            error.add_note(f"memtype {tried}; {'; '.join(hints)}.")
