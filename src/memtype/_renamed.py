"""Keyword arguments renamed for one spelling per concept (docs/api.md): the old keyword
still works, with a DeprecationWarning naming the new one."""

from __future__ import annotations

import warnings
from typing import TypeVar

from memtype.errors import ArgumentTypeError

__all__ = ["renamed_argument"]

T = TypeVar("T")


def renamed_argument(function: str, old: str, new: str, old_value: T, new_value: object,
                     stacklevel: int = 3) -> T:
    """``old_value``, passed as ``old=`` to ``function``, now spelled ``new=`` (warns).

    The caller checks ``old_value is not None`` first (one check on a hot path); passing
    both spellings is an :class:`ArgumentTypeError`. ``stacklevel`` 3 points the warning at
    the caller of ``function``.
    """
    if new_value is not None:
        raise ArgumentTypeError(
            f"{function}() got {new}={new_value!r} and its old spelling {old}={old_value!r}; "
            f"expected {new}= only.")
    warnings.warn(f"{function}({old}=...) is deprecated: write {function}({new}=...) "
                  f"(one spelling per concept, docs/api.md).", DeprecationWarning,
                  stacklevel=stacklevel)
    return old_value
