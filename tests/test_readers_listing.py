"""How readers list a plate: the folder walk (its exclusion), the natural sort of records, and
the records' memory (one tuple per record, its field pairs shared)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from memtype.errors import InputCollisionError
from memtype.pipeline.io.patterns import ImageRecord, key_order
from memtype.pipeline.readers import ImageXpressReader, PatternReader
from memtype.pipeline.readers.base import natural_sort, walk_folders, walk_inside


def _touch(root: Path, *paths: str) -> None:
    for path in paths:
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).touch()


def test_walk_folders_gives_each_folder_with_its_sorted_file_names(tmp_path: Path) -> None:
    _touch(tmp_path, "b.tif", "a.tif", "TimePoint_1/ZStep_2/x.tif", "TimePoint_1/ZStep_10/y.tif",
           "TimePoint_1/.hidden/z.tif", ".dot.tif")
    assert list(walk_folders(str(tmp_path))) == [
        ("", ["a.tif", "b.tif"]), ("TimePoint_1", []), ("TimePoint_1/ZStep_10", ["y.tif"]),
        ("TimePoint_1/ZStep_2", ["x.tif"])]


def test_walk_inside_leaves_out_the_excluded_folder_and_nothing_else(tmp_path: Path) -> None:
    _touch(tmp_path, "A01_s1_w1_z001.tif", "out/A01_s1_w1_z001.tif", "out/sub/x.tif",
           "outer/A02_s1_w1_z001.tif", "out.tif")
    assert sorted(walk_inside(str(tmp_path), "out")) == [
        "A01_s1_w1_z001.tif", "out.tif", "outer/A02_s1_w1_z001.tif"]


def test_a_nested_excluded_folder_is_left_out(tmp_path: Path) -> None:
    _touch(tmp_path, "run/a.tif", "run/out/b.tif", "run/outer/c.tif")
    assert sorted(walk_inside(str(tmp_path), "run/out")) == ["run/a.tif", "run/outer/c.tif"]


def test_a_run_output_inside_the_input_is_not_listed(tmp_path: Path) -> None:
    _touch(tmp_path, "A01_s1_w1_z001.tif", "results/A01_s1_w1_z001.tif")
    reader = PatternReader(tmp_path)
    assert [r.path for r in reader.records("results")] == ["A01_s1_w1_z001.tif"]
    with pytest.raises(InputCollisionError, match="results/A01_s1_w1_z001.tif"):
        reader.records()  # listed again, with the output: the same image twice


def _shuffled_records() -> list[ImageRecord]:
    wells = ["A1", "A2", "A10", "B03", "AA01", "a100", "A99", "P24"]
    records = [ImageRecord(f"{w}_{s}_{c}", (("well", w), ("site", s), ("channel", c)))
               for w in wells for s in (1, 2, 10, 100) for c in ("DAPI", "GFP10", "GFP9")]
    random.Random(3).shuffle(records)
    return records


def test_natural_sort_is_key_order() -> None:
    records = _shuffled_records()
    expected = sorted(records, key=lambda r: key_order(r.key))
    natural_sort(records)
    assert [r.path for r in records] == [r.path for r in expected]


def test_natural_sort_puts_a2_before_a10_and_site_2_before_10() -> None:
    records = [ImageRecord(p, (("well", w), ("site", s)))
               for p, w, s in (("a", "A10", 1), ("b", "A2", 10), ("c", "A2", 2))]
    natural_sort(records)
    assert [r.path for r in records] == ["c", "b", "a"]


def test_natural_sort_of_nothing() -> None:
    records: list[ImageRecord] = []
    natural_sort(records)
    assert records == []


def _imagexpress(root: Path) -> ImageXpressReader:
    _touch(root, *(f"TimePoint_1/ZStep_{z}/P_{w}_s{s}_w{c}.TIF" for z in (1, 2)
                   for w in ("A01", "B02") for s in (1, 2) for c in (1, 2)))
    return ImageXpressReader(root)


def test_imagexpress_records_share_their_field_pairs(tmp_path: Path) -> None:
    """A 138,240-file plate holds one key tuple per record: the (field, value) pairs are the
    same objects in every record that has them."""
    records = _imagexpress(tmp_path).records()
    assert len(records) == 16
    pairs = {id(pair) for rec in records for pair in rec.key}
    assert len(pairs) == len({pair for rec in records for pair in rec.key})  # 2+2+2+2+1 = 9


def test_imagexpress_records_are_in_natural_order(tmp_path: Path) -> None:
    records = _imagexpress(tmp_path).records()
    assert records == sorted(records, key=lambda r: key_order(r.key))
    assert records[0].fields == {"well": "A01", "site": 1, "channel": 1, "z": 1, "t": 1}
    assert records[1].path == "TimePoint_1/ZStep_2/P_A01_s1_w1.TIF"


def test_imagexpress_two_names_of_one_image_collide_naming_both(tmp_path: Path) -> None:
    _touch(tmp_path, "TimePoint_1/P_A01_s1_w1.TIF", "TimePoint_1/P_A001_s1_w1.TIF",
           "TimePoint_1/P_A02_s1_w1.TIF")
    with pytest.raises(InputCollisionError, match=r"P_A001_s1_w1\.TIF.*P_A01_s1_w1\.TIF"):
        ImageXpressReader(tmp_path).records()


def test_pattern_records_share_their_field_pairs(tmp_path: Path) -> None:
    _touch(tmp_path, *(f"{w}_s{s}_w1_z001.tif" for w in ("A01", "B2") for s in (1, 2)))
    records = PatternReader(tmp_path).records()
    assert [r.fields["well"] for r in records] == ["A01", "A01", "B02", "B02"]
    assert records[0].key[2] is records[3].key[2]  # ("channel", 1), one tuple
