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
    "array_api_compat": ("array-api-compat", "array-api"),
    "obstore": ("obstore", "s3"),
    "yaml": ("pyyaml", "all"),
    "skimage": ("scikit-image", "all"),
}


def require(module: str, purpose: str) -> ModuleType:
    """Import an optional package for a feature, or say how to install it.

    The one way memtype (and code built on it: a reader, a store, a step) imports a package
    it does not depend on: the package is imported on first use, and its absence is a
    :class:`~memtype.errors.MissingPackageError` naming the feature and the memtype extra
    that installs it.

    Parameters
    ----------
    module : str
        The module to import; dotted names allowed (``"zarr.storage"``).
    purpose : str
        What needs it, for the message (``"Reading TIFF files"``).

    Returns
    -------
    types.ModuleType
        The imported module.

    Raises
    ------
    MissingPackageError
        The package is not installed (also an ``ImportError``); the message names the
        extra to install. A package that is installed but lacks one of its own
        dependencies raises that ``ModuleNotFoundError`` unchanged.

    Examples
    --------
    >>> import memtype as mt
    >>> mt.require("json", "Reading settings").__name__
    'json'
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
