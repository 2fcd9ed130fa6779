"""What a folder holds when no image of the pattern is in it: a single OME-Zarr image (not a
plate), or plates in its folders (one plate per run), said in the error instead of "no file
matches the pattern".

>>> survey("experiment/")  # doctest: +SKIP
"'experiment/' holds 2 plates in its folders (plateA: imagexpress, plateB: ome-zarr) ..."
"""

from __future__ import annotations

import json
import os

from memtype.errors import MemtypeError
from memtype.pipeline.readers.base import dir_inside, open_inside
from memtype.pipeline.readers.imagexpress import ImageXpressReader
from memtype.pipeline.readers.ometiff import OmeTiffReader
from memtype.pipeline.readers.omezarr import OmeZarrReader
from memtype.pipeline.readers.phenix import PhenixReader

__all__ = ["survey"]

_VENDORS = (OmeZarrReader, PhenixReader, ImageXpressReader, OmeTiffReader)
_LOOKED_AT = 200
"""Folders of the input looked into (a pattern folder of many wells is not walked)."""
_SUPPORTED = ("memtype reads one plate per run: an OME-Zarr plate (HCS: 'plate' in its root "
              "group's attributes), an ImageXpress or Opera Phenix export, OME-TIFF files, or "
              "images named by a pattern (--pattern).")


def survey(root: str) -> str | None:
    """What ``root`` holds instead of images of a pattern, in words, or None."""
    if ome_zarr_image(root, ""):
        return (f"{root!r} is a single OME-Zarr image (multiscales at its root), not a plate; "
                f"{_SUPPORTED} Put the image in a plate (a well's field), or read it with "
                "memtype.storage.ZarrStore.")
    found = _plates_below(root)
    if not found:
        return None
    listed = ", ".join(f"{name}: {what}" for name, what in found[:6])
    more = f", and {len(found) - 6} more" if len(found) > 6 else ""
    return (f"{root!r} holds {len(found)} plate(s) or image(s) in its folders ({listed}{more}), "
            f"not one plate at its root; {_SUPPORTED} Give each plate's folder as the input "
            f"(e.g. {os.path.join(root, found[0][0])!r}).")


def ome_zarr_image(root: str, folder: str) -> bool:
    """Whether ``folder`` (relative to ``root``) is an OME-Zarr image: ``multiscales`` in
    its ``zarr.json`` (0.5) or ``.zattrs`` (0.4), read beneath ``root``."""
    for name, keys in (("zarr.json", ("attributes", "ome")), (".zattrs", ())):
        try:
            with open_inside(root, f"{folder}/{name}" if folder else name) as fh:
                doc = json.loads(fh.read(1 << 20).decode("utf-8"))
        except (MemtypeError, OSError, ValueError, RecursionError):
            continue
        for key in keys:
            doc = doc.get(key) if isinstance(doc, dict) else None
        if isinstance(doc, dict) and "multiscales" in doc:
            return True
    return False


def _plates_below(root: str) -> list[tuple[str, str]]:
    """(folder, what) of the folders just below ``root`` that are plates (a layout detected)
    or OME-Zarr images."""
    with os.scandir(root) as entries:
        folders = sorted(e.name for e in entries if e.name[0] != ".")
    found = []
    for name in folders[:_LOOKED_AT]:
        if not dir_inside(root, name):
            continue
        what = _layout_of(os.path.join(root, name))
        if what is None and ome_zarr_image(root, name):
            what = "an OME-Zarr image, not a plate"
        if what is not None:
            found.append((name, what))
    return found


def _layout_of(folder: str) -> str | None:
    """The vendor layout detected in ``folder``, if any (a folder that cannot be read is
    none)."""
    for cls in _VENDORS:
        try:
            if cls.detect(folder) is not None:
                return cls.layout
        except (MemtypeError, OSError):
            continue
    return None
