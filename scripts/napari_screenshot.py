"""Open a memtype plate headless in napari with its OME-Zarr reader and save a screenshot.

Not part of memtype or its tests (napari is a GUI application): it shows that the plates
memtype writes open in napari as they are, labels included. Run it in a separate venv::

    python3.11 -m venv /tmp/napari
    /tmp/napari/bin/pip install "napari[pyside6]" napari-ome-zarr
    apt-get install -y xvfb libgl1-mesa-dri libegl1 libxkbcommon-x11-0 libxcb-cursor0
    memtype demo --out /tmp/demo
    xvfb-run -a -s "-screen 0 1600x1200x24" /tmp/napari/bin/python \\
        scripts/napari_screenshot.py /tmp/demo/results/plate.zarr docs/napari_plate.png

The plate opens as napari-ome-zarr shows it: one image layer per channel (the plate's wells
tiled as on the plate, each channel in its ``omero`` colour and window) and a labels layer
(napari-ome-zarr hides labels at first; here they are shown as outlines). The view is fitted
to the wells the plate holds.
"""

from __future__ import annotations

import json
import os
import sys

import napari
from qtpy.QtWidgets import QApplication


def _plate(path: str) -> dict:
    """The plate's OME ``plate`` metadata (OME-Zarr 0.5 or 0.4)."""
    v3 = os.path.join(path, "zarr.json")
    if os.path.isfile(v3):
        with open(v3, encoding="utf-8") as fh:
            return json.load(fh)["attributes"]["ome"]["plate"]
    with open(os.path.join(path, ".zattrs"), encoding="utf-8") as fh:
        return json.load(fh)["plate"]


def main(path: str, png: str) -> None:
    viewer = napari.Viewer(show=True)  # under Xvfb: a window is needed for the GL canvas
    viewer.window._qt_window.resize(1400, 700)
    viewer.open(path, plugin="napari-ome-zarr")
    for layer in viewer.layers:
        if isinstance(layer, napari.layers.Labels):
            layer.visible, layer.contour, layer.opacity = True, 2, 1.0
    plate = _plate(path)
    height, width = viewer.layers[0].data[0].shape[-2:]
    well_h, well_w = height / len(plate["rows"]), width / len(plate["columns"])
    rows = [w["rowIndex"] for w in plate["wells"]]
    columns = [w["columnIndex"] for w in plate["wells"]]
    top, bottom = min(rows) * well_h, (max(rows) + 1) * well_h
    left, right = min(columns) * well_w, (max(columns) + 1) * well_w
    viewer.scene.camera.center = ((top + bottom) / 2, (left + right) / 2)
    for _ in range(10):
        QApplication.processEvents()
    canvas = viewer.window._qt_viewer.canvas.size
    viewer.scene.camera.zoom = 0.95 * min(canvas[0] / (bottom - top), canvas[1] / (right - left))
    for _ in range(10):
        QApplication.processEvents()
    viewer.screenshot(png, canvas_only=True)
    viewer.close()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
