"""Screen analysis: objects, measurements, plate-wide passes and summaries.

A pipeline names what a step takes (:mod:`~memtype.pipeline.analysis.references`:
``inputs={"image": "channel:DAPI", "primary": "nuclei"}``), makes object sets
(``identify_primary``, ``identify_secondary``, ``identify_tertiary``) and measures them
(``measure_intensity``, ``measure_size_shape``, ``measure_image_quality``,
``measure_neighbors``: :mod:`~memtype.pipeline.analysis.operations`), inside one field
(:mod:`~memtype.pipeline.analysis.fields`); plate-wide passes (illumination correction,
normalisation: :mod:`~memtype.pipeline.analysis.passes`) are computed from every group and
applied to each; the tables are summarised per well and joined with a plate map
(:mod:`~memtype.pipeline.analysis.summaries`).

The algorithms are NumPy/scipy modules of this package (``objects``, ``intensity``,
``shape``, ``quality``, ``neighbors``, ``illumination``), imported on first use: importing
this package imports no image library.
"""

from __future__ import annotations

__all__: list[str] = []
