"""Pipeline runs writing their output to a real S3 server (moto, the ``s3`` fixture): the same
plate as on disk (images, pyramid levels, labels, tables, CSVs), in OME-Zarr 0.5 and 0.4;
``resume`` after a SIGKILL and after the server stopped mid-write gives that plate again;
a second run while one holds the output is refused; dask workers upload their own groups."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.errors import StoreExistsError, StoreIOError
from memtype.pipeline import ExecutionOptions, FunctionStep, Pipeline, WriteOptions
from memtype.pipeline.demo import count_blobs, max_project, segment_nuclei
from memtype.pipeline.synthetic import SyntheticPlate
from memtype.storage.remote import ObjectLocation
from tests.pipeline_support import ROOT, write_plate
from tests.s3_server import S3Server, started

pytestmark = pytest.mark.requires("obstore", "moto", "scipy", "tifffile")

PLATE = SyntheticPlate(wells=3, sites=1, channels=2, z_planes=2, size=48, cells=(2, 4))
KILL_AFTER = "MEMTYPE_TEST_KILL_AFTER"
"""A run with this variable set (an object's URL) kills its own process (SIGKILL) at the
first stack it processes once that object exists (a group's done-marker)."""
_STOP: list[tuple[S3Server, str]] = []
"""(a server, an object's URL): :func:`halt_at` stops the server once the object exists."""


def _exists(url: str) -> bool:
    """Whether the object at ``url`` exists."""
    directory, name = url.rsplit("/", 1)
    return ObjectLocation.parse(directory).head(name) is not None


@mt.numpy
def halt_at(stack: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Pass the stack on; kill the process (KILL_AFTER) or stop the S3 server (_STOP) once
    a given group is done."""
    if KILL_AFTER in os.environ and _exists(os.environ[KILL_AFTER]):
        os.kill(os.getpid(), signal.SIGKILL)
    if _STOP and _exists(_STOP[0][1]):
        _STOP.pop()[0].stop()
    return stack


def pipeline(ome_version: str = "0.5", halt: bool = False) -> Pipeline:
    """Project, label the nuclei (OME-Zarr labels and a table), count (a table); two levels."""
    steps = [FunctionStep(max_project, name="project"),
             FunctionStep(segment_nuclei, variable_components=("channel",), labels="nuclei",
                          passes_input=True, outputs=("nuclei",), threshold=0.2, min_area=9),
             FunctionStep(count_blobs, outputs=("counts",), threshold=0.2, min_area=9)]
    if halt:
        steps.insert(0, FunctionStep(halt_at, name="halt"))
    return Pipeline(steps, pyramid_levels=2, ome_version=ome_version, name="s3-test")


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"), PLATE)


_LOCAL: dict[str, Path] = {}


def local_run(version: str, plate_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The output of a local run of :func:`pipeline` (one per OME-Zarr version)."""
    if version not in _LOCAL:
        out = tmp_path_factory.mktemp("local") / "out"
        assert pipeline(version).run(plate_dir, out).ok
        _LOCAL[version] = out
    return _LOCAL[version]


@pytest.fixture(params=["0.5", "0.4"])
def reference(request: pytest.FixtureRequest, plate_dir: Path,
              tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    """(OME-Zarr version, the output of a local run of :func:`pipeline`)."""
    return request.param, local_run(request.param, plate_dir, tmp_path_factory)


def _json(data: bytes) -> Any:
    return json.loads(data.decode("utf-8"))


def assert_same_output(local: Path, remote: ObjectLocation) -> None:
    """Every file of the local plate (but its lock files) and CSVs is an object of the remote
    output, with the same bytes (metadata documents: the same JSON, well image lists in any
    order); the remote plate has nothing more."""
    expected = sorted(p.relative_to(local).as_posix() for p in local.rglob("*")
                      if p.is_file() and (p.relative_to(local).parts[0] == "plate.zarr"
                                          and ".memtype-locks" not in p.parts
                                          or p.suffix == ".csv" and p.parent == local))
    found = [k for k in remote.keys() if not k.startswith(".memtype/")]
    assert found == expected
    for key in expected:
        mine, theirs = (local / key).read_bytes(), remote.get(key) or b""
        if key.endswith((".json", ".zattrs", ".zgroup", ".zarray")):
            assert _normal(_json(theirs)) == _normal(_json(mine)), key
        else:
            assert theirs == mine, key


def _normal(doc: Any) -> Any:
    """A metadata document with its well's image list sorted."""
    images = doc.get("attributes", {}).get("ome", doc).get("well", {}).get("images")
    if images:
        images.sort(key=lambda i: i["path"])
    return doc


def test_a_run_writes_the_same_output_to_s3(s3: S3Server, plate_dir: Path,
                                             reference: tuple[str, Path]) -> None:
    version, local = reference
    url = f"s3://{s3.bucket()}/run1"
    report = pipeline(version).run(plate_dir, url)
    assert report.ok and report.outputs["images"] == f"{url}/plate.zarr"
    assert_same_output(local, ObjectLocation.parse(url))
    assert ObjectLocation.parse(url).head(".memtype/lease.json") is None  # released


def test_resume_after_sigkill_gives_the_same_plate(
        s3: S3Server, plate_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    version, local = "0.5", local_run("0.5", plate_dir, tmp_path_factory)
    url = f"s3://{s3.bucket()}/killed"
    code = ("import sys; from tests.test_object_storage_runs import pipeline; "
            f"pipeline({version!r}, halt=True).run(sys.argv[1], sys.argv[2])")
    env = {**os.environ, KILL_AFTER: f"{url}/.memtype/done/A01.json",
           "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code, str(plate_dir), url], env=env,
                          cwd=ROOT, timeout=240, capture_output=True, text=True)
    assert done.returncode == -signal.SIGKILL, done.stderr[-2000:]
    where = ObjectLocation.parse(url)
    assert where.keys(".memtype/done") == [".memtype/done/A01.json"]
    assert where.head(".memtype/lease.json") is not None  # left by the killed run
    report = pipeline(version, halt=True).run(plate_dir, url, write=WriteOptions(resume=True))
    assert report.ok and [r.key for r in report.skipped] == [(("well", "A01"),)]
    assert_same_output(local, where)


def test_a_second_run_is_refused_while_one_holds_the_output(s3: S3Server,
                                                            plate_dir: Path) -> None:
    import time

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/busy")
    held = {"run": "x", "host": "another-host", "pid": 1, "renewed": time.time()}
    where.put(".memtype/lease.json", json.dumps(held).encode())
    with pytest.raises(StoreExistsError, match="being written by another run.*another-host"):
        pipeline().run(plate_dir, where.url)
    assert _json(where.get(".memtype/lease.json") or b"") == held
    assert not where.keys(".memtype/done")


def test_a_lease_not_renewed_is_taken_over(s3: S3Server) -> None:
    from memtype.pipeline.io.remote_output import LEASE, ObjectOutputSpec

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/stale")
    where.put(LEASE, json.dumps({"run": "x", "host": "another-host", "pid": 1,
                                 "renewed": 1.0}).encode())
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    spec.prepare(resume=True, overwrite=False)
    taken = _json(where.get(LEASE) or b"")
    assert taken["pid"] == os.getpid() and taken["run"] != "x"
    spec.finish([])
    assert where.head(LEASE) is None


def test_a_server_that_stops_mid_write_loses_no_finished_well(
        monkeypatch: pytest.MonkeyPatch, plate_dir: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from memtype.storage import remote

    monkeypatch.setattr(remote, "RETRY", {**remote.RETRY, "max_retries": 1})  # fail fast
    version, local = "0.4", local_run("0.4", plate_dir, tmp_path_factory)
    with started() as server:
        for key, value in server.environment().items():
            monkeypatch.setenv(key, value)
        url = f"s3://{server.bucket()}/stopped"
        _STOP.append((server, f"{url}/.memtype/done/A02.json"))
        with pytest.raises(StoreIOError, match=f"Cannot .*{url}.*{server.endpoint}"):
            pipeline(version, halt=True).run(plate_dir, url)
    with started() as again:  # the same buckets (moto keeps them in this process)
        for key, value in again.environment().items():
            monkeypatch.setenv(key, value)
        where = ObjectLocation.parse(url)
        assert where.keys(".memtype/done") == [".memtype/done/A01.json",
                                               ".memtype/done/A02.json"]
        report = pipeline(version, halt=True).run(plate_dir, url, write=WriteOptions(resume=True))
        assert report.ok and len(report.skipped) == 2
        assert_same_output(local, where)


@pytest.mark.requires("distributed")
def test_dask_workers_read_and_write_the_store_themselves(
        s3: S3Server, plate_dir: Path, tmp_path: Path,
        tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.test_object_storage_reads import upload

    source = local_run("0.5", plate_dir, tmp_path_factory) / "plate.zarr"  # an OME-Zarr input
    assert pipeline("0.5").run(source, tmp_path / "local").ok
    bucket = s3.bucket()
    upload(source, ObjectLocation.parse(f"s3://{bucket}/input/plate.zarr"))
    url = f"s3://{bucket}/dask"
    mark = s3.mark()
    report = pipeline("0.5").run(f"s3://{bucket}/input/plate.zarr", url, executor="dask",
                                 execution=ExecutionOptions(workers=2))
    assert report.ok
    assert_same_output(tmp_path / "local", ObjectLocation.parse(url))
    driver = f"(pid {os.getpid()})"
    chunks = [(driver in agent, path) for agent, path
              in s3.calls(mark, "GET", "/input/plate.zarr/") if "/0/c/" in path]
    # the workers read every plane of the input; the driver one, the first (the plan's
    # look at the data: its shape and dtype)
    assert len({path for on_driver, path in chunks if not on_driver}) == 3 * PLATE.channels
    assert len([path for on_driver, path in chunks if on_driver]) <= 1
    puts = s3.calls(mark, "PUT", "/dask/plate.zarr/A/")
    by_driver = sorted(path.split("/plate.zarr/")[1] for agent, path in puts
                       if driver in agent)
    assert len({agent for agent, _ in puts if driver not in agent}) == 2  # both workers
    assert by_driver == ["A/1/zarr.json", "A/2/zarr.json", "A/3/zarr.json", "A/zarr.json"]


def test_the_existing_output_rule_on_s3(s3: S3Server) -> None:
    from memtype.pipeline.io.remote_output import LEASE, ObjectOutputSpec

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/kept")
    where.put("notes.txt", b"someone else's")
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    with pytest.raises(StoreExistsError,
                       match=r"already exists; expected a new or empty prefix\. Pass "
                             r"WriteOptions\(resume=True\) \(--resume\)"):
        spec.prepare(resume=False, overwrite=False)
    with pytest.raises(StoreExistsError, match="memtype did not write"):
        spec.prepare(resume=False, overwrite=True)
    assert where.keys() == ["notes.txt"]  # untouched, and the lease given back
    where.put(".memtype/run.json", b"{}")  # an earlier run's output
    spec.prepare(resume=False, overwrite=True)
    assert where.keys() == [LEASE]
    spec.finish([])
    assert where.keys() == []


def test_a_tiff_output_on_s3(s3: S3Server, plate_dir: Path, tmp_path: Path) -> None:
    steps = [FunctionStep(max_project, name="project"),
             FunctionStep(count_blobs, outputs=("counts",), threshold=0.2, min_area=9)]
    assert Pipeline(steps, output_format="tiff").run(plate_dir, tmp_path / "local").ok
    url = f"s3://{s3.bucket()}/tiff"
    report = Pipeline(steps, output_format="tiff").run(plate_dir, url)
    assert report.ok and report.outputs["images"] == f"{url}/images"
    where = ObjectLocation.parse(url)
    local = sorted(p.relative_to(tmp_path / "local").as_posix()
                   for p in (tmp_path / "local").rglob("*")
                   if p.is_file() and p.parts[-2] != "done" and ".memtype" not in p.parts)
    assert [k for k in where.keys() if not k.startswith(".memtype/")] == local
    assert all(where.get(k) == (tmp_path / "local" / k).read_bytes() for k in local)


def test_a_running_run_renews_its_lease(s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    import time

    from memtype.pipeline.io import remote_output
    from memtype.pipeline.io.remote_output import LEASE, ObjectOutputSpec

    monkeypatch.setattr(remote_output, "RENEW_S", 0.1)
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/renewed")
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    spec.prepare(resume=False, overwrite=False)
    first = _json(where.get(LEASE) or b"")["renewed"]
    deadline = time.monotonic() + 10
    while _json(where.get(LEASE) or b"")["renewed"] == first and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _json(where.get(LEASE) or b"")["renewed"] > first  # renewed with If-Match
    spec.finish([])
    assert where.head(LEASE) is None


def test_a_sharded_output_on_s3(s3: S3Server, tmp_path: Path) -> None:
    from memtype.pipeline.io.outputs import OutputSpec
    from memtype.pipeline.io.remote_output import ObjectOutputSpec

    url = f"s3://{s3.bucket()}/sharded"
    image = np.random.default_rng(3).integers(0, 4000, (2, 3, 32, 32), dtype=np.uint16)
    items = [([(("well", "B03"), ("channel", c + 1), ("z", z + 1)) for z in range(3)],
              image[c]) for c in range(2)]
    group = (("well", "B03"),)
    for spec in (OutputSpec(str(tmp_path), "zarr", "{well}_w{channel}_z{z}.tif",
                            ("B",), ("3",), pyramid_levels=2, shards="image"),
                 ObjectOutputSpec(url, "zarr", "{well}_w{channel}_z{z}.tif", ("B",), ("3",),
                                  pyramid_levels=2, shards="image")):
        spec.prepare(resume=False, overwrite=False)
        spec.write_images("final", True, items, group)
        spec.mark_done(group, ["final"])
        spec.finish([group])
    where = ObjectLocation.parse(url)
    assert_same_output(tmp_path, where)
    assert [k for k in where.keys("plate.zarr/B/3") if "/c/" in k] == [
        "plate.zarr/B/3/0/0/c/0/0/0/0", "plate.zarr/B/3/0/1/c/0/0/0/0"]  # a shard a level


def test_a_run_gone_without_finishing_gives_its_lease_back(
        s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    import gc
    import time

    from memtype.pipeline.io import remote_output
    from memtype.pipeline.io.remote_output import LEASE, ObjectOutputSpec

    monkeypatch.setattr(remote_output, "RENEW_S", 0.1)
    where = ObjectLocation.parse(f"s3://{s3.bucket()}/abandoned")
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    spec.prepare(resume=False, overwrite=False)  # then the run raised: no finish
    assert where.head(LEASE) is not None
    del spec
    gc.collect()
    deadline = time.monotonic() + 10
    while where.head(LEASE) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert where.head(LEASE) is None


_UPLOAD_PEAK = """
import sys, tracemalloc
from memtype.pipeline.io.remote_output import _UPLOADS, _upload
from memtype.storage.remote import ObjectLocation
root, url, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
tracemalloc.start()
_upload(ObjectLocation.parse(url), root, [f"{i}.bin" for i in range(count)])
print(tracemalloc.get_traced_memory()[1], _UPLOADS)
"""


@pytest.mark.parametrize("attempt", range(6))
def test_an_upload_holds_no_more_than_its_concurrent_objects_in_memory(
        s3: S3Server, tmp_path: Path, attempt: int) -> None:
    """Six fresh processes: obstore's put_async under asyncio.run aborted the interpreter at
    exit in about one run in six (SIGABRT after every upload had succeeded)."""
    size, count = 1 << 20, 64
    for i in range(count):
        (tmp_path / f"{i}.bin").write_bytes(bytes([i]) * size)
    url = f"s3://{s3.bucket()}/uploaded"
    done = subprocess.run(  # a child: the moto server's own memory is not counted
        [sys.executable, "-c", _UPLOAD_PEAK, str(tmp_path), url, str(count)],
        env={**os.environ, "PYTHONPATH": str(ROOT)}, cwd=ROOT, timeout=120,
        capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    peak, gate = (int(v) for v in done.stdout.split())
    assert peak < 2 * gate * size, f"{peak / size:.0f} MiB held for {gate} uploads at once"
    assert ObjectLocation.parse(url).get("63.bin") == bytes([63]) * size


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"\xff\xfe", b"null"])
def test_a_damaged_lease_is_one_clear_error(s3: S3Server, body: bytes) -> None:
    from memtype.errors import StoreFormatError
    from memtype.pipeline.io.remote_output import LEASE, ObjectOutputSpec

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/damaged")
    where.put(LEASE, body)
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    with pytest.raises(StoreFormatError, match=r"lease\.json' is not the JSON object"):
        spec.prepare(resume=True, overwrite=False)
    assert where.get(LEASE) == body  # left as it was


def test_a_damaged_done_marker_is_one_clear_error(s3: S3Server) -> None:
    from memtype.errors import StoreFormatError
    from memtype.pipeline.io.remote_output import ObjectOutputSpec

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/damaged-marker")
    where.put(".memtype/done/A01.json", b"\x00garbage")
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    spec.prepare(resume=True, overwrite=False)
    with pytest.raises(StoreFormatError, match=r"done/A01\.json' is not the JSON object"):
        spec.finish([(("well", "A01"),)])


@pytest.mark.parametrize("version", ["0.5", "0.4"])
def test_a_group_created_on_s3_is_created_once(s3: S3Server, version: str) -> None:
    """The object-store files honour the layout's create-only write (overwrite=False)."""
    from memtype.omezarr.layout import layout_for
    from memtype.pipeline.io.remote_output import _ObjectFiles

    files = _ObjectFiles(ObjectLocation.parse(f"s3://{s3.bucket()}/created-{version}"))
    layout = layout_for(version)
    assert layout.create_group(files, "A", {"first": 1}, fsync=False)
    assert not layout.create_group(files, "A", {"second": 2}, fsync=False)
    document = "A/zarr.json" if version == "0.5" else "A/.zattrs"
    assert "first" in json.dumps(files.read_json(document))


def test_a_done_marker_without_its_label_still_merges_its_tables(s3: S3Server) -> None:
    """A group's table part is found by the group's own key, never by what its marker says
    (a marker without ``label`` raised a bare KeyError)."""
    from memtype.pipeline.io.remote_output import ObjectOutputSpec

    where = ObjectLocation.parse(f"s3://{s3.bucket()}/marker-without-label")
    where.put(".memtype/done/A01.json", json.dumps({"group": "well=A01",
                                                     "tables": ["counts"]}).encode())
    where.put(".memtype/tables/counts/A01.csv", b"well,count\nA01,3\n")
    spec = ObjectOutputSpec(where.url, "zarr", "{well}_w{channel}.tif")
    spec.prepare(resume=True, overwrite=False)
    outputs = spec.finish([(("well", "A01"),)])
    assert "counts" in outputs
    assert where.get("counts.csv").decode().splitlines() == ["well,count", "A01,3"]


class _Owner:
    """What holds a lease (a run's output; the lease keeps a weak reference)."""


class _TakenOverAtOnce(ObjectLocation):
    """A location where another run replaces the lease right after this run created it (the
    moment between the write and any look-up of its ETag)."""

    foreign = json.dumps({"run": "other", "host": "another-host", "pid": 1,
                          "renewed": 4e9}).encode()
    replaced: set[str] = set()

    def _replace(self, key: str) -> None:
        if self.url not in self.replaced:
            self.replaced.add(self.url)
            ObjectLocation.put(self, key, self.foreign)

    def create(self, key: str, data: bytes) -> bool:
        written = super().create(key, data)
        self._replace(key)
        return written

    def create_tagged(self, key: str, data: bytes) -> str | None:
        tag = super().create_tagged(key, data)
        self._replace(key)
        return tag


def test_a_lease_taken_over_after_its_write_is_never_renewed_over_the_new_holder(
        s3: S3Server, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run keeps the ETag its own write answered, not what a look-up finds later: its
    renewal (If-Match) then fails and the new holder's lease stays."""
    import time

    from memtype.pipeline.io import remote_output
    from memtype.pipeline.io.remote_output import LEASE, _Lease

    monkeypatch.setattr(remote_output, "RENEW_S", 0.05)
    plain = ObjectLocation.parse(f"s3://{s3.bucket()}/raced")
    where = _TakenOverAtOnce.parse(plain.url)
    owner = _Owner()
    _Lease.take(where, owner)
    try:
        time.sleep(0.5)  # ten renewal periods
        assert _json(plain.get(LEASE) or b"")["run"] == "other"
    finally:
        _Lease._held.pop(where.url, None)
        del owner
