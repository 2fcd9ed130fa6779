"""Conversion hooks and ``capture_conversions``: who sees which conversion."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import memtype as mt
from memtype.conversion import ConversionEvent, add_conversion_hook, remove_conversion_hook
from tests.helpers import import_if_installed

pytestmark = pytest.mark.requires("torch")

torch = import_if_installed("torch")


@pytest.fixture
def seen() -> list[ConversionEvent]:
    events: list[ConversionEvent] = []
    add_conversion_hook(events.append)
    yield events
    remove_conversion_hook(events.append)


def test_hook_sees_conversions_between_types(seen: list[ConversionEvent]) -> None:
    x = np.arange(6.0)
    assert mt.convert(x, "numpy") is x  # nothing changes: no event
    mt.convert(x, "torch")
    assert [(e.source_type, e.target_type, e.nbytes, e.zero_copy) for e in seen] == [
        ("numpy", "torch", 48, True)]


def test_capture_collects_and_hides_from_hooks(seen: list[ConversionEvent]) -> None:
    with mt.capture_conversions() as captured:
        mt.convert(np.zeros(3, np.float32), "torch")
        mt.convert(torch.zeros(2), "numpy")
    assert [(e.source_type, e.target_type) for e in captured] == [("numpy", "torch"),
                                                                  ("torch", "numpy")]
    assert seen == []
    mt.convert(np.zeros(1), "torch")  # after the block, hooks see conversions again
    assert len(seen) == 1 and len(captured) == 2


def test_capture_without_any_hook_still_collects() -> None:
    with mt.capture_conversions() as captured:
        mt.convert(np.zeros(2), "torch")
    assert [e.target_type for e in captured] == ["torch"]


def test_nested_captures_each_get_their_own(seen: list[ConversionEvent]) -> None:
    with mt.capture_conversions() as outer:
        mt.convert(np.zeros(2), "torch")
        with mt.capture_conversions() as inner:
            mt.convert(np.zeros(2), "torch")
        mt.convert(np.zeros(2), "torch")
    assert (len(outer), len(inner), len(seen)) == (2, 1, 0)


def test_capture_ends_on_an_error(seen: list[ConversionEvent]) -> None:
    with pytest.raises(mt.UnknownMemoryTypeError), mt.capture_conversions() as captured:
        mt.convert(np.zeros(2), "torch")
        mt.convert(np.zeros(2), "no-such-type")
    mt.convert(np.zeros(2), "torch")
    assert len(captured) == 1 and len(seen) == 1


def test_capture_leaves_other_threads_to_the_hooks(seen: list[ConversionEvent]) -> None:
    def other() -> None:
        mt.convert(np.zeros(5), "torch")

    with mt.capture_conversions() as captured:
        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
    assert captured == [] and [e.nbytes for e in seen] == [40]
