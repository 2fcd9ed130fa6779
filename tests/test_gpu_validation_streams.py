"""GPU validation, check 3 of issue 7: streams (run with ``pytest -m gpu``; skipped without a GPU).

A producer writes on a side stream — a long matmul, then an in-place add — and the result is
converted to another framework at once, while that stream is still the producer's current
stream (what DLPack's stream hand-off is for: the consumer passes its stream, the producer
makes it wait). The consumer must see the finished values, in 100 repetitions and from 8
threads at once; and deleting the source right after the conversion, then writing -1 into a
fresh array on the same stream (which would reuse its memory had it been released), must
not change the result. The same holds when the consumer is a decorated function called with
the producer's array: its result must not depend on the caller dropping its array at once.
JAX has no user streams: its work is asynchronous on XLA's streams.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from typing import Any

import numpy as np
import pytest

import memtype as mt
from tests.gpu_validation_support import (
    GPU_PAIRS,
    PAIR_IDS,
    release_gpu_memory,
    require,
    to_host,
)

pytestmark = pytest.mark.gpu

N = 6144  # matmul of ones: every element is exactly N (fp32, TF32 or not)
REPEATS = 100
THREADS, THREAD_N, THREAD_REPEATS = 8, 4096, 13  # 8 x 13 = 104 conversions per pair


@pytest.fixture(autouse=True)
def _release() -> Iterator[None]:
    """Each test starts and ends with the frameworks' caches emptied."""
    release_gpu_memory()
    yield
    release_gpu_memory()


def _side_stream(name: str) -> Any:
    """A new non-blocking stream on GPU 0 (None for JAX, which has no user streams)."""
    if name == "torch":
        import torch

        return torch.cuda.Stream(device=0)  # type: ignore[no-untyped-call]
    if name == "cupy":
        import cupy as cp

        with cp.cuda.Device(0):
            return cp.cuda.Stream(non_blocking=True)
    return None


def _on(name: str, stream: Any) -> AbstractContextManager[Any]:
    """Make ``stream`` the framework's current stream on this thread."""
    if name == "torch":
        import torch

        return torch.cuda.stream(stream)
    if name == "cupy":
        entered: AbstractContextManager[Any] = stream  # cupy.cuda.Stream is a context manager
        return entered
    return nullcontext()


def _ones(name: str, n: int) -> Any:
    """An ``n x n`` float32 matrix of ones on GPU 0, made on the current stream."""
    if name == "torch":
        import torch

        return torch.ones((n, n), dtype=torch.float32, device="cuda:0")
    if name == "cupy":
        import cupy as cp

        return cp.ones((n, n), dtype=cp.float32)
    import jax
    import jax.numpy as jnp

    return jax.device_put(jnp.ones((n, n), dtype=jnp.float32), jax.devices("gpu")[0])


def _produce(name: str, a: Any, add: int) -> Any:
    """``a @ a`` then ``+= add`` in place (JAX: a new array), queued on the current stream."""
    if name == "torch":
        import torch

        y = torch.matmul(a, a)
        y.add_(add)
        return y
    if name == "cupy":
        y = a @ a
        y += add
        return y
    import jax.numpy as jnp

    return jnp.matmul(a, a) + add


def _scribble(name: str, n: int) -> Any:
    """A fresh ``n x n`` array of -1 on the current stream (reuses freed memory of that size)."""
    if name == "torch":
        import torch

        return torch.full((n, n), -1.0, dtype=torch.float32, device="cuda:0")
    if name == "cupy":
        import cupy as cp

        return cp.full((n, n), -1.0, dtype=cp.float32)
    import jax.numpy as jnp

    return jnp.full((n, n), -1.0, dtype=jnp.float32)


def _all_equal(name: str, y: Any, value: float) -> bool:
    """Whether every element of ``y`` is ``value``, computed by the consumer on its stream."""
    if name == "jax":
        import jax.numpy as jnp

        return bool(jnp.all(y == value))
    return bool((y == value).all())


def _round(producer: str, consumer: str, stream: Any, a: Any, n: int, add: int) -> bool:
    """One repetition: produce on the side stream, convert at once, delete, scribble, check."""
    with _on(producer, stream):
        y = _produce(producer, a, add)
        out = mt.convert(y, consumer)
        del y
        junk = _scribble(producer, n)
    ok = _all_equal(consumer, out, float(n + add))
    del out, junk
    return ok


@pytest.mark.parametrize(("producer", "consumer"), GPU_PAIRS, ids=PAIR_IDS)
def test_side_stream_result_converted_at_once(producer: str, consumer: str) -> None:
    require(producer)
    require(consumer)
    stream = _side_stream(producer)
    with _on(producer, stream):
        a = _ones(producer, N)
    wrong = [rep for rep in range(REPEATS) if not _round(producer, consumer, stream, a, N, rep)]
    assert wrong == [], f"{producer}->{consumer}: wrong values in repetitions {wrong}"


@pytest.mark.parametrize(("producer", "consumer"), GPU_PAIRS, ids=PAIR_IDS)
def test_eight_threads_convert_side_stream_results(producer: str, consumer: str) -> None:
    require(producer)
    require(consumer)
    start = threading.Barrier(THREADS)

    def work(index: int) -> list[tuple[int, int]]:
        stream = _side_stream(producer)  # one stream per thread
        with _on(producer, stream):
            a = _ones(producer, THREAD_N)
        start.wait(timeout=120)
        return [(index, rep) for rep in range(THREAD_REPEATS)
                if not _round(producer, consumer, stream, a, THREAD_N, 1000 * index + rep)]

    with ThreadPoolExecutor(THREADS) as pool:
        wrong = [w for found in pool.map(work, range(THREADS)) for w in found]
    assert wrong == [], f"{producer}->{consumer}: wrong values in (thread, repetition) {wrong}"


DECORATED = [("torch", "cupy"), ("cupy", "torch"), ("torch", "jax"), ("cupy", "jax")]


@pytest.mark.parametrize(("producer", "consumer"), DECORATED,
                         ids=[f"{p}->@{c}" for p, c in DECORATED])
def test_decorated_function_reads_side_stream_writes(producer: str, consumer: str) -> None:
    require(producer)
    require(consumer)

    @getattr(mt, consumer)(contract="any")
    def plus_one(image: Any) -> Any:
        return image + 1

    stream = _side_stream(producer)
    with _on(producer, stream):
        a = _ones(producer, THREAD_N)
    wrong = []
    for rep in range(25):
        with _on(producer, stream):
            y = _produce(producer, a, rep)
            out = plus_one(y, gpu_id=0)
            del y
            junk = _scribble(producer, THREAD_N)
        if not _all_equal(consumer, out, float(THREAD_N + rep + 1)):
            wrong.append(rep)
        del out, junk
    assert wrong == [], f"{producer}->@{consumer}: wrong values in repetitions {wrong}"


def test_values_survive_the_round_trip_to_the_host() -> None:
    """A control for the checks above: the consumer's comparison is not vacuous."""
    torch = require("torch")
    require("cupy")
    y = torch.full((4, 4), 5.0, device="cuda:0")
    out = mt.convert(y, "cupy")
    assert _all_equal("cupy", out, 5.0) and not _all_equal("cupy", out, 6.0)
    np.testing.assert_array_equal(to_host(out), np.full((4, 4), 5.0, np.float32))
