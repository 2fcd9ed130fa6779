"""The ``memtype`` command's output is its own: no framework start-up chatter on stderr
(TensorFlow's absl INFO lines), while warnings still reach the user."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from memtype.frameworks import get_framework
from memtype.frameworks._startup import QUIET_VARIABLE, _replay

TF_PATTERNS = get_framework("tensorflow").quiet_stderr
CHATTER = [
    "WARNING: All log messages before absl::InitializeLog() is called are written to STDERR\n",
    "I0000 00:00:1795869631.661012    9092 port.cc:153] oneDNN custom operations are on. "
    "You may see slightly different numerical results.\n",
    "I0000 00:00:1795869631.693562    9092 cpu_feature_guard.cc:227] This TensorFlow binary "
    "is optimized to use available CPU instructions in performance-critical operations.\n",
    "To enable the following instructions: AVX2 AVX512F FMA, in other operations, rebuild "
    "TensorFlow with the appropriate compiler flags.\n",
]
KEPT = [
    "W0000 00:00:1795869631.693562    9092 gpu_device.cc:2344] Cannot dlopen some GPU "
    "libraries.\n",
    "E0000 00:00:1795869631.693562    9092 cuda_dnn.cc:8579] Unable to register cuDNN "
    "factory.\n",
    "/x/y.py:5: UserWarning: a real warning\n",
    "Traceback (most recent call last):\n",
]


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("TF_CPP_MIN_LOG_LEVEL",
                                                            QUIET_VARIABLE)}
    env.update(extra)
    return env


@pytest.mark.parametrize("line", CHATTER, ids=["absl-preinit", "onednn", "cpu-guard",
                                               "cpu-guard-2"])
def test_start_up_chatter_is_dropped(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    _replay(line.encode(), TF_PATTERNS)
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize("line", KEPT, ids=["absl-warning", "absl-error", "python-warning",
                                            "traceback"])
def test_warnings_and_errors_are_kept(line: str, capsys: pytest.CaptureFixture[str]) -> None:
    _replay(line.encode(), TF_PATTERNS)
    assert capsys.readouterr().err == line


@pytest.mark.requires("tensorflow")
def test_memtype_info_prints_no_tensorflow_start_up_lines() -> None:
    done = subprocess.run([sys.executable, "-m", "memtype", "info"], env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "tensorflow" in done.stdout  # it was imported, and said nothing on stderr
    assert "oneDNN" not in done.stderr and "absl::InitializeLog" not in done.stderr
    assert done.stderr == ""


@pytest.mark.requires("tensorflow")
def test_a_warning_during_a_quiet_import_still_reaches_stderr() -> None:
    code = ("import warnings, memtype\n"
            "from memtype.frameworks import load_adapter, _startup\n"
            "with _startup.quiet_startup(('^I\\\\d{4} ',)):\n"
            "    warnings.warn('kept while quiet')\n"
            "load_adapter('tensorflow')\n")
    done = subprocess.run([sys.executable, "-c", code], env=_env(**{QUIET_VARIABLE: "1"}),
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "UserWarning: kept while quiet" in done.stderr
    assert "oneDNN" not in done.stderr


@pytest.mark.requires("tensorflow")
def test_a_library_user_sees_tensorflow_as_tensorflow_prints_it() -> None:
    code = "from memtype.frameworks import load_adapter\nload_adapter('tensorflow')\n"
    done = subprocess.run([sys.executable, "-c", code], env=_env(), capture_output=True,
                          text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert "oneDNN" in done.stderr  # memtype changes nothing outside its command
