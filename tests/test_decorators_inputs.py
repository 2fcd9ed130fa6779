"""What a decorated function receives: no copies of inputs it may have (issue 13), arrays
inside containers (issue 12 item 3), autograd (item 10), methods and generators (item 19)."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib
from collections import OrderedDict, defaultdict, namedtuple
from typing import Any, NamedTuple

import numpy as np
import pytest

import memtype as mt
from memtype.decorators.inputs import arrays_in
from memtype.errors import ArgumentTypeError
from tests.helpers import host, import_if_installed

pytestmark = pytest.mark.requires("torch")

IMAGE = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
torch = import_if_installed("torch")


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


@pytest.mark.requires("jax")
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


# -- any depth (issue 21 item 9) --------------------------------------------------------


def _nested(value: Any, depth: int, wrap: Any = lambda v: [v]) -> Any:
    for _ in range(depth):
        value = wrap(value)
    return value


def _innermost(value: Any, depth: int, key: Any = 0) -> Any:
    for _ in range(depth):
        value = value[key]
    return value


@pytest.mark.parametrize("depth", [500, 5000], ids=["500-levels", "5000-levels"])
def test_deeply_nested_list_is_converted(depth: int) -> None:
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(_nested(IMAGE.copy(), depth))
    assert isinstance(_innermost(seen[0], depth), torch.Tensor)


def test_deeply_nested_dicts_and_tuples_are_converted() -> None:
    caller = _nested(IMAGE.copy(), 1000, lambda v: {"k": (v,)})
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(caller)
    inner = seen[0]
    for _ in range(1000):
        assert type(inner) is dict
        inner = inner["k"][0]
    assert isinstance(inner, torch.Tensor)


def test_deeply_nested_container_without_arrays_is_the_same_object() -> None:
    caller = _nested(1, 3000)
    seen: list[Any] = []
    mt.numpy(lambda image, v: seen.append(v) or image)(IMAGE, caller)
    assert seen[0] is caller


def test_arrays_in_walks_a_deeply_nested_result() -> None:
    t = torch.zeros(1)
    assert [id(a) for a in arrays_in(_nested(t, 3000))] == [id(t)]


def test_deeply_nested_result_is_returned() -> None:
    out = mt.torch(contract="any")(lambda image: (image, _nested(image, 2000)))(IMAGE)
    assert isinstance(_innermost(out[1], 2000), torch.Tensor)


# -- containers are rebuilt without their own code (issue 21 item 10) ------------------


class Scaling(dict[str, Any]):
    """A dict subclass whose own ``__setitem__`` changes the value (and counts)."""

    calls = 0

    def __setitem__(self, key: str, value: Any) -> None:
        type(self).calls += 1
        super().__setitem__(key, value * 2)


class Copying(dict[str, Any]):
    """A dict subclass with its own ``__copy__``."""

    def __copy__(self) -> Copying:
        raise AssertionError("memtype ran the container's __copy__")


class Points(OrderedDict[str, Any]):
    pass


class Factories(defaultdict[str, Any]):
    pass


class Items(list[Any]):
    pass


@pytest.mark.parametrize("make", [
    lambda a: Scaling(image=a),
    lambda a: Copying(image=a),
    lambda a: Points(image=a),
    lambda a: Factories(list, image=a),
    lambda a: Items([a]),
], ids=["own-setitem", "own-copy", "OrderedDict-subclass", "defaultdict-subclass",
        "list-subclass"])
def test_subclasses_of_builtin_containers_reach_the_function_as_they_are(make: Any) -> None:
    caller = make(IMAGE.copy())
    Scaling.calls = 0
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(caller)
    assert seen[0] is caller and Scaling.calls == 0
    assert all(isinstance(a, np.ndarray) for a in arrays_in(seen[0]))


class Counted(NamedTuple):
    image: Any
    label: str


class Overriding(Counted):
    """A namedtuple subclass whose own ``__new__`` and ``_make`` must not run."""

    __slots__ = ()

    def __new__(cls, *args: Any) -> Overriding:
        raise AssertionError("memtype ran the namedtuple's __new__")

    @classmethod
    def _make(cls, iterable: Any) -> Overriding:
        raise AssertionError("memtype ran the namedtuple's _make")


class Stateful(Counted):
    """A namedtuple subclass whose instances hold more than their fields."""


def test_namedtuple_is_rebuilt_without_its_own_new_or_make() -> None:
    caller = tuple.__new__(Overriding, (IMAGE.copy(), "x"))
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(caller)
    assert type(seen[0]) is Overriding and seen[0].label == "x"
    assert isinstance(seen[0].image, torch.Tensor)


def test_namedtuple_with_instance_state_reaches_the_function_as_it_is() -> None:
    caller = Stateful(IMAGE.copy(), "x")
    caller.note = "kept"  # type: ignore[attr-defined]
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(caller)
    assert seen[0] is caller and isinstance(seen[0].image, np.ndarray)


@dataclasses.dataclass
class Guarded:
    image: Any
    label: str = "x"
    inits = 0

    def __post_init__(self) -> None:
        type(self).inits += 1
        self.__dict__["sealed"] = True

    def __copy__(self) -> Guarded:
        raise AssertionError("memtype ran the dataclass's __copy__")

    def __setattr__(self, name: str, value: Any) -> None:
        if self.__dict__.get("sealed"):
            raise AssertionError("memtype ran the dataclass's __setattr__")
        super().__setattr__(name, value)


def test_dataclass_is_rebuilt_without_its_own_init_copy_or_setattr() -> None:
    caller = Guarded(IMAGE.copy())
    caller.__dict__["extra"] = "kept"  # state that is not a field
    Guarded.inits = 0
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(caller)
    got = seen[0]
    assert type(got) is Guarded and got is not caller and Guarded.inits == 0
    assert isinstance(got.image, torch.Tensor) and isinstance(caller.image, np.ndarray)
    assert (got.label, got.extra) == ("x", "kept")


@pytest.mark.parametrize("slots", [False, True], ids=["attrs", "attrs-slotted"])
@pytest.mark.requires("attrs")
def test_attrs_instance_is_rebuilt_without_its_own_init(slots: bool) -> None:
    attrs = importlib.import_module("attrs")

    @attrs.define(slots=slots, frozen=True)
    class Sample:
        image: Any
        label: str

        def __attrs_post_init__(self) -> None:
            if type(self.image) is not np.ndarray:
                raise AssertionError("memtype ran the class's __init__")

    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(Sample(IMAGE.copy(), "y"))
    assert type(seen[0]) is Sample and seen[0].label == "y"
    assert isinstance(seen[0].image, torch.Tensor)


@pytest.mark.parametrize("make", [
    lambda a: OrderedDict([("b", 1), ("image", a), ("a", 2)]),
    lambda a: defaultdict(list, {"b": 1, "image": a}),
], ids=["OrderedDict", "defaultdict"])
def test_ordereddict_and_defaultdict_keep_order_and_factory(make: Any) -> None:
    caller = make(IMAGE.copy())
    seen: list[Any] = []
    mt.torch(contract="any")(lambda v: seen.append(v))(caller)
    assert type(seen[0]) is type(caller) and list(seen[0]) == list(caller)
    assert isinstance(seen[0]["image"], torch.Tensor)
    assert getattr(seen[0], "default_factory", None) is getattr(caller, "default_factory", None)


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
