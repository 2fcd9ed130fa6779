"""memtype's exceptions: one base class, each error also the matching builtin.

Catch :class:`MemtypeError` for anything memtype raises on purpose, or the builtin
(``TypeError``, ``ValueError``, ``FileNotFoundError`` ...) where that is what the
caller already handles.
"""

from __future__ import annotations

import functools
from typing import Any

__all__ = [
    "MemtypeError",
    "UnsupportedArrayError",
    "UnknownMemoryTypeError",
    "FrameworkNotInstalledError",
    "ImportOrderError",
    "MissingPackageError",
    "MemoryConversionError",
    "DeviceError",
    "ShapeError",
    "ContractError",
    "StoreKeyError",
    "CacheKeyError",
    "AllocationKeyError",
    "StoreNotFoundError",
    "StoreExistsError",
    "StoreFormatError",
    "StorePathError",
    "StoreNotADirectoryError",
    "StoreIsADirectoryError",
    "StoreReadOnlyError",
    "ConfigurationError",
    "PipelineError",
    "MemoryBudgetError",
    "NoImagesError",
    "DtypePolicyError",
    "CallOptionError",
    "StoreUsageError",
    "InvalidArgumentError",
    "ArgumentTypeError",
    "FieldError",
    "PipelineFileError",
    "PipelineSpecError",
    "StoreFullError",
    "CommandError",
    "SideOutputError",
    "InputWriteError",
    "ArrayAPIError",
    "StoreIndexError",
    "StoreAccessError",
    "StoreIOError",
    "InputCollisionError",
]


MESSAGE_LIMIT = 4000
"""The most characters of a message: a longer one (a huge value quoted as received) keeps its
start and end, and says how much was left out between them."""


def bounded(message: str, limit: int = MESSAGE_LIMIT) -> str:
    """``message``, its middle left out where it is longer than ``limit`` characters."""
    if len(message) <= limit:
        return message
    keep = (limit - 60) // 2
    return (f"{message[:keep]} ... ({len(message) - 2 * keep:,} characters left out) ... "
            f"{message[-keep:]}")


class MemtypeError(Exception):
    """Base class of every error memtype raises on purpose.

    A message longer than :data:`MESSAGE_LIMIT` characters is shortened in its middle (a
    value quoted as received can be any size: the error stays readable and small).
    """

    def __init__(self, *args: Any) -> None:
        super().__init__(*_bounded_args(args))


def _bounded_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    """An error's arguments, a single message :func:`bounded`."""
    if len(args) == 1 and isinstance(args[0], str) and len(args[0]) > MESSAGE_LIMIT:
        return (bounded(args[0]),)
    return args


class UnsupportedArrayError(MemtypeError, TypeError, ValueError):
    """Not an array of any known (and loaded) framework, or one that cannot leave it.

    Also a ``ValueError``: OpenHCS's ``detect_memory_type`` (and arraybridge's) raise
    ``ValueError`` for a value of no framework, and code written for it catches that.
    """


class UnknownMemoryTypeError(MemtypeError, ValueError):
    """A memory type name that no framework in the table carries."""


class FrameworkNotInstalledError(MemtypeError, ImportError):
    """The framework behind a memory type cannot be imported; the message has the install hint."""


class MissingPackageError(MemtypeError, ImportError):
    """An optional package a feature needs (tifffile, zarr, dask...) is not installed; the
    message names the feature and the extra that installs it."""


class ImportOrderError(MemtypeError, ImportError):
    """A framework import that would crash the interpreter in this order (refused instead)."""


class MemoryConversionError(MemtypeError, ValueError):
    """A conversion that cannot (or may not) be done.

    Attributes
    ----------
    source_type, target_type : str
        The memory type values of the requested conversion.
    reason : str
        Why it was refused, naming the blocked path.
    method : str
        The conversion mechanism that was tried (``"dlpack"``), or ``""``. OpenHCS code
        raises ``MemoryConversionError(source_type=..., target_type=..., method=...,
        reason=...)``; those keywords work here too.
    """

    def __init__(self, reason: str, source_type: str = "", target_type: str = "", *,
                 method: str = "") -> None:
        self.reason = reason
        self.source_type = source_type
        self.target_type = target_type
        self.method = method
        using = f" using {method}" if method else ""
        prefix = f"Cannot convert {source_type} -> {target_type}{using}: " if source_type else ""
        super().__init__(prefix + reason)

    def __reduce__(self) -> tuple[Any, tuple[str, str, str]]:
        return (functools.partial(type(self), method=self.method),
                (self.reason, self.source_type, self.target_type))


class DeviceError(MemtypeError, ValueError):
    """A device was requested that does not exist, or a GPU type was used without a GPU."""


class ShapeError(MemtypeError, ValueError):
    """An array has the wrong number of dimensions or mismatched shapes."""


class ContractError(MemtypeError, ValueError):
    """A decorated function returned something its output contract forbids."""


class _ReadableKeyError(MemtypeError, KeyError):
    """A KeyError whose message prints as written (KeyError itself quotes its argument)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class StoreKeyError(_ReadableKeyError, ValueError):
    """A storage name that is not registered: a store backend, a FileManager backend.

    Also a ``ValueError``: polystore's and OpenHCS's ``FileManager`` raise one
    (``StorageResolutionError``) for an unknown backend.
    """


class CacheKeyError(_ReadableKeyError):
    """A key that is not in a :class:`~memtype.gpu.GPUTensorCache`."""


class AllocationKeyError(_ReadableKeyError):
    """An array a GPU memory manager or pool did not allocate, or released already."""


class StoreNotFoundError(MemtypeError, FileNotFoundError):
    """A path that does not exist in a store."""


class StoreExistsError(MemtypeError, FileExistsError):
    """A path that already exists, written without ``overwrite=True``."""


class StoreFormatError(MemtypeError, ValueError):
    """Data that a storage format cannot hold, an unsupported extension, or a stored file that
    is not valid in its format (corrupt, truncated, tampered metadata)."""


class StorePathError(MemtypeError, ValueError):
    """A path that escapes the store root (``..`` or a symbolic link leading outside), a file
    where a directory is expected, a symbolic link loop, or a name too long for the file
    system."""


class StoreNotADirectoryError(NotADirectoryError, StorePathError):  # OSError first: errno kept
    """A file where a directory is expected (``list_files`` of a file, a file in the way of a
    path's parents); a ``StorePathError`` that is also the ``NotADirectoryError`` the file
    system (and polystore) raise."""

    def __init__(self, *args: Any) -> None:  # OSError's __init__ comes before MemtypeError's
        super().__init__(*_bounded_args(args))


class StoreIsADirectoryError(IsADirectoryError, StorePathError):  # OSError first: errno kept
    """A directory where a file is expected (``load`` of a directory, ``delete`` of a non-empty
    directory); a ``StorePathError`` that is also the ``IsADirectoryError`` the file system
    (and polystore) raise."""

    def __init__(self, *args: Any) -> None:  # OSError's __init__ comes before MemtypeError's
        super().__init__(*_bounded_args(args))


class StoreReadOnlyError(MemtypeError, PermissionError):
    """A write to a store that does not support writes."""


class ConfigurationError(MemtypeError, RuntimeError):
    """A framework setting that can no longer be applied (the framework already started)."""


class PipelineError(MemtypeError, RuntimeError):
    """A pipeline step failed; the message names the group, step and function."""


class MemoryBudgetError(MemoryError, MemtypeError):  # MemoryError first: see below
    """An allocation that would exceed a memory budget (a pool's limit or a memory fraction).

    MemoryError comes first so that the class is made by MemoryError's own ``__new__``:
    distributed's exception pickling (tblib) remakes an error with its class's ``__new__``,
    which refused this one the other way round, so a budget error raised on a dask worker
    never reached the driver.
    """

    def __init__(self, *args: Any) -> None:  # MemoryError's __init__ comes before MemtypeError's
        super().__init__(*_bounded_args(args))


class NoImagesError(MemtypeError, FileNotFoundError):
    """No input file matches a pipeline's file-name pattern."""


class InputCollisionError(MemtypeError, ValueError):
    """Two input images that land on one plate field (the same well, site, channel, z and t)."""


class DtypePolicyError(MemtypeError, ValueError):
    """A dtype conversion the dtype policy refuses (complex to real, an unknown scaling)."""


class CallOptionError(MemtypeError, ValueError):
    """A decorated function was called with an invalid call-time option value."""


class StoreUsageError(MemtypeError, ValueError):
    """A store used wrongly: a negative budget, a release without a matching acquire."""


class InvalidArgumentError(MemtypeError, ValueError):
    """An argument of the right type with a value memtype cannot use (a size, a name...)."""


class ArgumentTypeError(MemtypeError, TypeError):
    """An argument of a type memtype cannot use where it was passed."""


class FieldError(_ReadableKeyError):
    """A filename-pattern or grouping field that is missing or unknown."""


class PipelineFileError(MemtypeError, ImportError):
    """A pipeline file that cannot be imported as a Python module."""


class PipelineSpecError(MemtypeError, ValueError):
    """A pipeline file written as data (YAML) that does not say a valid pipeline."""


class StoreFullError(MemtypeError, OSError):
    """A write stopped because the device is full (``errno.ENOSPC``); nothing was replaced."""


class CommandError(MemtypeError):
    """A user error on the ``memtype`` command line: printed as one line, exit code 2."""


class SideOutputError(MemtypeError, ValueError):
    """A step's side output whose table columns would overwrite the pattern's field columns."""


class InputWriteError(MemtypeError, RuntimeError):
    """A decorated function wrote to an input it had to leave unchanged."""


class ArrayAPIError(MemtypeError, TypeError):
    """An ``@mt.array_api`` function that cannot run as written where its data is: a write
    into an immutable array (JAX), a dtype the framework has no kernels for."""


class StoreIndexError(MemtypeError, IndexError):
    """An index outside a stored array: ``load(index=...)`` of a zarr field, a TIFF page."""


class StoreAccessError(MemtypeError, PermissionError):
    """The file system refused access to a store path (permissions); ``errno`` is kept."""


class StoreIOError(MemtypeError, OSError):
    """Any other operating-system error on a store path (an I/O error...); ``errno`` is kept."""
