"""The docs' code blocks are tests (tests/docs.py, collected by the root conftest.py): these
check that every page is picked up and that a block runs as a reader runs it, alone."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.requires("sybil")

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^ *```(\S*)", re.M)


def _examples(path: Path) -> list[object]:
    from tests.docs import DOCS

    return list(DOCS.parse(path).examples())


def _run_page(path: Path) -> None:
    """Every example of ``path``, in order, as the pytest integration runs them."""
    from tests.docs import DOCS

    document = DOCS.parse(path)
    assert DOCS.setup is not None and DOCS.teardown is not None
    DOCS.setup(document.namespace)
    try:
        for example in document.examples():
            example.evaluate()
    finally:
        DOCS.teardown(document.namespace)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_page_is_collected(page: Path) -> None:
    from tests.docs import DOCS

    assert DOCS.should_parse(page)


def test_a_new_page_is_collected_without_a_list() -> None:
    from tests.docs import DOCS

    assert DOCS.should_parse(ROOT / "docs" / "a-page-written-tomorrow.md")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_fence_names_its_language(page: Path) -> None:
    """Shell commands and output are ```console / ```text, so an unlabelled block is never
    taken for Python, nor Python for text (the closing fence of each pair has no name)."""
    openings = FENCE.findall(page.read_text(encoding="utf-8"))[::2]
    assert "" not in openings, f"{page.name}: a ``` block without a language"


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_python_block_is_an_example(page: Path) -> None:
    python = FENCE.findall(page.read_text(encoding="utf-8"))[::2].count("python")
    blocks = [e for e in _examples(page) if isinstance(getattr(e, "parsed", None), str)]
    assert len(blocks) == python


def test_a_block_does_not_see_the_names_of_the_block_before(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nvolume = 1\n```\n\n```python\nprint(volume)\n```\n")
    with pytest.raises(NameError, match="volume"):
        _run_page(page)


def test_a_block_runs_as_a_script_with_its_imports(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("```python\nimport os\nif __name__ == '__main__':\n"
                    "    open('made-here.txt', 'w').close()\n"
                    "    assert os.path.exists('made-here.txt')\n```\n")
    _run_page(page)
    assert not (tmp_path / "made-here.txt").exists()  # in the page's scratch directory


def test_a_gpu_block_is_skipped_only_without_a_gpu(tmp_path: Path) -> None:
    from tests.frameworks import has_gpu

    page = tmp_path / "page.md"
    page.write_text('<!-- skip: next if(not CUDA_GPU, reason="needs a CUDA GPU") -->\n'
                    "```python\nraise RuntimeError('ran')\n```\n")
    if has_gpu():
        with pytest.raises(RuntimeError, match="ran"):
            _run_page(page)
    else:
        with pytest.raises(Exception, match="needs a CUDA GPU") as info:
            _run_page(page)
        assert type(info.value).__name__ == "SkipTest"
