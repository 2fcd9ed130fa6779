"""Pipeline files: imported by path, and made importable again in worker processes.

A pipeline file is imported under a unique module name. Its decorated functions pickle by
reference (module name and qualified name), which a dask worker or a process pool cannot
resolve: the module exists only in the process that loaded the file. So the file's name and
source travel with the run's shared context, and each worker imports them under the same
module name (from the same path when it can see the same file, else from a private copy)
before the steps are unpickled.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
import traceback
from types import ModuleType

from memtype.errors import PipelineFileError

__all__ = ["import_pipeline_file", "shipped_modules", "ensure_modules", "ModuleSpec"]

ModuleSpec = tuple[str, str, str]
"""(module name, file path, source text)."""

_loaded: dict[str, ModuleSpec] = {}
_lock = threading.Lock()


def _module_name(path: str, source: str) -> str:
    """A unique, stable module name for a file and its content."""
    digest = hashlib.sha1(f"{path}\0{source}".encode()).hexdigest()[:12]
    stem = "".join(ch if ch.isalnum() else "_" for ch in os.path.basename(path)[:-3])
    return f"memtype_pipeline_file_{stem}_{digest}"


def _import(name: str, path: str) -> ModuleType:
    """Import the file at ``path`` as module ``name`` (registered in ``sys.modules``)."""
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise PipelineFileError(
            f"{path!r} cannot be imported as a Python module; expected a .py file.")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except KeyboardInterrupt:
        del sys.modules[name]
        raise
    except (Exception, SystemExit) as exc:  # any failure of the file's own code
        del sys.modules[name]
        raise PipelineFileError(_import_failure(path, exc)) from exc
    return module


def _import_failure(path: str, exc: BaseException) -> str:
    """One line: which file failed to import, where, and with what error."""
    if isinstance(exc, SyntaxError):
        where = f"line {exc.lineno}" if exc.lineno else "a syntax error"
        what = f"SyntaxError: {exc.msg}"
    else:
        lines = [f.lineno for f in traceback.extract_tb(exc.__traceback__)
                 if f.filename == path]
        where = f"line {lines[-1]}" if lines else "import"
        what = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    text = " ".join(what.split())
    return (f"Pipeline file {path!r} failed to import ({where}): {text}; expected a Python "
            "file that defines a module-level `pipeline` when imported.")


def import_pipeline_file(path: str | os.PathLike[str]) -> ModuleType:
    """Import a Python file as a module of its own, remembered for shipping to workers.

    Raises
    ------
    FileNotFoundError
        The file does not exist.
    PipelineFileError
        It is not a ``.py`` file, or importing it failed (a syntax error, a missing module,
        an exception or ``sys.exit`` in its code); an ``ImportError``.
    """
    full = os.path.abspath(os.fspath(path))
    if not full.endswith(".py"):
        raise PipelineFileError(f"{os.fspath(path)!r} is not a .py file; expected a Python "
                                "file defining a module-level `pipeline`.")
    try:
        with open(full, encoding="utf-8") as fh:
            source = fh.read()
    except UnicodeDecodeError as exc:
        raise PipelineFileError(f"Pipeline file {os.fspath(path)!r} is not UTF-8 text "
                                f"({exc.reason} at byte {exc.start}); expected Python "
                                "source.") from exc
    name = _module_name(full, source)
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            module = _import(name, full)
        _loaded[name] = (name, full, source)
    return module


def shipped_modules() -> tuple[ModuleSpec, ...]:
    """The pipeline files imported in this process (for workers to import too)."""
    with _lock:
        return tuple(_loaded.values())


def _same_source(path: str, source: str) -> bool:
    """Whether the file at ``path`` exists and holds ``source``."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read() == source
    except OSError:  # not visible from this machine: use a private copy
        return False


def ensure_modules(specs: tuple[ModuleSpec, ...]) -> None:
    """Import each shipped pipeline file under its module name, unless already imported."""
    for name, path, source in specs:
        with _lock:
            if name in sys.modules:
                continue
            if not _same_source(path, source):
                directory = tempfile.mkdtemp(prefix="memtype-pipeline-")
                path = os.path.join(directory, os.path.basename(path))
                with open(path, "w", encoding="utf-8") as fh:
                    fh.write(source)
            _import(name, path)
            _loaded[name] = (name, path, source)
