"""The dask.distributed executor on a real 2-process LocalCluster."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.pipeline import DaskExecutor, ExecutionOptions, FunctionStep, Pipeline, WriteOptions
from memtype.pipeline.execution.executors import current_worker_index
from memtype.pipeline.model.modules import import_pipeline_file
from tests.helpers import import_if_installed
from tests.pipeline_support import (
    EXAMPLE,
    SMALL,
    example_reference,
    load_field,
    read_csv,
    stacks,
    write_plate,
)

pytestmark = pytest.mark.requires("distributed")

distributed = import_if_installed("distributed")


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                       dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


def _worker_slot(offset: int, item: int) -> tuple[int, int]:
    return item + offset, current_worker_index()


def test_dask_executor_scatters_the_context_and_names_workers(client: Any) -> None:
    ex = DaskExecutor(client)
    assert ex.workers == 2 and ex.describe() == "dask (2 workers)"
    out = list(ex.map_unordered(_worker_slot, 100, list(range(8))))
    assert sorted(v for v, _ in out) == list(range(100, 108))
    assert {w for _, w in out} <= {0, 1}
    ex.close()
    assert client.status == "running"  # a given client stays open


def test_dask_executor_keeps_no_future_of_finished_items(client: Any) -> None:
    import time

    ex = DaskExecutor(client)
    seen = []
    for value, _ in ex.map_unordered(_worker_slot, 0, list(range(6))):
        seen.append(value)
        if len(seen) == 3:  # half-way: the finished items are released already
            deadline = time.monotonic() + 10
            while len(client.futures) > 1 + 3 and time.monotonic() < deadline:
                time.sleep(0.05)  # releases reach the client asynchronously
            assert len(client.futures) <= 1 + 3  # the context and the pending items at most
    deadline = time.monotonic() + 10
    while client.futures and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sorted(seen) == list(range(6)) and not client.futures


def test_pipeline_file_runs_on_workers_and_matches_numpy(client: Any, plate_dir: Path,
                                                         tmp_path: Path) -> None:
    pipeline = import_pipeline_file(EXAMPLE).pipeline
    report = pipeline.run(plate_dir, tmp_path / "out", executor="dask",
                          execution=ExecutionOptions(client=client))
    assert report.ok and len(report.done) == 2, report.summary()
    assert {g.worker for g in report.done} <= {"worker 0", "worker 1"}
    stats = {(r["well"], int(r["site"]), int(r["channel"])): r
             for r in read_csv(report.outputs["stats"])}
    for key, stack in stacks(SMALL).items():
        expected, measured = example_reference(stack)
        field = load_field(report.outputs["images"], key[0], key[1])
        np.testing.assert_array_equal(field[key[2] - 1, 0], expected)
        assert float(stats[key]["mean"]) == pytest.approx(measured["mean"], rel=1e-6)
        assert float(stats[key]["area_fraction"]) == measured["area_fraction"]


def test_a_failing_group_on_a_worker_is_reported_and_resumed(client: Any, plate_dir: Path,
                                                             tmp_path: Path) -> None:
    from tests.test_pipeline import _split_wells, np_fail_if_bright_while, np_project

    dim, bright, limit = _split_wells(stacks(SMALL))
    out = tmp_path / "out"
    flag = tmp_path / "broken"  # the workers see the same file system
    flag.touch()
    steps = [np_project, FunctionStep(np_fail_if_bright_while, name="check", limit=limit,
                                      flag=str(flag))]
    report = Pipeline(steps).run(plate_dir, out, execution=ExecutionOptions(client=client))
    [bad] = report.failed
    assert bad.label == f"well={bright}" and "np_fail_if_bright" in bad.error
    assert "too bright" in bad.error and "Traceback" in (bad.traceback or "")
    assert load_field(out / "plate.zarr", dim, 1).shape == (2, 1, 64, 64)

    flag.unlink()
    again = Pipeline(steps).run(plate_dir, out, execution=ExecutionOptions(client=client),
                                write=WriteOptions(resume=True))
    assert [g.label for g in again.skipped] == [f"well={dim}"]
    assert [g.label for g in again.done] == [f"well={bright}"]
    np.testing.assert_array_equal(load_field(out / "plate.zarr", bright, 2)[1, 0],
                                  stacks(SMALL)[(bright, 2, 2)].max(axis=0))


def test_a_failure_every_worker_repeats_stops_the_run_and_is_printed_once(
        client: Any, tmp_path: Path) -> None:
    from tests.test_pipeline_stopping import SIX, np_wrong_shape

    src = write_plate(tmp_path / "in", SIX)
    report = Pipeline([FunctionStep(np_wrong_shape, name="flat")]).run(src, tmp_path / "out",
                                                                       execution=ExecutionOptions(client=client))
    assert len(report.failed) == 3 and report.stopped is not None
    assert len(report.not_run) + len(report.done) == 3 and not report.done
    summary = report.summary()
    assert summary.count("STOPPED") == 1
    [line] = [x for x in summary.splitlines() if x.startswith("FAILED")]
    assert line.startswith("FAILED 3 groups failed (") and "'flat'" in line


def test_sys_exit_in_a_step_on_a_worker_fails_only_its_group(client: Any, plate_dir: Path,
                                                             tmp_path: Path) -> None:
    from tests.test_pipeline import _split_wells
    from tests.test_pipeline_failures import np_exit_if_bright

    dim, bright, limit = _split_wells(stacks(SMALL))
    step = FunctionStep(np_exit_if_bright, name="check", limit=limit)
    report = Pipeline([step]).run(plate_dir, tmp_path / "out",
                                  execution=ExecutionOptions(client=client))
    assert [g.label for g in report.done] == [f"well={dim}"]
    [bad] = report.failed
    assert bad.label == f"well={bright}" and "SystemExit: 3" in (bad.error or "")
    assert len(client.scheduler_info()["workers"]) == 2  # no worker was lost


def _page_faults_per_reallocation() -> float:
    """Minor page faults of allocating, filling and freeing a 16 MiB array, once it has
    been done before (what every group's stacks and temporaries do again and again)."""
    import resource

    def once() -> None:
        np.ones(4 << 20, np.float32)

    once()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        once()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 10


def _xla_flags() -> str:
    import os

    return os.environ.get("XLA_FLAGS", "")


def test_local_cluster_workers_reuse_freed_memory_and_run_jax_single_threaded(
        client: Any) -> None:
    # the module's stock cluster has put dask's MALLOC_TRIM_THRESHOLD_ into this process's
    # environment, which new workers inherit: the executor's own cluster must override it
    stock = client.run(_page_faults_per_reallocation)
    ex = DaskExecutor(workers=2)
    try:
        faults = ex.client.run(_page_faults_per_reallocation)
        flags = ex.client.run(_xla_flags)
    finally:
        ex.close()
    assert len(faults) == 2 and all(f < 100 for f in faults.values()), (faults, stock)
    assert all(f.endswith("--xla_cpu_multi_thread_eigen=false") for f in flags.values())


def _periodic_ms(dask_worker: Any) -> dict[str, float]:
    """The period of each of this dask worker's periodic callbacks, in milliseconds."""
    return {name: pc.callback_time for name, pc in dask_worker.periodic_callbacks.items()}


def test_local_cluster_workers_run_without_the_profiler_and_monitor_less_often() -> None:
    ex = DaskExecutor(workers=1)
    try:
        (periods,) = ex.client.run(_periodic_ms).values()
    finally:
        ex.close()
    assert "profile" not in periods and "profile-cycle" not in periods
    assert periods["monitor"] == 2000
    assert periods["tick"] == 200
    assert periods["memory_monitor"] == 500


def test_local_cluster_workers_keep_the_users_dask_configuration() -> None:
    dask = import_if_installed("dask")
    with dask.config.set({"distributed.admin.system-monitor.interval": "1s"}):
        ex = DaskExecutor(workers=1)
    try:
        (periods,) = ex.client.run(_periodic_ms).values()
    finally:
        ex.close()
    assert periods["monitor"] == 1000
    assert periods["tick"] == 200 and "profile" not in periods  # memtype's: the user's unset


def test_dask_worker_environ_keeps_dask_settings_and_the_users_xla_flags(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    monkeypatch.setenv("XLA_FLAGS", "--xla_dump_to=/tmp/xla")
    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "65536")  # dask's, left by another cluster
    pre_spawn, environ = dask_worker_environ(1)
    assert pre_spawn["OMP_NUM_THREADS"] == "1"  # dask's own, kept
    assert pre_spawn["MALLOC_MMAP_THRESHOLD_"] == str(32 << 20)
    assert pre_spawn["MALLOC_TRIM_THRESHOLD_"] == str(64 << 20)
    assert environ == {"XLA_FLAGS": "--xla_dump_to=/tmp/xla --xla_cpu_multi_thread_eigen=false"}


def test_dask_worker_environ_leaves_jax_threads_alone_with_several_cores_per_worker() -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    assert dask_worker_environ(2)[1] == {}


def test_dask_worker_environ_keeps_malloc_settings_of_the_users_own(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    monkeypatch.setenv("MALLOC_TRIM_THRESHOLD_", "1048576")
    monkeypatch.setenv("MALLOC_MMAP_THRESHOLD_", "4194304")
    pre_spawn = dask_worker_environ(1)[0]
    assert pre_spawn["MALLOC_TRIM_THRESHOLD_"] == "1048576"
    assert pre_spawn["MALLOC_MMAP_THRESHOLD_"] == "4194304"


@pytest.mark.parametrize("variable", ["POCL_MAX_PTHREAD_COUNT", "TF_NUM_INTRAOP_THREADS"])
def test_dask_worker_environ_gives_each_thread_pool_the_workers_share_of_the_cores(
        variable: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    monkeypatch.delenv(variable, raising=False)
    assert dask_worker_environ(1)[0][variable] == "1"
    assert dask_worker_environ(3)[0][variable] == "3"


def test_dask_worker_environ_keeps_the_users_pocl_threads(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    monkeypatch.setenv("POCL_MAX_PTHREAD_COUNT", "4")
    assert dask_worker_environ(1)[0]["POCL_MAX_PTHREAD_COUNT"] == "4"


def test_dask_worker_environ_keeps_pocl_threads_of_the_users_dask_configuration(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    dask = import_if_installed("dask")
    monkeypatch.delenv("POCL_MAX_PTHREAD_COUNT", raising=False)
    with dask.config.set({"distributed.nanny.pre-spawn-environ.POCL_MAX_PTHREAD_COUNT": 2}):
        assert dask_worker_environ(1)[0]["POCL_MAX_PTHREAD_COUNT"] == "2"
    with dask.config.set({"distributed.nanny.environ": {"POCL_MAX_PTHREAD_COUNT": 3}}):
        assert "POCL_MAX_PTHREAD_COUNT" not in dask_worker_environ(1)[0]  # the nanny sets 3


def test_dask_worker_environ_keeps_malloc_settings_of_the_users_dask_configuration() -> None:
    from memtype.pipeline.execution.executors import dask_worker_environ

    dask = import_if_installed("dask")
    with dask.config.set({"distributed.nanny.pre-spawn-environ.MALLOC_TRIM_THRESHOLD_": 1 << 20}):
        assert dask_worker_environ(1)[0]["MALLOC_TRIM_THRESHOLD_"] == str(1 << 20)


def _cpu_per_thread() -> dict[str, int]:
    """CPU clock ticks (user + system) of each thread of this process so far."""
    import os

    ticks = {}
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(FileNotFoundError):  # a thread that just ended
            with open(f"/proc/self/task/{tid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks[tid] = int(fields[11]) + int(fields[12])
    return ticks


def _busy_threads(work: Any) -> int:
    """Threads of the framework's pool (this process's threads but the one calling
    ``work()``) that ran at least a tenth of the CPU time of ``work()`` (run once before, to
    compile and start its pools). The calling thread is left out: it copies results to the
    host, which with a fast runtime (Intel's OpenCL) can pass a tenth of the time without
    being part of any pool."""
    import threading

    work()
    before = _cpu_per_thread()
    work()
    caller = str(threading.get_native_id())
    used = {tid: ticks - before.get(tid, 0) for tid, ticks in _cpu_per_thread().items()}
    total = sum(used.values())
    return sum(u >= total / 10 for tid, u in used.items() if tid != caller)


def _busy_threads_of_opencl_medians() -> int:
    """:func:`_busy_threads` of pyclesperanto medians of a 5 x 1024 x 1024 stack (pocl, the
    CPU OpenCL driver, runs kernels on threads of its own)."""
    import memtype as mt

    stack = mt.convert(np.arange(5 << 20, dtype=np.float32).reshape(5, 1024, 1024),
                       "pyclesperanto")
    cle = import_if_installed("pyclesperanto")

    def medians() -> None:
        for _ in range(2):
            cle.pull(cle.median_box(stack, radius_x=1, radius_y=1, radius_z=0))

    return _busy_threads(medians)


def _busy_threads_of_tensorflow_products() -> int:
    """:func:`_busy_threads` of TensorFlow matrix products (its intra-op thread pool)."""
    tf = import_if_installed("tensorflow")
    x = tf.constant(np.ones((1024, 1024), np.float32))

    def products() -> None:
        for _ in range(10):
            (x @ x).numpy()

    return _busy_threads(products)


def _check_workers_use_their_share_of_the_cores(work: Any) -> None:
    from memtype.pipeline.execution.executors import default_workers

    ex = DaskExecutor(workers=2)
    try:
        busy = ex.client.run(work)
    finally:
        ex.close()
    # the pool had one thread per core of the machine in each worker (2 of 2 here)
    assert all(n <= max(1, default_workers() // 2) for n in busy.values()), busy


@pytest.mark.opencl
@pytest.mark.requires("pyclesperanto")
@pytest.mark.filterwarnings("ignore:median_box:DeprecationWarning")
def test_local_cluster_workers_run_opencl_kernels_on_their_share_of_the_cores() -> None:
    _check_workers_use_their_share_of_the_cores(_busy_threads_of_opencl_medians)


@pytest.mark.requires("tensorflow")
def test_local_cluster_workers_run_tensorflow_kernels_on_their_share_of_the_cores() -> None:
    _check_workers_use_their_share_of_the_cores(_busy_threads_of_tensorflow_products)


def _pool_variables() -> dict[str, str | None]:
    import os

    return {n: os.environ.get(n) for n in ("POCL_MAX_PTHREAD_COUNT", "OMP_NUM_THREADS")}


def test_local_cluster_leaves_this_processs_thread_pools_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("POCL_MAX_PTHREAD_COUNT", raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")  # the user's: here and (as dask does) in workers
    ex = DaskExecutor(workers=1)
    try:
        (workers,) = ex.client.run(_pool_variables).values()
    finally:
        ex.close()
    assert _pool_variables() == {"POCL_MAX_PTHREAD_COUNT": None, "OMP_NUM_THREADS": "2"}
    assert workers["OMP_NUM_THREADS"] == "2" and workers["POCL_MAX_PTHREAD_COUNT"] is not None
