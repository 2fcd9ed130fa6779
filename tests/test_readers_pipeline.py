"""The readers in a run: one plate's pixels in every layout give the same plate and CSV; the
run says which layout it read; ``memtype run --layout`` and ``memtype inspect``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.cli import main
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline, ReadOptions
from tests.helpers import import_if_installed
from tests.pipeline_support import load_field, read_csv
from tests.readers_support import (
    CHANNEL_NAMES,
    PATTERN,
    PLANES,
    SITES,
    WELLS,
    WRITERS,
    layout_params,
    plane,
    write_imagexpress,
)

pytestmark = pytest.mark.requires("tifffile", "zarr")

LAYOUT_OF = {"pattern": "pattern", "imagexpress": "imagexpress", "phenix": "phenix",
             "phenix-names-only": "phenix", "ome-zarr-0.4": "ome-zarr",
             "ome-zarr-0.5": "ome-zarr", "ome-tiff": "ome-tiff"}


@mt.numpy
def project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@mt.numpy
def measure(stack: np.ndarray) -> tuple[np.ndarray, dict[str, float]]:
    return stack, {"mean": float(stack.mean()), "max": float(stack.max())}


def _pipeline() -> Pipeline:
    return Pipeline([FunctionStep(project), FunctionStep(measure, outputs=("stats",))])


def _reference(well: str, site: int, channel: int) -> np.ndarray:
    return np.max([plane(well, site, channel, z) for z in range(1, PLANES + 1)], axis=0)


@pytest.mark.parametrize("name", layout_params(WRITERS))
def test_the_same_plate_in_every_layout_gives_the_same_results(name: str,
                                                               tmp_path: Path) -> None:
    root = WRITERS[name](tmp_path / "plate")
    report = _pipeline().run(root, tmp_path / "out",
                             read=ReadOptions(pattern=PATTERN if name == "pattern" else None))
    assert report.ok and report.input is not None
    assert report.input.layout == LAYOUT_OF[name]
    rows = read_csv(tmp_path / "out" / "stats.csv")
    got = {(r["well"], int(r["site"]), int(r["channel"]), int(r["t"])):
           (float(r["mean"]), float(r["max"])) for r in rows}
    expected = {}
    for well in WELLS:
        for site in range(1, SITES + 1):
            field = load_field(tmp_path / "out" / "plate.zarr", well, site)
            assert field.shape == (1, 2, 1, 8, 10)  # t, c, z, y, x
            for c in (1, 2):
                ref = _reference(well, site, c)
                np.testing.assert_array_equal(field[0, c - 1, 0], ref)
                expected[(well, site, c, 1)] = (float(ref.mean()), float(ref.max()))
    assert got == expected


def test_a_vendor_plate_runs_on_threads_from_a_reader(tmp_path: Path) -> None:
    from memtype.pipeline.readers import ImageXpressReader

    reader = ImageXpressReader(write_imagexpress(tmp_path / "plate"))
    report = _pipeline().run(reader, tmp_path / "out", executor="threads",
                             execution=ExecutionOptions(workers=2))
    assert report.ok and len(report.groups) == 2
    assert report.input is not None
    assert report.input.channel_names == dict(enumerate(CHANNEL_NAMES, start=1))


def test_a_pipeline_with_its_own_pattern_reads_by_it(tmp_path: Path) -> None:
    root = WRITERS["pattern"](tmp_path / "plate")
    pipeline = Pipeline([FunctionStep(project)], pattern=PATTERN)
    assert pipeline.reader(root).layout == "pattern"
    assert pipeline.reader(root, layout="imagexpress").layout == "imagexpress"
    assert len(pipeline.tasks(root)) == 2


def test_the_layout_can_be_forced_in_a_run(tmp_path: Path) -> None:
    root = WRITERS["phenix-names-only"](tmp_path / "plate")
    report = _pipeline().run(root, tmp_path / "out", read=ReadOptions(layout="phenix"))
    assert report.ok and report.input is not None and report.input.layout == "phenix"


@pytest.fixture(scope="module")
def dask_client() -> Iterator[Any]:
    distributed = import_if_installed("distributed")
    assert distributed is not None  # the tests using this fixture require it
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    with distributed.Client(cluster) as client:
        yield client
    cluster.close()


@pytest.mark.requires("distributed")
@pytest.mark.parametrize("name", layout_params(["imagexpress", "phenix", "ome-zarr-0.5",
                                                "ome-tiff"]))
def test_dask_workers_read_every_layout_from_the_source(name: str, tmp_path: Path,
                                                        dask_client: Any) -> None:
    root = WRITERS[name](tmp_path / "plate")
    report = _pipeline().run(root, tmp_path / "out", executor="dask",
                             execution=ExecutionOptions(client=dask_client))
    assert report.ok, [g.error for g in report.groups]
    field = load_field(tmp_path / "out" / "plate.zarr", "B03", 2)
    np.testing.assert_array_equal(field[0, 0, 0], _reference("B03", 2, 1))


# -- the command line -----------------------------------------------------------------------
PIPELINE_FILE = '''
import numpy as np
import memtype as mt
from memtype.pipeline import FunctionStep, Pipeline


@mt.numpy
def project(stack):
    return stack.max(axis=0, keepdims=True)


pipeline = Pipeline([FunctionStep(project)])
'''


def test_memtype_run_says_which_layout_it_read(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root = write_imagexpress(tmp_path / "plate")
    (tmp_path / "pipe.py").write_text(PIPELINE_FILE)
    code = main(["run", str(tmp_path / "pipe.py"), "--input", str(root), "--output",
                 str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 0, err
    assert out.startswith(f"input    {root} read as imagexpress (from MFGTMP_140206180002.HTD)")
    field = load_field(tmp_path / "out" / "plate.zarr", "B03", 2)
    np.testing.assert_array_equal(field[0, 1, 0], _reference("B03", 2, 2))


def test_memtype_run_layout_forces_one(tmp_path: Path,
                                       capsys: pytest.CaptureFixture[str]) -> None:
    root = WRITERS["phenix"](tmp_path / "plate")
    (tmp_path / "pipe.py").write_text(PIPELINE_FILE)
    code = main(["run", str(tmp_path / "pipe.py"), "--input", str(root), "--output",
                 str(tmp_path / "out"), "--layout", "imagexpress"])
    err = capsys.readouterr().err
    assert code == 2 and "read as layout 'imagexpress'" in err


def test_memtype_inspect_shows_the_plate(tmp_path: Path,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    root = write_imagexpress(tmp_path / "plate")
    (root / "TimePoint_1/ZStep_1/MFGTMP_140206180002_A01_s2_w2.TIF").unlink()
    assert main(["inspect", str(root)]) == 0
    out = capsys.readouterr().out
    for text in ("imagexpress", "96 wells (8 rows x 12 columns)", "A01, B03", "1 (DAPI)",
                 "2 (FITC)", "15", "8 x 10", "uint16",
                 "1: well=A01 site=2 channel=2 z=1 t=1"):
        assert text in out, (text, out)


def test_inspect_lists_gaps_of_a_plate_without_metadata(tmp_path: Path) -> None:
    from memtype.pipeline.io.inspection import inspect_plate

    root = WRITERS["pattern"](tmp_path / "plate")
    (root / "TimePoint_1" / "B03_s1_w2_z2.tif").unlink()
    summary = inspect_plate(root, pattern=PATTERN)
    assert summary.missing == ["t=1 well=B03 site=1 channel=2 z=2"]
    assert summary.images == 15 and summary.nbytes is not None and summary.nbytes > 0


def test_a_vendor_plate_written_as_tiff_is_named_by_its_fields(tmp_path: Path) -> None:
    import tifffile

    root = WRITERS["phenix"](tmp_path / "plate")
    pipeline = Pipeline([FunctionStep(project)], output_format="tiff")
    assert pipeline.run(root, tmp_path / "out").ok
    written = tmp_path / "out" / "images" / "B03_t1_s2_w1_z001.tif"
    np.testing.assert_array_equal(tifffile.imread(written), _reference("B03", 2, 1))


def test_memtype_inspect_of_a_missing_folder_is_one_line(tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]
                                                         ) -> None:
    assert main(["inspect", str(tmp_path / "nowhere")]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "does not exist" in err
