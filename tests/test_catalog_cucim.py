"""cucim.skimage in the function catalog (issue 25, sections 1-2): its entries are declared as
the scikit-image functions they mirror, listing them imports neither cucim nor CuPy, a
machine without cucim lists them as not installed, and the plan never runs an operation's
CuPy implementation without a CUDA device. Running every cucim entry once and comparing
every CuPy implementation with the reference are the GPU tests of tests/test_catalog.py
(``test_every_entry_runs_as_declared``) and tests/test_catalog_operations.py
(``test_implementations_agree_within_tolerance``), marked ``gpu``."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from memtype.pipeline import Pipeline, catalog
from memtype.pipeline.catalog.declarations import CUPY, HOST, INSTALL_HINTS, mirrored
from memtype.pipeline.catalog.entry import CUCIM_DATA_FILE

CUCIM = [e for e in catalog.entries() if e.library == "cucim"]
SKIMAGE = [e for e in catalog.entries() if e.library == "skimage"]
_NAMES = {e.name for e in catalog.entries()}
MIRRORED = [pytest.param(e, id=e.name) for e in CUCIM if mirrored(e.name) in _NAMES]
# cucim's own functions, without a scikit-image 0.26 entry to mirror (declarations.OUTPUT)
CUCIM_ONLY = {f"cucim.skimage.morphology.binary_{op}": "mask"
              for op in ("erosion", "dilation", "opening", "closing")}


def test_cucim_entries_are_listed() -> None:
    """112 functions of cucim.skimage 26.10 (measured when generated); each runs in CuPy."""
    assert len(CUCIM) >= 100
    assert {e.memory_type for e in CUCIM} == {CUPY}
    assert all(e.module.startswith("cucim.skimage.") for e in CUCIM)


@pytest.mark.parametrize("entry", MIRRORED)
def test_a_cucim_entry_is_declared_as_the_scikit_image_function_it_mirrors(
        entry: catalog.Entry) -> None:
    """Same output kind, dimensionality and required arguments as the scikit-image entry
    (the declarations made for it apply to its mirror), but the memory type is CuPy."""
    reference = catalog.get(mirrored(entry.name))
    assert reference.memory_type == HOST and entry.memory_type == CUPY
    assert (entry.output, entry.dimensions, entry.required) == \
        (reference.output, reference.dimensions, reference.required)
    assert entry.function == reference.function


@pytest.mark.parametrize(("name", "kind"), sorted(CUCIM_ONLY.items()),
                         ids=sorted(CUCIM_ONLY))
def test_cucims_own_functions_are_declared(name: str, kind: str) -> None:
    """scikit-image 0.26 removed binary_erosion & co.; cucim keeps them without docstrings,
    so their kind is declared (a mask), not read."""
    assert mirrored(name) not in _NAMES
    assert catalog.get(name).output == kind


@pytest.mark.parametrize("entry", [pytest.param(e, id=e.name) for e in SKIMAGE])
def test_every_scikit_image_entry_has_a_cucim_entry_or_a_reason(entry: catalog.Entry) -> None:
    name = f"cucim.{entry.name}"
    reasons = {x.name: x.reason for x in catalog.excluded()}
    assert name in _NAMES or reasons.get(name)


def test_a_function_cucim_lacks_says_so() -> None:
    with pytest.raises(ValueError, match=r"left out of the catalog: not in cucim.skimage "
                                         r"26\.10\.0 \(scikit-image only: use "
                                         r"skimage\.segmentation\.watershed\)"):
        catalog.get("cucim.skimage.segmentation.watershed")


def test_a_cucim_step_checks_its_arguments_without_cucim() -> None:
    """Made (and checked) from the data file alone, as a scikit-image step is."""
    step = catalog.step("cucim.skimage.filters.gaussian", sigma=2)
    assert step.chain[0].kwargs == {"sigma": 2}
    with pytest.raises(ValueError, match="needs 'output_shape'"):
        catalog.step("cucim.skimage.transform.resize")


def test_listing_imports_neither_cucim_nor_cupy() -> None:
    """Listing, searching and making cucim steps read the data files only (the listing
    budget, 50 ms, is measured in benchmarks/catalog.py, not here)."""
    code = ("import sys; from memtype.pipeline import catalog; catalog.entries(); "
            "catalog.search('cucim gaussian'); "
            "catalog.step('cucim.skimage.filters.gaussian', sigma=2); "
            "catalog.operation('gaussian'); "
            "print(sorted(m for m in ('cucim', 'cupy', 'cupyx', 'skimage') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "[]"


def test_cli_lists_cucim_functions_with_whether_cucim_is_installed() -> None:
    """``memtype functions cucim``: not installed here, with the install hint (installed on a
    GPU machine with cucim: no hint)."""
    out = subprocess.run([sys.executable, "-m", "memtype", "functions", "cucim", "threshold_otsu"],
                         capture_output=True, text=True, check=True,
                         env={**os.environ, "COLUMNS": "200"}).stdout
    assert "cucim.skimage.filters.threshold_otsu" in out
    hint = f"cucim: not installed; {INSTALL_HINTS['cucim']}"
    if importlib.util.find_spec("cucim") is None:
        assert "cupy (not installed)" in out and hint in out
    else:
        assert "not installed" not in out


def test_the_rows_say_which_library_is_not_installed() -> None:
    from memtype.pipeline.catalog.listing import not_installed, rows

    found = catalog.search("cucim gaussian")
    absent = importlib.util.find_spec("cucim") is None
    assert all(r[1] == ("cupy (not installed)" if absent else "cupy") for r in rows(found))
    assert not_installed(found) == ([f"cucim: not installed; {INSTALL_HINTS['cucim']}"]
                                    if absent else [])
    # the wheel alone (make package-check) has no scikit-image: then it is named too
    skimage_absent = importlib.util.find_spec("skimage") is None
    assert not_installed([catalog.get("skimage.filters.gaussian")]) == (
        [f"skimage: not installed; {INSTALL_HINTS['skimage']}"] if skimage_absent else [])


@pytest.mark.parametrize("name", sorted(catalog.OPERATIONS))
def test_every_operation_has_a_cupy_implementation(name: str) -> None:
    """cucim or cupyx.scipy.ndimage covers every operation; declared last."""
    assert list(catalog.OPERATIONS[name].implementations)[-1] == CUPY


@pytest.mark.no_gpu
@pytest.mark.requires("tifffile")
@pytest.mark.parametrize("name", ["gaussian", "threshold_otsu", "label_statistics"])
def test_the_plan_never_runs_cupy_without_a_gpu_and_says_why(name: str,
                                                             tmp_path: Path) -> None:
    """The data is on the host: the plan keeps it there and gives CuPy's reason on the
    chain-cost line. Without CuPy (or with CuPy not imported) the headline is the data (an
    absent GPU library is no reason to headline); where this process imported CuPy without
    a device, CuPy's trial failed and the headline says so."""
    from tests.pipeline_support import write_plate

    plate = write_plate(tmp_path / "plate")
    plan = Pipeline([name]).plan(plate)
    assert plan.choices == {name: HOST}
    line = next(x for x in plan.table().splitlines() if x.startswith(f"{name}: chain cost"))
    if importlib.util.find_spec("cupy") is None:
        assert plan.reasons == {name: f"the data is already there ({HOST})"}
        assert "cupy unavailable (FrameworkNotInstalledError: cupy is not installed" in line
    elif "cupy" not in sys.modules:
        assert plan.reasons == {name: f"the data is already there ({HOST})"}
        assert "cupy unavailable (not imported" in line
    else:
        assert "cupy: cannot run here" in plan.reasons[name]
        assert "cupy unavailable (DeviceError" in line


@pytest.mark.requires("cucim")
def test_cucim_data_file_matches_the_installed_cucim() -> None:
    """cucim_entries.json is what the generator makes from the installed cucim (it imports
    without a GPU: the generator reads signatures and docstrings only)."""
    from memtype.pipeline.catalog.generate import generate_cucim

    data = json.loads(Path(CUCIM_DATA_FILE).read_text())
    fresh = generate_cucim()
    if fresh["versions"] != data["versions"]:
        pytest.fail(f"cucim_entries.json was generated for {data['versions']}, installed: "
                    f"{fresh['versions']}; run python -m memtype.pipeline.catalog.generate "
                    "--cucim")
    assert json.loads(json.dumps(fresh)) == data


@pytest.mark.requires("cupy", "cucim")
@pytest.mark.gpu
@pytest.mark.parametrize("name", ["cucim.skimage.filters.threshold_otsu",
                                  "cucim.skimage.measure.regionprops_table",
                                  "cucim.skimage.feature.peak_local_max"])
def test_a_cucim_side_output_becomes_host_rows(name: str) -> None:
    """Scalars, tables and coordinates come back from the GPU as plain rows, equal to
    scikit-image's."""
    from tests.catalog_support import arguments_for, sample_stack

    entry, reference = catalog.get(name), catalog.get(mirrored(name))
    ours = catalog.catalog_function(entry, volume=True, **arguments_for(entry))
    theirs = catalog.catalog_function(reference, volume=True, **arguments_for(reference))
    _, rows = ours(sample_stack(entry))
    _, expected = theirs(sample_stack(reference))
    assert len(rows) == len(expected) > 0

    def ordered(found: list[dict[str, Any]]) -> list[dict[str, Any]]:  # peaks of equal height
        return sorted(found, key=lambda r: tuple(sorted(r.items())))

    for row, want in zip(ordered(rows), ordered(expected), strict=True):
        assert row == pytest.approx(want)
