"""Small helpers shared by the core tests."""

from __future__ import annotations

import importlib
import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

import numpy as np

import memtype as mt
from memtype.frameworks import Framework, load_adapter, register_framework, unregister_framework


def host(x: Any) -> np.ndarray:
    """A NumPy copy of any array, for comparing values."""
    return np.array(load_adapter(mt.detect_memory_type(x).value).to_numpy(x), copy=True)


def dtype_of(x: Any) -> np.dtype:
    return load_adapter(mt.detect_memory_type(x).value).dtype_of(x)


def shape_of(x: Any) -> tuple[int, ...]:
    return load_adapter(mt.detect_memory_type(x).value).shape_of(x)


def aligned(values: np.ndarray) -> np.ndarray:
    """A 64-byte aligned C-contiguous copy (the layout every host framework can share)."""
    from memtype.frameworks._host import aligned_copy

    return aligned_copy(values)


@contextmanager
def registered(row: Framework) -> Iterator[Framework]:
    """``row`` registered for the block; afterwards unregistered, with the decorator
    ``memtype.decorators`` made for it (a run-time row's ``@mt.<name>``) dropped."""
    register_framework(row)
    try:
        yield row
    finally:
        unregister_framework(row.name)
        decorators = sys.modules.get("memtype.decorators")
        if decorators is not None:
            decorators.__dict__.pop(row.name, None)


def import_if_installed(name: str) -> ModuleType | None:
    """``name`` imported, or None where it is not installed: for a module-level import in a
    test file whose tests declare ``@pytest.mark.requires(name)`` (that marker skips them,
    naming it). An installed module that fails to import raises: a broken install fails."""
    return None if importlib.util.find_spec(name.partition(".")[0]) is None else \
        importlib.import_module(name)


def remove_tree(path: str | os.PathLike[str]) -> None:
    """Remove ``path`` however deep it goes. ``shutil.rmtree`` (and pytest's own cleanup of its
    temp root, at the end of any later run) recurses once per level and dies on a tree a few
    thousand levels deep; ``rm -rf`` walks it iteratively."""
    subprocess.run(["rm", "-rf", "--", os.fspath(path)], check=True)
