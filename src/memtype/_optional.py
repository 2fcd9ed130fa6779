"""Optional packages a feature needs: imported on first use, with a clear error when absent.

``require("tifffile", "Reading TIFF files")`` returns the module, or raises
:class:`~memtype.errors.MissingPackageError` (an ``ImportError``) naming the feature, the
package and the extra that installs it.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from memtype.errors import MissingPackageError

__all__ = ["require", "EXTRAS"]

EXTRAS: dict[str, tuple[str, str]] = {
    # top-level module: (pip package, memtype extra that installs it)
    "tifffile": ("tifffile", "zarr"),
    "PIL": ("pillow", "zarr"),
    "zarr": ("zarr", "zarr"),
    "dask": ("dask[array]", "dask"),
    "distributed": ("distributed", "dask"),
    "scipy": ("scipy", "all"),
    "rich": ("rich", "all"),
    "matplotlib": ("matplotlib", "bench"),
    "ml_dtypes": ("ml_dtypes", "torch"),
    "pynvml": ("nvidia-ml-py", "gpu"),
}


def require(module: str, purpose: str) -> ModuleType:
    """Import ``module`` (dotted names allowed) for ``purpose``.

    Raises
    ------
    MissingPackageError
        The package is not installed; the message names the extra to install.
    """
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as exc:
        top = module.partition(".")[0]
        if exc.name is None or exc.name.partition(".")[0] != top:
            raise  # the package is there but one of its own dependencies is missing
        package, extra = EXTRAS.get(top, (top, ""))
        how = f"pip install 'memtype[{extra}]' (or pip install {package})" if extra else \
            f"pip install {package}"
        raise MissingPackageError(
            f"{purpose} needs the {package!r} package, which is not installed. "
            f"Install it with: {how}"
        ) from exc
