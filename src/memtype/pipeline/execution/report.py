"""What a pipeline run reports: per-group results, per-step statistics, and the summary table."""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from memtype.errors import PipelineError
from memtype.pipeline.io.patterns import Key, key_label, key_order

if TYPE_CHECKING:
    from memtype.pipeline.planning import Plan
    from memtype.pipeline.readers import PlateMetadata

__all__ = ["StepStats", "GroupResult", "RunReport", "Fallback", "without_group"]

GroupStatus = Literal["done", "failed", "skipped", "not_run"]
_MIB = 1024 * 1024


@dataclass
class StepStats:
    """Time, conversions and memory of one step (over one group, or merged over many).

    Attributes
    ----------
    name : str
        The step's name; ``[load]`` and ``[write]`` for reading inputs and writing outputs.
    seconds : float
        Time spent in the step (summed over groups: worker time, not wall time).
    stacks : int
        Stacks processed.
    conversions : int
        Conversions between memory types or devices.
    bytes_converted : int
        Bytes of the converted arrays.
    zero_copy, copied : int
        Conversions whose result shared memory with the source, and those that copied.
    peak_rss : int
        The largest resident set size of a worker process seen at the end of the step.
    peak_device : int
        The largest GPU memory peak of the step (all frameworks), 0 without GPU.
    buffers_new, buffers_reused : int
        Buffers the pipeline allocated for the step (the loaded stacks), and those it
        reused from an earlier group instead (see :mod:`memtype.pipeline.execution.buffers`).
    """

    name: str
    seconds: float = 0.0
    stacks: int = 0
    conversions: int = 0
    bytes_converted: int = 0
    zero_copy: int = 0
    copied: int = 0
    peak_rss: int = 0
    peak_device: int = 0
    buffers_new: int = 0
    buffers_reused: int = 0

    def merge(self, other: StepStats) -> None:
        """Add another group's figures for the same step (peaks take the maximum)."""
        self.seconds += other.seconds
        self.stacks += other.stacks
        self.conversions += other.conversions
        self.bytes_converted += other.bytes_converted
        self.zero_copy += other.zero_copy
        self.copied += other.copied
        self.peak_rss = max(self.peak_rss, other.peak_rss)
        self.peak_device = max(self.peak_device, other.peak_device)
        self.buffers_new += other.buffers_new
        self.buffers_reused += other.buffers_reused


@dataclass(frozen=True)
class Fallback:
    """One fallback of one group: the step that ran out of memory, where, and what ran next.

    Attributes
    ----------
    step : str
        The step running when memory ran out (``[load]``: moving the images to its device).
    ran_in : str
        Its memory type and device: ``pyclesperanto (opencl:0)``.
    error : str
        The out-of-memory error: ``OutOfMemoryError: ...``.
    choices : dict of str to str
        The implementations of the plan the group ran next (``{}``: it failed instead).
    reason : str
        Why there was no next plan (empty when there was one).
    """

    step: str
    ran_in: str
    error: str
    choices: dict[str, str]
    reason: str = ""

    def describe(self) -> str:
        """One line for the report."""
        head = f"step {self.step!r} ran out of memory in {self.ran_in} ({self.error})"
        if self.reason:
            return f"{head}; no fallback: {self.reason}"
        chosen = ", ".join(f"{k}={v}" for k, v in self.choices.items())
        return f"{head}; re-ran the group with {chosen or 'the declared implementations'}"


def without_group(text: str, key: Key) -> str:
    """``text`` with the group's identity put in general terms: each field named with its
    value (``well A01``, ``site=2``, ``channel: 1``) becomes the field and ``<field>``
    (``well <well>``), and a well's name alone, in any of its spellings (``A01``, ``A1``,
    ``A/1``: a plate path), becomes ``<well>``. Failures alike but for the group they name
    then read alike (``GroupResult.cause``).

    Examples
    --------
    >>> without_group("The labels of well B03 hold 2 channels (B/3/1)", (("well", "B03"),))
    'The labels of well <well> hold 2 channels (<well>/1)'
    """
    for name, value in key:
        named = rf"\b({re.escape(name)}\s*[=:]?\s*){re.escape(str(value))}(?![0-9A-Za-z])"
        text = re.sub(named, rf"\g<1><{name}>", text)
        if name == "well":
            for form in _well_spellings(str(value)):
                text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(form)}(?![0-9])", "<well>", text)
    return text


def _well_spellings(well: str) -> list[str]:
    """A well's name as messages and paths spell it, longest first: ``A/01``, ``A01``,
    ``A/1``, ``A1`` (only ``well`` itself when it is not a row and a column)."""
    m = re.fullmatch(r"([A-Za-z]+)0*(\d+)", well)
    if m is None:
        return [well]
    row, column = m[1], int(m[2])
    forms = {well, f"{row}{column:02d}", f"{row}/{column:02d}", f"{row}{column}",
             f"{row}/{column}"}
    return sorted(forms, key=len, reverse=True)


@dataclass
class GroupResult:
    """The outcome of one group (one task).

    Attributes
    ----------
    key : Key
        The group's field values (``(("well", "A01"),)``).
    status : {"done", "failed", "skipped", "not_run"}
        ``skipped``: already written by an earlier run (``resume=True``); ``not_run``: the
        run stopped before the group ran (see ``RunReport.stopped``).
    error : str or None
        For a failed group: the message, naming the group, the step and the function.
    traceback : str or None
        The formatted traceback of a failure, for logs.
    steps : list of StepStats
        This group's figures per step.
    seconds : float
        Time the group took on its worker.
    worker : str
        Which worker ran it.
    fallbacks : list of Fallback
        Each time the group ran out of memory and ran again with the next-best plan.
    predicted : dict or None
        After a fallback, the conversions that plan predicts (phase -> (events, bytes)).
    retried : list of StepStats
        The figures of the attempts that ran out of memory before a fallback (merged; not in
        ``steps``, which are the last attempt's).
    cause : str or None
        For a failed group: its error without the group, ``step 2 'check' (function f):
        ValueError: too bright``; groups that failed with the same cause failed alike.
    disk_full : bool
        The failure was a full disk or an exhausted quota (``ENOSPC``, ``EDQUOT``).
    log : str or None
        For a failed group: the log its traceback was written to (``OUTPUT/failures.log``,
        see :mod:`memtype.pipeline.execution.failures`).
    """

    key: Key
    status: GroupStatus
    error: str | None = None
    traceback: str | None = None
    steps: list[StepStats] = field(default_factory=list)
    seconds: float = 0.0
    worker: str = ""
    fallbacks: list[Fallback] = field(default_factory=list)
    predicted: dict[str, tuple[int, int]] | None = None
    retried: list[StepStats] = field(default_factory=list)
    cause: str | None = None
    disk_full: bool = False
    log: str | None = None

    @property
    def label(self) -> str:
        """The group as text: ``well=A01``."""
        return key_label(self.key)


@dataclass
class RunReport:
    """Everything a run did.

    Attributes
    ----------
    groups : list of GroupResult
        One per group, in group order.
    steps : list of StepStats
        Per step (with ``[load]`` and ``[write]``), merged over the groups that ran.
    wall_seconds : float
        Wall time of the whole run.
    executor : str
        Which executor ran it (``dask (2 workers)``).
    outputs : dict of str to str
        What was written: ``{"images": ".../plate.zarr", "counts": ".../counts.csv"}``.
    plan : Plan or None
        The plan the run followed (made from its first group); ``plan_note`` says why there
        is none.
    stopped : str or None
        Why the run stopped before every group ran (the first groups all failed alike, or
        the disk is full); None when it did not stop.
    retried : list of StepStats
        Per step, the figures of the attempts that ran out of memory and were run again
        with the next-best plan (not in ``steps``: those count the attempts that finished).
    input : PlateMetadata or None
        The input's layout (``input.layout``), what showed it (``input.detected_from``), and
        its metadata: channel names, pixel size, plate size, images missing.
    """

    groups: list[GroupResult]
    steps: list[StepStats]
    wall_seconds: float
    executor: str
    outputs: dict[str, str] = field(default_factory=dict)
    plan: Plan | None = None
    plan_note: str | None = None
    stopped: str | None = None
    retried: list[StepStats] = field(default_factory=list)
    input: PlateMetadata | None = None

    @classmethod
    def collect(cls, step_names: Sequence[str], groups: Iterable[GroupResult], wall: float,
                executor: str, outputs: dict[str, str], stopped: str | None = None
                ) -> RunReport:
        """Merge the groups' step figures into one row per step."""
        ordered = sorted(groups, key=lambda g: key_order(g.key))
        merged = {name: StepStats(name) for name in step_names}
        retried: dict[str, StepStats] = {}
        for group in ordered:
            for stats in group.steps:
                merged.setdefault(stats.name, StepStats(stats.name)).merge(stats)
            for stats in group.retried:
                retried.setdefault(stats.name, StepStats(stats.name)).merge(stats)
        order = {name: i for i, name in enumerate(merged)}
        return cls(ordered, list(merged.values()), wall, executor, outputs,
                   retried=sorted(retried.values(), key=lambda s: order.get(s.name, 0)),
                   stopped=stopped)

    def _with(self, status: GroupStatus) -> list[GroupResult]:
        """Groups with one status."""
        return [g for g in self.groups if g.status == status]

    @property
    def done(self) -> list[GroupResult]:
        """Groups processed and written by this run."""
        return self._with("done")

    @property
    def skipped(self) -> list[GroupResult]:
        """Groups skipped because an earlier run wrote them (``resume=True``)."""
        return self._with("skipped")

    @property
    def failed(self) -> list[GroupResult]:
        """Groups that failed; their errors name the step and function."""
        return self._with("failed")

    @property
    def not_run(self) -> list[GroupResult]:
        """Groups the run did not get to, because it stopped (see :attr:`stopped`)."""
        return self._with("not_run")

    @property
    def ok(self) -> bool:
        """True when no group failed and the run did not stop."""
        return not self.failed and self.stopped is None

    @property
    def errors(self) -> list[tuple[str, list[GroupResult]]]:
        """Each distinct error once, with the groups that failed with it, most frequent
        first (then in group order): ``[(cause, [group, ...]), ...]``."""
        by_cause: dict[str, list[GroupResult]] = {}
        for group in self.failed:
            by_cause.setdefault(group.cause or group.error or "", []).append(group)
        return sorted(by_cause.items(), key=lambda item: -len(item[1]))

    def error_lines(self) -> list[str]:
        """One line per distinct error: how many groups, which (the first five), and what."""
        lines = []
        for cause, groups in self.errors:
            labels = ", ".join(g.label for g in groups[:5])
            more = f" and {len(groups) - 5} more" if len(groups) > 5 else ""
            count = f"{len(groups)} group{'s' if len(groups) != 1 else ''}"
            lines.append(f"{count} failed ({labels}{more}): {cause}")
        return lines

    def raise_for_failures(self) -> None:
        """Raise :class:`~memtype.errors.PipelineError` (the first failure) if any group failed."""
        failed = self.failed
        if failed:
            more = f" (and {len(failed) - 1} more failed groups)" if len(failed) > 1 else ""
            stop = f"; {self.stopped}" if self.stopped else ""
            raise PipelineError(f"{failed[0].error}{more}{stop}")

    def plan_vs_actual(self) -> list[tuple[str, int, int, int, int]]:
        """Per phase: predicted conversions and bytes (per group x groups done), and counted."""
        if self.plan is None:
            return []
        first = self.plan.predicted()
        total = {name: [0, 0] for name in first}
        for group in self.done:  # a group that fell back ran its own plan
            for name, (events, nbytes) in (group.predicted or first).items():
                total.setdefault(name, [0, 0])[0] += events
                total[name][1] += nbytes
        counted = {s.name: s for s in self.steps}
        rows = []
        for name, (events, nbytes) in total.items():
            actual = counted.get(name, StepStats(name))
            rows.append((name, events, nbytes, actual.conversions, actual.bytes_converted))
        return rows

    @property
    def fallbacks(self) -> list[tuple[str, Fallback]]:
        """Every fallback of every group: (group label, Fallback), in group order."""
        return [(g.label, f) for g in self.groups for f in g.fallbacks]

    def _plan_lines(self) -> list[str]:
        """The plan-against-actual table of the summary."""
        if self.plan is None:
            return [f"plan: {self.plan_note}"] if self.plan_note else []
        lines = [f"{'plan vs actual':<22}{'conv':>7}{'MiB':>10}{'conv':>9}{'MiB':>10}",
                 f"{'':<22}{'(predicted)':>17}{'(counted)':>19}"]
        for name, pe, pb, ae, ab in self.plan_vs_actual():
            mark = "" if (pe, pb) == (ae, ab) else "  differs"
            lines.append(f"{name[:21]:<22}{pe:>7}{pb / _MIB:>10.1f}{ae:>9}{ab / _MIB:>10.1f}"
                         f"{mark}")
        # why each step with several implementations runs where it does (its chain costs)
        lines.extend(f"{p.name}: {p.explanation}" for p in self.plan.phases if p.explanation)
        return lines

    def _retried_lines(self) -> list[str]:
        """The attempts that ran out of memory, which the rows above leave out."""
        if not self.retried:
            return []
        seconds = sum(s.seconds for s in self.retried)
        parts = [f"{s.name} {s.seconds:.2f} s, {s.conversions} conv "
                 f"{s.bytes_converted / _MIB:.1f} MiB" for s in self.retried]
        return [f"attempts that ran out of memory (not in the rows above, which count the "
                f"attempts that finished): {seconds:.2f} s; " + "; ".join(parts)]

    def summary(self) -> str:
        """A plain-text table: one row per step, then totals and failures."""
        header = (f"{'step':<22}{'time s':>9}{'stacks':>8}{'conv':>7}{'MiB conv':>10}"
                  f"{'0-copy':>8}{'copied':>8}{'RSS MiB':>9}{'GPU MiB':>9}")
        lines = [header, "-" * len(header)]
        for s in self.steps:
            lines.append(f"{s.name[:21]:<22}{s.seconds:>9.2f}{s.stacks:>8}{s.conversions:>7}"
                         f"{s.bytes_converted / _MIB:>10.1f}{s.zero_copy:>8}{s.copied:>8}"
                         f"{s.peak_rss / _MIB:>9.0f}{s.peak_device / _MIB:>9.0f}")
        lines.append("-" * len(header))
        not_run = f", {len(self.not_run)} not run" if self.not_run else ""
        lines.append(f"{len(self.groups)} groups: {len(self.done)} done, "
                     f"{len(self.skipped)} skipped, {len(self.failed)} failed{not_run}; "
                     f"{self.wall_seconds:.2f} s wall on {self.executor}")
        if self.stopped:
            lines.append(f"STOPPED: {self.stopped}")
        lines.extend(f"FAILED {line}" for line in self.error_lines())
        logs = sorted({g.log for g in self.failed if g.log})
        if logs:
            lines.append(f"tracebacks of the failed groups: {', '.join(logs)}")
        lines.extend(f"fallback {label}: {f.describe()}" for label, f in self.fallbacks)
        lines.extend(self._retried_lines())
        every = {s.name: StepStats(s.name) for s in self.steps}
        for s in [*self.steps, *self.retried]:  # attempts that ran out allocated too
            every.setdefault(s.name, StepStats(s.name)).merge(s)
        buffers = [f"{s.name} {s.buffers_new} new, {s.buffers_reused} reused"
                   for s in every.values() if s.buffers_new or s.buffers_reused]
        if buffers:
            lines.append("buffers allocated by the pipeline: " + "; ".join(buffers))
        lines.extend(self._plan_lines())
        return "\n".join(lines)
