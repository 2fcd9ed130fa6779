"""The code blocks of README.md and docs/*.md are tests (sybil; tests/docs.py says how).

Where sybil is not installed (the extras matrix runs ``tests/`` with pytest alone) the pages
are not collected; under ``make test`` (``MEMTYPE_TEST_ALL_EXTRAS=1``) sybil is required.
"""

from __future__ import annotations

import importlib.util
import os

# The settings tests/conftest.py makes, for a run of the docs alone (a page's
# `mt.gpu.configure(jax_preallocate=False)` agrees with the JAX an earlier page started).
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

if importlib.util.find_spec("sybil") is not None or os.environ.get("MEMTYPE_TEST_ALL_EXTRAS"):
    from tests.docs import DOCS

    pytest_collect_file = DOCS.pytest()
