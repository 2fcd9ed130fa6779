"""`memtype info` and `memtype bench` (the core's commands)."""

from __future__ import annotations

import importlib.util

import pytest

from memtype.cli import main
from tests.frameworks import available_types


def test_info_lists_frameworks_devices_and_missing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["info"]) == 0
    out = capsys.readouterr().out
    for name in available_types():
        assert name in out
    assert "GPUs:" in out
    cle_installed = importlib.util.find_spec("pyclesperanto") is not None
    assert ("pyclesperanto: OpenCL runtime:" in out) == cle_installed
    assert "dlpack" in out


@pytest.mark.requires("matplotlib")
def test_bench_prints_matrix_and_png(tmp_path, capsys: pytest.CaptureFixture[str]) -> None:
    png = tmp_path / "matrix.png"
    assert main(["bench", "--sizes", "1KiB", "--repeats", "1", "--png", str(png)]) == 0
    out = capsys.readouterr().out
    assert "| from \\ to |" in out
    rows = [line for line in out.splitlines() if line.startswith("| ") and "from" not in line]
    assert len(rows) == len(available_types())
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_bench_bad_size_is_one_line_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--sizes", "12 parsecs"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("memtype bench: error: Cannot read size") and "\n" not in err
