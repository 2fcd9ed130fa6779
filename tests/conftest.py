"""Shared fixtures. Import order matters: torch and pyclesperanto before tensorflow
(the pocl OpenCL runtime segfaults when pyclesperanto is imported after tensorflow)."""

from __future__ import annotations

import importlib.util
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from memtype.errors import FrameworkNotInstalledError  # noqa: E402
from memtype.frameworks import load_adapter  # noqa: E402

# Through memtype, so pyclesperanto gets the OpenCL runtime memtype chooses (a pip-installed
# pocl where no OpenCL platform offers a device). A framework that fails to import is
# reported by tests.frameworks.unusable_reason, as a skip reason, never at collection.
for _name in ("torch", "pyclesperanto", "jax", "tensorflow"):  # order is the workaround
    if importlib.util.find_spec(_name) is not None:
        try:
            load_adapter(_name)
        except FrameworkNotInstalledError:
            continue  # its tests skip with this error as the reason (tests.frameworks)

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# CI runs the same examples every time (a failure there is reproducible, never a flake);
# locally hypothesis explores new ones on every run.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

from memtype.frameworks import Framework  # noqa: E402
from tests.frameworks import builtin_names, has_gpu, unusable_reason  # noqa: E402
from tests.helpers import registered  # noqa: E402

TOY = Framework(
    name="toy", module="tests.toyarrays", array_types=("tests.toyarrays:ToyArray",),
    adapter="tests.toy_adapter", device_kinds=("cpu",), dlpack=False, immutable=False,
    install_hint="(ships with the tests)",
)

TOYDEV = Framework(
    name="toydev", module="tests.toydevice", array_types=("tests.toydevice:ToyDeviceArray",),
    adapter="tests.toydevice_adapter", device_kinds=("toyaccel",), dlpack=False,
    immutable=False, install_hint="(ships with the tests)",
)


def _absent_module(exc: BaseException | None) -> str | None:
    """The top-level module an error (or its causes) says is not installed, if truly absent.
    An exception group (hypothesis reports several failures as one) counts when each of its
    members does."""
    if isinstance(exc, BaseExceptionGroup):
        found = [_absent_module(e) for e in exc.exceptions]
        return found[0] if found and all(found) else None
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, ModuleNotFoundError) and exc.name:
            top = exc.name.partition(".")[0]
            if importlib.util.find_spec(top) is None:
                return top
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """A test that needs an optional package which is not installed here is a skip with that
    reason (an install with only some extras runs the rest of the suite), never a failure.
    Only a package absent from this environment counts: anything else still fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not report.failed or call.excinfo is None:
        return
    missing = _absent_module(call.excinfo.value)
    if missing is not None:
        report.outcome = "skipped"
        report.longrepr = (str(item.path), item.location[1] or 0,
                           f"Skipped: needs {missing!r}, not installed (an optional extra)")


def _skip_missing_requirements(items: list[pytest.Item]) -> None:
    """``@pytest.mark.requires("torch", ...)``: skip, naming what is absent (subprocess tests
    cannot raise the ModuleNotFoundError the report hook above turns into a skip)."""
    for item in items:
        for mark in item.iter_markers("requires"):
            absent = [m for m in mark.args if importlib.util.find_spec(m) is None]
            if absent:
                item.add_marker(pytest.mark.skip(
                    reason=f"needs {', '.join(absent)}, not installed (an optional extra)"))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    _skip_missing_requirements(items)
    if has_gpu():
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU; none on this machine")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(params=builtin_names(), ids=str)
def memory_type(request: pytest.FixtureRequest) -> str:
    """Each built-in memory type; skipped, with the reason, where it cannot run here."""
    reason = unusable_reason(str(request.param))
    if reason:
        pytest.skip(reason)
    return str(request.param)


@pytest.fixture
def toy() -> Iterator[Framework]:
    """The toy framework registered as a seventh row for one test (one row + one module)."""
    import tests.toyarrays  # noqa: F401  (a framework not loaded cannot own an array)

    with registered(TOY) as row:
        yield row


@pytest.fixture
def toydev() -> Iterator[Framework]:
    """The toy *device* framework (tests.toydevice: 2 "toyaccel" devices with allocators,
    streams and statistics) registered for one test, its allocators fresh."""
    from tests import toydevice as tdv

    tdv.reset()
    with registered(TOYDEV) as row:
        yield row
    tdv.reset()
