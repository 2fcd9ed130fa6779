"""OME-Zarr, the format: plates, wells, images, labels and tables, in versions 0.4 and 0.5.

One package owns what an OME-Zarr plate looks like, for reading and for writing; the storage
layer below gives it files resolved beneath a root, and the pipeline above uses it through
:class:`ZarrStore` (writing, and reading memtype's own plates), :mod:`~memtype.omezarr.read`
(plates written by anyone, read by their metadata alone) and :mod:`~memtype.omezarr.assemble`
(a pipeline group's planes into fields):

=================  ==========================================================================
module             owns
=================  ==========================================================================
``layout``         where each version keeps a group's metadata; array codecs
``paths``          a plate's keys (``row/column/field``) and every file opened below its root
``beneath``        the zarr ``Store`` that resolves every key beneath the plate's root
``metadata``       the documents: plate, well, image (multiscales, axes, units), their checks
``pyramid``        resolution levels and the ``omero`` channel block
``plate``          the group tree, and the well and plate documents kept in step under locks
``write``          a field's arrays, level 0 first, then its metadata
``labels``         label images beside their field
``tables``         the Fractal/ngio tables (AnnData) inside a field
``store``          :class:`ZarrStore`, the plate behind the :class:`~memtype.storage.Store`
                   interface
``read``           plates written by others, read through any zarr store by metadata alone
``assemble``       a pipeline group's planes as fields, labels and ROI tables of a plate
=================  ==========================================================================

Importing this package imports neither zarr nor any array framework.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memtype._lazy import lazy_loader

if TYPE_CHECKING:
    from memtype.omezarr.store import ZarrStore

__all__ = ["ZarrStore"]

_LAZY = {"ZarrStore": "memtype.omezarr.store"}

__getattr__ = lazy_loader(globals(), _LAZY)


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
