"""A synthetic microscopy plate: cell-like blobs in z, uneven background and noise, fixed seed.

Channel 1 holds small bright nuclei, channel 2 larger, dimmer cell bodies around the same
centres. Each cell is in focus at its own z-plane. Every (well, site) has a known number of
cells (:attr:`SyntheticPlate.cell_counts`), so a counting pipeline can be checked against it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from memtype import storage  # DiskStore: loaded on first use (storage's lazy names)
from memtype.errors import InvalidArgumentError
from memtype.frameworks import data_nbytes
from memtype.pipeline.io.patterns import DEFAULT_PATTERN, FilenamePattern
from memtype.pipeline.io.plates import PlateLayout, plate_layout

__all__ = ["SyntheticPlate", "write_synthetic_plate"]

_NUCLEUS_SIGMA = (3.0, 5.0)      # px, per cell
_BODY_SCALE = 2.6                # cell body sigma / nucleus sigma
_Z_SIGMA = 1.6                   # planes
_AMPLITUDE = ((2500.0, 4500.0), (900.0, 1600.0))  # per channel: nuclei, bodies
_BACKGROUND = (400.0, 300.0)     # per channel: mean background level
_READ_NOISE = 30.0


@dataclass(frozen=True)
class _Cell:
    """One cell: centre, size, focal plane and brightness."""

    y: float
    x: float
    sigma: float
    z: float
    gain: float


@dataclass(frozen=True)
class SyntheticPlate:
    """A reproducible synthetic plate of 2D ``uint16`` images.

    Parameters
    ----------
    wells : int
        Number of wells (1 to 384), laid out row by row on a standard plate:
        A01 .. A12, B01 .. H12 on a 96-well plate, A01 .. P24 on a 384-well plate.
    sites, channels, z_planes : int
        Images per well: ``sites x channels x z_planes``; at most 2 channels.
    size : int
        Image height and width in pixels.
    cells : tuple of int
        The range (low, high) of the number of cells per site.
    seed : int
        Everything is derived from it: the same seed gives the same plate.
    pattern : str
        File names, ImageXpress style by default: ``A01_s1_w1_z001.tif``.
    plate : {96, 384}, optional
        The plate layout; by default the smallest that holds ``wells``.

    Raises
    ------
    InvalidArgumentError
        A count out of range, or more wells than the plate holds (a ``ValueError``).

    Examples
    --------
    >>> plate = SyntheticPlate(wells=1, sites=1, channels=1, z_planes=2, size=64)
    >>> [name for name, _ in plate.images()]
    ['A01_s1_w1_z001.tif', 'A01_s1_w1_z002.tif']
    """

    wells: int = 4
    sites: int = 4
    channels: int = 2
    z_planes: int = 8
    size: int = 512
    cells: tuple[int, int] = (18, 36)
    seed: int = 2026
    pattern: str = DEFAULT_PATTERN
    plate: int | None = None

    def __post_init__(self) -> None:
        if not 1 <= self.channels <= 2:
            raise InvalidArgumentError(f"channels must be 1 or 2; received {self.channels}.")
        if min(self.wells, self.sites, self.z_planes) < 1 or self.size < 32:
            raise InvalidArgumentError(
                "wells, sites and z_planes must be >= 1 and size >= 32; received "
                f"{self.wells}, {self.sites}, {self.z_planes}, {self.size}."
            )
        plate_layout(self.wells, self.plate)  # a count the plate holds

    @property
    def layout(self) -> PlateLayout:
        """The plate the wells are laid out on (96 or 384 wells)."""
        return plate_layout(self.wells, self.plate)

    @property
    def well_names(self) -> list[str]:
        """The wells, in plate order (row by row)."""
        return self.layout.well_names(self.wells)

    @cached_property
    def cell_counts(self) -> dict[tuple[str, int], int]:
        """The true number of cells of each (well, site)."""
        return {(w, s): len(self._cells(wi, s)) for wi, w in enumerate(self.well_names)
                for s in range(1, self.sites + 1)}

    def _rng(self, *parts: int) -> np.random.Generator:
        """A generator seeded by the plate seed and a position on the plate."""
        return np.random.default_rng([self.seed, *parts])

    def _cells(self, well: int, site: int) -> list[_Cell]:
        """The cells of one site: random positions kept apart so they stay separable."""
        rng = self._rng(well, site, 0)
        wanted = int(rng.integers(self.cells[0], self.cells[1] + 1))
        margin = min(4 * _NUCLEUS_SIGMA[1], self.size / 4)
        z_low = min(1.5, (self.z_planes - 1) / 2)
        z_high = self.z_planes - 1 - z_low
        cells: list[_Cell] = []
        for _ in range(wanted * 20):
            if len(cells) == wanted:
                break
            y, x = rng.uniform(margin, self.size - margin, 2)
            if all((c.y - y) ** 2 + (c.x - x) ** 2 > (6 * _NUCLEUS_SIGMA[1]) ** 2 for c in cells):
                cells.append(_Cell(float(y), float(x), float(rng.uniform(*_NUCLEUS_SIGMA)),
                                   float(rng.uniform(z_low, z_high)),
                                   float(rng.uniform(0.7, 1.0))))
        return cells

    def _background(self, rng: np.random.Generator, channel: int) -> np.ndarray[Any, Any]:
        """A smooth, uneven illumination field."""
        yy, xx = np.mgrid[0:self.size, 0:self.size].astype(np.float32) / self.size
        gy, gx = rng.uniform(-0.4, 0.4, 2)
        cy, cx = rng.uniform(0.3, 0.7, 2)
        vignette = np.exp(-((yy - cy) ** 2 + (xx - cx) ** 2) / 0.5)
        field_ = (1.0 + gy * yy + gx * xx) * (0.6 + 0.4 * vignette)
        out: np.ndarray[Any, Any] = (_BACKGROUND[channel] * field_).astype(np.float32)
        return out

    def stack(self, well: int, site: int, channel: int) -> np.ndarray[Any, Any]:
        """The ``[Z, Y, X]`` uint16 stack of one well (index), site and channel (1-based)."""
        rng = self._rng(well, site, channel)
        planes = np.empty((self.z_planes, self.size, self.size), np.float32)
        planes[:] = self._background(rng, channel - 1)
        low, high = _AMPLITUDE[channel - 1]
        zs = np.arange(self.z_planes, dtype=np.float32)
        for cell in self._cells(well, site):
            sigma = cell.sigma * (_BODY_SCALE if channel == 2 else 1.0)
            r = int(np.ceil(3.5 * sigma))
            y0, x0 = int(cell.y) - r, int(cell.x) - r
            yy, xx = np.mgrid[y0:y0 + 2 * r + 1, x0:x0 + 2 * r + 1].astype(np.float32)
            spot = np.exp(-((yy - cell.y) ** 2 + (xx - cell.x) ** 2) / (2 * sigma ** 2))
            profile = np.exp(-((zs - cell.z) ** 2) / (2 * _Z_SIGMA ** 2))
            amplitude = cell.gain * (low + (high - low) * rng.random())
            ys, xs = slice(max(y0, 0), y0 + 2 * r + 1), slice(max(x0, 0), x0 + 2 * r + 1)
            window = spot[ys.start - y0:, xs.start - x0:][: planes.shape[1] - ys.start,
                                                           : planes.shape[2] - xs.start]
            planes[:, ys, xs] += amplitude * profile[:, None, None] * window[None]
        noise = rng.standard_normal(planes.shape, dtype=np.float32)
        planes += noise * (_READ_NOISE + 0.5 * np.sqrt(planes))
        return np.clip(np.rint(planes), 0, np.iinfo(np.uint16).max).astype(np.uint16)

    def images(self) -> Iterator[tuple[str, np.ndarray[Any, Any]]]:
        """Every image as ``(file name, 2D uint16 array)``, well by well."""
        pattern = FilenamePattern(self.pattern)
        for wi, well in enumerate(self.well_names):
            for site in range(1, self.sites + 1):
                for channel in range(1, self.channels + 1):
                    planes = self.stack(wi, site, channel)
                    for z in range(self.z_planes):
                        name = pattern.format(well=well, site=site, channel=channel, z=z + 1)
                        yield name, planes[z]

    @property
    def nbytes(self) -> int:
        """Bytes of pixel data in the whole plate."""
        return data_nbytes((self.wells, self.sites, self.channels, self.z_planes, self.size,
                            self.size), np.dtype(np.uint16))


def write_synthetic_plate(directory: str | os.PathLike[str], plate: SyntheticPlate | None = None,
                          *, overwrite: bool = False) -> list[str]:
    """Write a synthetic plate as TIFF files into ``directory`` (created if missing).

    Parameters
    ----------
    directory : path
        Where the images go.
    plate : SyntheticPlate, optional
        The plate to write; the demo plate (4 wells x 4 sites x 2 channels x 8 planes of
        512 x 512) by default.
    overwrite : bool
        Replace images that already exist (else ``FileExistsError``).

    Returns
    -------
    list of str
        The file names written, in order.
    """
    plate = plate or SyntheticPlate()
    store = storage.DiskStore(os.fspath(directory))
    names: list[str] = []
    batch: list[tuple[str, np.ndarray[Any, Any]]] = []
    for name, image in plate.images():
        batch.append((name, image))
        if len(batch) == plate.z_planes:
            store.save_batch([a for _, a in batch], [n for n, _ in batch], overwrite=overwrite)
            names.extend(n for n, _ in batch)
            batch.clear()
    return names
