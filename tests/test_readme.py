"""The README's quick tour runs as written (so the README stays true)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

README = Path(__file__).resolve().parents[1] / "README.md"


@pytest.mark.requires("torch", "jax", "tensorflow")
def test_quick_tour_runs(tmp_path: Path) -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks, "README has no python block"
    script = tmp_path / "tour.py"
    call = "invert(np.ones((2, 8, 8), np.float32))"
    script.write_text(blocks[0] + f"\nprint(type({call}).__name__)\n")
    out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                         timeout=300, check=False)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "Tensor"
