"""Finer tasks, the same results: ``task_by=("well", "site")`` against ``("well",)``.

docs/pipeline.md ("Task size") recommends splitting a well into one task per site on dask
where no step needs the whole well; this holds it to its word on the demo pipeline.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memtype.pipeline import Pipeline, SyntheticPlate, write_synthetic_plate


def _arrays(group: Any, prefix: str = "") -> dict[str, Any]:
    """Every array of a zarr hierarchy by path."""
    import zarr

    found = {}
    for key, member in group.members():
        if isinstance(member, zarr.Array):
            found[prefix + key] = member[...]
        else:
            found.update(_arrays(member, f"{prefix}{key}/"))
    return found


@pytest.mark.requires("torch", "jax", "scipy", "zarr", "tifffile")
def test_tasks_by_site_write_what_tasks_by_well_write(tmp_path: Path) -> None:
    import zarr

    from memtype.pipeline.demo import demo_pipeline

    source = tmp_path / "in"
    write_synthetic_plate(source, SyntheticPlate(wells=2, sites=2, z_planes=3, size=96))
    by_well = demo_pipeline(use_opencl=False)
    by_site = Pipeline(by_well.steps, task_by=("well", "site"), name=by_well.name)
    assert (len(by_well.tasks(source)), len(by_site.tasks(source))) == (2, 4)

    by_well.run(source, tmp_path / "well")
    by_site.run(source, tmp_path / "site")
    for table in ("counts.csv", "nuclei.csv"):
        rows = [sorted((tmp_path / run / table).read_text().splitlines())
                for run in ("well", "site")]
        assert len(rows[0]) > 1 and rows[0] == rows[1]
    well, site = (_arrays(zarr.open_group(tmp_path / run / "plate.zarr", mode="r"))
                  for run in ("well", "site"))
    assert well.keys() == site.keys() and len(well) > 8
    for path, values in well.items():
        np.testing.assert_array_equal(values, site[path], err_msg=path)
