"""The openhcs 0.8.6 side of benchmarks/readers.py: what openhcs does with an ImageXpress plate
before a run, timed. Runs in openhcs's venv (not memtype's; benchmarks/openhcs_venv.sh builds
it):

    /tmp/ohcs/bin/python benchmarks/readers_openhcs_peer.py PLATE --warm SMALL_PLATE

``PipelineOrchestrator(plate_path=PLATE).initialize()``: microscope detection (the ``.HTD``),
its ImageXpress handler's ``initialize_workspace`` (every ``TimePoint_<t>/ZStep_<z>`` folder
listed, each file name parsed and rebuilt into a flat virtual name, the mapping written to
``openhcs_metadata.json`` in the plate), then its component keys and metadata cached. The
configuration set-up before it (as openhcs_e2e_peer.py does) and a first initialisation of a
small plate (the modules openhcs imports on first use; memtype's side is warmed up too) are not
timed.
Prints one JSON line: ``seconds``, ``cpu_seconds`` (this process's), ``peak_bytes``
(``tracemalloc``, a third run) and ``images`` (the virtual workspace's mappings).
"""

from __future__ import annotations

import argparse
import json
import logging
import time
import tracemalloc
from pathlib import Path
from typing import Any


def initialize(plate: Path) -> Any:
    """openhcs's orchestrator for the plate, initialised (workspace mapping, component keys)."""
    from openhcs.core.orchestrator.orchestrator import (  # type: ignore[import-not-found]
        PipelineOrchestrator,
    )

    return PipelineOrchestrator(plate_path=plate).initialize()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("plate", type=Path)
    parser.add_argument("--warm", type=Path, required=True,
                        help="a small plate initialised first, untimed")
    args = parser.parse_args()
    logging.disable(logging.INFO)  # openhcs logs a line per folder; not part of the work
    from objectstate.lazy_factory import (  # type: ignore[import-not-found]
        ensure_global_config_context,
    )
    from openhcs.core.config import GlobalPipelineConfig  # type: ignore[import-not-found]

    ensure_global_config_context(GlobalPipelineConfig, GlobalPipelineConfig(num_workers=1))
    initialize(args.warm)  # the modules openhcs imports on first use
    start, cpu = time.perf_counter(), time.process_time()
    orchestrator = initialize(args.plate)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    mapping = json.loads((args.plate / "openhcs_metadata.json").read_text())
    images = sum(len(v["workspace_mapping"]) for v in mapping["subdirectories"].values())
    del orchestrator
    tracemalloc.start()
    initialize(args.plate)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "peak_bytes": peak,
                      "images": images}))


if __name__ == "__main__":
    main()
