"""The built distributions: what a user installing memtype from a wheel or sdist gets."""

from __future__ import annotations

import email
import subprocess
import sys
import tarfile
import zipfile
from email.message import Message
from pathlib import Path

import pytest

import memtype
from tests.helpers import import_if_installed

pytestmark = pytest.mark.requires("build", "setuptools")

ROOT = Path(__file__).resolve().parents[1]
# ``build`` the package (the test extra), not the ``build/`` directory setuptools leaves in a
# checkout, which imports as an empty namespace package when the tests run from the root.
_build = import_if_installed("build")
if not hasattr(_build, "ProjectBuilder"):
    pytest.skip("python -m build needs the 'build' package (test extra); only a build/ "
                "directory is importable here", allow_module_level=True)


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / "pyproject.toml").is_file():
        pytest.skip("not a source checkout")
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "-o", str(out),
                           str(ROOT)], capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return out


def _wheel(dist: Path) -> zipfile.ZipFile:
    (wheel,) = dist.glob("memtype-*.whl")
    return zipfile.ZipFile(wheel)


def _metadata(dist: Path) -> Message:
    wheel = _wheel(dist)
    name = next(n for n in wheel.namelist() if n.endswith(".dist-info/METADATA"))
    return email.message_from_bytes(wheel.read(name))


def test_wheel_has_py_typed_and_the_license(dist: Path) -> None:
    names = _wheel(dist).namelist()
    assert "memtype/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names), names[-10:]


def test_wheel_version_is_the_package_version(dist: Path) -> None:
    assert _metadata(dist)["Version"] == memtype.__version__
    (wheel,) = dist.glob("memtype-*.whl")
    assert wheel.name.startswith(f"memtype-{memtype.__version__}-")


def test_requirements_state_lower_bounds_and_pin_nothing(dist: Path) -> None:
    requires = _metadata(dist).get_all("Requires-Dist") or []
    assert requires, "no Requires-Dist at all"
    specs = [r.split(";")[0] for r in requires]  # the marker (extra == "x") aside
    pinned = [s for s in specs if "==" in s or "<" in s]
    assert pinned == []
    unbounded = [s for s in specs if ">=" not in s and not s.startswith("memtype[")]
    assert unbounded == []


def test_metadata_users_look_for(dist: Path) -> None:
    meta = _metadata(dist)
    classifiers = meta.get_all("Classifier") or []
    assert "Typing :: Typed" in classifiers
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in classifiers)
    assert meta["License-Expression"] == "BSD-3-Clause"
    urls = meta.get_all("Project-URL") or []
    assert not [u for u in urls if "example" in u or "TODO" in u]
    assert "memtype" in (meta.get_payload() or "")  # the README is the long description


def test_sdist_has_sources_tests_and_license(dist: Path) -> None:
    (sdist,) = dist.glob("memtype-*.tar.gz")
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    for needed in ("LICENSE", "pyproject.toml", "README.md", "src/memtype/__init__.py",
                   "src/memtype/py.typed"):
        assert needed in names, needed


def test_changelog_names_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    assert f"## {memtype.__version__}" in text
