"""memtype.gpu.profiler: per-call records of time, memory and conversions."""

from __future__ import annotations

import sys
import threading
import time

import numpy as np
import pytest

import memtype as mt
from memtype.gpu.profiler import Profiler, ProfileRecord, profile
from tests.helpers import import_if_installed

pytestmark = pytest.mark.requires("torch")

torch = import_if_installed("torch")
no_gpu = pytest.mark.no_gpu
# the hooks registered with memtype.conversion.add_conversion_hook
convert_module = sys.modules["memtype.conversion.events"]


def test_context_manager_counts_conversions_and_zero_copy() -> None:
    data = np.ones(1000)  # float64, aligned enough for torch to share
    with profile("convert") as p:
        t = mt.convert(data, "torch")
        back = mt.convert(t, "numpy")
        same = mt.convert(back, "numpy")  # same type: no conversion
    assert same is back
    (record,) = p.records
    assert record.name == "convert"
    assert record.conversions == 2
    assert record.bytes_converted == 2 * data.nbytes
    assert record.zero_copy == 2  # numpy <-> torch on the host share memory
    assert record.conversion_seconds <= record.wall_seconds
    assert record.error is None


def test_copies_are_not_counted_as_zero_copy() -> None:
    readonly = np.ones(100)
    readonly.flags.writeable = False  # torch may not share a read-only buffer
    with profile() as p:
        mt.convert(readonly, "torch")
    assert p.records[0].conversions == 1 and p.records[0].zero_copy == 0


def test_wall_time_is_measured() -> None:
    with profile() as p:
        time.sleep(0.02)
    assert p.records[0].wall_seconds >= 0.02
    assert p.records[0].name == "block"


def test_decorator_bare_records_every_call() -> None:
    @profile
    def step(x: np.ndarray) -> object:
        return mt.convert(x, "torch")

    for _ in range(3):
        step(np.zeros(10))
    records = step.profiler.records  # type: ignore[attr-defined]
    assert len(records) == 3
    assert all(r.name.endswith("step") and r.conversions == 1 for r in records)
    assert step.__name__ == "step"


def test_decorator_with_a_name_and_errors() -> None:
    @profile(name="failing")
    def fail() -> None:
        mt.convert(np.zeros(4), "torch")
        raise KeyError("missing")

    with pytest.raises(KeyError, match="missing"):
        fail()
    (record,) = fail.profiler.records  # type: ignore[attr-defined]
    assert record.name == "failing" and record.error == "KeyError" and record.conversions == 1


def test_context_manager_records_errors_and_reraises() -> None:
    p = Profiler("x")
    with pytest.raises(ZeroDivisionError), p:
        _ = 1 / 0
    assert p.records[0].error == "ZeroDivisionError"


def test_nested_blocks_count_inner_conversions_in_both() -> None:
    with profile("outer") as outer:
        mt.convert(np.zeros(8), "torch")
        with profile("inner") as inner:
            mt.convert(np.zeros(8), "torch")
    assert outer.records[0].conversions == 2
    assert inner.records[0].conversions == 1


def test_other_threads_conversions_are_not_counted() -> None:
    with profile() as p:
        thread = threading.Thread(target=lambda: mt.convert(np.zeros(8), "torch"))
        thread.start()
        thread.join()
    assert p.records[0].conversions == 0


def test_hook_is_removed_after_the_last_block() -> None:
    before = list(convert_module._hooks)
    with profile():
        assert len(convert_module._hooks) == len(before) + 1
        with profile():
            assert len(convert_module._hooks) == len(before) + 1
    assert convert_module._hooks == before


def test_a_profiler_is_reusable_and_clearable() -> None:
    p = profile(name="again")
    for _ in range(2):
        with p:
            pass
    assert [r.name for r in p.records] == ["again", "again"]
    p.clear()
    assert p.records == []


def test_table_is_returned_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    with profile("tabled") as p:
        mt.convert(np.zeros(1 << 18), "torch")  # 2 MiB
    table = p.table()
    lines = table.splitlines()
    assert lines[0].split()[:3] == ["name", "wall", "ms"]
    assert set(lines[1]) <= {"-", " "}
    assert lines[2].startswith("tabled") and "2.00" in lines[2]
    assert str(p) == table
    assert capsys.readouterr().out == ""


@no_gpu
def test_without_gpu_there_is_no_device_time_or_peak() -> None:
    with profile() as p:
        mt.convert(np.zeros(8), "torch")
    record = p.records[0]
    assert record.device_seconds is None and dict(record.peak_memory) == {}
    assert isinstance(record, ProfileRecord)


@pytest.mark.gpu
def test_cuda_block_has_device_time_and_its_own_peak() -> None:
    torch.empty(256 << 20, dtype=torch.uint8, device="cuda:0")  # an earlier, larger peak
    with profile("matmul") as p:
        a = torch.ones((2048, 2048), device="cuda:0")
        b = a @ a
        del b
    record = p.records[0]
    assert record.device_seconds is not None and record.device_seconds > 0
    assert 16 << 20 <= record.peak_memory["torch"] < 256 << 20
