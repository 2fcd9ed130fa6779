"""What a decorated function receives: no copies of inputs it may have (issue 13), arrays
inside containers (issue 12 item 3), autograd (item 10), methods and generators (item 19)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections import OrderedDict, defaultdict, namedtuple
from typing import Any, NamedTuple

import numpy as np
import pytest

import memtype as mt
from memtype.decorators.inputs import arrays_in
from memtype.errors import ArgumentTypeError
from tests.helpers import host

IMAGE = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
torch = pytest.importorskip("torch")


class Pair(NamedTuple):
    image: Any
    label: str


@dataclasses.dataclass
class Sample:
    image: Any
    scale: float = 1.0


@dataclasses.dataclass(frozen=True, slots=True)
class Frozen:
    image: Any
    extra: list[Any] = dataclasses.field(default_factory=list)


# -- O(1) calls: nothing the function may have is copied ---------------------------------


def test_large_same_type_tensor_is_not_copied() -> None:
    big = torch.zeros(64, 1024, 256)  # 64 MiB
    seen: list[Any] = []

    @mt.torch
    def f(image: Any) -> Any:
        seen.append(image)
        return image

    assert f(big) is big and seen[0] is big


def test_numpy_into_torch_is_the_zero_copy_alias() -> None:
    caller = np.zeros((4, 256, 256), np.float32)
    out = mt.torch(lambda image: image)(caller)
    assert mt.shares_memory(out, caller)


# -- autograd (issue 12 item 10) ---------------------------------------------------------


def test_autograd_survives_a_decorated_torch_call() -> None:
    w = torch.ones(1, 2, 2, requires_grad=True)
    out = mt.torch(lambda x: x * 3)(w)
    assert out.requires_grad
    out.sum().backward()
    assert w.grad is not None
    np.testing.assert_array_equal(w.grad.numpy(), np.full((1, 2, 2), 3.0, np.float32))


def test_autograd_survives_with_keywords_and_containers() -> None:
    w = torch.ones(1, 2, 2, requires_grad=True)

    @mt.torch
    def f(pair: Pair, *, offset: Any) -> Any:
        return pair.image * 2 + offset

    out = f(Pair(w, "a"), offset=w)
    out.sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), np.full((1, 2, 2), 3.0, np.float32))


# -- containers (issue 12 item 3) --------------------------------------------------------


@pytest.mark.parametrize("wrap", [
    lambda a: Pair(a, "x"),
    lambda a: {"image": a, "n": 1},
    lambda a: OrderedDict(image=a),
    lambda a: Sample(a, 2.0),
    lambda a: Frozen(a, [a]),
    lambda a: [(a,)],
], ids=["namedtuple", "dict", "OrderedDict", "dataclass", "frozen-slots-dataclass", "nested"])
def test_arrays_inside_containers_are_converted(wrap: Any) -> None:
    caller = wrap(IMAGE.copy())
    seen: list[Any] = []

    @mt.torch(contract="any")
    def f(value: Any) -> Any:
        seen.append(value)
        return 0

    f(caller)
    assert type(seen[0]) is type(caller)
    assert arrays_in(seen[0]) and all(isinstance(a, torch.Tensor) for a in arrays_in(seen[0]))
    assert all(isinstance(a, np.ndarray) for a in arrays_in(caller))  # the caller's own


def test_namedtuple_and_dict_arrays_are_isolated_for_numpy() -> None:
    caller = IMAGE.copy()
    frozen = mt.convert(IMAGE.copy(), "jax")

    @mt.numpy(contract="any", copy_inputs=True)
    def f(p: Pair, d: dict[str, Any]) -> None:
        p.image[...] = 0  # private copies: the caller's arrays stay as they are
        d["image"][...] = 0

    @mt.numpy(contract="any")
    def g(p: Pair, d: dict[str, Any]) -> None:
        with pytest.raises(ValueError, match="read-only"):  # immutable data stays immutable
            p.image[...] = 0
        with pytest.raises(ValueError, match="read-only"):
            d["image"][...] = 0

    f(Pair(caller, "x"), {"image": caller})
    g(Pair(frozen, "x"), {"image": frozen})
    np.testing.assert_array_equal(caller, IMAGE)
    np.testing.assert_array_equal(np.asarray(frozen), IMAGE)


def test_defaultdict_keeps_its_factory_and_keys() -> None:
    caller: defaultdict[str, Any] = defaultdict(list, {"a": IMAGE.copy()})
    seen: list[Any] = []
    mt.torch(contract="any")(lambda d: seen.append(d))(caller)
    assert isinstance(seen[0], defaultdict) and seen[0].default_factory is list
    assert isinstance(seen[0]["a"], torch.Tensor) and seen[0] is not caller


def test_container_without_arrays_is_passed_as_is() -> None:
    settings = {"sigma": 2.0, "names": ["a", "b"]}
    point = namedtuple("point", "y x")(1, 2)
    seen: list[Any] = []
    mt.numpy(lambda image, s, p: seen.append((s, p)) or image)(IMAGE, settings, point)
    assert seen[0][0] is settings and seen[0][1] is point


def test_self_containing_list_is_walked_once() -> None:
    looped: list[Any] = [IMAGE.copy()]
    looped.append(looped)
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(looped)
    assert isinstance(seen[0][0], torch.Tensor) and seen[0][1] is looped


def test_first_array_in_a_dict_sets_the_preserved_dtype() -> None:
    @mt.numpy
    def f(inputs: dict[str, Any]) -> Any:
        return inputs["image"] * 1.5

    assert f({"image": np.full((1, 2, 2), 100, np.uint8)}).dtype == np.uint8


def test_arrays_in_walks_result_containers() -> None:
    t, u = torch.zeros(1), torch.ones(1)
    assert [id(a) for a in arrays_in({"a": t, "b": Pair(u, "x")})] == [id(t), id(u)]


# -- methods, generators, coroutines (issue 12 item 19) ----------------------------------


class Filters:
    factor = 3.0

    @mt.numpy
    @staticmethod
    def double(image: np.ndarray) -> np.ndarray:
        return image * 2

    @mt.numpy
    @classmethod
    def scaled(cls, image: np.ndarray) -> np.ndarray:
        return image * cls.factor

    @mt.numpy
    def plus(self, image: np.ndarray) -> np.ndarray:
        return image + 1


def test_staticmethod_classmethod_and_method() -> None:
    obj = Filters()
    np.testing.assert_array_equal(obj.double(IMAGE), IMAGE * 2)
    np.testing.assert_array_equal(Filters.double(IMAGE), IMAGE * 2)
    np.testing.assert_array_equal(obj.scaled(IMAGE), IMAGE * 3)
    np.testing.assert_array_equal(Filters.scaled(IMAGE), IMAGE * 3)
    np.testing.assert_array_equal(obj.plus(IMAGE), IMAGE + 1)


def _generator(image: Any) -> Any:
    yield image


async def _coroutine(image: Any) -> Any:
    return image


async def _async_generator(image: Any) -> Any:
    yield image


@pytest.mark.parametrize("func, kind", [
    (_generator, "a generator function"), (_coroutine, "an async function"),
    (_async_generator, "an async generator function"),
], ids=["generator", "async", "async-generator"])
def test_generators_and_coroutines_are_refused_at_decoration(func: Any, kind: str) -> None:
    with pytest.raises(ArgumentTypeError, match=kind):
        mt.numpy(contract="any")(func)


def test_decorated_function_in_a_coroutine() -> None:
    double = mt.numpy(lambda image: image * 2)

    async def main() -> Any:
        return double(IMAGE)

    np.testing.assert_array_equal(host(asyncio.run(main())), IMAGE * 2)
