"""``memtype functions --operations``: the catalog's operations and the analysis operations
(objects and measurements), each with its frameworks, named inputs, output and parameters."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memtype.cli import main
from memtype.pipeline.analysis.operations import ANALYSIS_OPERATIONS
from memtype.pipeline.catalog.listing import OPERATIONS_HEADER, operation_rows


@pytest.mark.parametrize("name", sorted(ANALYSIS_OPERATIONS))
def test_every_analysis_operation_is_listed_with_its_named_inputs(name: str) -> None:
    op = ANALYSIS_OPERATIONS[name]
    row = dict(zip(OPERATIONS_HEADER, next(r for r in operation_rows(name) if r[0] == name),
                   strict=True))
    assert row["input"] == ", ".join(op.inputs)
    assert row["output"] == op.output
    assert row["frameworks"].split(", ") == list(op.implementations)


def test_measure_intensity_takes_labels_and_an_image() -> None:
    (row,) = operation_rows("measure_intensity")
    assert row[2:4] == ("labels, image", "measurements")
    assert "image_name=None" in row[4]


def test_catalog_operations_are_still_listed() -> None:
    names = [row[0] for row in operation_rows("gaussian")]
    assert "gaussian" in names


def test_a_query_matching_nothing_lists_nothing() -> None:
    assert operation_rows("no_such_operation_anywhere") == []


def test_the_command_prints_the_analysis_operations(capsys: pytest.CaptureFixture[str],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    assert main(["functions", "--operations", "identify"]) == 0
    out = capsys.readouterr().out
    assert "3 operations" in out
    row = next(line for line in out.splitlines() if "identify_secondary" in line)
    assert "primary, image" in row and "labels" in row and "method=propagation" in row


def test_listing_operations_imports_no_image_library() -> None:
    code = ("import sys; from memtype.pipeline.catalog.listing import operation_rows; "
            "operation_rows(); print(sorted(m for m in ('skimage', 'scipy.ndimage', "
            "'pyclesperanto', 'torch', 'cupy', 'jax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"
