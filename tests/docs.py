"""The sybil configuration that makes the code blocks of README.md and docs/*.md tests.

Every ```python block runs as written, alone, in a fresh namespace (a reader copies one
block, not the page) with ``__name__ == "__main__"``, from a temporary working directory
that is removed afterwards. A block that needs a CUDA GPU is preceded by
``<!-- skip: next if(not CUDA_GPU, reason="needs a CUDA GPU; none on this machine") -->``
(skipped only where no GPU is seen). Shell commands and output go in ```console / ```text
blocks, never run. A new page under docs/ is picked up by the pattern, with no list to
update. The root conftest.py hands :data:`DOCS` to pytest.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from sybil import Example, Sybil
from sybil.evaluators.python import PythonEvaluator
from sybil.parsers.markdown import CodeBlockParser, SkipParser

PATTERNS = ("README.md", "docs/*.md")
_CWD = "__memtype_doc_cwd__"


def base_namespace() -> dict[str, Any]:
    """What every block starts with: ``__name__`` and, for skip directives, ``CUDA_GPU`` and
    ``NGIO`` (ngio, the Fractal table library of the test extra, is installed)."""
    from tests.frameworks import has_gpu

    return {"__name__": "__main__", "CUDA_GPU": has_gpu(),
            "NGIO": importlib.util.find_spec("ngio") is not None}


class RunAlone(PythonEvaluator):
    """Runs each block in a namespace of its own (only :func:`base_namespace`'s names)."""

    def __call__(self, example: Example) -> None:
        __tracebackhide__ = True
        namespace = example.namespace
        keep = {k: namespace[k] for k in (_CWD, *base_namespace()) if k in namespace}
        namespace.clear()
        namespace.update(keep)
        try:
            super().__call__(example)
        finally:
            namespace.clear()
            namespace.update(keep)


def setup(namespace: dict[str, Any]) -> None:
    """Before a page: the frameworks loaded in tests/conftest.py's order (torch and
    pyclesperanto before tensorflow), the base names, and a scratch working directory."""
    from memtype.frameworks import load_adapter

    for name in ("torch", "pyclesperanto", "jax", "tensorflow"):
        if importlib.util.find_spec(name) is not None:
            load_adapter(name)
    namespace.update(base_namespace())
    namespace[_CWD] = (os.getcwd(), tempfile.mkdtemp(prefix="memtype-doc-"))
    os.chdir(namespace[_CWD][1])


def teardown(namespace: dict[str, Any]) -> None:
    """After a page: back to the previous working directory; the scratch one removed."""
    previous, scratch = namespace.pop(_CWD)
    os.chdir(previous)
    shutil.rmtree(scratch)


DOCS = Sybil(
    parsers=[CodeBlockParser(language="python", evaluator=RunAlone()), SkipParser()],
    patterns=list(PATTERNS),
    path=str(Path(__file__).resolve().parents[1]),
    setup=setup,
    teardown=teardown,
)
