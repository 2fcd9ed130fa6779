"""A 24-well OME-Zarr plate written to and read from a local S3 server (moto), by memtype and
by the object-store client alone.

The server is moto's (``python -m moto.server``) in a child process on a free localhost port
(so it does not share the client's interpreter). The plate: 24 wells (4 x 6), one field each,
2 channels x 4 z of 256 x 256 uint16 (24 MiB of pixels, blosc-lz4 chunks of one plane,
OME-Zarr 0.5), unsharded and with ``shards="image"`` (each level one zarr v3 shard). Each
round, in alternating order:

* **write, memtype**: what a run's output does for each well on an ``s3://`` output
  (:class:`memtype.pipeline.io.remote_output.ObjectOutputSpec`): the field written into the
  worker's staging folder by the local writer (pyramid of one level, channel windows, ROI
  tables), its objects uploaded (16 at a time), its done-marker; then the driver's plate,
  row and well documents and the lease; and the same sharded;
* **write, limit**: the same objects (the bytes memtype wrote, held in memory) put with
  obstore directly, 16 at a time: what any writer of those bytes pays;
* **write, zarr + obstore / zarr + fsspec**: the plate's arrays written by zarr-python itself
  through ``zarr.storage.ObjectStore`` (obstore) and ``zarr.storage.FsspecStore`` (s3fs),
  the same shapes, chunks and codec: the two clients doing the same work;
* **read, memtype**: ``open_input(url)``: records and every plane (``load_batch``), of the
  unsharded and of the sharded plate;
* **read, limit**: the objects a run reads (the plate's, wells' and fields' documents, the
  full-resolution level's document and chunks) fetched with obstore, 16 at a time;
* **read, zarr + obstore / zarr + fsspec**: every field's array read whole by zarr.

Reported: median seconds over rounds and ratios; objects written per field and requests per
field read, counted once against an in-process moto server that counts them
(tests/s3_server.py).

Usage::

    python benchmarks/object_storage.py            # about 2 minutes on 2 busy cores
    python benchmarks/object_storage.py --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO))

import numpy as np  # noqa: E402

WELLS = [f"{r}{c:02d}" for r in "ABCD" for c in range(1, 7)]
CHANNELS, PLANES, SIZE = 2, 4, 256
PATTERN = "{well}_s{site}_w{channel}_z{z}.tif"
ENV = {"AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench",
       "AWS_REGION": "us-east-1", "AWS_ALLOW_HTTP": "true"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server() -> tuple[subprocess.Popen[bytes], str]:
    """moto's S3 server in a child process; its endpoint."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                             str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    endpoint = f"http://127.0.0.1:{port}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return proc, endpoint
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("moto server did not start")


def new_bucket(endpoint: str) -> str:
    import boto3

    name = f"bench-{uuid.uuid4().hex[:10]}"
    boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=name)
    return name


def images() -> dict[str, np.ndarray[Any, Any]]:
    """One [C, Z, Y, X] field per well."""
    rng = np.random.default_rng(0)
    return {w: rng.integers(0, 4096, (CHANNELS, PLANES, SIZE, SIZE), dtype=np.uint16)
            for w in WELLS}


def write_memtype(url: str, fields: dict[str, np.ndarray[Any, Any]],
                  shards: str | None = None) -> None:
    """The output path of a run writing to ``url`` (staging, upload, markers, documents);
    ``shards="image"``: each level one zarr v3 shard."""
    from memtype.pipeline.io.remote_output import ObjectOutputSpec

    spec = ObjectOutputSpec(url, "zarr", PATTERN, tuple("ABCD"),
                            tuple(str(c) for c in range(1, 7)), shards=shards)
    spec.prepare(resume=False, overwrite=False)
    keys = []
    for well, image in fields.items():
        group = (("well", well),)
        items = [([(("well", well), ("site", 1), ("channel", c + 1), ("z", z + 1))
                   for z in range(PLANES)], image[c]) for c in range(CHANNELS)]
        spec.write_images("final", True, items, group)
        spec.mark_done(group, ["final"])
        keys.append(group)
    spec.finish(keys)


def plate_objects(url: str) -> dict[str, bytes]:
    """Every object of the plate at ``url`` (key -> bytes)."""
    from memtype.storage.remote import ObjectLocation

    where = ObjectLocation.parse(url)
    return {k: where.get(k) or b"" for k in where.keys()}


def put_all(url: str, objects: dict[str, bytes]) -> None:
    """The objects put with obstore directly, 16 at a time."""
    import obstore

    from memtype.storage.remote import ObjectLocation

    client = ObjectLocation.parse(url).client()

    async def run() -> None:
        gate = asyncio.Semaphore(16)

        async def one(key: str, data: bytes) -> None:
            async with gate:
                await obstore.put_async(client, key, data)

        await asyncio.gather(*(one(k, v) for k, v in objects.items()))

    asyncio.run(run())


def get_all(url: str, keys: list[str]) -> int:
    """Every object fetched with obstore, 16 at a time; bytes read."""
    import obstore

    from memtype.storage.remote import ObjectLocation

    client = ObjectLocation.parse(url).client()

    async def run() -> int:
        gate = asyncio.Semaphore(16)

        async def one(key: str) -> int:
            async with gate:
                got = await obstore.get_async(client, key)
                return len(await got.bytes_async())

        return sum(await asyncio.gather(*(one(k) for k in keys)))

    return asyncio.run(run())


def zarr_store(kind: str, url: str, endpoint: str, read_only: bool) -> Any:
    """zarr's ObjectStore (obstore) or FsspecStore (s3fs) at ``url``."""
    from zarr.storage import FsspecStore, ObjectStore

    from memtype.storage.remote import ObjectLocation

    if kind == "obstore":
        return ObjectStore(ObjectLocation.parse(url).client(), read_only=read_only)
    return FsspecStore.from_url(url, read_only=read_only,
                                storage_options={"endpoint_url": endpoint,
                                                 "asynchronous": True})


def write_zarr(kind: str, url: str, endpoint: str,
               fields: dict[str, np.ndarray[Any, Any]]) -> None:
    """The plate's arrays written by zarr itself (same chunks and codec as memtype's)."""
    import zarr
    from zarr.codecs import BloscCodec

    store = zarr_store(kind, url, endpoint, read_only=False)
    for well, image in fields.items():
        array = zarr.create_array(store, name=f"{well[0]}/{int(well[1:])}/1/0",
                                  shape=image.shape, dtype=image.dtype,
                                  chunks=(1, 1, SIZE, SIZE), overwrite=True,
                                  compressors=BloscCodec(cname="lz4", clevel=5,
                                                         shuffle="bitshuffle"))
        array[...] = image


def read_zarr(kind: str, url: str, endpoint: str) -> int:
    """Every field's array read whole by zarr; bytes read."""
    import zarr

    store = zarr_store(kind, url, endpoint, read_only=True)
    return sum(zarr.open_array(store, path=f"{w[0]}/{int(w[1:])}/1/0", mode="r",
                               zarr_format=3)[...].nbytes for w in WELLS)


def read_memtype(url: str) -> int:
    """Records and every plane, as a run reads them; bytes read."""
    from memtype.pipeline.readers import open_input

    reader = open_input(url)
    return sum(a.nbytes for a in reader.load_batch([r.path for r in reader.records()]))


def counts(fields: dict[str, np.ndarray[Any, Any]]) -> dict[str, float]:
    """Objects written per field and requests per field read (in-process counting server)."""
    from tests.s3_server import started

    with started() as server:
        os.environ.update(server.environment())
        url = f"s3://{server.bucket()}/count"
        mark = server.mark()
        write_memtype(url, fields)
        wrote = server.since(mark)
        objects = plate_objects(url)
        field_objects = [k for k in objects if k.startswith("plate.zarr/A/1/1/")]
        mark = server.mark()
        read_memtype(f"{url}/plate.zarr")
        read = server.since(mark)
        mark = server.mark()
        read_zarr("fsspec", f"{url}/plate.zarr", server.endpoint)
        fsspec_read = server.since(mark)
        sharded = f"s3://{server.bucket()}/sharded"
        write_memtype(sharded, fields, "image")
        sharded_objects = [k for k in plate_objects(sharded)
                           if k.startswith("plate.zarr/A/1/1/")]
        mark = server.mark()
        read_memtype(f"{sharded}/plate.zarr")
        sharded_read = server.since(mark)
    n = len(fields)
    return {"objects per field": len(field_objects),
            "chunk objects per field": sum("/c/" in k for k in field_objects),
            "write requests per field": sum(wrote.values()) / n,
            "write LIST per field": wrote["LIST"] / n,
            "read requests per field": sum(read.values()) / n,
            "read LIST": read["LIST"],
            "sharded: objects per field": len(sharded_objects),
            "sharded: chunk (shard) objects per field": sum("/c/" in k for k in sharded_objects),
            "sharded: read requests per field": sum(sharded_read.values()) / n,
            "zarr+fsspec read requests per field": sum(fsspec_read.values()) / n,
            "zarr+fsspec read LIST per field": fsspec_read["LIST"] / n}


_READ = re.compile(r"zarr\.json|[A-Z]/\d+/zarr\.json|[A-Z]/\d+/1/zarr\.json|"
                   r"[A-Z]/\d+/1/0/(zarr\.json|c/.*)")


def _read_by_run(key: str) -> bool:
    """Whether a run reading the plate needs the object: the plate's, wells' and fields'
    documents, and the full-resolution level (its document and chunks)."""
    return _READ.fullmatch(key) is not None


def timed(fn: Callable[[], Any]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--out", default=str(REPO / "benchmarks/results/object_storage.md"))
    args = parser.parse_args()
    os.environ.update(ENV)
    fields = images()
    counted = counts(fields)
    proc, endpoint = start_server()
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    cases = ["write memtype", "write memtype sharded", "write limit", "write zarr+obstore",
             "write zarr+fsspec", "read memtype", "read memtype sharded", "read limit",
             "read zarr+obstore", "read zarr+fsspec"]
    times: dict[str, list[float]] = {c: [] for c in cases}
    try:
        bucket = new_bucket(endpoint)
        base = f"s3://{bucket}/reference"
        write_memtype(base, fields)  # warm-up, and the bytes the limit copies
        objects = {k: v for k, v in plate_objects(base).items() if k.startswith("plate.zarr/")}
        plate = f"{base}/plate.zarr"
        keys = [k for k in (k[len("plate.zarr/"):] for k in objects) if _read_by_run(k)]
        write_memtype(f"s3://{bucket}/sharded", fields, "image")
        sharded = f"s3://{bucket}/sharded/plate.zarr"
        for r in range(args.rounds):
            order = cases if r % 2 == 0 else cases[::-1]
            for case in order:
                url = f"s3://{bucket}/r{r}-{case.replace(' ', '-').replace('+', '-')}"
                times[case].append(timed(_case(case, url, plate, endpoint, fields, objects,
                                               keys, sharded)))
                print(f"round {r + 1} {case}: {times[case][-1]:.2f} s", flush=True)
    finally:
        proc.terminate()
        proc.wait()
    write_report(args.out, times, counted, args.rounds)


def _case(case: str, url: str, plate: str, endpoint: str,
          fields: dict[str, np.ndarray[Any, Any]], objects: dict[str, bytes],
          keys: list[str], sharded: str) -> Callable[[], Any]:
    """The work of one case (``url``: a fresh prefix for writes; ``plate``, ``sharded``: the
    plates read)."""
    return {
        "write memtype": lambda: write_memtype(url, fields),
        "write memtype sharded": lambda: write_memtype(url, fields, "image"),
        "read memtype sharded": lambda: read_memtype(sharded),
        "write limit": lambda: put_all(url, objects),
        "write zarr+obstore": lambda: write_zarr("obstore", url, endpoint, fields),
        "write zarr+fsspec": lambda: write_zarr("fsspec", url, endpoint, fields),
        "read memtype": lambda: read_memtype(plate),
        "read limit": lambda: get_all(plate, keys),
        "read zarr+obstore": lambda: read_zarr("obstore", plate, endpoint),
        "read zarr+fsspec": lambda: read_zarr("fsspec", plate, endpoint),
    }[case]


def write_report(path: str, times: dict[str, list[float]], counted: dict[str, float],
                 rounds: int) -> None:
    med = {c: statistics.median(v) for c, v in times.items()}
    mib = len(WELLS) * CHANNELS * PLANES * SIZE * SIZE * 2 / 2**20
    lines = [
        "# Object storage: a 24-well plate to and from a local S3 server (moto)",
        "",
        f"{time.strftime('%Y-%m-%d')}, {platform.machine()} Python "
        f"{platform.python_version()}, this project's shared 2-core box, other jobs running; "
        f"{rounds} alternating rounds, medians; `python benchmarks/object_storage.py`.",
        f"24 wells x 1 field x {CHANNELS} channels x {PLANES} z x {SIZE}x{SIZE} uint16 "
        f"({mib:.0f} MiB of pixels), OME-Zarr 0.5, one plane a chunk, blosc-lz4; "
        "'sharded': shards='image' (each level one shard).",
        "",
        "| work | median s | rounds | vs limit |",
        "|---|---|---|---|",
    ]
    for case in times:
        limit = med["write limit" if case.startswith("write") else "read limit"]
        shown = ", ".join(f"{t:.2f}" for t in times[case])
        lines.append(f"| {case} | {med[case]:.2f} | {shown} | {med[case] / limit:.2f}x |")
    lines += ["", "| count | value |", "|---|---|"]
    lines += [f"| {k} | {v:g} |" for k, v in counted.items()]
    lines.append("")
    Path(path).write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
