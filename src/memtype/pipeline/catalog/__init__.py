"""The function catalog: scikit-image, scipy.ndimage, pyclesperanto and cucim as steps.

Entries are declared (generated from the libraries' signatures and docs, checked by a
maintainer in :mod:`~memtype.pipeline.catalog.declarations`), never probed at run time;
importing the catalog imports no image library.

>>> from memtype.pipeline import catalog
>>> entry = catalog.get("skimage.filters.threshold_otsu")
>>> entry.output, entry.dimensions
('scalar', 'nd')
>>> otsu = catalog.step("skimage.filters.threshold_otsu")

See ``docs/functions.md``.
"""

from __future__ import annotations

from memtype.pipeline.catalog.builders import operation, step
from memtype.pipeline.catalog.calls import catalog_function
from memtype.pipeline.catalog.entry import (
                                                   OUTPUT_KINDS,
                                                   Entry,
                                                   Exclusion,
                                                   entries,
                                                   excluded,
                                                   get,
                                                   search,
                                                   versions,
)
from memtype.pipeline.catalog.operations import (
                                                   OPERATIONS,
                                                   TOLERANCES,
                                                   operations,
)

__all__ = ["Entry", "Exclusion", "OPERATIONS", "OUTPUT_KINDS", "TOLERANCES", "catalog_function",
           "entries", "excluded", "get", "operation", "operations", "search", "step", "versions"]
