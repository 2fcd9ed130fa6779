"""Issue 21 items 3 and 12 (storage and gpu): what a store or pool keeps or hands out is
private. MLX copies are lazy (a copy reads its source only when evaluated) and NumPy's view of
an MLX array writes through, so every MLX array kept or handed out must be an evaluated
copy; a JAX array can be freed by its owner (``x.delete()``, a donated ``jax.jit``
argument), so the in-memory stores keep a copy of it, as of every other framework."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.gpu import GPUMemoryManager
from memtype.storage import MemoryStore, TieredStore


def _write_through(x: Any) -> None:
    """What a caller does to an MLX array after saving it: write into its buffer in place
    (NumPy's view of an MLX array is zero-copy and writable)."""
    np.asarray(x)[0] = 5


def _values(x: Any) -> list[float]:
    return [float(v) for v in np.asarray(x)]


def _fresh_mlx() -> Any:
    import mlx.core as mx

    x = mx.array([1.0, 2.0, 3.0])
    mx.eval(x)
    return x


# -- item 3: MLX ----------------------------------------------------------------------------
@pytest.mark.requires("mlx")
@pytest.mark.parametrize("make", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_a_saved_mlx_array_ignores_the_callers_later_writes(make: Any) -> None:
    store, x = make(), _fresh_mlx()
    store.save(x, "x")
    _write_through(x)
    assert _values(store.load("x")) == [1.0, 2.0, 3.0]


@pytest.mark.requires("mlx")
@pytest.mark.parametrize("make", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_an_mlx_array_loaded_with_copy_is_private(make: Any) -> None:
    store = make()
    store.save(_fresh_mlx(), "x")
    _write_through(store.load("x", copy=True))
    assert _values(store.load("x")) == [1.0, 2.0, 3.0]


@pytest.mark.requires("mlx")
@pytest.mark.parametrize("make", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_a_copied_mlx_entry_is_private(make: Any) -> None:
    store = make()
    store.save(_fresh_mlx(), "x")
    store.copy("x", "y")
    _write_through(store.load("x"))  # the store's own value (documented as not to be written)
    assert _values(store.load("y")) == [1.0, 2.0, 3.0]


@pytest.mark.requires("mlx")
def test_an_mlx_array_spilled_to_disk_comes_back_private(tmp_path: Path) -> None:
    store, x = TieredStore(0, spill_dir=tmp_path), _fresh_mlx()
    store.save(x, "x")
    store.save(np.zeros(4), "p")
    assert store.tier_of("x") == "disk"
    _write_through(x)
    first = store.load("x", copy=True)
    _write_through(first)
    assert _values(store.load("x")) == [1.0, 2.0, 3.0]


@pytest.mark.requires("mlx")
def test_pool_allocations_of_mlx_do_not_share_a_buffer() -> None:
    manager = GPUMemoryManager()
    a = manager.allocate(3, "float32", "mlx")
    b = manager.allocate(3, "float32", "mlx")
    _write_through(a)
    assert _values(b) == [0.0, 0.0, 0.0]


# -- item 12: JAX -----------------------------------------------------------------------------
def _deleted(x: Any) -> None:
    x.delete()


def _donated(x: Any) -> None:
    import jax

    jax.jit(lambda v: v + 1, donate_argnums=0)(x)  # deletes x (its buffer is reused)


@pytest.mark.requires("jax")
@pytest.mark.parametrize("free", [_deleted, _donated], ids=["delete", "donate"])
@pytest.mark.parametrize("make", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_a_saved_jax_array_outlives_the_callers_delete(make: Any, free: Any) -> None:
    import jax.numpy as jnp

    store, x = make(), jnp.arange(3.0)
    store.save(x, "x")
    free(x)
    assert x.is_deleted()
    assert _values(store.load("x")) == [0.0, 1.0, 2.0]


@pytest.mark.requires("jax")
def test_copy_false_keeps_a_jax_reference() -> None:
    import jax.numpy as jnp

    store, x = MemoryStore(), jnp.arange(3.0)
    store.save(x, "x", copy=False)
    assert store.load("x") is x


@pytest.mark.requires("tensorflow")
@pytest.mark.parametrize("make", [MemoryStore, lambda: TieredStore(1 << 20)],
                         ids=["memory", "tiered"])
def test_a_saved_tf_tensor_is_kept_as_it_is(make: Any) -> None:
    """Nobody can change or free a TensorFlow tensor: keeping it costs no copy."""
    import tensorflow as tf

    store, t = make(), tf.constant([1.0, 2.0])
    store.save(t, "t")
    assert store.load("t") is t
