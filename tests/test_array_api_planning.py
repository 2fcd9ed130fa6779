"""Planning a pipeline with an ``@mt.array_api`` step (or an ``mt.variants`` step whose first
implementation is in another framework) imports only the frameworks the pipeline uses: which
frameworks the standard covers is read from the table row (``Framework.array_api``) until a
framework is imported, and a variants step is checked and tried in an imported framework
first."""

from __future__ import annotations

import subprocess
import sys

import pytest

from memtype.array_api_functions import covers
from memtype.frameworks import get_framework
from tests.frameworks import type_params

pytestmark = pytest.mark.requires("array_api_compat")

_PLAN = """
import sys
import numpy as np
import memtype as mt
from memtype.frameworks import iter_frameworks
from memtype.pipeline import FunctionStep, Pipeline

@mt.array_api
def centre(image, xp):
    return image - xp.mean(image)

@mt.numpy
def inc(x):
    return x + 1

step = {step}
plan = Pipeline([FunctionStep(inc), step]).plan(np.zeros((2, 8, 8), np.float32))
print(sorted(fw.name for fw in iter_frameworks() if fw.name != "numpy"
             and fw.module in sys.modules))
print(plan.choices)
print(plan.table())
"""

STEPS = [
    pytest.param("FunctionStep(centre)", "centre", id="array_api"),
    pytest.param("FunctionStep(mt.variants(torch=lambda x: x, numpy=lambda x: x), 'same')",
                 "same", marks=pytest.mark.requires("torch"), id="variants-torch-first"),
]


@pytest.mark.parametrize("step,name", STEPS)
def test_planning_imports_only_the_frameworks_the_pipeline_uses(step: str, name: str) -> None:
    done = subprocess.run([sys.executable, "-c", _PLAN.format(step=step)],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    imported, choices, *table = done.stdout.splitlines()
    assert imported == "[]"
    assert choices == repr({name: "numpy"})


@pytest.mark.requires("torch")
def test_the_plan_still_lists_a_covered_framework_it_did_not_import() -> None:
    done = subprocess.run([sys.executable, "-c", _PLAN.format(step="FunctionStep(centre)")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "torch unavailable (not imported" in done.stdout


@pytest.mark.parametrize("memory_type", type_params())
def test_the_row_s_array_api_fact_is_what_the_import_finds(memory_type: str) -> None:
    assert get_framework(memory_type).array_api is covers(memory_type)
