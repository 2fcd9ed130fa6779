"""Regenerate the catalog's data files from the installed libraries.

``python -m memtype.pipeline.catalog.generate`` imports every module of
:data:`~memtype.pipeline.catalog.declarations.MODULES`, reads each public function's
signature, numpydoc ``Returns`` section and (pyclesperanto) ``categories``, applies the
declarations and writes ``entries.json`` beside this module. With ``--cucim`` it reads
:data:`~memtype.pipeline.catalog.declarations.CUCIM_MODULES` the same way (cucim imports
without a GPU) into ``cucim_entries.json``: memory type ``cupy``, the scikit-image
declarations applied to each function's mirror, and every scikit-image entry cucim lacks
listed as left out. Only this script imports the libraries; the catalog reads the JSON.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import inspect
import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

from memtype.frameworks import load_adapter
from memtype.pipeline.catalog import declarations as decl

__all__ = ["generate", "generate_cucim", "DATA_FILE", "CUCIM_DATA_FILE"]

DATA_FILE = Path(__file__).with_name("entries.json")
CUCIM_DATA_FILE = Path(__file__).with_name("cucim_entries.json")
_SECTION = re.compile(r"^\s*([A-Z][A-Za-z ]+)\n\s*-{3,}\s*$", re.M)
_KINDS = ("image", "labels", "mask", "scalar", "coordinates", "table")
T = TypeVar("T")


def _section(doc: str, title: str) -> str:
    """The text of a numpydoc section, '' when absent."""
    parts = _SECTION.split(doc)
    for i in range(1, len(parts) - 1, 2):
        if parts[i].strip() == title:
            return parts[i + 1]
    return ""


def _first_type(doc: str) -> str:
    """The documented type of the first parameter."""
    params = _section(doc, "Parameters").strip().splitlines()
    return params[0].split(":", 1)[1].strip() if params and ":" in params[0] else ""


def _returns(doc: str) -> list[str]:
    """The ``name : type`` lines of the Returns section."""
    lines = _section(doc, "Returns").splitlines()
    indent = min((len(x) - len(x.lstrip()) for x in lines if x.strip()), default=0)
    return [x.strip() for x in lines if x.strip() and len(x) - len(x.lstrip()) == indent]


def _output_kind(doc: str, short: str) -> str:
    """image, labels, mask, scalar, coordinates, table or 'several' from the Returns."""
    found = _returns(doc)
    if len(found) > 1:
        return "several"
    text = found[0].lower() if found else ""
    if short.startswith("threshold_"):
        return "scalar"
    if "bool" in text or "binary" in text.split(":")[0]:
        return "mask"
    if "label" in text.split(":")[0]:
        return "labels"
    if re.search(r":\s*(float|int|scalar)\b", text) and "array" not in text:
        return "scalar"
    if "coordinates" in text or "(n, 2)" in text or "(n, image.ndim)" in text:
        return "coordinates"
    if text.startswith("list") or ": list" in text or ": tuple" in text:
        return "several"
    return "image"


def _dimensions(first_type: str) -> str:
    """'2d' when the first parameter is documented as one 2D image, else 'nd'."""
    t = first_type.replace(" ", "")
    if "..." in t or "[," in t or "ndarray" == t or "nd" in t.lower().replace("ndarray", ""):
        return "nd"
    return "2d" if re.search(r"\(M,N\)|\(N,M\)|2-?D", t) else "nd"


def _rgb_only(first_type: str) -> bool:
    """Documented as a colour image only."""
    return bool(re.search(r"\(M,N,3\)|\(\.\.\.,3\)|RGB", first_type.replace(" ", ""))) and \
        "(M,N)" not in first_type.replace(" ", "")


def _parameters(sig: inspect.Signature) -> tuple[list[str], list[str], bool]:
    """(required extra arguments, every keyword argument, accepts **kwargs)."""
    params = list(sig.parameters.values())[1:]
    named = [p for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    required = [p.name for p in named if p.default is p.empty]
    return required, [p.name for p in named], any(p.kind is p.VAR_KEYWORD for p in params)


def _cle_kind(func: Any) -> str:
    """Output kind from pyclesperanto's categories."""
    cats = getattr(func, "categories", None) or []
    for cat, kind in decl.CLE_OUTPUT:
        if cat in cats:
            return kind
    return "image"


def _declared(table: Mapping[str, T], name: str) -> T | None:
    """A declaration made for ``name``, else for the scikit-image function it mirrors."""
    found = table.get(name)
    return table.get(decl.mirrored(name)) if found is None else found


def _entry(prefix: str, module: str, memory: str, short: str, func: Any) -> dict[str, Any]:
    """One entry, or one exclusion (``{"name", "excluded": reason}``)."""
    name = f"{prefix}.{short}"
    try:
        sig = inspect.signature(func)
    except (TypeError, ValueError):
        return {"name": name, "excluded": "no Python signature"}
    first = next(iter(sig.parameters), "")
    reason = _declared(decl.EXCLUDED, name)
    if reason is not None:
        return {"name": name, "excluded": reason}
    if first in decl.TWO_IMAGE_PARAMETERS:
        return {"name": name, "excluded": "combines two images (a step has one image "
                                          "input: use a FunctionStep)"}
    if first not in decl.IMAGE_PARAMETERS:
        return {"name": name, "excluded": f"first argument ({first or 'none'}) is not an image"}
    doc = inspect.getdoc(func) or ""
    first_type = _first_type(doc)
    if memory == decl.CLE:
        cats = set(getattr(func, "categories", None) or ())
        if not cats and short not in decl.CLE_KINDS:
            return {"name": name, "excluded": "no pyclesperanto category (a utility, not an "
                                              "image operation)"}
        kind = decl.CLE_KINDS.get(short) or _cle_kind(func)
        if short.endswith(decl.CLE_MAP_SUFFIX) and kind == "labels":
            kind = "image"  # a parametric map: a measurement per label painted on it
        dims = "3d" if cats & decl.VOLUME_ONLY_CATEGORIES else "nd"
    else:
        if _rgb_only(first_type):
            return {"name": name, "excluded": "colour (RGB) images only"}
        kind = _declared(decl.OUTPUT, name) or _output_kind(doc, short)
        dims = _declared(decl.DIMENSIONS, name) or _dimensions(first_type)
    if kind == "several":
        return {"name": name, "excluded": "returns several results (a tuple or list)"}
    required, keywords, var_kw = _parameters(sig)
    required += [r for r in _declared(decl.REQUIRED_ARGUMENTS, name) or () if r not in required]
    if memory == decl.CLE:
        keywords = [k for k in keywords if k not in ("output_image", "device")]
        required = [k for k in required if k not in ("output_image", "device")]
    second = [r for r in required if r in decl.SECOND_IMAGE_ARGUMENTS
              and r not in decl.NAMED_IMAGE_ARGUMENTS]
    if second:
        return {"name": name, "excluded": f"needs a second input ({', '.join(second)}) that "
                                          "is not an image: use a FunctionStep"}
    images = [r for r in required if r in decl.NAMED_IMAGE_ARGUMENTS]
    images += [r for r in _declared(decl.SECOND_IMAGES, name) or () if r not in images]
    summary = doc.strip().splitlines()[0] if doc.strip() else ""
    return {"name": name, "module": module, "function": short, "memory_type": memory,
            "dimensions": dims, "output": kind, "required": required, "keywords": keywords,
            "var_keywords": var_kw, "summary": summary[:100],
            "needs": _declared(decl.NEEDS, name) or "",
            **({"images": images} if images else {})}


def _module_entries(prefix: str, module: str, memory: str) -> list[dict[str, Any]]:
    """Every public function of one module as an entry or an exclusion."""
    if memory == decl.CLE:
        load_adapter(decl.CLE)
    mod = importlib.import_module(module)
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    out = []
    for short in sorted(names):
        func = getattr(mod, short, None)
        if inspect.isfunction(func) or (callable(func) and not inspect.isclass(func)
                                        and not inspect.ismodule(func)):
            out.append(_entry(prefix, module, memory, short, func))
    return out


def _version(dist: str) -> str:
    """An installed distribution's version."""
    return importlib.metadata.version(dist)


def _rows(modules: tuple[tuple[str, str, str], ...]) -> list[dict[str, Any]]:
    """Every public function of ``modules`` as an entry or an exclusion."""
    rows: list[dict[str, Any]] = []
    for prefix, module, memory in modules:
        rows.extend(_module_entries(prefix, module, memory))
    return rows


def _split(versions: dict[str, str], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The data file's layout: versions, entries, exclusions."""
    return {"versions": versions,
            "entries": [r for r in rows if "excluded" not in r],
            "excluded": [r for r in rows if "excluded" in r]}


def generate() -> dict[str, Any]:
    """The catalog's data: library versions, entries and exclusions."""
    return _split({d: _version(d) for d in ("scikit-image", "scipy", decl.CLE)},
                  _rows(decl.MODULES))


def _cucim_version() -> dict[str, str]:
    """The installed cucim's version (one key for its CUDA 12 and 13 builds: one API)."""
    for dist in decl.CUCIM_DISTRIBUTIONS:
        try:
            return {"cucim": _version(dist)}
        except importlib.metadata.PackageNotFoundError:
            continue
    raise importlib.metadata.PackageNotFoundError(
        f"none of {', '.join(decl.CUCIM_DISTRIBUTIONS)} is installed")


def generate_cucim() -> dict[str, Any]:
    """The cucim.skimage part of the catalog: its entries (memory type ``cupy``), its
    exclusions, and each scikit-image entry without a cucim counterpart, left out."""
    rows = _rows(decl.CUCIM_MODULES)
    have = {r["name"] for r in rows}
    versions = _cucim_version()
    version = versions["cucim"]
    host = json.loads(DATA_FILE.read_text())["entries"]
    lacking = sorted(f"cucim.{e['name']}" for e in host if e["name"].startswith("skimage.")
                     and f"cucim.{e['name']}" not in have)
    rows += [{"name": name, "excluded": f"not in cucim.skimage {version} (scikit-image "
                                        f"only: use {decl.mirrored(name)})"}
             for name in lacking]
    return _split(versions, rows)


def main(argv: list[str] | None = None) -> int:
    """Write entries.json (``--cucim``: cucim_entries.json) and say what it holds."""
    cucim = "--cucim" in (sys.argv[1:] if argv is None else argv)
    data, target = (generate_cucim(), CUCIM_DATA_FILE) if cucim else (generate(), DATA_FILE)
    target.write_text(json.dumps(data, indent=0, sort_keys=True) + "\n")
    sys.stdout.write(f"{len(data['entries'])} entries, {len(data['excluded'])} left out -> "
                     f"{target}\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
