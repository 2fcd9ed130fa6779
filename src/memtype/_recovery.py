"""Out-of-memory recovery of a decorated call: the stages after a failed first attempt
(retry, slice by slice, on the CPU), each converting the caller's arguments afresh."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memtype._arguments import Inputs, Policy, check_guarded, check_unwritten, prepare
from memtype._calls import CallOptions
from memtype._slicing import can_slice
from memtype.errors import CallOptionError
from memtype.frameworks import Framework
from memtype.gpu.oom import is_oom_error

__all__ = ["Recovery"]

Stage = tuple[str, Callable[[], tuple[Inputs, Any]]]


class Recovery:
    """The recovery half of a decorated function (mixed into ``MemoryTypeFunction``)."""

    _name: str
    _in: Framework
    _policy: Policy | None

    def _invoke(self, inputs: Inputs, by_slice: bool) -> Any:
        """Run the function (or its slices) on the call's device and stream."""
        raise NotImplementedError

    def _recovery_stages(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                         opts: CallOptions, failed: Inputs) -> list[Stage]:
        """Retry, slice by slice, then (if asked for) on the CPU (``failed``: the first try)."""
        stages: list[Stage] = [
            ("retry", lambda: self._stage(args, kwargs, opts, opts.slice_by_slice))]
        if not opts.slice_by_slice and can_slice(failed):
            stages.append(("slice by slice", lambda: self._stage(args, kwargs, opts, True)))
        if opts.oom_fallback == "cpu" and failed.device.is_gpu:
            stages.append(("on the CPU", lambda: self._on_cpu(args, kwargs, opts)))
        return stages

    def _stage(self, args: tuple[Any, ...], kwargs: dict[str, Any], opts: CallOptions,
               by_slice: bool, host: bool = False) -> tuple[Inputs, Any]:
        """One recovery attempt on the caller's arguments, converted afresh.

        Fresh conversions (uploads, ``copy_inputs=True`` copies) hold the caller's original
        values again; an input passed as the caller's own array is retried only if the
        failed attempt did not write to it (:func:`check_unwritten`).
        """
        assert self._policy is not None
        inputs = prepare(args, kwargs, self._policy, None if host else opts.gpu_id, host=host)
        try:
            result = self._invoke(inputs, by_slice)
        except Exception as exc:  # an out-of-memory error after a write is not retried
            if is_oom_error(exc):
                check_unwritten(inputs, exc, self._name)
            raise
        if inputs.guarded:
            check_guarded(inputs, self._name)
        return inputs, result

    def _on_cpu(self, args: tuple[Any, ...], kwargs: dict[str, Any],
                opts: CallOptions) -> tuple[Inputs, Any]:
        """The call again with every array on the host."""
        if self._in.gpu_only:
            raise CallOptionError(
                f"oom_fallback='cpu': {self._name} runs in {self._in.name}, which has no host "
                "arrays; expected a framework with a CPU device (numpy, torch, jax, tensorflow)."
            )
        return self._stage(args, kwargs, opts, opts.slice_by_slice, host=True)

