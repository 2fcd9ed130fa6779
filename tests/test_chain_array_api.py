"""``mt.chain`` with ``@mt.array_api`` links: such a link runs in whatever framework the
previous link left its result in (no conversion between them), and the chain returns what
the calls one by one would."""

from __future__ import annotations

import pickle
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.array_api_functions import ArrayAPIFunction
from tests.frameworks import needs

pytestmark = [pytest.mark.requires("array_api_compat"), *needs("torch")]


@mt.array_api
def centre(image: Any, xp: Any) -> Any:
    return image - xp.mean(image)


@mt.array_api(memory_type="torch")
def centre_to_torch(image: Any, xp: Any) -> Any:
    return image - xp.mean(image)


@mt.torch(output_type="numpy")
def t_double(x: Any) -> Any:
    return x * 2


@mt.numpy
def n_inc(x: Any) -> Any:
    return x + 1


CHAINS = {
    "torch-then-array_api": (t_double, centre),
    "array_api-then-numpy": (centre, n_inc),
    "array_api-twice": (centre, centre),
    "torch-array_api-numpy": (t_double, centre, n_inc),
    "array_api-declared-then-array_api": (centre_to_torch, centre),
}
INPUTS = [pytest.param("numpy", id="numpy"), pytest.param("torch", id="torch"),
          pytest.param("tensorflow", marks=needs("tensorflow"), id="tensorflow")]


def _x(memory_type: str) -> Any:
    return mt.convert(np.arange(8, dtype=np.float32).reshape(2, 2, 2), memory_type)


def _one_by_one(funcs: tuple[Any, ...], x: Any) -> Any:
    for f in funcs:
        x = f(x)
    return x


def test_an_array_api_link_runs_where_the_previous_result_is() -> None:
    x = _x("numpy")
    with mt.capture_conversions() as events:
        y = mt.chain(t_double, centre)(x)
    # numpy -> torch for t_double; centre runs on its torch result; torch -> numpy at the end
    assert [(e.source_type, e.target_type) for e in events] == [("numpy", "torch"),
                                                                ("torch", "numpy")]
    assert isinstance(y, np.ndarray)
    assert y.tolist() == (x * 2 - (x * 2).mean()).tolist()


@pytest.mark.parametrize("memory_type", INPUTS)
@pytest.mark.parametrize("name", list(CHAINS))
def test_a_chain_returns_what_the_calls_one_by_one_return(name: str, memory_type: str) -> None:
    funcs = CHAINS[name]
    expected = _one_by_one(funcs, _x(memory_type))
    got = mt.chain(*funcs)(_x(memory_type))
    assert type(got) is type(expected)
    assert np.allclose(mt.convert(got, "numpy"), mt.convert(expected, "numpy"))


@pytest.mark.parametrize("name,output", [("torch-then-array_api", "numpy"),
                                         ("array_api-then-numpy", "numpy"),
                                         ("array_api-twice", "numpy"),
                                         ("array_api-declared-then-array_api", "torch")])
def test_the_chain_declares_the_output_of_the_calls_one_by_one(name: str, output: str) -> None:
    chained = mt.chain(*CHAINS[name])
    assert chained.output_memory_type == mt.MemoryType(output)


def test_returning_pins_the_result_type_and_pickles() -> None:
    pinned = centre.returning("torch")
    assert isinstance(pinned, ArrayAPIFunction) and pinned.output_type == "torch"
    assert centre.output_type is None and centre.returning("torch") is pinned
    import torch

    assert isinstance(pinned(_x("numpy")), torch.Tensor)
    again = pickle.loads(pickle.dumps(pinned))
    assert again is pinned


def test_a_chain_with_an_array_api_link_pickles() -> None:
    chained = pickle.loads(pickle.dumps(mt.chain(t_double, centre)))
    assert chained(_x("numpy")).tolist() == mt.chain(t_double, centre)(_x("numpy")).tolist()
