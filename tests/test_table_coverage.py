"""Every built-in row has an entry in each test table that is declared per framework.

A new row (MLX was the seventh) cannot silently get no coverage: where a test module keeps a
per-framework table rather than reading the row, this module fails until the row is declared.
"""

from __future__ import annotations

import pytest

from memtype.frameworks import builtin_frameworks, load_adapter
from tests import expectations, test_convert_matrix, test_decorators
from tests.frameworks import builtin_names


@pytest.mark.parametrize("name", builtin_names())
def test_host_sharing_declares_every_row(name: str) -> None:
    assert name in test_convert_matrix.HOST_SHARING, (
        f"tests/test_convert_matrix.py HOST_SHARING has no entry for {name!r}")


@pytest.mark.parametrize("name", [  # immutability is the adapter's: it needs the module
    pytest.param(fw.name, marks=pytest.mark.requires(fw.module), id=fw.name)
    for fw in builtin_frameworks()])
def test_mutable_in_place_declares_every_mutable_row(name: str) -> None:
    declared = name in test_decorators.MUTABLE_IN_PLACE
    immutable = load_adapter(name).immutable
    assert declared is not immutable, (
        f"tests/test_decorators.py MUTABLE_IN_PLACE: {name!r} is "
        f"{'im' if immutable else ''}mutable; "
        f"{'remove' if declared else 'add'} its entry")


@pytest.mark.parametrize("name", builtin_names())
def test_expected_dtype_knows_every_row(name: str) -> None:
    assert name in expectations.COVERED, f"tests/expectations.py has no rules for {name!r}"


def test_no_table_names_an_unknown_row() -> None:
    names = set(builtin_names())
    for table in (test_convert_matrix.HOST_SHARING, test_decorators.MUTABLE_IN_PLACE,
                  expectations.COVERED):
        assert set(table) <= names


def _extras() -> set[str]:
    import tomllib
    from pathlib import Path

    with open(Path(__file__).parents[1] / "pyproject.toml", "rb") as f:
        return set(tomllib.load(f)["project"]["optional-dependencies"])


@pytest.mark.parametrize("name", builtin_names())
def test_a_rows_extra_is_a_memtype_extra_named_by_its_install_hint(name: str) -> None:
    from memtype.frameworks import get_framework

    row = get_framework(name)
    if row.extra:  # NumPy, the host, is a dependency, not an extra
        assert row.extra in _extras()
        assert f"memtype[{row.extra}]" in row.install_hint
    else:
        assert "memtype[" not in row.install_hint
