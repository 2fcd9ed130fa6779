"""FileManager: one object that routes storage calls to named backends.

>>> from memtype.storage import FileManager, DiskStore, MemoryStore, ZarrStore
>>> fm = FileManager({"disk": DiskStore("/data/out"), "memory": MemoryStore(),
...                   "zarr": ZarrStore("/data/out/plate.zarr")})             # doctest: +SKIP
>>> fm.save(image, "A01/s1.tif", "disk", parents=True)                      # doctest: +SKIP
>>> fm.load("A01/s1.tif", "disk")                                           # doctest: +SKIP

Every call names its backend: the manager never guesses one from a path or an extension.
Errors from a backend pass through with their own type (``StoreNotFoundError`` is still a
``FileNotFoundError``); only an unknown backend name is the manager's own error
(``StoreKeyError``, also a ``KeyError``).

Pickling a FileManager (to send it to a worker process) pickles each backend as its
registered name and constructor parameters; the worker rebuilds fresh stores. Disk and
zarr stores therefore see the same files; an in-memory store arrives empty.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import MappingProxyType
from typing import Any

from memtype.errors import ArgumentTypeError, StoreKeyError
from memtype.storage._registry import get_store_class
from memtype.storage.base import PathLike, Store, StoreStat, check_type

__all__ = ["FileManager"]


class FileManager:
    """Route ``save`` / ``load`` / ``list_files`` ... to backends chosen by name.

    Parameters
    ----------
    registry : mapping of str to Store
        Backend name -> store instance (``{"disk": DiskStore(root), ...}``).

    Raises
    ------
    ArgumentTypeError
        ``registry`` is not a mapping of str to :class:`Store` (also a ``TypeError``).
    """

    def __init__(self, registry: Mapping[str, Store]) -> None:
        check_type("FileManager's registry", registry, Mapping,
                   "a mapping of backend name (str) to Store")
        stores: dict[str, Store] = {}
        for name, store in registry.items():
            check_type("A FileManager backend name", name, str, "a str")
            if not isinstance(store, Store):
                raise ArgumentTypeError(
                    f"FileManager backend {name!r} must be a memtype Store; received "
                    f"{type(store).__name__}."
                )
            stores[name] = store
        self._stores = stores

    @classmethod
    def from_spec(cls, spec: Mapping[str, tuple[str, Mapping[str, Any]]]) -> FileManager:
        """Build from ``{name: (registered store name, constructor parameters)}``.

        >>> FileManager.from_spec({"disk": ("disk", {"root": "/data"})})   # doctest: +SKIP

        Raises
        ------
        ArgumentTypeError
            ``spec`` or one of its entries has the wrong shape.
        StoreKeyError
            A registered store name that does not exist.
        """
        expected = "a mapping of backend name to (registered store name, parameters)"
        check_type("FileManager.from_spec's spec", spec, Mapping, expected)
        stores: dict[str, Store] = {}
        for name, entry in spec.items():
            if not (isinstance(entry, tuple) and len(entry) == 2
                    and isinstance(entry[1], Mapping)):
                check_type(f"The spec of backend {name!r}", entry, type(None),
                           "a (registered store name, parameters mapping) pair")
            stores[name] = get_store_class(entry[0])(**dict(entry[1]))
        return cls(stores)

    def spec(self) -> dict[str, tuple[str, dict[str, Any]]]:
        """``{name: (registered store name, constructor parameters)}`` of every backend."""
        return {name: (store.registry_name, store.params()) for name, store in self._stores.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (FileManager.from_spec, (self.spec(),))

    @property
    def backends(self) -> Mapping[str, Store]:
        """Read-only view of the backends by name."""
        return MappingProxyType(self._stores)

    def store(self, backend: str) -> Store:
        """The store registered as ``backend``.

        Raises
        ------
        StoreKeyError
            No backend has that name (``None`` or a number included: a lookup, like a
            dict's).
        """
        store = self._stores.get(backend) if isinstance(backend, str) else None
        if store is None:
            raise StoreKeyError(
                f"Unknown backend {backend!r}. Expected one of: "
                f"{', '.join(self._stores) or '(none registered)'}."
            )
        return store

    def __repr__(self) -> str:
        return f"FileManager({self._stores!r})"

    # -- routed calls -------------------------------------------------------------------
    def save(self, data: Any, path: PathLike, backend: str, **options: Any) -> None:
        """``store(backend).save(data, path, **options)``."""
        self.store(backend).save(data, path, **options)

    def load(self, path: PathLike, backend: str, **options: Any) -> Any:
        """``store(backend).load(path, **options)``."""
        return self.store(backend).load(path, **options)

    def save_batch(self, items: Sequence[Any], paths: Sequence[PathLike], backend: str,
                   **options: Any) -> None:
        """``store(backend).save_batch(items, paths, **options)``."""
        self.store(backend).save_batch(items, paths, **options)

    def load_batch(self, paths: Sequence[PathLike], backend: str, **options: Any) -> list[Any]:
        """``store(backend).load_batch(paths, **options)``."""
        return self.store(backend).load_batch(paths, **options)

    def exists(self, path: PathLike, backend: str) -> bool:
        """``store(backend).exists(path)``."""
        return self.store(backend).exists(path)

    def is_file(self, path: PathLike, backend: str) -> bool:
        """``store(backend).is_file(path)``."""
        return self.store(backend).is_file(path)

    def is_dir(self, path: PathLike, backend: str) -> bool:
        """``store(backend).is_dir(path)``."""
        return self.store(backend).is_dir(path)

    def list_files(self, directory: PathLike, backend: str, pattern: str | None = None,
                   extensions: Iterable[str] | str | None = None,
                   recursive: bool = False) -> list[str]:
        """``store(backend).list_files(directory, pattern, extensions, recursive)``."""
        return self.store(backend).list_files(directory, pattern, extensions, recursive)

    def list_dir(self, directory: PathLike, backend: str) -> list[str]:
        """``store(backend).list_dir(directory)``."""
        return self.store(backend).list_dir(directory)

    def ensure_directory(self, path: PathLike, backend: str) -> str:
        """``store(backend).ensure_directory(path)``."""
        return self.store(backend).ensure_directory(path)

    def delete(self, path: PathLike, backend: str) -> None:
        """``store(backend).delete(path)``."""
        self.store(backend).delete(path)

    def delete_all(self, path: PathLike, backend: str) -> None:
        """``store(backend).delete_all(path)``."""
        self.store(backend).delete_all(path)

    def move(self, src: PathLike, dst: PathLike, backend: str, **options: Any) -> None:
        """``store(backend).move(src, dst, **options)``."""
        self.store(backend).move(src, dst, **options)

    def copy(self, src: PathLike, dst: PathLike, backend: str, **options: Any) -> None:
        """``store(backend).copy(src, dst, **options)``."""
        self.store(backend).copy(src, dst, **options)

    def stat(self, path: PathLike, backend: str) -> StoreStat:
        """``store(backend).stat(path)``."""
        return self.store(backend).stat(path)

    def transfer(self, src: PathLike, src_backend: str, dst: PathLike, dst_backend: str,
                 **save_options: Any) -> None:
        """Copy one file between backends: ``load`` from one, ``save`` to the other.

        Parameters
        ----------
        src, dst : str or os.PathLike
            Source and destination paths.
        src_backend, dst_backend : str
            Backend names.
        **save_options
            Passed to the destination's ``save`` (``overwrite``, ``parents``, format options).
        """
        data = self.store(src_backend).load(src)
        self.store(dst_backend).save(data, dst, **save_options)
