"""The openhcs 0.8.6 side of benchmarks/openhcs_e2e.py: the nuclei pipeline run headless by
openhcs's own orchestrator on an ImageXpress plate. Runs in openhcs's venv (not memtype's):

    /tmp/ohcs/bin/python benchmarks/openhcs_e2e_peer.py PLATE --workers 2 --radius 7 \
        --sigma 1 --min-size 30 --json result.json

Steps, each on the z-stack of one (well, site, channel), as memtype's catalog operations do:

1. ``skimage:morphology.white_tophat`` from openhcs's function registry, a (2r+1)^2 box
   footprint with ``mode="nearest"``, ``slice_by_slice=True``;
2. ``skimage:filters.gaussian`` from the registry, ``slice_by_slice=True`` (openhcs's default
   would blur across z);
3. ``count_nuclei`` (below): Otsu of the stack, 3D connected components (full connectivity),
   small-object removal, ``regionprops`` (label, area, centroid) as a measurements artifact.
   openhcs's registry offers no ``measure.label``, ``remove_small_objects`` or
   ``regionprops`` (its ``threshold_otsu`` returns a number, which cannot be a step's
   image), so this is a user function in openhcs's idiom (``@numpy``, ``@artifact_outputs``
   with a CSV materialization), as its own ``count_cells_simple`` is written, calling the same
   scikit-image functions as memtype's NumPy implementations.

Writes a JSON file: object counts per (well, site) and the wall time of registry start-up,
orchestrator initialisation, compilation and execution.
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from openhcs.core.artifacts import (  # type: ignore[import-not-found]
    ArtifactMeasurementSubjectRelation,
    ArtifactSpec,
    MeasurementsArtifactType,
)
from openhcs.core.measurement_row_materialization import (  # type: ignore[import-not-found]
    DataclassMeasurementColumnarRows,
)
from openhcs.core.memory import numpy as ohcs_numpy  # type: ignore[import-not-found]
from openhcs.core.pipeline.function_contracts import (  # type: ignore[import-not-found]
    artifact_outputs,
)
from openhcs.processing.materialization import (  # type: ignore[import-not-found]
    CsvOptions,
    MaterializationSpec,
)


@dataclass(frozen=True)
class Nucleus:
    """One object of a stack: its label, size in voxels and centroid."""

    label: int
    area: int
    centroid_z: float
    centroid_y: float
    centroid_x: float


@ohcs_numpy
@artifact_outputs(ArtifactSpec("nuclei", MeasurementsArtifactType,
                               materialization=MaterializationSpec(CsvOptions()),
                               relations=(ArtifactMeasurementSubjectRelation(),)))
def count_nuclei(image: Any, min_size: int = 30) -> tuple[Any, Any]:
    """Otsu mask of the stack, connected components, small ones removed, one row per object."""
    from skimage.filters import threshold_otsu
    from skimage.measure import label, regionprops_table
    from skimage.morphology import remove_small_objects

    labels = label(image > threshold_otsu(image))
    labels = remove_small_objects(labels, max_size=min_size - 1)
    table = regionprops_table(labels, properties=("label", "area", "centroid"))
    rows = tuple(Nucleus(int(table["label"][i]), int(table["area"][i]),
                         *(float(table[f"centroid-{a}"][i]) for a in range(3)))
                 for i in range(len(table["label"])))
    return image, DataclassMeasurementColumnarRows(rows, row_type=Nucleus)


@ohcs_numpy
def white_tophat_box(image: Any, radius: int = 7) -> Any:
    """scikit-image's white top-hat of each plane with a (2r+1)^2 box, edges ``nearest``."""
    from skimage.morphology import footprint_rectangle, white_tophat

    box = footprint_rectangle((2 * radius + 1, 2 * radius + 1))
    return np.stack([white_tophat(plane, box, mode="nearest") for plane in image])


def pipeline(radius: int, sigma: float) -> list[Any]:
    """The three steps, each over the z-stack of one (site, channel)."""
    import openhcs_e2e_peer as me  # by module name, so spawned workers can import it
    from openhcs.constants.constants import VariableComponents  # type: ignore[import-not-found]
    from openhcs.core.config import LazyProcessingConfig  # type: ignore[import-not-found]
    from openhcs.core.steps.function_step import FunctionStep  # type: ignore[import-not-found]
    from openhcs.processing.func_registry import get_function  # type: ignore[import-not-found]

    def per_stack() -> Any:
        return LazyProcessingConfig(variable_components=[VariableComponents.Z_INDEX])

    return [
        FunctionStep(func=(me.white_tophat_box, {"radius": radius}), name="white_tophat",
                     processing_config=per_stack()),
        FunctionStep(func=(get_function("skimage:filters.gaussian"),
                           {"sigma": sigma, "slice_by_slice": True}),
                     name="gaussian", processing_config=per_stack()),
        FunctionStep(func=(me.count_nuclei, {"min_size": me.MIN_SIZE}), name="count_nuclei",
                     processing_config=per_stack()),
    ]


MIN_SIZE = 30


def counts(output_root: Path) -> dict[str, int]:
    """Objects per 'well/site/channel' from the nuclei CSVs openhcs wrote (a row per object)."""
    found: dict[str, int] = {}
    for path in sorted(output_root.rglob("*_nuclei_*details.csv")):
        with open(path, newline="", encoding="utf-8") as handle:
            for row in csv.DictReader(handle):
                key = f"{row['well']}/{row['site']}/{row['channel']}"
                found[key] = found.get(key, 0) + 1
    return found


def _drain(queue: Any) -> None:
    """Read progress events until ``None``."""
    while queue.get() is not None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plate", type=Path)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--radius", type=int, default=7)
    parser.add_argument("--sigma", type=float, default=1.0)
    parser.add_argument("--min-size", type=int, default=30)
    parser.add_argument("--json", type=Path, required=True)
    args = parser.parse_args()
    global MIN_SIZE
    MIN_SIZE = args.min_size
    times: dict[str, float] = {}
    start = time.perf_counter()
    from objectstate.lazy_factory import (  # type: ignore[import-not-found]
        ensure_global_config_context,
    )
    from openhcs.core.config import GlobalPipelineConfig  # type: ignore[import-not-found]
    from openhcs.core.orchestrator.orchestrator import (  # type: ignore[import-not-found]
        PipelineOrchestrator,
    )
    from openhcs.core.progress import set_progress_queue  # type: ignore[import-not-found]
    from openhcs.processing import func_registry  # type: ignore[import-not-found]

    config = GlobalPipelineConfig(num_workers=args.workers)
    ensure_global_config_context(GlobalPipelineConfig, config)
    func_registry.initialize_registry()
    times["import_and_registry"] = time.perf_counter() - start
    import openhcs_e2e_peer as me

    me.MIN_SIZE = args.min_size
    steps = pipeline(args.radius, args.sigma)
    mark = time.perf_counter()
    orchestrator = PipelineOrchestrator(plate_path=args.plate).initialize()
    times["initialize"] = time.perf_counter() - mark
    queue = multiprocessing.get_context("spawn").Queue()  # progress events, drained unread
    drain = threading.Thread(target=_drain, args=(queue,), daemon=True)
    drain.start()
    set_progress_queue(queue)
    mark = time.perf_counter()
    bundle = orchestrator.compile_pipelines(pipeline_definition=steps)
    times["compile"] = time.perf_counter() - mark
    mark = time.perf_counter()
    results = orchestrator.execute_compiled_plate(
        execution_bundle=bundle, max_workers=args.workers, progress_queue=queue,
        progress_context={"execution_id": "bench", "plate_id": str(args.plate)})
    times["execute"] = time.perf_counter() - mark
    set_progress_queue(None)
    queue.put(None)
    drain.join()
    times["total"] = time.perf_counter() - start
    failed = sorted(k for k, v in results.items() if str(v.status.value) != "success")
    if failed:
        raise RuntimeError(f"openhcs failed on {failed}: {[results[k] for k in failed]}")
    output_root = Path(str(args.plate) + "_openhcs")
    args.json.write_text(json.dumps({"times": times, "counts": counts(output_root)}))
    print(json.dumps(times))


if __name__ == "__main__":
    main()
