"""OME metadata a viewer uses: per-channel names, colours and display windows (omero), and
physical pixel sizes (issue 24, section 4)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.errors import StoreFormatError
from memtype.storage import ZarrStore

pytestmark = pytest.mark.requires("zarr")


@pytest.fixture
def plate(tmp_path: Path) -> ZarrStore:
    return ZarrStore(tmp_path / "plate.zarr")


def omero(plate: ZarrStore, field: str) -> dict[str, Any]:
    doc = json.loads(Path(plate.root, field, "zarr.json").read_text())
    return dict(doc["attributes"]["ome"]["omero"])


def two_channels() -> np.ndarray:
    """A dim channel (0-100) and a bright one (1000-5000), with a few hot pixels."""
    rng = np.random.default_rng(3)
    image = np.empty((2, 1, 64, 64), np.uint16)
    image[0] = rng.integers(0, 101, (1, 64, 64))
    image[1] = rng.integers(1000, 5001, (1, 64, 64))
    image[1, 0, :2, :2] = 65000
    return image


def test_each_channel_gets_a_window_from_the_lowest_level(plate: ZarrStore) -> None:
    plate.save(two_channels(), "A/1/0", parents=True, pyramid_levels=3)
    lowest = plate.load("A/1/0", resolution=2)
    channels = omero(plate, "A/1/0")["channels"]
    for c, channel in enumerate(channels):
        start, end = np.percentile(lowest[c], (0.1, 99.9))
        assert channel["window"] == {"min": 0.0, "max": 65535.0, "start": start, "end": end}
    assert channels[0]["window"]["end"] < channels[1]["window"]["start"]  # not one shared window


def test_a_float_window_ignores_nan_and_spans_the_data(plate: ZarrStore) -> None:
    image = np.linspace(-1.0, 3.0, 400, dtype=np.float32).reshape(20, 20)
    image[0, 0] = np.nan
    plate.save(image, "A/1/0", parents=True)
    window = omero(plate, "A/1/0")["channels"][0]["window"]
    finite = image[np.isfinite(image)]
    start, end = np.percentile(finite, (0.1, 99.9))
    assert window == {"min": float(finite.min()), "max": float(finite.max()),
                      "start": start, "end": end}


def test_a_constant_channel_gets_a_window_of_one(plate: ZarrStore) -> None:
    plate.save(np.full((8, 8), 7, np.uint8), "A/1/0", parents=True)
    window = omero(plate, "A/1/0")["channels"][0]["window"]
    assert (window["start"], window["end"]) == (7.0, 8.0)


@pytest.mark.parametrize(("shape", "names", "colors", "expected"), [
    ((8, 8), None, None, ["FFFFFF"]),
    ((2, 1, 8, 8), None, None, ["00FF00", "FF00FF"]),
    ((2, 1, 8, 8), ["DAPI", "GFP"], None, ["0000FF", "00FF00"]),
    ((3, 1, 8, 8), ["w1 Hoechst", "mCherry", "brightfield"], None,
     ["0000FF", "FF0000", "00FFFF"]),
    ((2, 1, 8, 8), ["a", "b"], ["ff8800", "112233"], ["ff8800", "112233"]),
], ids=["one channel", "two unnamed", "dapi gfp", "named stains", "given"])
def test_channel_colours(plate: ZarrStore, shape: tuple[int, ...], names: Any, colors: Any,
                         expected: list[str]) -> None:
    plate.save(np.zeros(shape, np.uint8), "A/1/0", parents=True, channel_names=names,
               channel_colors=colors)
    channels = omero(plate, "A/1/0")["channels"]
    assert [c["color"] for c in channels] == expected
    assert [c["label"] for c in channels] == (names or [f"channel {i}" for i in
                                                        range(len(expected))])


@pytest.mark.parametrize("colors", [["00FF00"], ["00FF0", "FF00FF"], ["GGGGGG", "FF00FF"],
                                    "00FF00FF00FF"], ids=str)
def test_invalid_channel_colours(plate: ZarrStore, colors: Any) -> None:
    with pytest.raises(StoreFormatError, match="channel_colors"):
        plate.save(np.zeros((2, 1, 8, 8), np.uint8), "A/1/0", parents=True,
                   channel_colors=colors)
    assert not plate.exists("A/1/0")


def test_the_window_sample_is_a_bounded_view() -> None:
    from memtype.omezarr.pyramid import _channel

    image = np.zeros((2, 3, 2000, 1500), np.uint16)
    sample = _channel(image, "czyx", 1)
    assert sample.shape[-2:] == (250, 250) and np.shares_memory(sample, image)


def test_physical_pixel_sizes_are_the_scale_of_each_level(plate: ZarrStore) -> None:
    plate.save(np.zeros((2, 3, 16, 16), np.uint8), "A/1/0", parents=True, pyramid_levels=2,
               scale=(1, 2.0, 0.325, 0.325), unit="micrometer")
    doc = json.loads(Path(plate.root, "A/1/0/zarr.json").read_text())["attributes"]["ome"]
    multiscale = doc["multiscales"][0]
    assert [a.get("unit") for a in multiscale["axes"]] == [None, "micrometer", "micrometer",
                                                           "micrometer"]
    assert [d["coordinateTransformations"][0]["scale"] for d in multiscale["datasets"]] == [
        [1.0, 2.0, 0.325, 0.325], [1.0, 2.0, 0.65, 0.65]]
