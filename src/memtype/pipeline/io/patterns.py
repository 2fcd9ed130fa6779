"""Filename patterns with named fields, and grouping of matched images into tasks and stacks.

A pattern is a filename with ``{field}`` placeholders: ``{well}_s{site}_w{channel}_z{z:03d}.tif``
(the default, ImageXpress style: ``A01_s1_w1_z001.tif``). ``{well}`` matches a plate well
(``A01``, ``B12``, ``AA3``); every other ``{name}`` matches digits and is read as an ``int``;
``{name:s}`` matches any text without a path separator. A format spec such as ``03d`` pads the
number when a filename is built with :meth:`FilenamePattern.format` and is accepted with any
number of digits when matching.

A pattern may name directory levels too: ``TimePoint_{t}/ZStep_{z}/{well}_s{site}_w{channel}.tif``
or ``{well}/{site}/{channel}_z{z}.tif`` match the last as many path components as the pattern has
(a pattern without ``/`` matches the file name alone, in any folder). The extension (the text
after the last ``.`` of the pattern) matches in any case: ``.tif`` matches ``.TIF``.

Well names are read as a row and a column: ``A01``, ``A1``, ``a001`` are all well ``A01``
(:func:`canonical_well`); :func:`match_files` records them so, and two files that land on one
set of field values are an :class:`~memtype.errors.InputCollisionError` naming both.
"""

from __future__ import annotations

import functools
import re
import string
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from memtype.errors import FieldError, InputCollisionError, InvalidArgumentError, ShapeError
from memtype.storage.base import natural_key

__all__ = [
    "DEFAULT_PATTERN",
    "FilenamePattern",
    "ImageRecord",
    "FieldValue",
    "Key",
    "match_files",
    "group_records",
    "stack_keys",
    "key_label",
    "key_order",
    "split_well",
    "canonical_well",
    "check_unique",
    "field_sort_key",
]

DEFAULT_PATTERN = "{well}_s{site}_w{channel}_z{z:03d}.tif"
"""ImageXpress-style names: well, site, wavelength (channel), z-plane."""

FieldValue = int | str
Key = tuple[tuple[str, FieldValue], ...]
"""Hashable field values in the pattern's field order: ``(("well", "A01"), ("site", 1))``."""

_WELL_RE = r"[A-Za-z]{1,2}\d{1,3}"
_TEXT_RE = r"[^/\\]+?"
_INT_RE = r"\d+"


@dataclass(frozen=True)
class _Field:
    """One placeholder of a pattern."""

    name: str
    spec: str

    @property
    def is_text(self) -> bool:
        """Whether values are strings (``{well}``, ``{name:s}``) rather than integers."""
        return self.name == "well" or self.spec.endswith("s")

    @property
    def regex(self) -> str:
        """The regular expression a value of this field matches."""
        if self.name == "well" and not self.spec:
            return _WELL_RE
        return _TEXT_RE if self.is_text else _INT_RE


def _parse_template(template: str) -> tuple[list[str], list[_Field]]:
    """Split a template into literal parts and fields (``string.Formatter`` syntax)."""
    literals: list[str] = []
    fields: list[_Field] = []
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:  # an unmatched brace
        raise InvalidArgumentError(
            f"Pattern {template!r} is not a template: {exc}; expected fields in braces, e.g. "
            "{well}_s{site}_w{channel}_z{z:03d}.tif (a literal brace is written twice).") from exc
    for literal, name, spec, conversion in parsed:
        literals.append(literal)
        if name is None:
            continue
        if not name.isidentifier() or conversion:
            raise InvalidArgumentError(
                f"Pattern field {{{name}}} in {template!r} is not a plain name; expected "
                "{name} or {name:spec}, e.g. {well}_s{site}_w{channel}_z{z:03d}.tif."
            )
        if any(f.name == name for f in fields):
            raise InvalidArgumentError(f"Pattern {template!r} names the field {name!r} twice.")
        field = _Field(name, spec or "")
        _check_spec(field, template)
        fields.append(field)
    return literals, fields


def _check_spec(field: _Field, template: str) -> None:
    """Refuse a format spec its field's values cannot be written with (``{z:xyz}``)."""
    try:
        format("A01" if field.is_text else 1, field.spec)
    except ValueError as exc:
        kind = "text" if field.is_text else "an integer"
        raise InvalidArgumentError(
            f"Pattern field {{{field.name}:{field.spec}}} in {template!r} has a format spec "
            f"{kind} cannot be written with ({exc}); expected e.g. {{z:03d}} or {{well}}."
        ) from exc


def _literal_regex(literal: str, last: bool) -> str:
    """A literal part of a template as a regex; the extension of the ``last`` part (after
    its last ``.``) in any case."""
    dot = literal.rfind(".")
    if not last or dot < 0 or "/" in literal[dot:]:
        return re.escape(literal)
    return re.escape(literal[:dot]) + "(?i:" + re.escape(literal[dot:]) + ")"


@dataclass(frozen=True)
class FilenamePattern:
    """A filename template with named fields.

    Parameters
    ----------
    template : str
        For example ``"{well}_s{site}_w{channel}_z{z:03d}.tif"`` or
        ``"{well}_s{site}_c{channel}_z{z}.tif"``. Literal text must match exactly.

    Raises
    ------
    ValueError
        A template without fields, a field named twice, or a malformed placeholder.

    Examples
    --------
    >>> p = FilenamePattern("{well}_s{site}_w{channel}_z{z:03d}.tif")
    >>> p.match("B03_s2_w1_z004.tif")
    {'well': 'B03', 'site': 2, 'channel': 1, 'z': 4}
    >>> p.format(well="B03", site=2, channel=1, z=4)
    'B03_s2_w1_z004.tif'
    """

    template: str = DEFAULT_PATTERN
    _fields: tuple[_Field, ...] = field(init=False, repr=False, compare=False)
    _regex: re.Pattern[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        literals, fields = _parse_template(self.template)
        if not fields:
            raise InvalidArgumentError(
                f"Pattern {self.template!r} has no {{field}}; expected e.g. "
                "{well}_s{site}_w{channel}_z{z:03d}.tif."
            )
        parts: list[str] = []
        for i, literal in enumerate(literals):
            parts.append(_literal_regex(literal, last=i == len(literals) - 1))
            if i < len(fields):
                parts.append(f"(?P<{fields[i].name}>{fields[i].regex})")
        object.__setattr__(self, "_fields", tuple(fields))
        object.__setattr__(self, "_regex", re.compile("".join(parts) + r"\Z"))

    def __reduce__(self) -> tuple[type, tuple[str]]:
        return (FilenamePattern, (self.template,))

    @property
    def fields(self) -> tuple[str, ...]:
        """The field names, in template order."""
        return tuple(f.name for f in self._fields)

    @property
    def levels(self) -> int:
        """How many path components the pattern matches (1: the file name alone)."""
        return self.template.count("/") + 1

    def match(self, name: str) -> dict[str, FieldValue] | None:
        """The field values of a path (its last :attr:`levels` components), or None if it does
        not match."""
        parts = name.replace("\\", "/").split("/")
        if len(parts) < self.levels:
            return None
        m = self._regex.match("/".join(parts[-self.levels:]))
        if m is None or any(f.is_text and m[f.name] in (".", "..") for f in self._fields):
            return None  # "." and "..": folder names, never a well's or a field's value
        return {f.name: (m[f.name] if f.is_text else int(m[f.name])) for f in self._fields}

    def format(self, **values: FieldValue) -> str:
        """The filename for these field values (every field must be given).

        Raises
        ------
        FieldError
            A field of the template is missing from ``values`` (a ``KeyError``).
        InvalidArgumentError
            A value its field's format spec cannot write (a ``ValueError``).
        """
        missing = [f for f in self.fields if f not in values]
        if missing:
            raise FieldError(f"Pattern {self.template!r} needs values for {missing}.")
        try:
            return self.template.format(**values)
        except (ValueError, TypeError) as exc:  # a value its field's spec cannot write
            given = {f.name: values[f.name] for f in self._fields}
            raise InvalidArgumentError(
                f"Pattern {self.template!r} cannot write the values {given}: {exc}; expected "
                "an integer for each field whose spec is numeric (e.g. {z:03d}).") from exc


@dataclass(frozen=True, slots=True)
class ImageRecord:
    """One image file found by a pattern: its path in the store and its field values."""

    path: str
    key: Key

    @property
    def fields(self) -> dict[str, FieldValue]:
        """The field values as a dict."""
        return dict(self.key)

    def get(self, name: str) -> FieldValue:
        """The value of one field."""
        return self.fields[name]


def field_sort_key(value: object) -> tuple[tuple[int, int | str], ...]:
    """A sort key for field values: ``A2`` before ``A10``, ints numerically."""
    if isinstance(value, int):
        return ((0, value),)
    return natural_key(str(value))


def key_order(key: Key) -> tuple[tuple[tuple[int, int | str], ...], ...]:
    """A sort key putting keys in the natural order of their values."""
    return tuple(field_sort_key(v) for _, v in key)


def match_files(paths: Iterable[str], pattern: FilenamePattern) -> list[ImageRecord]:
    """The records of the paths whose names match ``pattern``, in natural order, with their
    well names canonical (``A1`` -> ``A01``).

    Raises
    ------
    InputCollisionError
        Two paths land on the same field values (a ``ValueError``): see :func:`check_unique`.
    """
    records: list[ImageRecord] = []
    for path in paths:
        values = pattern.match(path)
        if values is not None:
            if isinstance(values.get("well"), str):
                values["well"] = canonical_well(str(values["well"]))
            records.append(ImageRecord(path, tuple(values.items())))
    records.sort(key=lambda r: key_order(r.key))
    check_unique(records)
    return records


def check_unique(records: Sequence[ImageRecord]) -> None:
    """Refuse two records with the same field values, naming both files.

    Two names of one well (``A01_s1_w1_z001.tif``, ``A1_s1_w1_z001.tif``) or one name in two
    folders the pattern does not tell apart would write one plate field twice: the run
    would keep one and report both done.

    Raises
    ------
    InputCollisionError
        Two records with one key (a ``ValueError``).
    """
    seen: dict[Key, str] = {}
    for record in records:
        first = seen.setdefault(record.key, record.path)
        if first != record.path:
            raise InputCollisionError(
                f"Input files {first!r} and {record.path!r} are the same image "
                f"({key_label(record.key)}; well names are read as row and column, so "
                "A01 = A1 = a001); each image needs its own field values. Remove one, or "
                "add the part of the name or folder that tells them apart to the pattern "
                "(e.g. 'TimePoint_{t}/{well}_s{site}_w{channel}.tif').")


def _project(key: Key, names: Sequence[str], keep: bool) -> Key:
    """The part of ``key`` whose names are (``keep``) or are not in ``names``."""
    return tuple((k, v) for k, v in key if (k in names) == keep)


def _check_names(records: Sequence[ImageRecord], names: Sequence[str], what: str) -> None:
    """Raise a clear error when a component is not a field of the records."""
    if not records:
        return
    have = [k for k, _ in records[0].key]
    unknown = [n for n in names if n not in have]
    if unknown:
        raise InvalidArgumentError(
            f"{what} {unknown} are not fields of the filename pattern; the fields are {have}."
        )


def group_records(records: Sequence[ImageRecord],
                  by: Sequence[str]) -> dict[Key, list[ImageRecord]]:
    """Records grouped by the values of the ``by`` fields, groups and members in natural order.

    Raises
    ------
    ValueError
        A name in ``by`` is not a field of the records.
    """
    _check_names(records, by, "Group components")
    groups: dict[Key, list[ImageRecord]] = {}
    for record in records:
        groups.setdefault(_project(record.key, by, True), []).append(record)
    return {k: groups[k] for k in sorted(groups, key=key_order)}


def stack_keys(keys: Sequence[Key], variable_components: Sequence[str],
               names: Sequence[str] | None = None) -> dict[Key, list[int]]:
    """Indices of ``keys`` grouped into stacks: equal outside ``variable_components``,
    sorted inside. ``names`` (the images' files) name the two images that collide.

    Raises
    ------
    ValueError
        Two images with the same key (a ``ShapeError``).
    """
    stacks: dict[Key, list[int]] = {}
    for i, key in enumerate(keys):
        stacks.setdefault(_project(key, variable_components, False), []).append(i)
    for fixed, members in stacks.items():
        members.sort(key=lambda i: key_order(_project(keys[i], variable_components, True)))
        first: dict[Key, int] = {}
        for i in members:
            j = first.setdefault(_project(keys[i], variable_components, True), i)
            if j != i:
                which = (f" ({names[j]!r} and {names[i]!r})" if names is not None
                         else f" (images {j} and {i})")
                raise ShapeError(
                    f"Two images of stack {key_label(fixed)}{which} have the same "
                    f"{list(variable_components)} values; each slice of a stack needs its own.")
    return {k: stacks[k] for k in sorted(stacks, key=key_order)}


def key_label(key: Key | Mapping[str, FieldValue]) -> str:
    """A short readable label: ``well=A01 site=2`` (``all`` for the empty key)."""
    items = key.items() if isinstance(key, Mapping) else key
    text = " ".join(f"{k}={v}" for k, v in items)
    return text or "all"


@functools.lru_cache(maxsize=4096)
def canonical_well(well: str) -> str:
    """A well name as row letters (upper case) and a column of at least two digits:
    ``A1``, ``a001``, ``A01`` -> ``A01``; a name that is not letters and digits stays as is."""
    m = re.fullmatch(r"([A-Za-z]+)(\d+)", well)
    return well if m is None else f"{m[1].upper()}{int(m[2]):02d}"


def split_well(well: str) -> tuple[str, int]:
    """A well name's row letters and column number: ``"B03"`` -> ``("B", 3)``.

    Raises
    ------
    ValueError
        The name is not letters followed by digits.
    """
    m = re.fullmatch(r"([A-Za-z]+)(\d+)", well)
    if m is None:
        raise InvalidArgumentError(
            f"Well name {well!r} is not a row letter and column number like 'B03'.")
    return m[1].upper(), int(m[2])
