"""Filename patterns, grouping into tasks and stacks, and the synthetic plate."""

from __future__ import annotations

import pickle
import re
from pathlib import Path

import numpy as np
import pytest

import memtype as mt
from memtype.errors import InputCollisionError, InvalidArgumentError, ShapeError
from memtype.pipeline.io.patterns import (
    DEFAULT_PATTERN,
    FilenamePattern,
    group_records,
    key_label,
    match_files,
    split_well,
    stack_keys,
)
from memtype.pipeline.synthetic import SyntheticPlate
from memtype.storage.base import natural_key


@pytest.mark.parametrize(("name", "expected"), [
    ("A01_s1_w1_z001.tif", {"well": "A01", "site": 1, "channel": 1, "z": 1}),
    ("P24_s16_w4_z128.tif", {"well": "P24", "site": 16, "channel": 4, "z": 128}),
    ("AA3_s2_w2_z1.tif", {"well": "AA3", "site": 2, "channel": 2, "z": 1}),
    ("/data/TimePoint_1/B03_s2_w1_z004.tif", {"well": "B03", "site": 2, "channel": 1, "z": 4}),
])
def test_default_pattern_matches_imagexpress_names(name: str, expected: dict[str, object]) -> None:
    assert FilenamePattern().match(name) == expected


@pytest.mark.parametrize("name", [
    "A01_s1_w1_z001.tiff", "A01_s1_w1.tif", "A01_sX_w1_z001.tif", "thumb_A01_s1_w1_z001.tif",
    "A01_s1_w1_z001.tif.bak", "1A_s1_w1_z001.tif",
])
def test_default_pattern_rejects_other_names(name: str) -> None:
    assert FilenamePattern().match(name) is None


def test_user_pattern_with_other_fields() -> None:
    p = FilenamePattern("{well}_s{site}_c{channel}_z{z}.tif")
    assert p.fields == ("well", "site", "channel", "z")
    assert p.match("C07_s3_c2_z10.tif") == {"well": "C07", "site": 3, "channel": 2, "z": 10}
    assert p.match("C07_s3_w2_z10.tif") is None


def test_text_fields_and_literal_regex_characters() -> None:
    p = FilenamePattern("{plate:s}.{well}(t{t}).png")
    assert p.match("run.7.B02(t5).png") == {"plate": "run.7", "well": "B02", "t": 5}
    assert p.match("run7xB02(t5).png") is None  # '.' and '(' are literal


def test_format_pads_with_the_spec_and_round_trips() -> None:
    p = FilenamePattern(DEFAULT_PATTERN)
    name = p.format(well="B03", site=2, channel=1, z=4)
    assert name == "B03_s2_w1_z004.tif"
    assert p.match(name) == {"well": "B03", "site": 2, "channel": 1, "z": 4}
    with pytest.raises(KeyError, match="z"):
        p.format(well="B03", site=2, channel=1)


@pytest.mark.parametrize("template", ["plain.tif", "{a}_{a}.tif", "{0}.tif", "{a!r}.tif",
                                      "{well", "{well}}_x.tif", "{well}_{z:xyz}.tif",
                                      "{well}_{z:03q}.tif", "{well:d}.tif"])
def test_bad_templates_are_refused(template: str) -> None:
    """A memtype error (also a ValueError) naming the template, never the bare one of
    ``string.Formatter`` or of ``str.format`` at the first write."""
    with pytest.raises(InvalidArgumentError, match=re.escape(repr(template))):
        FilenamePattern(template)


@pytest.mark.parametrize("template", ["{{x}}_{well}.tif", "{well:>4}_{z:02}.tif",
                                      "{name:s}_{plate:x}.tif"])
def test_escaped_braces_and_specs_a_field_can_write_are_kept(template: str) -> None:
    assert FilenamePattern(template).template == template


def test_format_refuses_a_value_its_spec_cannot_write() -> None:
    p = FilenamePattern(DEFAULT_PATTERN)
    with pytest.raises(InvalidArgumentError, match=r"'z': 'four'.*integer"):
        p.format(well="B03", site=2, channel=1, z="four")


def test_pattern_pickles() -> None:
    p = FilenamePattern("{well}_s{site}_c{channel}_z{z}.tif")
    q = pickle.loads(pickle.dumps(p))
    assert q == p and q.match("A01_s1_c1_z1.tif") == p.match("A01_s1_c1_z1.tif")


def _names(wells: list[str], sites: int, channels: int, zs: int) -> list[str]:
    p = FilenamePattern()
    return [p.format(well=w, site=s, channel=c, z=z) for w in wells
            for s in range(1, sites + 1) for c in range(1, channels + 1) for z in range(1, zs + 1)]


def test_match_files_sorts_naturally_and_skips_strangers() -> None:
    names = _names(["A10", "A2"], 1, 1, 2)[::-1] + ["notes.txt"]
    records = match_files(names, FilenamePattern())
    assert [r.path for r in records] == ["A2_s1_w1_z001.tif", "A2_s1_w1_z002.tif",
                                         "A10_s1_w1_z001.tif", "A10_s1_w1_z002.tif"]
    assert records[0].get("well") == "A02" and records[0].fields["z"] == 1


def test_group_by_well_then_stack_by_z() -> None:
    records = match_files(_names(["A01", "B01"], 2, 2, 3), FilenamePattern())
    groups = group_records(records, ["well"])
    assert [key_label(k) for k in groups] == ["well=A01", "well=B01"]
    members = groups[(("well", "A01"),)]
    assert len(members) == 12
    stacks = stack_keys([r.key for r in members], ["z"])
    assert len(stacks) == 4  # 2 sites x 2 channels
    fixed, idx = next(iter(stacks.items()))
    assert fixed == (("well", "A01"), ("site", 1), ("channel", 1))
    assert [members[i].get("z") for i in idx] == [1, 2, 3]


def test_stacks_along_two_components() -> None:
    records = match_files(_names(["A01"], 2, 2, 2), FilenamePattern())
    stacks = stack_keys([r.key for r in records], ["channel", "z"])
    assert list(stacks) == [(("well", "A01"), ("site", 1)), (("well", "A01"), ("site", 2))]
    order = [(records[i].get("channel"), records[i].get("z")) for i in stacks[list(stacks)[0]]]
    assert order == [(1, 1), (1, 2), (2, 1), (2, 2)]


def test_grouping_by_an_unknown_field_names_the_fields() -> None:
    records = match_files(_names(["A01"], 1, 1, 1), FilenamePattern())
    with pytest.raises(ValueError, match="plate.*fields of the filename pattern"):
        group_records(records, ["plate"])


def test_duplicate_slices_in_a_stack_are_an_error() -> None:
    key = (("well", "A01"), ("z", 1))
    with pytest.raises(ShapeError, match="same"):
        stack_keys([key, key], ["z"])


def test_empty_group_by_is_one_group() -> None:
    records = match_files(_names(["A01", "A02"], 1, 1, 1), FilenamePattern())
    groups = group_records(records, [])
    assert list(groups) == [()] and len(groups[()]) == 2 and key_label(()) == "all"


def test_natural_key_and_split_well() -> None:
    assert sorted(["A10", "A2", "B1"], key=natural_key) == ["A2", "A10", "B1"]
    assert split_well("b03") == ("B", 3)
    with pytest.raises(ValueError):
        split_well("3B")


def test_synthetic_plate_is_reproducible_and_named_by_the_pattern() -> None:
    plate = SyntheticPlate(wells=3, sites=2, channels=2, z_planes=3, size=64, cells=(3, 5))
    images = list(plate.images())
    assert len(images) == 3 * 2 * 2 * 3
    assert images[0][0] == "A01_s1_w1_z001.tif" and images[-1][0] == "A03_s2_w2_z003.tif"
    again = dict(SyntheticPlate(wells=3, sites=2, channels=2, z_planes=3, size=64,
                                cells=(3, 5)).images())
    for name, image in images:
        assert image.dtype == np.uint16 and image.shape == (64, 64)
        np.testing.assert_array_equal(image, again[name])
    other = SyntheticPlate(wells=3, sites=2, channels=2, z_planes=3, size=64, cells=(3, 5), seed=1)
    assert not np.array_equal(images[0][1], next(other.images())[1])


def test_synthetic_plate_has_blobs_over_an_uneven_background() -> None:
    plate = SyntheticPlate(wells=1, sites=1, channels=2, z_planes=6, size=128, cells=(4, 4))
    assert plate.cell_counts == {("A01", 1): 4}
    nuclei = plate.stack(0, 1, 1)
    projection = nuclei.max(axis=0).astype(float)
    background = np.median(nuclei, axis=0)
    assert projection.max() > background.mean() + 1500  # bright cells
    assert np.ptp(background) > 50  # uneven illumination, not flat
    assert nuclei.std(axis=(1, 2)).min() > 20  # noise and structure in every plane


def test_synthetic_plate_refuses_bad_shapes() -> None:
    with pytest.raises(ValueError):
        SyntheticPlate(channels=3)
    with pytest.raises(ValueError):
        SyntheticPlate(size=8)


@pytest.mark.parametrize("names", [
    ["A01_s1_w1_z001.tif", "A1_s1_w1_z001.tif"],
    ["A01_s1_w1_z001.tif", "a001_s1_w1_z001.tif"],
    ["A1_s1_w1_z001.tif", "a001_s1_w1_z001.tif"],
    ["TimePoint_1/A01_s1_w1_z001.tif", "TimePoint_2/A01_s1_w1_z001.tif"],
], ids=["A01-A1", "A01-a001", "A1-a001", "same-name-two-folders"])
def test_two_files_of_one_field_are_an_error_naming_both(names: list[str]) -> None:
    with pytest.raises(InputCollisionError) as info:
        match_files(names, FilenamePattern())
    assert all(repr(n) in str(info.value) for n in names)
    assert isinstance(info.value, ValueError)


def test_names_of_one_well_are_merged_into_that_well() -> None:
    records = match_files(["A01_s1_w1_z001.tif", "A1_s2_w1_z001.tif", "a001_s3_w1_z001.tif"],
                          FilenamePattern())
    groups = group_records(records, ["well"])
    assert list(groups) == [(("well", "A01"),)]
    assert [r.get("site") for r in groups[(("well", "A01"),)]] == [1, 2, 3]


@mt.numpy
def _keep(stack: np.ndarray) -> np.ndarray:
    return stack


@pytest.mark.requires("tifffile")
def test_a_run_over_two_names_of_one_image_fails_before_anything_runs(tmp_path: Path) -> None:
    from memtype.pipeline import FunctionStep, Pipeline
    from memtype.storage import DiskStore

    store = DiskStore(tmp_path / "in")
    for name in ("A01_s1_w1_z001.tif", "A1_s1_w1_z001.tif", "a001_s1_w1_z001.tif"):
        store.save(np.ones((4, 4), np.uint16), name)
    pipeline = Pipeline([FunctionStep(_keep)])
    with pytest.raises(InputCollisionError, match="A01_s1_w1_z001.tif"):
        pipeline.run(tmp_path / "in", tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_colliding_stack_slices_name_both_files() -> None:
    key = (("well", "A01"), ("z", 1))
    with pytest.raises(ShapeError, match="'a.tif' and 'b.tif'"):
        stack_keys([key, key], ["z"], ["a.tif", "b.tif"])


@pytest.mark.parametrize(("well", "expected"), [
    ("A01", "A01"), ("A1", "A01"), ("a001", "A01"), ("p24", "P24"), ("AA3", "AA03"),
    ("B123", "B123"), ("plate", "plate"),
])
def test_canonical_well(well: str, expected: str) -> None:
    from memtype.pipeline.io.patterns import canonical_well

    assert canonical_well(well) == expected


@pytest.mark.parametrize(("template", "path", "expected"), [
    ("{well}/{site}/{channel}_z{z}.tif", "plate/B03/2/1_z4.tif",
     {"well": "B03", "site": 2, "channel": 1, "z": 4}),
    ("TimePoint_{t}/ZStep_{z}/{well}_s{site}_w{channel}.tif",
     "TimePoint_2/ZStep_3/A01_s1_w2.tif", {"t": 2, "z": 3, "well": "A01", "site": 1,
                                           "channel": 2}),
    ("{well}_s{site}_w{channel}_z{z}.tif", "deep/er/A01_s1_w1_z1.TIF",
     {"well": "A01", "site": 1, "channel": 1, "z": 1}),
    ("{well}_s{site}_w{channel}_z{z}.tif", "A01_s1_w1_z1.Tif",
     {"well": "A01", "site": 1, "channel": 1, "z": 1}),
], ids=["well-site-folders", "timepoint-zstep-folders", "upper-extension", "mixed-extension"])
def test_patterns_with_folders_and_any_extension_case(template: str, path: str,
                                                      expected: dict[str, object]) -> None:
    assert FilenamePattern(template).match(path) == expected


@pytest.mark.parametrize(("template", "path"), [
    ("{well}/{site}/{channel}_z{z}.tif", "B03/1_z4.tif"),
    ("TimePoint_{t}/{well}_s{site}_w{channel}.tif", "ZStep_1/A01_s1_w1.tif"),
    ("{well}_s{site}_w{channel}_z{z}.tif", "A01_S1_w1_z1.tif"),
], ids=["too-few-levels", "wrong-folder", "literal-case-is-kept"])
def test_patterns_with_folders_reject_other_paths(template: str, path: str) -> None:
    assert FilenamePattern(template).match(path) is None
