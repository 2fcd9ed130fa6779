"""A package's names imported at first use: the one lazy loader behind each package's
module-level ``__getattr__``."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_loader"]


def lazy_loader(namespace: dict[str, Any], exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``namespace`` (a package's ``globals()``).

    ``exports`` maps a name to the module that defines it (a name whose module is the
    package's own submodule of that name, ``"gpu": "memtype.gpu"``, is that module; a
    function named like the module it lives in, ``"variants": "memtype.pipeline.model.variants"``,
    is the function). The value is imported at first use and then cached in ``namespace``;
    any other name is an ``AttributeError``.
    """
    package = namespace["__name__"]

    def load(name: str) -> Any:
        target = exports.get(name)
        if target is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module = importlib.import_module(target)
        value = module if target == f"{package}.{name}" else getattr(module, name)
        namespace[name] = value
        return value

    return load
