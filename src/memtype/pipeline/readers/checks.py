"""Numbers read from a plate's metadata, checked where they are read.

A vendor's metadata file is input like any other: a count, a position or a pixel size in it
may be missing, not a number, negative, zero, NaN or infinite. Each reader reads its numbers
through these functions, so that a bad one is a :class:`~memtype.errors.StoreFormatError` (a
``ValueError``) naming the file, the key and the value, at the moment it is read, rather than
a wrong well, a site 0, or a failure far downstream.
"""

from __future__ import annotations

import math

from memtype.errors import StoreFormatError

__all__ = ["whole", "length", "finite", "bounded"]


def whole(value: object, where: str, key: str, *, minimum: int = 0,
          maximum: int | None = None) -> int:
    """``value`` (text or a number) as a whole number from ``minimum`` to ``maximum``.

    Raises
    ------
    StoreFormatError
        It is not a whole number in that range (a ``ValueError``), naming ``where``, ``key``
        and the value.
    """
    text = str(value).strip()
    try:
        number = int(text)
    except ValueError:
        number = None
    if number is None or number < minimum or (maximum is not None and number > maximum):
        span = f"from {minimum} to {maximum}" if maximum is not None else f"of {minimum} or more"
        raise StoreFormatError(f"{where}: {key} is {text[:80]!r}; expected a whole number {span}.")
    return number


def length(value: object, where: str, key: str, scale: float = 1.0) -> float:
    """``value`` (text or a number) times ``scale``: a finite length greater than 0.

    Raises
    ------
    StoreFormatError
        It is not a number, or not finite and positive (a ``ValueError``), naming ``where``,
        ``key`` and the value.
    """
    text, number = _scaled(value, scale)
    if not math.isfinite(number) or number <= 0:
        raise StoreFormatError(f"{where}: {key} is {text[:80]!r}; expected a finite length "
                               "greater than 0.")
    return number


def finite(value: object, where: str, key: str, scale: float = 1.0) -> float:
    """``value`` (text or a number) times ``scale``: a finite number (a position).

    Raises
    ------
    StoreFormatError
        It is not a number, or not finite (NaN, inf; a ``ValueError``), naming ``where``,
        ``key`` and the value.
    """
    text, number = _scaled(value, scale)
    if not math.isfinite(number):
        raise StoreFormatError(f"{where}: {key} is {text[:80]!r}; expected a finite number.")
    return number


def _scaled(value: object, scale: float) -> tuple[str, float]:
    """``value``'s text, and its number times ``scale`` (NaN where it is no number)."""
    text = str(value).strip()
    try:
        return text, float(text) * scale
    except ValueError:
        return text, math.nan


def bounded(count: int, limit: int, where: str, what: str) -> None:
    """Refuse a size that metadata claims beyond what the plate on disk can hold.

    Raises
    ------
    StoreFormatError
        ``count`` exceeds ``limit`` (a ``ValueError``); ``what`` names the fields and values.
    """
    if count > limit:
        raise StoreFormatError(f"{where}: {what} claims {count:,} images, more than the plate "
                               f"on disk can hold (at most {limit:,}); the metadata is corrupt "
                               "or not this plate's.")
