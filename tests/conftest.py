"""Shared fixtures. Import order matters: torch and pyclesperanto before tensorflow
(the pocl OpenCL runtime segfaults when pyclesperanto is imported after tensorflow)."""

from __future__ import annotations

import importlib.util
import os
import platform
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

from memtype.frameworks import load_adapter  # noqa: E402

# Through memtype, so pyclesperanto gets the OpenCL runtime memtype chooses (a pip-installed
# pocl where no OpenCL platform offers a device). An installed framework that fails to
# import fails here, loudly: a broken install is never a reason to skip.
for _name in ("torch", "pyclesperanto", "jax", "tensorflow"):  # order is the workaround
    if importlib.util.find_spec(_name) is not None:
        load_adapter(_name)

from collections.abc import Iterator  # noqa: E402

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

# CI runs the same examples every time (a failure there is reproducible, never a flake);
# locally hypothesis explores new ones on every run.
settings.register_profile("ci", derandomize=True, deadline=None)
if os.environ.get("CI"):
    settings.load_profile("ci")

from memtype.frameworks import Framework  # noqa: E402
from tests.frameworks import has_gpu, type_params, unusable_reason  # noqa: E402
from tests.helpers import registered  # noqa: E402
from tests.s3_server import s3, s3_session_server  # noqa: E402,F401  (a real S3 server, moto)

TOY = Framework(
    name="toy", module="tests.toyarrays", array_types=("tests.toyarrays:ToyArray",),
    adapter="tests.toy_adapter:ToyAdapter", device_kinds=("cpu",),
    install_hint="(ships with the tests)",
)

TOYDEV = Framework(
    name="toydev", module="tests.toydevice", array_types=("tests.toydevice:ToyDeviceArray",),
    adapter="tests.toydevice_adapter:ToyDeviceAdapter", device_kinds=("toyaccel",),
    install_hint="(ships with the tests)",
)


# What a test may be skipped for. Nothing else skips: a test that fails is a failure, and
# a case that cannot run here is listed as a skip naming what is absent (tests.frameworks).
ALL_EXTRAS_ENV = "MEMTYPE_TEST_ALL_EXTRAS"
# Modules that memtype[test] does not install (`make test` has every other one): cupy,
# cucim and pynvml (nvidia-ml-py) are GPU extras; pandas is only an optional side-output type; pywt
# (PyWavelets) is scikit-image's optional dependency of two catalog entries (wavelet denoising).
# centrosome (CellProfiler's algorithms, the analysis tests' reference) pins pillow<12: not in all
NOT_IN_ALL_EXTRAS = frozenset({"cupy", "cucim", "pynvml", "pandas", "pywt", "centrosome"})
_ALLOWED_SKIP = pytest.StashKey[str]()


def _all_extras() -> bool:
    """``make test`` says every extra is installed: a skip it does not expect fails the run."""
    return os.environ.get(ALL_EXTRAS_ENV, "") == "1"


def _pip_pocl_platform() -> bool:
    """Where memtype[cle] brings its own OpenCL runtime (pocl-binary-distribution)."""
    return sys.platform == "linux" and platform.machine() == "x86_64"


def _skip_reason(item: pytest.Item) -> tuple[str, bool] | None:
    """Why ``item`` cannot run here, from its markers, and whether a run with every extra
    installed may skip it for that; None when it can run."""
    for mark in item.iter_markers("requires"):
        absent = [m for m in mark.args if importlib.util.find_spec(m) is None]
        if absent:
            return (f"needs {', '.join(absent)}, not installed (an optional extra)",
                    set(absent) <= NOT_IN_ALL_EXTRAS)
    if item.get_closest_marker("gpu") is not None and not has_gpu():
        return "needs a CUDA GPU; none on this machine", True
    if item.get_closest_marker("no_gpu") is not None and has_gpu():
        return "checks the behaviour without a GPU; this machine has one", True
    if item.get_closest_marker("opencl") is not None:
        why = unusable_reason("pyclesperanto")
        if why:
            return f"needs an OpenCL device: {why}", not _pip_pocl_platform()
    return None


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Skip, naming what is absent, each test whose ``requires``/``gpu``/``no_gpu``/``opencl``
    marker is not met here. With every extra installed, a missing module that memtype[all]
    installs is not skipped: the test runs and fails on its import."""
    for item in items:
        found = _skip_reason(item)
        if found is None:
            continue
        reason, allowed = found
        if allowed or not _all_extras():
            item.stash[_ALLOWED_SKIP] = reason
            item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """With every extra installed (``MEMTYPE_TEST_ALL_EXTRAS=1``, set by ``make test``), a skip
    that no marker above asked for (``pytest.skip``, ``importorskip``, ``skipif``) fails."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if not (report.skipped and _all_extras()) or hasattr(report, "wasxfail"):
        return
    if _ALLOWED_SKIP in item.stash:
        return
    why = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
    report.outcome = "failed"
    report.longrepr = (f"{item.nodeid} was skipped ({why}), but {ALL_EXTRAS_ENV}=1 says "
                       "every extra is installed: a skip must come from a requires/gpu/"
                       "no_gpu/opencl marker naming what is absent")


@pytest.hookimpl(hookwrapper=True)
def pytest_make_collect_report(collector: pytest.Collector) -> Iterator[None]:
    """The same for a whole module skipped while it was collected."""
    outcome = yield
    report = outcome.get_result()  # type: ignore[attr-defined]
    if report.skipped and _all_extras():
        why = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"{collector.nodeid} was skipped while collected ({why}), but "
                           f"{ALL_EXTRAS_ENV}=1 says every extra is installed")


@pytest.fixture(params=type_params())
def memory_type(request: pytest.FixtureRequest) -> str:
    """Each built-in memory type, marked with what it needs (tests.frameworks.type_params)."""
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
