"""The test configuration itself: a skip comes only from a marker naming what is absent, and
with every extra installed (``MEMTYPE_TEST_ALL_EXTRAS=1``, ``make test``) any other skip fails.

Each case runs pytest on a small generated test file in a fresh interpreter, with this suite's
own hooks (tests/conftest.py), and reads the outcome of every test from the report."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

import memtype
from tests.conftest import TOY
from tests.frameworks import builtin_names, has_gpu, type_params, unusable_reason
from tests.helpers import registered

ROOT = Path(__file__).resolve().parents[1]
ABSENT = "memtype_no_such_module_xyz"
CASES = f'''
import pytest

def test_missing_module_fails():
    import {ABSENT}

@pytest.mark.requires("{ABSENT}")
def test_requires_an_absent_module():
    import {ABSENT}

@pytest.mark.requires("cupy")
def test_requires_a_gpu_extra():
    pass

@pytest.mark.gpu
def test_needs_a_gpu():
    pass

def test_skips_itself():
    pytest.skip("decided inside the test")

@pytest.mark.skipif(True, reason="a condition, not a marker naming what is absent")
def test_skipif():
    pass
'''
MODULE_SKIP = f'import pytest\n\npytest.importorskip("{ABSENT}")\n\n\ndef test_x():\n    pass\n'


def _outcomes(tmp_path: Path, all_extras: bool) -> dict[str, str]:
    """Test name (a module skipped or failed while collected: its file's stem) -> "passed",
    "failed" or "skipped", from pytest's JUnit XML report of the generated files."""
    (tmp_path / "conftest.py").write_text(
        "from tests.conftest import (  # noqa: F401  (this suite's hooks)\n"
        "    pytest_collection_modifyitems, pytest_make_collect_report,\n"
        "    pytest_runtest_makereport)\n")
    (tmp_path / "test_cases.py").write_text(CASES)
    (tmp_path / "test_module_skip.py").write_text(MODULE_SKIP)
    (tmp_path / "pytest.ini").write_text(
        "[pytest]\nmarkers =\n    gpu: a\n    no_gpu: b\n    opencl: c\n    requires(*m): d\n")
    env = {k: v for k, v in os.environ.items() if k != "MEMTYPE_TEST_ALL_EXTRAS"}
    here = Path(memtype.__file__).resolve().parents[1]  # the memtype this run imports
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), str(here), env.get("PYTHONPATH", "")])
    if all_extras:
        env["MEMTYPE_TEST_ALL_EXTRAS"] = "1"
    report = tmp_path / "report.xml"
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--continue-on-collection-errors", f"--junitxml={report}",
                           "test_cases.py", "test_module_skip.py"],
                          capture_output=True, text=True, cwd=tmp_path, env=env, timeout=600,
                          check=False)
    assert report.is_file(), done.stdout[-3000:] + done.stderr[-3000:]
    outcomes: dict[str, str] = {}
    for case in ElementTree.parse(report).iter("testcase"):
        kinds = {child.tag for child in case} & {"failure", "error", "skipped"}
        outcome = "failed" if kinds & {"failure", "error"} else kinds.pop() if kinds else "passed"
        outcomes[case.get("name") or ""] = outcome
    return outcomes


@pytest.fixture(scope="module")
def default_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _outcomes(tmp_path_factory.mktemp("default"), all_extras=False)


@pytest.fixture(scope="module")
def all_extras_run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return _outcomes(tmp_path_factory.mktemp("all-extras"), all_extras=True)


GPU_OUTCOME = "passed" if has_gpu() else "skipped"
CUPY_OUTCOME = "skipped" if importlib.util.find_spec("cupy") is None else "passed"


@pytest.mark.parametrize("test,expected", [
    ("test_missing_module_fails", "failed"),  # was a skip: the exception-chain hook
    ("test_requires_an_absent_module", "skipped"),
    ("test_requires_a_gpu_extra", CUPY_OUTCOME),
    ("test_needs_a_gpu", GPU_OUTCOME),
    ("test_skips_itself", "skipped"),
    ("test_skipif", "skipped"),
    ("test_module_skip", "skipped"),
])
def test_outcome_by_default(default_run: dict[str, str], test: str, expected: str) -> None:
    assert default_run[test] == expected, default_run


@pytest.mark.parametrize("test,expected", [
    ("test_missing_module_fails", "failed"),
    ("test_requires_an_absent_module", "failed"),  # memtype[test] promises every module...
    ("test_requires_a_gpu_extra", CUPY_OUTCOME),  # ...but the GPU extras
    ("test_needs_a_gpu", GPU_OUTCOME),
    ("test_skips_itself", "failed"),
    ("test_skipif", "failed"),
    ("test_module_skip", "failed"),
])
def test_outcome_with_every_extra_installed(all_extras_run: dict[str, str], test: str,
                                            expected: str) -> None:
    assert all_extras_run[test] == expected, all_extras_run


def test_every_memory_type_is_a_case() -> None:
    params = type_params()
    assert [p.id for p in params] == builtin_names()  # type: ignore[attr-defined]


def test_a_case_names_what_it_needs() -> None:
    marks = {p.id: {(m.name, m.args) for m in p.marks} for p in type_params()}  # type: ignore[attr-defined]
    assert marks["cupy"] == {("requires", ("cupy",)), ("gpu", ())}
    assert marks["pyclesperanto"] == {("requires", ("pyclesperanto",)), ("opencl", ())}
    assert marks["numpy"] == {("requires", ("numpy",))}


def test_an_installed_framework_that_fails_to_import_is_no_skip_reason() -> None:
    broken = dataclasses.replace(TOY, name="broken",
                                 adapter="tests.memtype_no_such_adapter:Adapter")
    with registered(broken), pytest.raises(Exception, match="memtype_no_such_adapter"):
        unusable_reason("broken")
