"""What the decorator benchmarks (``decorators.py``, ``gpu.py``) measure: one row per case."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Case:
    """One benchmark row: the plain call, memtype's decorated call, arraybridge's (or None)."""

    label: str
    plain: Callable[[], Any]
    memtype: Callable[[], Any]
    arraybridge: Callable[[], Any] | None


def identity(image: Any) -> Any:
    """No work: the decorator's overhead alone."""
    return image
