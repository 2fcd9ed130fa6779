"""memtype's beneath-the-root zarr store (``memtype.omezarr.beneath.BeneathStore``) against
zarr-python's store conformance suite (``zarr.testing.store.StoreTests``), as zarr's own
stores are tested: every read, write, listing and delete zarr may ask of a store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("zarr.testing.store", reason="zarr with its testing module")
pytest_asyncio = pytest.importorskip("pytest_asyncio", reason="pytest-asyncio")

from zarr.core.buffer import Buffer, cpu  # noqa: E402
from zarr.testing.store import StoreTests  # noqa: E402

from memtype.errors import StorePathError  # noqa: E402
from memtype.omezarr.beneath import BeneathStore  # noqa: E402
from memtype.omezarr.layout import layout_for  # noqa: E402
from memtype.omezarr.paths import PlatePaths  # noqa: E402

# the suite mixes async and plain tests; its plain ones need no event loop
pytestmark = [pytest.mark.asyncio,
              pytest.mark.filterwarnings("ignore:The test <Function .* is marked with "
                                         "'@pytest.mark.asyncio' but it is not an async")]


class TestBeneathStore(StoreTests[BeneathStore, cpu.Buffer]):
    store_cls = BeneathStore
    buffer_cls = cpu.Buffer

    async def set(self, store: BeneathStore, key: str, value: Buffer) -> None:
        path = Path(store.paths.root, store.prefix, key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(value.to_bytes())

    async def get(self, store: BeneathStore, key: str) -> Buffer:
        return self.buffer_cls.from_bytes(Path(store.paths.root, store.prefix, key).read_bytes())

    @pytest.fixture(params=["", "A/1/0"], ids=["plate", "field"])
    def store_kwargs(self, tmp_path: Path, request: pytest.FixtureRequest) -> dict[str, Any]:
        """A store of the whole plate, and one of a field (as ZarrStore opens its arrays)."""
        root = tmp_path / "plate.zarr"
        root.mkdir()
        return {"paths": PlatePaths(str(root), False, layout_for("0.5")),
                "prefix": request.param}

    @pytest_asyncio.fixture
    async def store(self, open_kwargs: dict[str, Any]) -> BeneathStore:
        return await self.store_cls.open(**open_kwargs)

    @pytest_asyncio.fixture
    async def store_not_open(self, store_kwargs: dict[str, Any]) -> BeneathStore:
        return self.store_cls(**store_kwargs)

    def test_store_repr(self, store: BeneathStore) -> None:
        where = os.path.normpath(os.path.join(store.paths.root, store.prefix))
        assert str(store) == f"memtype-plate://{where}"

    def test_store_supports_writes(self, store: BeneathStore) -> None:
        assert store.supports_writes

    def test_store_supports_listing(self, store: BeneathStore) -> None:
        assert store.supports_listing


@pytest_asyncio.fixture
async def field_store(tmp_path: Path) -> BeneathStore:
    """A store rooted at the field ``A/1/0`` of a plate; a file ``x`` lies beside the field."""
    root = tmp_path / "plate.zarr"
    (root / "A" / "1" / "0").mkdir(parents=True)
    (root / "A" / "1" / "0" / "zarr.json").write_bytes(b"{}")
    (root / "A" / "1" / "x").write_bytes(b"beside")
    paths = PlatePaths(str(root), False, layout_for("0.5"))
    return await BeneathStore.open(paths=paths, prefix="A/1/0")


async def test_a_field_store_lists_only_its_field(field_store: BeneathStore) -> None:
    assert [k async for k in field_store.list()] == ["zarr.json"]


@pytest.mark.parametrize("key", ["../x", "./zarr.json", "/zarr.json", "a//b", ".."])
async def test_a_key_that_is_not_plain_is_refused(field_store: BeneathStore, key: str) -> None:
    """Before: ``get("../x")`` of a field's store read the file beside the field."""
    with pytest.raises(StorePathError, match="Invalid zarr key"):
        await field_store.get(key, prototype=cpu.buffer_prototype)


async def test_clear_empties_the_hierarchy_and_keeps_its_root(field_store: BeneathStore) -> None:
    """Before: ``clear()`` (``delete_dir("")``) raised StorePathError."""
    await field_store.clear()
    assert [k async for k in field_store.list()] == []
    assert Path(field_store.paths.root, "A/1/0").is_dir()
    assert Path(field_store.paths.root, "A/1/x").read_bytes() == b"beside"
