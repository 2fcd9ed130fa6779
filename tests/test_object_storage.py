"""memtype.storage.remote against a real S3 server (moto, started by the ``s3`` fixture):
URLs, objects, conditional writes, and one clear error for a missing bucket, refused
credentials and a server that stops answering."""

from __future__ import annotations

import pytest

from memtype.errors import (
    InvalidArgumentError,
    StoreAccessError,
    StoreIOError,
    StoreNotFoundError,
    StoreReadOnlyError,
)
from memtype.storage.remote import (
    ENDPOINT_VARIABLES,
    ObjectLocation,
    is_url,
    local_path,
    s3_endpoint,
)
from tests.s3_server import S3Server, started

pytestmark = pytest.mark.requires("obstore", "moto")


@pytest.mark.parametrize(("location", "expected"), [
    ("s3://bucket/plate.zarr", True), ("https://host/p.zarr", True),
    ("http://127.0.0.1:9000/b/p", True), ("file:///data/p.zarr", False),
    ("/data/p.zarr", False), ("plate.zarr", False), ("C:/data", False)])
def test_is_url(location: str, expected: bool) -> None:
    assert is_url(location) is expected


@pytest.mark.parametrize("url", ["gs://bucket/p", "ftp://host/p"])
def test_unknown_scheme_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgumentError, match="Unsupported URL scheme"):
        is_url(url)


def test_file_url_is_a_local_path() -> None:
    assert local_path("file:///data/plate.zarr") == "/data/plate.zarr"
    assert local_path("/data/plate.zarr") == "/data/plate.zarr"


@pytest.mark.parametrize("url", ["s3:///plate.zarr", "s3://b/p?x=1"])
def test_bad_url_is_refused(url: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"expected s3://bucket/path"):
        ObjectLocation.parse(url)


def test_parts_of_a_location() -> None:
    where = ObjectLocation.parse("s3://screens/run1/plate.zarr/")
    assert (where.scheme, where.bucket, where.prefix, where.name) == \
        ("s3", "screens", "run1/plate.zarr", "plate.zarr")
    assert where.child("B/3").url == "s3://screens/run1/plate.zarr/B/3"
    with pytest.raises(InvalidArgumentError, match="leads outside"):
        where.child("../other")


def test_objects_round_trip(s3: S3Server) -> None:
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/out")
    assert where.get("a.json") is None
    where.put("a.json", b"{}")
    assert where.get("a.json") == b"{}"
    assert where.keys() == ["a.json"]
    where.delete("a.json")
    assert where.keys() == []


def test_create_writes_only_a_new_object(s3: S3Server) -> None:
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/out")
    assert where.create("lease", b"first") is True
    assert where.create("lease", b"second") is False
    assert where.get("lease") == b"first"


def test_put_if_match_refuses_a_changed_object(s3: S3Server) -> None:
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/out")
    where.put("lease", b"one")
    tag = (where.head("lease") or {})["e_tag"]
    where.put("lease", b"two", if_match=tag)
    with pytest.raises(FileExistsError, match="changed by another writer"):
        where.put("lease", b"three", if_match=tag)
    assert where.get("lease") == b"two"


def test_delete_all_below_a_prefix(s3: S3Server) -> None:
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/out")
    for key in ("x/1", "x/2", "y/1"):
        where.put(key, b".")
    where.delete_all("x")
    assert where.keys() == ["y/1"]


def test_a_web_server_is_read_only(s3: S3Server) -> None:
    where = ObjectLocation.parse(f"{s3.endpoint}/{s3.bucket()}/out")
    with pytest.raises(StoreReadOnlyError, match="read-only"):
        where.put("x", b".")


def test_missing_bucket_is_one_clear_error(s3: S3Server) -> None:
    where = ObjectLocation.parse("s3://no-such-bucket-memtype/out")
    with pytest.raises(StoreNotFoundError, match="bucket 'no-such-bucket-memtype'.*does not "
                                                 "exist"):
        where.get("x")


def test_refused_credentials_are_one_clear_error(s3: S3Server) -> None:
    import moto.settings

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/out")
    where.put("x", b".")
    saved = moto.settings.INITIAL_NO_AUTH_ACTION_COUNT
    moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = 0  # the server checks keys from now on
    try:
        with pytest.raises(StoreAccessError, match="refused the request.*AWS_ACCESS_KEY_ID"):
            where.get("x")
    finally:
        moto.settings.INITIAL_NO_AUTH_ACTION_COUNT = saved


def test_a_stopped_server_is_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    with started() as server:
        for key, value in server.environment().items():
            monkeypatch.setenv(key, value)
        where = ObjectLocation.parse(f"s3://{server.bucket()}/out")
        where.put("x", b".")
        server.stop()
        with pytest.raises(StoreIOError, match=f"Cannot write 'y' to.*{server.endpoint} "
                                               "could not be reached"):
            where.put("y", b".")


@pytest.mark.requires("boto3")
def test_no_credentials_anywhere_is_one_clear_error(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: object) -> None:
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                "AWS_PROFILE", "AWS_SKIP_SIGNATURE"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")  # no instance-metadata request
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path) + "/none")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path) + "/none")
    where = ObjectLocation.parse("s3://memtype-no-credentials/plate.zarr")
    with pytest.raises(StoreAccessError, match="No credentials for 's3://memtype-no-cred"):
        where.get("zarr.json")  # was obstore's bare ValueError


@pytest.mark.parametrize("variable", ENDPOINT_VARIABLES)
def test_the_endpoint_variable_chooses_the_server_reached(
        variable: str, s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each variable obstore reads names the server, and the client follows a change
    (the client cache keyed on AWS_ENDPOINT_URL alone: AWS_ENDPOINT reached the old one)."""
    for name in ENDPOINT_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv(variable, s3.endpoint)
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/out")
    where.put("x", b".")
    with started() as other:  # moto's servers in one process share their buckets
        monkeypatch.setenv(variable, other.endpoint)
        before = s3.mark()
        assert where.get("x") == b"."
        assert (s3.since(before)["GET"], other.since(0)["GET"]) == (0, 1)
        assert where.describe() == other.endpoint


def test_the_service_specific_endpoint_comes_first(monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in zip(ENDPOINT_VARIABLES, ("http://a", "http://b", "http://c"),
                           strict=True):
        monkeypatch.setenv(name, value)
    assert (s3_endpoint(), ObjectLocation.parse("s3://b/p").describe()) == ("http://a",) * 2
