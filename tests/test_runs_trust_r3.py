"""Runs a scientist can trust (issue 31): early stop sees one error as one, resume never mixes
plates, a planner that does not run a user's step for nothing, failures kept in a log, a plate
overview that tells failed from never imaged, output files that say what their data is."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.errors import InvalidArgumentError, StoreExistsError
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline, WriteOptions
from memtype.pipeline.synthetic import SyntheticPlate
from tests.pipeline_support import write_plate

TWO_CHANNELS = SyntheticPlate(wells=6, sites=1, channels=2, z_planes=2, size=32, cells=(1, 2))
"""Six wells of one field of two channels."""


@pytest.fixture(scope="module")
def two_channels(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("two-channels"), TWO_CHANNELS)


@pytest.fixture(scope="module")
def other_plate(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("other"), OTHER)


OTHER = SyntheticPlate(wells=8, sites=1, channels=2, z_planes=2, size=32, cells=(1, 2))
"""Eight wells: A01..A06 as in TWO_CHANNELS and two more, another plate."""


# -- steps (module level: threads and dask workers import them) -------------------------
# -- 13: early stop sees the same error as the same --------------------------------------
@mt.numpy
def np_extended(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True).astype(np.longdouble)  # no zarr dtype


@pytest.mark.requires("tifffile", "zarr")
def test_failures_alike_but_for_the_well_name_stop_the_run(two_channels: Path,
                                                           tmp_path: Path) -> None:
    # every well's field is refused by the plate: memtype's message names the field (A/1/1)
    step = FunctionStep(np_extended, dtype_conversion=mt.DtypeConversion.NATIVE_OUTPUT)
    report = Pipeline([step]).run(two_channels, tmp_path / "out")
    assert len(report.failed) == 3 and len(report.not_run) == 3, report.summary()
    assert report.stopped is not None and "float128" in report.stopped
    assert report.summary().count("FAILED") == 1  # one distinct error, printed once
    assert "'A/1/" in (report.failed[0].error or "")  # the group's own message keeps it


@pytest.mark.parametrize(("text", "key", "expected"), [
    ("of well A01 hold", (("well", "A01"),), "of well <well> hold"),
    ("field B/3/1 failed", (("well", "B03"),), "field <well>/1 failed"),
    ("file A1_s2.tif", (("well", "A01"),), "file <well>_s2.tif"),
    ("in site=2, channel: 1", (("well", "A01"), ("site", 2), ("channel", 1)),
     "in site=<site>, channel: <channel>"),
    ("no good: 1234 at A010", (("well", "A01"),), "no good: 1234 at A010"),
    ("site 20 of 2", (("site", 2),), "site 20 of 2"),
])
def test_a_cause_leaves_out_the_group_it_names(text: str, key: tuple[tuple[str, object], ...],
                                               expected: str) -> None:
    from memtype.pipeline.execution.report import without_group

    assert without_group(text, key) == expected  # type: ignore[arg-type]


# -- 12: resume with another plate is refused ---------------------------------------------
@mt.numpy
def np_project(stack: np.ndarray) -> np.ndarray:
    return stack.max(axis=0, keepdims=True)


@pytest.mark.requires("tifffile", "zarr")
def test_resume_with_another_plate_is_refused_naming_both(two_channels: Path, other_plate: Path,
                                                         tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert Pipeline([np_project]).run(two_channels, out).ok
    with pytest.raises(StoreExistsError) as raised:
        Pipeline([np_project]).run(other_plate, out, write=WriteOptions(resume=True))
    message = str(raised.value)
    assert str(two_channels) in message and str(other_plate) in message
    assert "mix" in message and "--overwrite" in message


@pytest.mark.requires("tifffile", "zarr")
def test_resume_with_the_same_plate_by_another_spelling_goes_on(two_channels: Path,
                                                               tmp_path: Path) -> None:
    out = tmp_path / "out"
    assert Pipeline([np_project]).run(two_channels, out).ok
    again = Pipeline([np_project]).run(Path(f"{two_channels}/./"), out,
                                       write=WriteOptions(resume=True))
    assert again.ok and len(again.skipped) == 6


@pytest.mark.requires("tifffile", "zarr")
def test_resume_after_the_plate_changed_is_refused(tmp_path: Path) -> None:
    plate = write_plate(tmp_path / "plate", TWO_CHANNELS)
    out = tmp_path / "out"
    assert Pipeline([np_project]).run(plate, out).ok
    next(plate.rglob("*.tif")).unlink()  # the same folder, another listing
    with pytest.raises(StoreExistsError, match="listing"):
        Pipeline([np_project]).run(plate, out, write=WriteOptions(resume=True))


# -- 9, 10: table names are one path component, never memtype's ROI tables ---------------
@mt.numpy
def np_count(stack: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    return stack.max(axis=0, keepdims=True), {"count": int(stack.shape[0])}


@pytest.mark.parametrize("name", ["a/b", "..", ".", "", "/tmp/x", ".memtype", "FOV_ROI_table",
                                  "well_ROI_table", "nuclei_ROI_table"])
def test_a_table_name_that_is_no_file_name_or_an_roi_table_is_refused_at_declaration(
        name: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"outputs\[0\]"):
        FunctionStep(np_count, outputs=[name])


@pytest.mark.requires("tifffile", "zarr")
def test_a_default_table_name_from_a_step_name_is_checked_before_it_is_written(
        two_channels: Path, tmp_path: Path) -> None:
    # the step is not materialized, so its name becomes no folder; its table is a file
    step = FunctionStep(np_count, name="FOV_ROI_table")
    report = Pipeline([step, np_project]).run(two_channels, tmp_path / "out",
                                              execution=ExecutionOptions(max_failures=1))
    assert not report.ok and "FOV_ROI_table" in (report.failed[0].error or "")
    assert not (tmp_path / "out" / "FOV_ROI_table.csv").exists()


# -- 15: the planner runs a user's step at most once per plan, on the real shape ---------
SEEN: list[tuple[int, ...]] = []
"""The shapes np_counted was called with (inline runs only)."""


@mt.numpy
def np_counted(stack: np.ndarray) -> np.ndarray:
    SEEN.append(tuple(stack.shape))
    return stack.max(axis=0, keepdims=True)


FOUR_SITES = SyntheticPlate(wells=1, sites=4, channels=2, z_planes=3, size=48, cells=(1, 2))
"""One well of 4 sites x 2 channels: 8 stacks of (3, 48, 48) a group."""


@pytest.fixture(scope="module")
def four_sites(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("four-sites"), FOUR_SITES)


@pytest.mark.requires("tifffile")
def test_plan_alone_runs_a_step_once_on_the_real_shape(four_sites: Path) -> None:
    SEEN.clear()
    Pipeline([np_counted, np_project]).plan(four_sites)
    assert SEEN == [(3, 48, 48)]


@pytest.mark.requires("tifffile", "zarr")
def test_a_run_runs_a_step_once_for_its_plan_then_once_per_stack(four_sites: Path,
                                                                 tmp_path: Path) -> None:
    SEEN.clear()
    report = Pipeline([np_counted, np_project]).run(four_sites, tmp_path / "out")
    assert report.ok, report.summary()
    assert SEEN == [(3, 48, 48)] * (1 + 8)  # the plan's one trial, then the group's 8 stacks


# -- 16: a run keeps its own record of failures -------------------------------------------
@mt.numpy
def np_fail_in_a02(stack: np.ndarray, bad: int = -1) -> np.ndarray:
    if int(stack.sum()) == bad:
        raise ValueError("this stack is no good")
    return stack.max(axis=0, keepdims=True)


def _a02_first_stack_sum() -> int:
    return int(TWO_CHANNELS.stack(1, 1, 1).sum())  # well A02, site 1, channel 1


@pytest.mark.requires("tifffile", "zarr")
def test_a_failed_group_is_written_to_the_failure_log_named_by_the_summary(
        two_channels: Path, tmp_path: Path) -> None:
    step = FunctionStep(np_fail_in_a02, bad=_a02_first_stack_sum())
    report = Pipeline([step]).run(two_channels, tmp_path / "out")
    [failed] = report.failed
    log = tmp_path / "out" / "failures.log"
    assert failed.log == str(log) and f"failed groups: {log}" in report.summary()
    text = log.read_text()
    assert "well=A02" in text and "site=1" in text and "channel=1" in text
    assert "Traceback" in text and "this stack is no good" in text
    assert "well=A01" not in text  # only the failure


BROKEN = [True]
"""Whether np_fail_in_a02_while_broken fails (the same pipeline, a fixed cause: inline runs)."""


@mt.numpy
def np_fail_in_a02_while_broken(stack: np.ndarray, bad: int = -1) -> np.ndarray:
    if BROKEN[0] and int(stack.sum()) == bad:
        raise ValueError("this stack is no good")
    return stack.max(axis=0, keepdims=True)


@pytest.mark.requires("tifffile", "zarr")
def test_a_group_done_on_resume_is_no_longer_marked_failed(two_channels: Path,
                                                           tmp_path: Path) -> None:
    from memtype.pipeline.execution.failures import failed_wells

    out = tmp_path / "out"
    step = FunctionStep(np_fail_in_a02_while_broken, bad=_a02_first_stack_sum())
    BROKEN[0] = True
    Pipeline([step]).run(two_channels, out)
    assert list(failed_wells(str(out))) == ["A/2"]
    BROKEN[0] = False
    assert Pipeline([step]).run(two_channels, out, write=WriteOptions(resume=True)).ok
    assert failed_wells(str(out)) == {}


# -- 16: the overview marks failed wells, has a colour bar, and shows the chosen column ---
OVERVIEW = (96, 2, 22, 34)
"""tile, gap, margin, top of a 96-well overview's plate pictures."""


def _tile(picture: np.ndarray, row: int, column: int, tile: int = 96, left: int = 0
          ) -> np.ndarray:
    _, gap, margin, top = OVERVIEW
    y, x = top + row * (tile + gap), left + margin + column * (tile + gap)
    return picture[y:y + tile, x:x + tile]


@mt.numpy
def np_count_or_fail_in_a02(stack: np.ndarray, bad: int = -1
                            ) -> tuple[np.ndarray, dict[str, float]]:
    if int(stack.sum()) == bad:
        raise ValueError("this stack is no good")
    projected = stack.max(axis=0, keepdims=True)
    return projected, {"count": float((projected > projected.mean()).sum()),
                       "area": float(projected.mean())}


@pytest.mark.requires("tifffile", "zarr", "PIL")
def test_the_overview_marks_a_failed_well_failed_and_has_a_colour_bar(
        two_channels: Path, tmp_path: Path) -> None:
    from PIL import Image

    step = FunctionStep(np_count_or_fail_in_a02, bad=_a02_first_stack_sum())
    report = Pipeline([step]).run(two_channels, tmp_path / "out",
                                  execution=ExecutionOptions(max_failures=0))
    picture = np.asarray(Image.open(report.outputs["overview"]).convert("RGB"))
    failed = _tile(picture, 0, 1)  # A02
    assert (failed[np.arange(96), np.arange(96)] == (200, 30, 30)).all()  # the red cross
    assert (_tile(picture, 0, 6) == (40, 40, 40)).all()  # A07: never imaged, drawn empty
    heat_left = 22 + 12 * 98 + 16
    bar = picture[34 + 8 * (32 + 2) + 4:34 + 8 * (32 + 2) + 14, heat_left + 22:]
    colours = {tuple(c) for c in bar.reshape(-1, 3)}
    assert (68, 1, 84) in colours and (253, 231, 37) in colours  # the scale, low to high


@pytest.mark.parametrize(("column", "title"), [
    (None, "t: count"), ("area", "t: area, mean per well"), ("t:area", "t: area, mean per well"),
    ("count", "t: count, mean per well")])
def test_well_values_show_the_chosen_column(column: str | None, title: str) -> None:
    from memtype.pipeline.io.overview import well_values

    rows = [{"well": "A01", "site": 1, "count": "2", "area": "10"},
            {"well": "A01", "site": 2, "count": "4", "area": "20"},
            {"well": "B03", "site": 1, "count": "1", "area": "5"}]
    shown, values = well_values({"t": rows}, column) or ("", {})
    assert shown == title
    expected = {"area": {"A/1": 15.0, "B/3": 5.0}, "count": {"A/1": 3.0, "B/3": 1.0}}
    assert values == (expected["area"] if column and "area" in column
                      else expected["count"] if column else {"A/1": 6.0, "B/3": 1.0})


def test_a_column_no_table_has_is_said_and_the_default_shown() -> None:
    from memtype.pipeline.io.overview import well_values

    with pytest.warns(UserWarning, match="no side-output table has it"):
        shown, _ = well_values({"t": [{"well": "A01", "count": 1}]}, "perimeter") or ("", {})
    assert "no column 'perimeter'" in shown


@pytest.mark.requires("tifffile")  # the plate of the two_channels fixture
@pytest.mark.parametrize("column", ["", ":", "a:b:c", "t:"])
def test_a_malformed_overview_column_is_refused_before_the_run(two_channels: Path,
                                                              tmp_path: Path,
                                                              column: str) -> None:
    with pytest.raises(InvalidArgumentError, match="overview_column"):
        Pipeline([np_project]).run(two_channels, tmp_path / "out",
                                   write=WriteOptions(overview_column=column))
    assert not (tmp_path / "out").exists()


@pytest.mark.requires("tifffile", "zarr", "PIL")
def test_memtype_run_takes_overview_column(two_channels: Path, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    from memtype.cli import main

    pipeline = tmp_path / "p.py"
    pipeline.write_text("import memtype as mt\nfrom memtype.pipeline import Pipeline\n\n"
                        "@mt.numpy\ndef measure(stack):\n"
                        "    return stack.max(axis=0, keepdims=True), {'area': 1.0}\n\n"
                        "pipeline = Pipeline([measure])\n")
    code = main(["run", str(pipeline), "--input", str(two_channels), "--output",
                 str(tmp_path / "out"), "--overview-column", "measure:area"])
    assert code == 0, capsys.readouterr()
    assert (tmp_path / "out" / "plate_overview.png").exists()
    code = main(["run", str(pipeline), "--input", str(two_channels), "--output",
                 str(tmp_path / "out2"), "--overview-column", "a:b:c"])
    assert code == 2 and "overview_column" in capsys.readouterr().err


# -- 18: TIFF outputs say what their pixels measure ---------------------------------------
@pytest.mark.requires("tifffile")
@pytest.mark.parametrize(("dtype", "imagej"), [(np.uint16, True), (np.float64, False)])
def test_a_tiff_carries_its_pixel_size_and_unit(tmp_path: Path, dtype: type,
                                                imagej: bool) -> None:
    import tifffile

    from memtype.storage import DiskStore

    DiskStore(tmp_path).save(np.ones((3, 8, 8), dtype), "x.tif", pixel_size=(2.0, 0.5, 0.25))
    with tifffile.TiffFile(tmp_path / "x.tif") as tif:
        x_resolution = tif.pages[0].tags["XResolution"].value
        assert x_resolution[0] / x_resolution[1] == pytest.approx(4.0)  # pixels per unit
        if imagej:
            assert tif.imagej_metadata["unit"] == "micron"
            assert tif.imagej_metadata["spacing"] == pytest.approx(2.0)
        else:
            ome = tif.ome_metadata
            assert 'PhysicalSizeX="0.25"' in ome and 'PhysicalSizeZ="2.0"' in ome
            assert 'PhysicalSizeXUnit="µm"' in ome


@pytest.mark.requires("tifffile")
@pytest.mark.parametrize("options", [{"pixel_size": (0.0, 1.0)}, {"pixel_size": (1.0,)},
                                     {"pixel_size": (float("nan"), 1.0)},
                                     {"pixel_size": (1.0, 1.0), "unit": "furlong"},
                                     {"unit": "micrometer"}], ids=repr)
def test_a_bad_tiff_pixel_size_is_refused(tmp_path: Path, options: dict[str, object]) -> None:
    from memtype.errors import StoreFormatError
    from memtype.storage import DiskStore

    with pytest.raises(StoreFormatError, match="TIFF"):
        DiskStore(tmp_path).save(np.ones((8, 8), np.uint16), "x.tif", **options)
    assert not (tmp_path / "x.tif").exists()


@pytest.mark.requires("tifffile")
def test_a_runs_tiff_output_carries_the_pixel_size(two_channels: Path, tmp_path: Path) -> None:
    import tifffile

    pipeline = Pipeline([np_project], output_format="tiff", pixel_size=(2.0, 0.5, 0.5))
    report = pipeline.run(two_channels, tmp_path / "out")
    assert report.ok, report.summary()
    first = sorted((tmp_path / "out" / "images").rglob("*.tif"))[0]
    with tifffile.TiffFile(first) as tif:
        x_resolution = tif.pages[0].tags["XResolution"].value
        assert x_resolution[0] / x_resolution[1] == pytest.approx(2.0)
        assert tif.imagej_metadata["unit"] == "micron"


@pytest.mark.parametrize("name", ["FOV", "well", "fov"])
def test_labels_whose_roi_table_would_replace_a_fields_own_are_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="ROI table"):
        FunctionStep(np_project, labels=name)


def test_an_object_storage_output_writes_no_local_failure_log(tmp_path: Path,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    from memtype.pipeline.execution.failures import record_outcome
    from memtype.pipeline.execution.report import GroupResult

    monkeypatch.chdir(tmp_path)
    failed = GroupResult((("well", "A01"),), "failed", "group well=A01 failed", "Traceback")
    result = record_outcome("s3://bucket/out", failed, "A01")
    assert result.log is None and result.error == "group well=A01 failed"  # no local try
    assert list(tmp_path.iterdir()) == []  # nothing written under the working directory


# -- a well named '..' by a text field never names a folder of the output -------------------
@pytest.mark.parametrize("name", [".._s1.tif", "._s1.tif"], ids=["dotdot", "dot"])
def test_a_text_field_value_of_dot_or_dotdot_matches_no_file(name: str) -> None:
    from memtype.pipeline.io.patterns import FilenamePattern

    pattern = FilenamePattern("{well:s}_s{site}.tif")
    assert pattern.match(name) is None
    assert pattern.match("A01_s1.tif") == {"well": "A01", "site": 1}


@pytest.mark.parametrize("key", [(("well", ".."),), (("well", "."),)], ids=["dotdot", "dot"])
def test_a_group_label_that_would_leave_the_output_is_refused(
        key: tuple[tuple[str, object], ...]) -> None:
    from memtype.pipeline.io.outputs import group_file_label

    with pytest.raises(InvalidArgumentError, match="cannot name a file in the output"):
        group_file_label(key)  # type: ignore[arg-type]


def test_a_group_label_is_one_path_component() -> None:
    from memtype.pipeline.io.outputs import group_file_label

    assert group_file_label((("well", "a/b\\c"), ("site", 2))) == "a_b_c-site2"
