"""Names that become paths: one rule for every name a run turns into a file or folder name.

A step's name (``<step>.zarr``), a side-output table's (``<table>.csv``, ``<field>/tables/
<table>``), a label image's (``<field>/labels/<name>``) and a channel's are written as one
component of a path inside the output. Each is checked where it is declared, by
:func:`check_path_name`: 1 to 128 characters, letters, digits, ``_``, ``-`` and ``.``,
starting with a letter, a digit or ``_``. So a name is never empty, never ``.`` or ``..``, never
hidden (``.memtype`` is the run's own state), never holds a separator (``a/b``, ``a\\b``)
and is never absolute: it names one entry of the folder it is written in, and nothing
outside the output.

A table name is also never one of memtype's own ROI tables (:func:`check_table_name`): the
field's ``FOV_ROI_table`` and ``well_ROI_table`` and a label image's ``<labels>_ROI_table``
are written into every field, and a side output of that name would replace them.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.omezarr.assemble import FIELD_ROI_TABLES

__all__ = ["MAX_NAME_LENGTH", "check_path_name", "check_table_name", "check_labels_name"]

MAX_NAME_LENGTH = 128
"""The longest name (characters): with a suffix (``.zarr``, ``.csv``) well under the 255
bytes a file name may have on common file systems."""
_NAME = re.compile(r"\w[\w.\-]*")
_ROI_SUFFIX = "_ROI_table"
"""The ending of every ROI table memtype writes (``FIELD_ROI_TABLES``, ``<labels>_ROI_table``)."""
_RULE = (f"a name of 1 to {MAX_NAME_LENGTH} letters, digits, '_', '-' or '.', starting with "
         "a letter, a digit or '_' (e.g. 'nuclei')")


def check_path_name(name: object, what: str, reserved: Iterable[str] = ()) -> str:
    """Check a name that becomes one component of a path in the output; returns it.

    Parameters
    ----------
    name : object
        The name as declared.
    what : str
        What it names, for the message (``"FunctionStep: outputs[0]"``).
    reserved : iterable of str
        Names memtype writes itself in the same place (compared ignoring case, as a
        case-insensitive file system would).

    Raises
    ------
    ArgumentTypeError
        ``name`` is not a ``str`` (a ``TypeError``).
    InvalidArgumentError
        ``name`` breaks the rule in the module docstring, or is reserved (a ``ValueError``).

    Examples
    --------
    >>> check_path_name("nuclei", "labels")
    'nuclei'
    >>> check_path_name("../x", "labels")
    Traceback (most recent call last):
    ...
    memtype.errors.InvalidArgumentError: labels must be a name of 1 to 128 letters, ...
    """
    if not isinstance(name, str):
        raise ArgumentTypeError(f"{what} must be a str ({_RULE}); received "
                                f"{type(name).__name__} {name!r}.")
    if len(name) > MAX_NAME_LENGTH or not _NAME.fullmatch(name):
        raise InvalidArgumentError(f"{what} must be {_RULE}, since it becomes a file or "
                                   f"folder name in the output; received {name!r}.")
    taken = {r.casefold(): r for r in reserved}
    if name.casefold() in taken:
        raise InvalidArgumentError(f"{what} {name!r} is a name memtype writes itself "
                                   f"({taken[name.casefold()]!r}); choose another name.")
    return name


def check_table_name(name: object, what: str) -> str:
    """Check a side-output table's name (:func:`check_path_name`, and never one of memtype's
    own ROI tables: ``FOV_ROI_table``, ``well_ROI_table``, ``<labels>_ROI_table``).

    Raises
    ------
    ArgumentTypeError
        ``name`` is not a ``str``.
    InvalidArgumentError
        ``name`` breaks the rule, or names (or ends like) one of memtype's ROI tables.
    """
    checked = check_path_name(name, what, reserved=FIELD_ROI_TABLES)
    if checked.casefold().endswith(_ROI_SUFFIX.casefold()):
        raise InvalidArgumentError(
            f"{what} {checked!r} ends in {_ROI_SUFFIX!r}, the name of memtype's ROI tables "
            f"({', '.join(FIELD_ROI_TABLES)} and <labels>{_ROI_SUFFIX} in every field), which "
            f"a side output of that name would replace; choose another name (e.g. "
            f"{checked[:-len(_ROI_SUFFIX)] + '_rois'!r}).")
    return checked


def check_labels_name(name: object, what: str) -> str:
    """Check a label image's name (:func:`check_path_name`): its masking ROI table,
    ``<name>_ROI_table``, is never one of the field's own (``FOV``, ``well`` are refused).

    Raises
    ------
    ArgumentTypeError
        ``name`` is not a ``str``.
    InvalidArgumentError
        ``name`` breaks the rule, or its ROI table would replace a field's.
    """
    checked = check_path_name(name, what)
    table = f"{checked}{_ROI_SUFFIX}"
    if table.casefold() in {t.casefold() for t in FIELD_ROI_TABLES}:
        raise InvalidArgumentError(
            f"{what} {checked!r} would name its objects' ROI table {table!r}, which every "
            f"field already has (the field's own, {', '.join(FIELD_ROI_TABLES)}); choose "
            "another name (e.g. 'nuclei').")
    return checked
