"""Symbolic links in an input folder: followed while they stay inside it, skipped (with one
warning) when they lead outside; a link is read, never written."""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import NoImagesError
from memtype.pipeline.readers import ImageXpressReader, PatternReader

pytestmark = pytest.mark.requires("tifffile")


def _tif(path: Path, value: int) -> Path:
    import tifffile

    path.parent.mkdir(parents=True, exist_ok=True)
    tifffile.imwrite(path, np.full((4, 4), value, np.uint16))
    return path


def test_a_linked_file_inside_the_input_is_read(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    original = _tif(root / "raw" / "scan_0001.tif", 7)
    (root / "A01_s1_w1_z001.tif").symlink_to(original)
    reader = PatternReader(root)
    [rec] = reader.records()
    assert rec.path == "A01_s1_w1_z001.tif"
    assert int(reader.load_batch([rec.path])[0][0, 0]) == 7


def test_a_linked_folder_inside_the_input_is_walked(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / "raw" / "A01" / "1" / "1_z1.tif", 3)
    (root / "by-well").mkdir()
    (root / "by-well" / "A01").symlink_to(root / "raw" / "A01", target_is_directory=True)
    reader = PatternReader(root, "by-well/{well}/{site}/{channel}_z{z}.tif")
    [rec] = reader.records()
    assert rec.path == "by-well/A01/1/1_z1.tif"
    assert int(reader.load_batch([rec.path])[0][0, 0]) == 3


def test_a_timepoint_folder_link_is_followed_by_the_vendor_reader(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / ".acquired" / "p_A01_s1_w1.TIF", 5)  # hidden: walked through the link only
    (root / "TimePoint_2").symlink_to(root / ".acquired", target_is_directory=True)
    [rec] = ImageXpressReader(root).records()
    assert (rec.path, rec.get("t")) == ("TimePoint_2/p_A01_s1_w1.TIF", 2)


def test_a_folder_reached_by_two_paths_is_listed_under_both(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / "TimePoint_1" / "p_A01_s1_w1.TIF", 5)
    (root / "TimePoint_2").symlink_to(root / "TimePoint_1", target_is_directory=True)
    recs = ImageXpressReader(root).records()
    assert [(r.path, r.get("t")) for r in recs] == [("TimePoint_1/p_A01_s1_w1.TIF", 1),
                                                    ("TimePoint_2/p_A01_s1_w1.TIF", 2)]


def test_links_leading_outside_are_skipped_with_one_warning(tmp_path: Path) -> None:
    outside = _tif(tmp_path / "elsewhere" / "secret.tif", 9)
    root = tmp_path / "plate"
    _tif(root / "A01_s1_w1_z001.tif", 1)
    (root / "A02_s1_w1_z001.tif").symlink_to(outside)
    (root / "more").symlink_to(tmp_path / "elsewhere", target_is_directory=True)
    with pytest.warns(UserWarning, match=r"2 symbolic link\(s\).*lead outside") as caught:
        records = PatternReader(root).records()
    assert len(caught) == 1
    assert [r.path for r in records] == ["A01_s1_w1_z001.tif"]


def test_only_outside_links_is_no_images_and_says_why(tmp_path: Path) -> None:
    outside = _tif(tmp_path / "elsewhere" / "x.tif", 9)
    root = tmp_path / "plate"
    root.mkdir()
    (root / "A01_s1_w1_z001.tif").symlink_to(outside)
    with warnings.catch_warnings(record=True) as caught, pytest.raises(NoImagesError):
        warnings.simplefilter("always")
        PatternReader(root).records()
    assert any("lead outside" in str(w.message) for w in caught)


def test_a_link_loop_is_walked_once(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / "sub" / "A01_s1_w1_z001.tif", 1)
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    assert [r.path for r in PatternReader(root).records()] == ["sub/A01_s1_w1_z001.tif"]


def test_a_link_swapped_outside_after_listing_is_refused_at_read(tmp_path: Path) -> None:
    from memtype.errors import StorePathError

    inside = _tif(tmp_path / "plate" / "raw" / "a.tif", 1)
    outside = _tif(tmp_path / "elsewhere" / "b.tif", 2)
    link = tmp_path / "plate" / "A01_s1_w1_z001.tif"
    link.symlink_to(inside)
    reader = PatternReader(tmp_path / "plate")
    [rec] = reader.records()
    os.unlink(link)
    link.symlink_to(outside)
    with pytest.raises(StorePathError):
        reader.load_batch([rec.path])


def test_a_link_loop_is_an_error_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / "A01_s1_w1_z001.tif", 1)
    (root / "loop_a").symlink_to(root / "loop_b")
    (root / "loop_b").symlink_to(root / "loop_a")
    with pytest.raises(OSError, match="loop_"):
        PatternReader(root).records()


def test_a_dangling_link_is_not_an_image(tmp_path: Path) -> None:
    root = tmp_path / "plate"
    _tif(root / "A01_s1_w1_z001.tif", 1)
    (root / "A02_s1_w1_z001.tif").symlink_to(root / "gone.tif")
    assert [r.path for r in PatternReader(root).records()] == ["A01_s1_w1_z001.tif"]
