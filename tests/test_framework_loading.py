"""Framework loading under concurrency (issue 21 item 1): many threads making their first
calls at once, in fresh interpreters, while other threads import frameworks themselves."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from types import ModuleType

import pytest

from memtype.frameworks import is_loaded, ready_module

# Each thread of the script waits at one barrier, then: a first decorated call in a framework
# (input and output in it, so its arrays are detected too), a plain ``import`` of a framework
# (the user's own, racing memtype's), or detection of a non-array (which looks at every
# framework in sys.modules). pyclesperanto before tensorflow: memtype imports it first itself.
_RACE = textwrap.dedent("""
    import importlib, importlib.util, json, sys, threading, time
    import numpy as np
    import memtype as mt

    names = [n for n in ("pyclesperanto", "torch", "tensorflow", "jax", "mlx")
             if importlib.util.find_spec(n) is not None]
    calls = [getattr(mt, n)(contract="any")(lambda x: x + 1) for n in names]
    plain_imports = [n for n in ("torch", "jax") if n in names]
    errors = []
    running = threading.Event()
    running.set()
    jobs = [lambda c=c: c(np.ones(3, np.float32)) for c in calls for _ in range(3)]
    jobs += [lambda n=n: importlib.import_module(n) for n in plain_imports]
    def detect_objects():
        while running.is_set():
            mt.detect.framework_of(object())
            time.sleep(0.0005)
    jobs += [detect_objects] * 2
    barrier = threading.Barrier(len(jobs))
    def run(job):
        barrier.wait()
        try:
            job()
        except BaseException as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
    threads = [threading.Thread(target=run, args=(job,)) for job in jobs]
    for t in threads[:-2]:
        t.start()
    for t in threads[-2:]:
        t.start()
    for t in threads[:-2]:
        t.join()
    running.clear()
    for t in threads[-2:]:
        t.join()
    print(json.dumps({"frameworks": names, "threads": len(jobs), "errors": errors}))
""")


@pytest.mark.slow
@pytest.mark.requires("torch", "tensorflow")
@pytest.mark.parametrize("process", range(3), ids=lambda i: f"fresh-process-{i}")
def test_first_calls_from_many_threads_load_each_framework_once(process: int) -> None:
    done = subprocess.run([sys.executable, "-c", _RACE], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert report["threads"] >= 16
    assert report["errors"] == []


def _importing(name: str) -> ModuleType:
    """A module registered in sys.modules whose import has not finished."""
    from importlib.machinery import ModuleSpec

    module = ModuleType(name)
    module.__spec__ = ModuleSpec(name, None)
    module.__spec__._initializing = True  # what importlib sets while it runs the module
    return module


def test_a_module_still_being_imported_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "memtype_half_imported", _importing("memtype_half_imported"))
    assert ready_module("memtype_half_imported") is None


def test_a_finished_module_is_ready() -> None:
    assert ready_module("json") is json


def test_a_blocked_module_is_not_ready(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "memtype_blocked", None)
    assert ready_module("memtype_blocked") is None


def test_a_row_whose_module_is_still_being_imported_is_not_loaded(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Detection's view while another thread is still inside the framework's import."""
    from memtype.frameworks import Framework, array_types

    monkeypatch.setitem(sys.modules, "memtype_half_imported", _importing("memtype_half_imported"))
    row = Framework(name="halfimported", module="memtype_half_imported",
                    array_types=("memtype_half_imported:Array",),
                    adapter="tests.toy_adapter:ToyAdapter", device_kinds=("cpu",),
                    install_hint="nothing to install")
    assert not is_loaded(row)
    assert array_types(row) == ()  # no attribute lookup on the half-built module
