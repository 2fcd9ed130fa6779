"""``memtype functions QUERY`` whose only matches are left out of the catalog (issue 31, item 20):
before, an empty table and "0 catalog functions matching"; now the left-out functions and why."""

from __future__ import annotations

import os
import subprocess
import sys


def _functions(*args: str) -> str:
    """``memtype functions ARGS``'s output (a wide terminal: rows unbroken)."""
    env = {**os.environ, "COLUMNS": "250"}
    return subprocess.run([sys.executable, "-m", "memtype", "functions", *args],
                          capture_output=True, text=True, check=True, env=env).stdout


def test_a_search_matching_only_left_out_functions_shows_them_with_their_reasons() -> None:
    out = _functions("try_all_threshold")
    assert "skimage.filters.try_all_threshold" in out
    assert "draws a matplotlib figure" in out
    assert "left out of the catalog" in out


def test_a_search_with_catalog_matches_lists_the_catalog_only() -> None:
    out = _functions("threshold_otsu")
    assert "skimage.filters.threshold_otsu" in out
    assert "left out" not in out


def test_a_search_matching_nothing_says_none() -> None:
    out = _functions("no_such_function_anywhere")
    assert "0 catalog functions matching 'no_such_function_anywhere'" in out
    assert "left out" not in out
