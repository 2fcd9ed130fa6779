"""Names that become paths (memtype.pipeline.model.naming): one rule, checked where declared."""

from __future__ import annotations

import pytest

from memtype.errors import ArgumentTypeError, InvalidArgumentError
from memtype.omezarr.assemble import FIELD_ROI_TABLES
from memtype.pipeline.model.naming import MAX_NAME_LENGTH, check_path_name, check_table_name


@pytest.mark.parametrize("name", ["nuclei", "counts_2", "cell-area", "skimage.filters.gaussian",
                                  "A1", "noyaux_é", "_count", "x" * MAX_NAME_LENGTH])
def test_a_name_of_one_path_component_is_kept(name: str) -> None:
    assert check_path_name(name, "labels") == name


@pytest.mark.parametrize("name", ["", ".", "..", "../x", "a/b", "a\\b", "/abs", ".memtype",
                                  "-x", "a b", "a\x00b", "x" * (MAX_NAME_LENGTH + 1),
                                  "C:x", "a\nb"])
def test_a_name_that_is_not_one_path_component_is_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="becomes a file or folder name"):
        check_path_name(name, "outputs[0]")


@pytest.mark.parametrize("name", [None, 3, b"nuclei", ["a"]])
def test_a_name_that_is_not_text_is_a_type_error(name: object) -> None:
    with pytest.raises(ArgumentTypeError, match="must be a str"):
        check_path_name(name, "outputs[0]")


@pytest.mark.parametrize("name", ["plate", "PLATE"])
def test_a_reserved_name_is_refused_ignoring_case(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="memtype writes itself"):
        check_path_name(name, "step name", reserved=("plate",))


@pytest.mark.parametrize("name", [*FIELD_ROI_TABLES, "nuclei_ROI_table", "fov_roi_table"])
def test_a_table_named_like_an_roi_table_is_refused(name: str) -> None:
    with pytest.raises(InvalidArgumentError, match="ROI"):
        check_table_name(name, "outputs[0]")


def test_a_table_name_otherwise_follows_the_path_rule() -> None:
    with pytest.raises(InvalidArgumentError, match="becomes a file or folder name"):
        check_table_name("a/b", "outputs[0]")


@pytest.mark.parametrize(("name", "refused"), [("nuclei", False), ("cells", False),
                                               ("FOV", True), ("Well", True)])
def test_a_labels_name_never_makes_a_fields_roi_table(name: str, refused: bool) -> None:
    from memtype.pipeline.model.naming import check_labels_name

    if refused:
        with pytest.raises(InvalidArgumentError, match="ROI table"):
            check_labels_name(name, "labels")
    else:
        assert check_labels_name(name, "labels") == name
