"""OME-Zarr plates (0.5 and 0.4) read from a real S3 server (moto, the ``s3`` fixture) and over
plain HTTP by their metadata alone: the same records and pixels as from disk, no LIST request;
one clear error for a missing bucket, a URL that is not a plate, refused credentials and a
vendor layout asked of a URL; ``memtype inspect`` and ``memtype run`` with URLs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memtype.errors import (
    InvalidArgumentError,
    StoreAccessError,
    StoreFormatError,
    StoreNotFoundError,
)
from memtype.pipeline.readers import OmeZarrReader, detect_layout, open_input
from memtype.storage import ZarrStore
from memtype.storage.remote import ObjectLocation
from tests.pipeline_support import ROOT
from tests.s3_server import S3Server

pytestmark = pytest.mark.requires("obstore", "moto", "zarr")

WELLS, FIELDS, CHANNELS, PLANES = 2, 2, 2, 3


def _plate(folder: Path, version: str) -> Path:
    """A plate of WELLS wells x FIELDS fields, CHANNELS x PLANES planes each, two levels."""
    rng = np.random.default_rng(7)
    plate = ZarrStore(folder / "plate.zarr", ome_version=version)
    for w in range(1, WELLS + 1):
        for f in range(FIELDS):
            image = rng.integers(0, 4000, (CHANNELS, PLANES, 32, 32), dtype=np.uint16)
            plate.save(image, f"B/{w}/{f}", parents=True, pyramid_levels=2,
                       channel_names=["DAPI", "GFP"], scale=(1, 2.0, 0.5, 0.5),
                       unit="micrometer")
    return folder / "plate.zarr"


def upload(folder: Path, where: ObjectLocation) -> None:
    """Every file of a local plate as an object (its lock files left out)."""
    for path in sorted(folder.rglob("*")):
        if path.is_file() and ".memtype-locks" not in path.parts:
            where.put(path.relative_to(folder).as_posix(), path.read_bytes())


@pytest.fixture(scope="module", params=["0.5", "0.4"])
def local_plate(request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _plate(tmp_path_factory.mktemp(f"plate{request.param}"), request.param)


@pytest.fixture
def s3_plate(s3: S3Server, local_plate: Path) -> Iterator[str]:
    """The URL of the local plate, uploaded to a fresh bucket."""
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/screens/plate.zarr")
    upload(local_plate, where)
    yield where.url


def _read_all(reader: OmeZarrReader) -> tuple[list[tuple[str, dict[str, object]]],
                                               list[np.ndarray]]:
    """(path and fields of every record, every plane)."""
    records = reader.records()
    return ([(r.path, dict(r.fields)) for r in records],
            reader.load_batch([r.path for r in records]))


def test_a_plate_reads_the_same_from_s3(s3_plate: str, local_plate: Path) -> None:
    local, remote = OmeZarrReader(local_plate), open_input(s3_plate)
    assert isinstance(remote, OmeZarrReader) and remote.root == s3_plate
    (mine, planes), (theirs, expected) = _read_all(remote), _read_all(local)
    assert mine == theirs and len(mine) == WELLS * FIELDS * CHANNELS * PLANES
    assert all(np.array_equal(a, b) for a, b in zip(planes, expected, strict=True))
    assert remote.metadata.channel_names == {1: "DAPI", 2: "GFP"}
    assert remote.metadata.pixel_size_um == local.metadata.pixel_size_um == (0.5, 0.5)


def test_reading_a_plate_lists_nothing(s3: S3Server, s3_plate: str,
                                       local_plate: Path) -> None:
    version = ZarrStore(local_plate, read_only=True).ome_version
    mark = s3.mark()
    reader = open_input(s3_plate)
    reader.records()
    listed = s3.since(mark)
    reader.load_batch([r.path for r in reader.records()])
    read = s3.since(mark)
    assert listed["LIST"] == read["LIST"] == 0
    # each document once: the plate, its wells, their fields and the fields' full levels,
    # and the probe that finds the plate; 0.4 asks for a zarr.json first each time (a 404)
    fields, tries = WELLS * FIELDS, 1 if version == "0.5" else 2
    assert listed["GET"] == tries * (1 + WELLS + 2 * fields) + 2 * tries
    # the pixels: each field's level opened once more, then one chunk per plane
    assert read["GET"] - listed["GET"] == tries * fields + fields * CHANNELS * PLANES


def test_a_plate_reads_over_http(s3: S3Server, local_plate: Path) -> None:
    bucket = s3.bucket()
    _public(s3, bucket)
    upload(local_plate, ObjectLocation.parse(f"s3://{bucket}/plate.zarr"))
    remote = open_input(f"{s3.endpoint}/{bucket}/plate.zarr")
    (mine, planes), (theirs, expected) = _read_all(remote), _read_all(OmeZarrReader(local_plate))
    assert mine == theirs
    assert all(np.array_equal(a, b) for a, b in zip(planes, expected, strict=True))


def _public(s3: S3Server, bucket: str) -> None:
    """Let anyone read the bucket's objects over plain HTTP."""
    import boto3

    policy = {"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": "*", "Action": "s3:GetObject",
        "Resource": f"arn:aws:s3:::{bucket}/*"}]}
    boto3.client("s3", endpoint_url=s3.endpoint).put_bucket_policy(
        Bucket=bucket, Policy=json.dumps(policy))


def test_a_deep_stack_is_bounded_by_one_listing_on_s3_and_read_over_http(
        s3: S3Server, tmp_path: Path) -> None:
    from memtype.omezarr.read import CLAIM_CHECKED

    planes = CLAIM_CHECKED + 6  # more than a claim is taken on trust for
    ZarrStore(tmp_path / "deep.zarr").save(np.arange(planes * 64, dtype=np.uint32)
                                           .reshape(planes, 8, 8), "A/1/0", parents=True,
                                           chunks=(64, 8, 8))  # 65 chunk files
    bucket = s3.bucket()
    _public(s3, bucket)
    upload(tmp_path / "deep.zarr", ObjectLocation.parse(f"s3://{bucket}/deep.zarr"))
    mark = s3.mark()
    assert len(open_input(f"s3://{bucket}/deep.zarr").records()) == planes
    assert s3.since(mark)["LIST"] == 1  # the level's chunks counted once
    over_http = open_input(f"{s3.endpoint}/{bucket}/deep.zarr")
    records = over_http.records()
    assert len(records) == planes
    assert over_http.load_batch([records[-1].path])[0][0, 0] == (planes - 1) * 64


def test_a_missing_bucket_is_one_clear_error(s3: S3Server) -> None:
    with pytest.raises(StoreNotFoundError, match="bucket 'no-such-bucket-x'.*does not exist"):
        open_input("s3://no-such-bucket-x/plate.zarr")


def test_a_url_that_is_not_a_plate_is_one_clear_error(s3: S3Server) -> None:
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/images")
    where.put("A01_s1_w1.tif", b"II*\x00")
    with pytest.raises(StoreFormatError, match="is not an OME-Zarr plate.*only OME-Zarr"):
        open_input(where.url)


def test_refused_credentials_are_one_clear_error(s3: S3Server, s3_plate: str) -> None:
    import moto.settings

    saved = moto.settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = 0
    try:
        with pytest.raises(StoreAccessError, match="refused the request"):
            open_input(s3_plate)
    finally:
        moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = saved


@pytest.mark.parametrize(("layout", "pattern"), [("imagexpress", None), ("phenix", None),
                                                 (None, "{well}_s{site}.tif")])
def test_vendor_layouts_are_not_read_from_a_url(layout: str | None,
                                                pattern: str | None) -> None:
    with pytest.raises(InvalidArgumentError, match="Only OME-Zarr plates are read from a URL"):
        open_input("s3://bucket/plate", layout, pattern)


def test_detect_layout_of_a_url(s3_plate: str) -> None:
    assert detect_layout(s3_plate)[0] == "ome-zarr"


def _memtype(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "memtype", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=240)


def test_memtype_run_and_inspect_with_urls(s3: S3Server, tmp_path: Path) -> None:
    s3_plate = f"s3://{s3.bucket()}/plate.zarr"
    upload(_plate(tmp_path, "0.5"), ObjectLocation.parse(s3_plate))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    pipeline = tmp_path / "project.py"
    pipeline.write_text("from memtype.pipeline import FunctionStep, Pipeline\n"
                        "from memtype.pipeline.demo import max_project\n"
                        "pipeline = Pipeline([FunctionStep(max_project)])\n")
    out = f"s3://{s3.bucket()}/results"
    ran = _memtype("run", str(pipeline), "--input", s3_plate, "--output", out, env=env)
    assert ran.returncode == 0, ran.stderr[-2000:]
    assert f"input    {s3_plate} read as ome-zarr" in ran.stdout
    assert f"{out}/plate.zarr" in ran.stdout
    plate = open_input(f"{out}/plate.zarr")
    assert len(plate.records()) == WELLS * FIELDS * CHANNELS  # one plane: projected
    missing = _memtype("inspect", "s3://no-such-bucket-x/plate.zarr", env=env)
    assert missing.returncode != 0 and "does not exist" in missing.stderr
    assert "Traceback" not in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
