"""When a run stops early: a failure that every later group would repeat.

A run of thousands of groups should not fail them one by one for a mistake that is the same
everywhere (a wrong output shape, a missing module, a full disk). :class:`FailureWatch`
sees each group's result as it comes and says when to stop:

- a full disk or an exhausted quota (``ENOSPC``, ``EDQUOT``) stops the run at once;
- when the first ``max_failures`` groups to finish all failed with the same error (the same
  step, error type and message, see ``GroupResult.cause``) before any group succeeded, the
  run stops (``max_failures=0``: never).

The groups that finished stay marked done, so ``resume=True`` (``--resume``) does the rest.
"""

from __future__ import annotations

from memtype.errors import InvalidArgumentError
from memtype.pipeline.execution.report import GroupResult

__all__ = ["FailureWatch", "DEFAULT_MAX_FAILURES", "check_max_failures"]

DEFAULT_MAX_FAILURES = 3
"""Failures alike, at the start of a run, that stop it."""

_RESUME = "run again with WriteOptions(resume=True) (--resume) to do the rest"


def check_max_failures(value: object) -> int:
    """``value`` as a failure count, or a clear error.

    Raises
    ------
    InvalidArgumentError
        Not an int of at least 0 (a ``ValueError``).
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InvalidArgumentError(
            "max_failures must be an int >= 0 (0: never stop early); received "
            f"{value!r}.")
    return value


class FailureWatch:
    """Watches the results of a run as they come, and says when to stop it.

    Parameters
    ----------
    max_failures : int
        Stop when this many groups failed alike before any succeeded (0: never).
    """

    def __init__(self, max_failures: int = DEFAULT_MAX_FAILURES) -> None:
        self.max_failures = check_max_failures(max_failures)
        self._succeeded = False
        self._causes: list[str] = []

    def stop_reason(self, result: GroupResult) -> str | None:
        """Why the run must stop after ``result``, or None to go on."""
        if result.status != "failed":
            self._succeeded = self._succeeded or result.status == "done"
            return None
        if result.disk_full:
            return (f"the disk is full or the quota exhausted ({result.label}: {result.cause}); "
                    f"free some space and {_RESUME}")
        if self._succeeded or not self.max_failures:
            return None
        self._causes.append(result.cause or "")
        if len(self._causes) < self.max_failures or len(set(self._causes)) > 1:
            return None
        n = self.max_failures
        return (f"the first {n} groups failed with the same error ({self._causes[0]}), so the "
                f"others would too; fix it and {_RESUME} (max_failures={n}, --max-failures "
                f"{n}; 0 never stops)")
