"""Plate-wide passes (issue 32): map over groups or over tiles, reduce, apply, resume.

A median's per-pixel histogram is mapped over bands of rows (each task reads every image of
its channel and keeps only its band's histogram); its function must equal the one of whole
images, on every executor, whatever the band size.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import InvalidArgumentError, ShapeError
from memtype.pipeline import Pipeline
from memtype.pipeline.analysis import passes
from memtype.pipeline.analysis.fields import channel_field
from memtype.pipeline.analysis.illumination import IlluminationAccumulator
from memtype.pipeline.execution.executors import InlineExecutor
from memtype.pipeline.synthetic import SyntheticPlate, write_synthetic_plate
from tests.pipeline_support import stacks

pytestmark = pytest.mark.requires("scipy", "tifffile")

PLATE = SyntheticPlate(wells=2, sites=2, channels=2, z_planes=2, size=48, cells=(2, 4))
MEDIAN = ("correct_illumination", {"method": "median", "smoothing": "gaussian"})
MEAN = ("correct_illumination", {"method": "mean", "smoothing": "median"})


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("plate")
    write_synthetic_plate(path, PLATE)
    return path


def _run(step: Any, plate: Path, out: Path, executor: Any = None, *, resume: bool = False,
         tile_bytes: int = passes.TILE_BYTES) -> list[Any]:
    """run_passes over a plate, as Pipeline.run calls it: the steps it returns."""
    pipeline = Pipeline([step])
    reader = pipeline.reader(str(plate))
    return passes.run_passes(pipeline.steps, executor or InlineExecutor(), reader,
                             pipeline.tasks(reader), channel_field(reader.pattern.fields),
                             str(out), resume, tile_bytes=tile_bytes)


def _saved(out: Path, step: str = "correct_illumination") -> dict[str, np.ndarray]:
    return {p.stem: np.load(p) for p in sorted((out / "passes" / step).glob("*.npy"))}


def _whole(channel: int, **options: Any) -> np.ndarray:
    """The illumination function of every plane of a channel, in one accumulator."""
    acc = IlluminationAccumulator(median_bins=256 if options["method"] == "median" else None)
    for (_, _, c), stack in stacks(PLATE).items():
        for plane in stack if c == channel else ():
            acc.add(plane)
    return np.asarray(acc.function(**options), dtype=np.float32)


@pytest.mark.parametrize("tile_bytes", [1, 48 * 48 * 514 // 5, passes.TILE_BYTES],
                         ids=["one-row-bands", "six-bands", "one-band"])
def test_a_median_over_tiles_equals_the_median_of_whole_images(
        plate_dir: Path, tmp_path: Path, tile_bytes: int) -> None:
    _run(MEDIAN, plate_dir, tmp_path, tile_bytes=tile_bytes)
    saved = _saved(tmp_path)
    assert sorted(saved) == ["1", "2"]
    for channel in (1, 2):
        np.testing.assert_array_equal(
            saved[str(channel)], _whole(channel, method="median", smoothing="gaussian"))


@pytest.mark.parametrize(("height", "count"), [(48, 1), (48, 5), (7, 7), (5, 3)])
def test_bands_cover_every_row_once(height: int, count: int) -> None:
    bands = passes._bands(height, count)
    assert len(bands) == count
    assert [r for a, b in bands for r in range(a, b)] == list(range(height))


@pytest.mark.parametrize(("tile_bytes", "workers", "per_channel"), [
    (passes.TILE_BYTES, 1, 1), (passes.TILE_BYTES, 4, 2), (48 * 48 * 514 // 3, 1, 3),
    (1, 1, 48)])
def test_tiles_are_sized_by_memory_and_workers(plate_dir: Path, tile_bytes: int, workers: int,
                                               per_channel: int) -> None:
    pipeline = Pipeline([MEDIAN])
    reader = pipeline.reader(str(plate_dir))
    tiles = passes._tiles(reader, pipeline.tasks(reader), channel_field(reader.pattern.fields),
                          workers, 514, tile_bytes)
    assert sorted({t.channel for t in tiles}) == ["1", "2"]
    assert len(tiles) == 2 * per_channel
    assert all(len(t.paths) == 8 and t.shape == (48, 48) for t in tiles)  # 2 wells x 2 x 2


@pytest.mark.requires("distributed")
@pytest.mark.parametrize("step", [MEDIAN, MEAN, ("normalize_plate", {})],
                         ids=["median", "mean", "normalize_plate"])
def test_dask_computes_the_same_functions_as_inline(plate_dir: Path, tmp_path: Path,
                                                    step: Any) -> None:
    from memtype.pipeline.execution.executors import DaskExecutor

    _run(step, plate_dir, tmp_path / "inline")
    with DaskExecutor(workers=2) as executor:
        _run(step, plate_dir, tmp_path / "dask", executor, tile_bytes=48 * 48 * 514 // 3)
    inline, dask = _saved(tmp_path / "inline", step[0]), _saved(tmp_path / "dask", step[0])
    assert sorted(inline) == sorted(dask) == ["1", "2"]
    for channel, function in inline.items():
        np.testing.assert_array_equal(dask[channel], function)


def test_resume_applies_the_saved_functions_without_reading(plate_dir: Path,
                                                            tmp_path: Path) -> None:
    _run(MEDIAN, plate_dir, tmp_path)
    saved = tmp_path / "passes" / "correct_illumination" / "2.npy"
    np.save(saved, np.full((48, 48), 2.0, np.float32))  # what a resumed run must use
    pipeline = Pipeline([MEDIAN])
    steps = passes.run_passes(pipeline.steps, InlineExecutor(), None, [], "channel",
                              str(tmp_path), True)  # no reader, no group: nothing to read
    function = steps[0].routes["2"][0].kwargs["function"]
    np.testing.assert_array_equal(function, np.full((48, 48), 2.0))


def test_a_pass_after_another_step_names_it_and_its_position() -> None:
    with pytest.raises(InvalidArgumentError,
                       match=r"step 'normalize_plate' \(step 3 of 3, after 'gaussian'\) is a "
                             r"plate-wide pass.*put it before every other step"):
        Pipeline(["max_projection", ("gaussian", {"sigma": 1}), "normalize_plate"])


@pytest.mark.parametrize("step", [MEDIAN, MEAN], ids=["tiles", "groups"])
def test_an_image_of_another_shape_is_refused(tmp_path: Path, step: Any) -> None:
    import tifffile

    write_synthetic_plate(tmp_path / "plate", PLATE)
    tifffile.imwrite(tmp_path / "plate" / "A02_s1_w1_z002.tif", np.ones((40, 48), np.uint16))
    with pytest.raises(ShapeError, match=r"\(48, 48\)") as caught:
        _run(step, tmp_path / "plate", tmp_path / "out")
    assert "(40, 48)" in str(caught.value)


@pytest.mark.parametrize(("params", "match"), [
    ({"method": "medain"}, r"`method` .*\['mean', 'median'\]. Received: method='medain'"),
    ({"smoothing": "splines"}, r"`smoothing` .*Received: smoothing='splines'"),
    ({"how": "multiply"}, r"`how` .*\['divide', 'subtract'\]"),
    ({"median_bins": 1}, r"`median_bins` .*2\.\.4096. Received: median_bins=1"),
    ({"median_bins": 64.5}, r"`median_bins`"),
    ({"sigma": 0}, r"`sigma` .*> 0. Received: sigma=0"),
    ({"sigma": "2"}, r"`sigma`"),
    ({"rescale": "yes"}, r"`rescale` .*true or false"),
    ({"median_range": [10, 5]}, r"`median_range` .*low < high. Received: median_range=\[10, 5\]"),
    ({"median_range": 4095}, r"`median_range`")])
def test_a_pass_parameter_it_cannot_run_with_is_refused_when_declared(
        params: dict[str, Any], match: str) -> None:
    with pytest.raises(InvalidArgumentError, match=match):
        Pipeline([("correct_illumination", params)])


@pytest.mark.parametrize("params", [{"method": "median", "median_bins": np.int64(64)},
                                    {"method": "median", "median_range": [0, 4095]},
                                    {"sigma": 2}, {"sigma": 2.5, "how": "subtract"}])
def test_the_pass_parameters_it_can_run_with_are_taken(params: dict[str, Any]) -> None:
    assert Pipeline([("correct_illumination", params)]).steps[0].plate_pass \
        == "correct_illumination"


def test_a_median_range_narrows_the_bins_to_the_images_values(plate_dir: Path,
                                                              tmp_path: Path) -> None:
    data = np.stack([s for (_, _, c), stack in stacks(PLATE).items() if c == 1 for s in stack])
    high = int(data.max()) + 1
    assert high < 65535 / 4  # the image type's range would make bins 4x as wide, at least
    step = ("correct_illumination", {"method": "median", "smoothing": "none",
                                     "rescale": False, "median_range": [0, high]})
    _run(step, plate_dir, tmp_path)
    lower = np.sort(data, axis=0)[(len(data) + 1) // 2 - 1]  # the lower median: 8 fields
    error = np.abs(_saved(tmp_path)["1"] - lower)
    assert error.max() <= high / 256  # one bin width of the range given
