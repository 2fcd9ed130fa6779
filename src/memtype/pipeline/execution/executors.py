"""Executors: where a pipeline's groups run. Inline, a thread pool, or dask.distributed.

Each executor maps a task function over the groups and yields results as they finish.
A task function receives the index of the worker running it through
:func:`current_worker_index`, from which the GPU manager assigns its device.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, as_completed
from types import TracebackType
from typing import Any, TypeVar

from memtype import require
from memtype.errors import InvalidArgumentError

__all__ = [
    "Executor",
    "InlineExecutor",
    "ThreadExecutor",
    "DaskExecutor",
    "make_executor",
    "current_worker_index",
    "dask_worker_environ",
    "EXECUTORS",
]

C = TypeVar("C")
T = TypeVar("T")
R = TypeVar("R")

EXECUTORS = ("inline", "threads", "dask")

_local = threading.local()


def current_worker_index() -> int:
    """The index of the worker running this code: thread-pool slot, dask worker, or 0 inline."""
    index = getattr(_local, "index", None)
    if index is not None:
        return int(index)
    return _dask_worker_index()


def _dask_worker_index() -> int:
    """This dask worker's index (its name, when numeric, as LocalCluster names them), else 0."""
    import sys

    if "distributed" not in sys.modules:
        return 0
    from distributed import get_worker

    try:
        worker = get_worker()
    except ValueError:  # not running inside a dask worker
        return 0
    name = worker.name
    if isinstance(name, int):
        return name
    return int(name) if str(name).isdigit() else 0


_MMAP_THRESHOLD = 32 << 20
"""glibc's largest adaptive ``mmap`` threshold on 64-bit Linux (``DEFAULT_MMAP_THRESHOLD_MAX``)."""


_THREAD_POOLS = ("POCL_MAX_PTHREAD_COUNT", "CL_CONFIG_CPU_TBB_NUM_WORKERS",
                 "TF_NUM_INTRAOP_THREADS")
"""Variables that size a framework's own pool of CPU threads, which dask's OpenMP/BLAS limits
do not reach: pocl's and Intel's (the CPU OpenCL runtimes behind pyclesperanto; Intel's is a
TBB pool) and TensorFlow's intra-op pool. Each is read once, when its pool starts; unset,
the pool has a thread per core."""


def dask_worker_environ(threads: int = 1) -> tuple[dict[str, str], dict[str, str]]:
    """The environment of dask worker processes that run pipeline groups.

    A group allocates and frees arrays of megabytes over and over (stacks, every step's
    temporaries, in each framework), and its frameworks run kernels on thread pools of
    their own. Settings of a stock dask worker make that cost a worker far more than the
    same work in one process:

    * dask sets ``MALLOC_TRIM_THRESHOLD_=65536`` in every worker it spawns (to hand freed
      memory back to the system), and any explicit glibc malloc setting turns glibc's
      adaptive ``mmap`` threshold off: every allocation above 128 KiB is then a fresh
      ``mmap``, page-faulted again on first use and unmapped when freed (system time).
      Here the threshold is fixed where glibc's own adaptation would take it, 32 MiB, and
      freed memory is trimmed above 64 MiB (twice that, as glibc's rule does).
    * dask limits OpenMP (torch's intra-op threads), MKL and OpenBLAS pools to one thread
      per worker, but pocl, the CPU OpenCL driver behind pyclesperanto, and TensorFlow run
      kernels on pools of their own, one thread per core of the machine: every worker's
      kernels competed for all the cores. Their pools get the worker's share of the cores,
      ``threads`` (``POCL_MAX_PTHREAD_COUNT``, Intel's runtime's
      ``CL_CONFIG_CPU_TBB_NUM_WORKERS``, ``TF_NUM_INTRAOP_THREADS``), set before the
      worker process starts: each is read once, when its pool starts (pocl's when
      pyclesperanto is imported).
    * XLA (JAX) runs its kernels on a pool sized by the machine's cores; with one core per
      worker, XLA's multi-threaded kernels are turned off.

    A value the user sets for one of these variables, in this process's environment or in
    dask's ``distributed.nanny.pre-spawn-environ`` or ``distributed.nanny.environ``
    configuration, is kept.

    Parameters
    ----------
    threads : int
        Cores per worker: the size of pocl's and TensorFlow's thread pools; 1 (one worker
        per core) also makes JAX kernels single-threaded.

    Returns
    -------
    pre_spawn : dict of str to str
        Variables that must be set before the worker process starts (glibc and the thread
        pools read them then): dask's ``distributed.nanny.pre-spawn-environ`` with the
        malloc settings and the pools' sizes.
    environ : dict of str to str
        Variables set in the worker before it runs anything: ``XLA_FLAGS`` (after what this
        process's ``XLA_FLAGS`` holds) with one core per worker, else nothing.

    Examples
    --------
    >>> pre_spawn, environ = dask_worker_environ()
    >>> pre_spawn["MALLOC_MMAP_THRESHOLD_"], pre_spawn["MALLOC_TRIM_THRESHOLD_"]
    ('33554432', '67108864')
    >>> pre_spawn["POCL_MAX_PTHREAD_COUNT"]
    '1'
    >>> environ["XLA_FLAGS"].endswith("--xla_cpu_multi_thread_eigen=false")
    True
    """
    require("distributed", "dask_worker_environ")  # registers the nanny's configuration
    dask: Any = importlib.import_module("dask")  # untyped: called as Any

    key = "distributed.nanny.pre-spawn-environ"
    configured = {k: str(v) for k, v in dask.config.get(key, {}).items()}
    stock = {k: str(v) for k, v in dask.config.get(
        key, {}, config=dask.config.merge(*dask.config.defaults)).items()}
    nanny = dask.config.get("distributed.nanny.environ", {})
    # as dask does, a variable of this process's environment wins over the configuration
    pre_spawn = {k: os.environ.get(k, v) for k, v in configured.items()}
    ours = {"MALLOC_MMAP_THRESHOLD_": _MMAP_THRESHOLD,
            "MALLOC_TRIM_THRESHOLD_": 2 * _MMAP_THRESHOLD,
            **dict.fromkeys(_THREAD_POOLS, max(1, threads))}
    for name, value in ours.items():
        # a value of this process's environment is the user's, unless it is dask's own
        # (a Nanny writes its pre-spawn variables into the environment of its parent)
        own = os.environ.get(name)
        if own is not None and own not in (configured.get(name), stock.get(name)):
            pre_spawn[name] = own
        elif name in configured and configured[name] != stock.get(name):
            pre_spawn[name] = configured[name]  # the user's dask configuration
        elif name not in nanny:
            pre_spawn[name] = str(value)
    if threads > 1:
        return pre_spawn, {}
    flags = os.environ.get("XLA_FLAGS", "").strip()
    return pre_spawn, {"XLA_FLAGS": f"{flags} --xla_cpu_multi_thread_eigen=false".strip()}


_QUIET_WORKERS: dict[str, Any] = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.interval": "2s",
    "distributed.admin.tick.interval": "200ms",
    "distributed.worker.memory.monitor-interval": "500ms",
}
"""Periodic work of memtype's own cluster, cut down (idle, a 2-worker cluster's scheduler,
nannies and workers took about 11% of a core, 2.4% with these; a worker's event loop took
the GIL from the group it runs 100 times a second for dask's statistical profiler, whose
flame graph only the dashboard shows). The nanny still stops a worker at 95% of its memory
limit, checking twice a second instead of ten times."""


def _worker_config() -> dict[str, Any]:
    """:data:`_QUIET_WORKERS` for the settings still at dask's defaults (a value of the
    user's own dask configuration is kept)."""
    dask: Any = importlib.import_module("dask")  # untyped: called as Any

    defaults = dask.config.merge(*dask.config.defaults)
    return {key: value for key, value in _QUIET_WORKERS.items()
            if dask.config.get(key, None) == dask.config.get(key, None, config=defaults)}


def default_workers() -> int:
    """One worker per CPU core this process may use."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class Executor(ABC):
    """Runs a function over items and yields the results as they complete.

    Use as a context manager so that pools and clusters the executor started are closed.
    """

    name = "executor"
    workers = 1

    @abstractmethod
    def map_unordered(self, fn: Callable[[C, T], R], context: C,
                      items: Sequence[T]) -> Iterator[R]:
        """``fn(context, item)`` for every item, in completion order.

        ``context`` is shared by every call (sent to each dask worker once).
        """

    def close(self) -> None:  # noqa: B027 - an optional hook, not abstract
        """Release what the executor started (nothing by default)."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def describe(self) -> str:
        """A short description for summaries: ``dask (2 workers)``."""
        return f"{self.name} ({self.workers} worker{'s' if self.workers != 1 else ''})"


class InlineExecutor(Executor):
    """Runs every item in the calling thread, in order."""

    name = "inline"

    def map_unordered(self, fn: Callable[[C, T], R], context: C,
                      items: Sequence[T]) -> Iterator[R]:
        """``fn(context, item)`` for every item, one after the other."""
        for item in items:
            yield fn(context, item)


class ThreadExecutor(Executor):
    """Runs items on a pool of threads (frameworks release the GIL in their kernels).

    Parameters
    ----------
    workers : int, optional
        Pool size; one per CPU core by default.
    """

    name = "threads"

    def __init__(self, workers: int | None = None) -> None:
        self.workers = workers or default_workers()
        self._next = 0
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(self.workers, thread_name_prefix="memtype-pipeline",
                                        initializer=self._init_thread)

    def _init_thread(self) -> None:
        """Give each pool thread its own worker index."""
        with self._lock:
            _local.index = self._next
            self._next += 1

    def map_unordered(self, fn: Callable[[C, T], R], context: C,
                      items: Sequence[T]) -> Iterator[R]:
        """Submit every item, then yield results as they complete (each future dropped
        once its result is out: nothing is held per finished item). A map stopped early
        (closed, Ctrl-C, an error) cancels the items that have not started."""
        futures = {self._pool.submit(fn, context, item) for item in items}
        try:
            for future in as_completed(futures):
                futures.discard(future)
                yield future.result()
        finally:
            for future in futures:
                future.cancel()

    def close(self) -> None:
        """Shut the pool down (waits for running items)."""
        self._pool.shutdown(wait=True, cancel_futures=True)


class DaskExecutor(Executor):
    """Runs items as dask.distributed tasks, one task per item.

    Parameters
    ----------
    client : distributed.Client, optional
        Use this client (any scheduler). Without it a ``LocalCluster`` of ``workers``
        single-threaded worker processes is started, and closed by :meth:`close`; its
        workers run without dask's statistical profiler (the dashboard's profile page
        stays empty) and check their memory and the system less often, unless the dask
        configuration sets those values.
    workers : int, optional
        Worker processes of the local cluster; one per CPU core by default.
    scheduler : str, optional
        Address of a running scheduler to connect to instead (``tcp://host:8786``).
    gpus : int
        GPUs to use: with GPUs, each local worker declares the resource ``GPU=1`` and
        every task asks for one, so one worker holds one GPU. On a given cluster, tasks ask
        for ``GPU=1`` only if its workers declare GPU resources.
    """

    name = "dask"

    def __init__(self, client: Any | None = None, workers: int | None = None,
                 scheduler: str | None = None, gpus: int = 0) -> None:
        dist: Any = require("distributed", "The dask executor")  # untyped: called as Any

        self._owned: list[Any] = []
        if client is None and scheduler is None:
            n = workers or default_workers()
            cluster = _local_cluster(dist, n, gpus)
            self.client = dist.Client(cluster)
            self.client.run(_leave_ctrl_c_to_the_driver)
            self._owned.extend([self.client, cluster])
            self.workers, self.gpus = n, gpus
            return
        if client is None:
            client = dist.Client(scheduler)
            self._owned.append(client)
        self.client = client
        info = client.scheduler_info().get("workers", {})
        self.workers = len(info) or 1
        # ask for GPU=1 only where the workers declare GPU resources, else tasks never run
        declared = any("GPU" in w.get("resources", {}) for w in info.values())
        self.gpus = gpus if declared else 0

    def map_unordered(self, fn: Callable[[C, T], R], context: C,
                      items: Sequence[T]) -> Iterator[R]:
        """One task per item (``pure=False``), the context scattered once; results as they
        come. Each future is released once its result is out, so that workers do not keep
        the results of finished items until the whole map ends."""
        dist: Any = importlib.import_module("distributed")

        resources = {"GPU": 1} if self.gpus else None
        shared = self.client.scatter(context, broadcast=True, hash=False)
        pending = dist.as_completed(
            [self.client.submit(fn, shared, item, pure=False, resources=resources)
             for item in items])
        try:
            for future in pending:
                result = future.result()
                future.release()
                yield result
        except KeyboardInterrupt:
            self._interrupted = True  # close() shuts the cluster down quietly
            if self._owned:  # our workers: their groups are cancelled next, without a word
                self.client.run(_quiet_worker_logs, on_error="ignore")
            raise
        finally:
            pending.clear()  # a stopped map (Ctrl-C, an error) drops what is still pending
            shared.release()

    _interrupted = False

    def close(self) -> None:
        """Close the client and cluster this executor started (a given client stays open).

        A local cluster closes without distributed's shutdown log; after Ctrl-C (its workers
        ignore SIGINT and are still busy with their groups) that log stays off in this
        process, as each busy worker is killed: its warnings and tracebacks would bury the
        command's one-line message."""
        with _quiet_logs(bool(self._owned), keep=self._interrupted and bool(self._owned)):
            for thing in self._owned:
                thing.close()
        self._owned.clear()


def _leave_ctrl_c_to_the_driver() -> None:
    """In a worker of memtype's own cluster: ignore SIGINT. A Ctrl-C in the terminal reaches
    the whole process group; the driver stops the run and closes the cluster, and workers
    dying of it on their own would only print tracebacks over the driver's one line. (In
    the seconds while the workers start, before this runs, they still die of it loudly:
    ignoring SIGINT in the driver then, for them to inherit, would lose that Ctrl-C.)"""
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _quiet_worker_logs() -> None:
    """In a worker of memtype's own cluster being stopped: no more distributed log."""
    with _quiet_logs(True, keep=True):
        pass


@contextlib.contextmanager
def _quiet_logs(quiet: bool, keep: bool = False) -> Iterator[None]:
    """Silence the ``distributed`` loggers of this process for the block when ``quiet``;
    with ``keep``, after it too (after Ctrl-C the nannies go on logging each busy worker
    they kill from their own thread once the close returned)."""
    names = [n for n in list(logging.root.manager.loggerDict)
             if n == "distributed" or n.startswith("distributed.")] if quiet else []
    loggers = [logging.getLogger(n) for n in names]  # each: some have a level of their own
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.CRITICAL + 1)
    try:
        yield
    finally:
        if not keep:
            for logger, level in zip(loggers, levels, strict=True):
                logger.setLevel(level)


@contextlib.contextmanager
def _environ(values: dict[str, str]) -> Iterator[None]:
    """These environment variables in this process for a while, then the previous ones."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _local_cluster(dist: Any, workers: int, gpus: int) -> Any:
    """A LocalCluster of single-threaded worker processes set up for pipeline groups
    (see :func:`dask_worker_environ`), with less periodic work (:data:`_QUIET_WORKERS`)."""
    dask: Any = importlib.import_module("dask")  # ``dist`` is imported: so is dask

    pre_spawn, environ = dask_worker_environ(max(1, default_workers() // workers))
    # dask takes a variable of this process's environment over its configuration: set both;
    # the scheduler and nannies read the configuration as they start, workers get theirs.
    # The nannies write the pre-spawn variables into this process's environment: restored
    # after the start, so that this process's own pools (pocl's, torch's) keep their size
    with dask.config.set({"distributed.nanny.pre-spawn-environ": pre_spawn,
                          **_worker_config()}), _environ(pre_spawn):
        return dist.LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                                 dashboard_address=":0",  # any free port
                                 scheduler_kwargs={"dashboard": False}, env=environ,
                                 resources={"GPU": 1} if gpus else None)


def make_executor(kind: str | Executor = "inline", workers: int | None = None,
                  client: Any | None = None, scheduler: str | None = None,
                  gpus: int = 0) -> Executor:
    """The executor for a name: ``"inline"``, ``"threads"`` or ``"dask"``.

    A ``client`` or ``scheduler`` implies ``"dask"``. An :class:`Executor` is returned as is.

    Raises
    ------
    ValueError
        An unknown executor name, or ``workers`` below 1.
    """
    if isinstance(kind, Executor):
        return kind
    if workers is not None and workers < 1:
        raise InvalidArgumentError(f"workers must be >= 1; received {workers}.")
    if client is not None or scheduler is not None:
        kind = "dask"
    if kind == "inline":
        return InlineExecutor()
    if kind == "threads":
        return ThreadExecutor(workers)
    if kind == "dask":
        return DaskExecutor(client, workers, scheduler, gpus)
    raise InvalidArgumentError(
        f"Unknown executor {kind!r}. Expected one of: {', '.join(EXECUTORS)}.")
