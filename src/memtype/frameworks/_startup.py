"""Start-up chatter of a framework's import, kept off a command's stderr.

TensorFlow's import writes INFO lines through absl straight to file descriptor 2 ("oneDNN
custom operations are on", "This TensorFlow binary is optimized to use ..."), beneath
Python's ``sys.stderr``, where no logging setting of Python reaches. Where
``MEMTYPE_QUIET_STARTUP=1`` (the ``memtype`` command sets it; its dask workers inherit
it), memtype's import of a framework captures descriptor 2 and writes back every line that
is not one of the row's ``quiet_stderr`` patterns: warnings and errors, from C++ or Python,
still reach the user, once the import is over. A library user's process is never touched.
"""

from __future__ import annotations

import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

__all__ = ["QUIET_VARIABLE", "quiet_startup"]

QUIET_VARIABLE = "MEMTYPE_QUIET_STARTUP"


def _replay(captured: bytes, patterns: Sequence[str]) -> None:
    """Write the captured lines that match none of ``patterns`` to stderr."""
    compiled = [re.compile(p) for p in patterns]
    for line in captured.decode(errors="replace").splitlines(keepends=True):
        if not any(c.search(line) for c in compiled):
            sys.stderr.write(line)
    sys.stderr.flush()


@contextmanager
def quiet_startup(patterns: Sequence[str]) -> Iterator[None]:
    """Within the block, lines written to descriptor 2 that match ``patterns`` are dropped
    (only where ``MEMTYPE_QUIET_STARTUP=1``; elsewhere nothing changes)."""
    if not patterns or os.environ.get(QUIET_VARIABLE) != "1":
        yield
        return
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile() as captured:
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            _replay(captured.read(), patterns)
