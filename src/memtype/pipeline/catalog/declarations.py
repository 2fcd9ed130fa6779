"""The maintainer-checked declarations of the function catalog: one line per decision.

The catalog's entries are generated (``python -m memtype.pipeline.catalog.generate``) from
the libraries' own signatures, numpydoc ``Returns`` sections and pyclesperanto's
``categories``; this table holds only what those cannot say, or say wrong, each written
down once. Nothing here imports an image library.
"""

from __future__ import annotations

# The memory types catalog functions run in: the host, pyclesperanto (a library the
# catalog covers, whose module is also its framework's name) and CuPy (cucim.skimage).
HOST = "numpy"
CLE = "pyclesperanto"
CUPY = "cupy"

__all__ = ["HOST", "CLE", "CUPY", "MODULES", "CUCIM_MODULES", "CUCIM_DISTRIBUTIONS",
           "INSTALL_HINTS", "mirrored", "IMAGE_PARAMETERS", "OUTPUT", "DIMENSIONS", "EXCLUDED",
           "CLE_OUTPUT",
           "CLE_KINDS", "VOLUME_ONLY_CATEGORIES", "TWO_IMAGE_PARAMETERS",
           "SECOND_IMAGE_ARGUMENTS", "NAMED_IMAGE_ARGUMENTS", "SECOND_IMAGES",
           "REQUIRED_ARGUMENTS", "NEEDS", "CLE_MAP_SUFFIX"]

# (catalog prefix, module, memory type) for every module the catalog covers.
MODULES: tuple[tuple[str, str, str], ...] = (
    ("skimage.filters", "skimage.filters", HOST),
    ("skimage.morphology", "skimage.morphology", HOST),
    ("skimage.measure", "skimage.measure", HOST),
    ("skimage.segmentation", "skimage.segmentation", HOST),
    ("skimage.exposure", "skimage.exposure", HOST),
    ("skimage.transform", "skimage.transform", HOST),
    ("skimage.restoration", "skimage.restoration", HOST),
    ("skimage.feature", "skimage.feature", HOST),
    ("scipy.ndimage", "scipy.ndimage", HOST),
    (CLE, CLE, CLE),
)

# cucim.skimage (RAPIDS): scikit-image's API on CuPy arrays (an NVIDIA GPU). Generated into
# its own data file (``python -m memtype.pipeline.catalog.generate --cucim``) wherever cucim
# imports -- it imports without a GPU; its kernels need one -- so machines without cucim
# list these entries (as not installed) and a GPU machine runs them.
CUCIM_MODULES: tuple[tuple[str, str, str], ...] = tuple(
    (f"cucim.skimage.{m}", f"cucim.skimage.{m}", CUPY)
    for m in ("filters", "morphology", "measure", "segmentation", "exposure", "transform",
              "restoration", "feature"))
# cucim's distributions, one per CUDA major version, with one Python API (the data file
# records the version as "cucim").
CUCIM_DISTRIBUTIONS = ("cucim-cu12", "cucim-cu13")
_MIRROR = ("cucim.skimage.", "skimage.")


def mirrored(name: str) -> str:
    """The scikit-image function a cucim entry mirrors (``cucim.skimage.filters.gaussian``
    -> ``skimage.filters.gaussian``); any other name unchanged. Every declaration below made
    for a scikit-image function holds for its cucim mirror unless the cucim name has its own."""
    cucim, skimage = _MIRROR
    return skimage + name[len(cucim):] if name.startswith(cucim) else name


# How to install each library the catalog covers (``memtype functions`` says it for the
# entries of a library that is not installed).
INSTALL_HINTS: dict[str, str] = {
    "skimage": "pip install scikit-image",
    "scipy": "pip install scipy",
    CLE: "pip install 'memtype[cle]'",
    "cucim": "pip install 'memtype[cucim]' (an NVIDIA GPU with CUDA 12)",
}

# First-parameter names that mean "an image" (a function whose first parameter is named
# otherwise is left out, with the reason "first argument is not an image").
IMAGE_PARAMETERS = frozenset({
    "image", "input", "input_image", "label_image", "labels", "label_img", "data", "ar",
    "arr", "array", "volume", "int_image", "label_field",
})

# First-parameter names of functions that combine two images (left out: a step has one
# image input; use a FunctionStep).
TWO_IMAGE_PARAMETERS = frozenset({"input_image0", "image0", "input_image_label"})

# Required arguments that are a second image of the same field (a mask, labels, markers):
# such a function joins the catalog with them as named inputs (its entry's ``images``: a
# step gives them with inputs={...}). A structuring element (footprint) and the arguments
# that are not images (values, position, properties) still leave it out.
SECOND_IMAGE_ARGUMENTS = frozenset({"footprint", "labels", "mask", "values", "position",
                                    "properties", "label_img", "markers"})
NAMED_IMAGE_ARGUMENTS = frozenset({"labels", "mask", "label_img", "markers"})

# Second images that are required arguments by another name: the function joins the
# catalog, its step gives them as named inputs.
SECOND_IMAGES: dict[str, tuple[str, ...]] = {
    "skimage.exposure.match_histograms": ("reference",),
    "skimage.restoration.richardson_lucy": ("psf",),
    "skimage.restoration.wiener": ("psf",),
    "skimage.feature.match_template": ("template",),
    "scipy.ndimage.watershed_ift": ("markers",),
}

# Output kind where the Returns section does not say it plainly (or says it wrong).
OUTPUT: dict[str, str] = {
    "skimage.filters.threshold_multiotsu": "table",
    "skimage.filters.threshold_local": "image",
    "skimage.filters.try_all_threshold": "excluded",
    "skimage.measure.label": "labels",
    "skimage.measure.regionprops": "table",
    "skimage.measure.regionprops_table": "table",
    "skimage.measure.find_contours": "excluded",
    "skimage.measure.shannon_entropy": "scalar",
    "skimage.measure.blur_effect": "scalar",
    "skimage.measure.euler_number": "scalar",
    "skimage.measure.perimeter": "scalar",
    "skimage.measure.perimeter_crofton": "scalar",
    "skimage.measure.centroid": "coordinates",
    "skimage.morphology.remove_small_objects": "image",
    "skimage.morphology.remove_small_holes": "mask",
    "skimage.segmentation.watershed": "labels",
    "skimage.segmentation.slic": "labels",
    "skimage.segmentation.felzenszwalb": "labels",
    "skimage.segmentation.quickshift": "labels",
    "skimage.segmentation.clear_border": "image",
    "skimage.segmentation.expand_labels": "labels",
    "skimage.segmentation.random_walker": "labels",
    "skimage.feature.peak_local_max": "coordinates",
    "skimage.feature.blob_log": "coordinates",
    "skimage.feature.blob_dog": "coordinates",
    "skimage.feature.blob_doh": "coordinates",
    "skimage.feature.corner_peaks": "coordinates",
    "skimage.feature.canny": "mask",
    "skimage.restoration.estimate_sigma": "scalar",
    "scipy.ndimage.label": "labels",
    "scipy.ndimage.mean": "scalar",
    "scipy.ndimage.median": "scalar",
    "scipy.ndimage.minimum": "scalar",
    "scipy.ndimage.maximum": "scalar",
    "scipy.ndimage.sum": "scalar",
    "scipy.ndimage.sum_labels": "scalar",
    "scipy.ndimage.variance": "scalar",
    "scipy.ndimage.standard_deviation": "scalar",
    "scipy.ndimage.center_of_mass": "coordinates",
    "scipy.ndimage.minimum_position": "coordinates",
    "scipy.ndimage.maximum_position": "coordinates",
    "scipy.ndimage.binary_erosion": "mask",
    "scipy.ndimage.binary_dilation": "mask",
    "scipy.ndimage.binary_opening": "mask",
    "scipy.ndimage.binary_closing": "mask",
    "scipy.ndimage.binary_fill_holes": "mask",
    "scipy.ndimage.binary_propagation": "mask",
    "scipy.ndimage.distance_transform_edt": "image",
    "scipy.ndimage.distance_transform_cdt": "image",
    "scipy.ndimage.distance_transform_bf": "image",
    "scipy.ndimage.map_coordinates": "table",
    "skimage.filters.frangi": "image",
    "skimage.filters.threshold_niblack": "image",
    "skimage.filters.threshold_sauvola": "image",
    "skimage.morphology.label": "labels",
    "skimage.morphology.medial_axis": "mask",
    "skimage.morphology.local_maxima": "mask",
    "skimage.morphology.local_minima": "mask",
    "skimage.morphology.flood": "mask",
    "skimage.segmentation.flood": "mask",
    "skimage.segmentation.chan_vese": "mask",
    "skimage.segmentation.active_contour": "coordinates",
    "skimage.exposure.is_low_contrast": "scalar",
    "skimage.measure.moments": "table",
    "skimage.measure.moments_central": "table",
    "skimage.measure.inertia_tensor": "table",
    "skimage.measure.profile_line": "table",
    "skimage.transform.hough_ellipse": "table",
    "skimage.feature.haar_like_feature": "table",
    "skimage.feature.corner_orientations": "table",
    "skimage.feature.corner_subpix": "coordinates",
    # cucim keeps the binary morphology scikit-image 0.26 removed, without docstrings: the
    # result is a bool mask (cucim.skimage.morphology.binary, 26.10)
    **{f"cucim.skimage.morphology.binary_{op}": "mask"
       for op in ("erosion", "dilation", "opening", "closing")},
}

# pyclesperanto output kinds by name: functions without a category that are image
# operations all the same, and those whose category says "image" but return a vector.
CLE_KINDS: dict[str, str] = {
    "product_of_all_pixels": "scalar",
    "proximal_neighbor_count": "table",
    "statistics_of_labelled_pixels": "table",
    "statistics_of_background_and_labelled_pixels": "table",
    "mean_of_all_pixels": "scalar",
    "maximum_of_all_pixels": "scalar",
    "minimum_of_all_pixels": "scalar",
    "sum_of_all_pixels": "scalar",
}

# pyclesperanto's "label processing" functions named *_map paint a measurement per label
# (a parametric image), not labels.
CLE_MAP_SUFFIX = "_map"

# Functions that need the stack as one volume (a projection reduces Z).
VOLUME_ONLY_CATEGORIES = frozenset({"projection"})

# Dimensionality where the first parameter's documented shape does not say it.
DIMENSIONS: dict[str, str] = {
    "skimage.feature.canny": "2d",
    "skimage.filters.threshold_local": "nd",
    "skimage.restoration.rolling_ball": "nd",
    "skimage.restoration.denoise_bilateral": "2d",
    # its unitary Fourier transform pads the PSF to the image in every axis; a 2-plane
    # volume is shorter than a 3-plane PSF
    "skimage.restoration.wiener": "2d",
    "skimage.transform.radon": "2d",
    "skimage.transform.warp_polar": "2d",
    # max-tree filters index out of bounds on a 2-plane volume (scikit-image 0.26)
    "skimage.morphology.area_closing": "2d",
    "skimage.morphology.area_opening": "2d",
    "skimage.morphology.diameter_closing": "2d",
    "skimage.morphology.diameter_opening": "2d",
    "skimage.morphology.max_tree_local_maxima": "2d",
}

# Left out, with the reason (besides the generated reasons: first argument not an image,
# several results, RGB only).
EXCLUDED: dict[str, str] = {
    "skimage.filters.try_all_threshold": "draws a matplotlib figure",
    "skimage.measure.find_contours": "a list of contours of different lengths, not a table",
    "skimage.measure.marching_cubes": "a mesh (vertices, faces, normals, values)",
    "skimage.measure.ransac": "fits a model to data points, not an image",
    "skimage.measure.subdivide_polygon": "takes polygon coordinates",
    "skimage.measure.approximate_polygon": "takes polygon coordinates",
    "skimage.measure.points_in_poly": "takes points",
    "skimage.measure.grid_points_in_poly": "takes a shape",
    "skimage.feature.match_descriptors": "takes descriptors",
    "skimage.feature.plot_matched_features": "draws a matplotlib figure",
    "skimage.transform.warp": "needs a transform object or function",
    "skimage.segmentation.join_segmentations": "takes two label images",
    "skimage.restoration.unsupervised_wiener": "needs a point-spread function array",
    "skimage.restoration.unwrap_phase": "phase images only",
    "scipy.ndimage.generic_filter": "needs a Python callable per pixel",
    "scipy.ndimage.generic_filter1d": "needs a Python callable",
    "scipy.ndimage.generic_gradient_magnitude": "needs a derivative callable",
    "scipy.ndimage.generic_laplace": "needs a derivative callable",
    "scipy.ndimage.geometric_transform": "needs a mapping callable",
    "scipy.ndimage.labeled_comprehension": "needs a Python callable",
    "scipy.ndimage.value_indices": "a dict of index arrays per value",
    "scipy.ndimage.find_objects": "a list of slices per label",
    "scipy.ndimage.extrema": "four results (min, max, their positions)",
    "scipy.ndimage.histogram": "needs bins and range; use numpy",
    "scipy.ndimage.vectorized_filter": "needs a Python callable",
    "skimage.restoration.denoise_invariant": "needs a denoising function",
    "skimage.segmentation.mark_boundaries": "draws an RGB picture",
    "skimage.feature.draw_haar_like_feature": "draws an RGB picture",
    "skimage.feature.draw_multiblock_lbp": "draws an RGB picture",
    "skimage.feature.corner_orientations": "its mask is an odd-sized window (a footprint), "
                                           "not an image",
    "skimage.feature.graycomatrix": "a 4D co-occurrence matrix, not an image or table",
    "skimage.feature.multiscale_basic_features": "a feature stack with a channel axis last",
    "skimage.transform.pyramid_gaussian": "a generator of images of different sizes",
    "skimage.transform.pyramid_laplacian": "a generator of images of different sizes",
    "skimage.transform.hough_circle": "one accumulator image per radius",
    "skimage.filters.filter_forward": "needs an impulse-response function",
    "skimage.filters.filter_inverse": "needs an impulse-response function",
    "skimage.filters.wiener": "needs an impulse-response function",
    "skimage.filters.gabor": "two results (real and imaginary responses)",
    "skimage.segmentation.quickshift": "colour (RGB) images only",
    "scipy.ndimage.fourier_ellipsoid": "works on a Fourier transform (complex), not an image",
    "scipy.ndimage.fourier_gaussian": "works on a Fourier transform (complex), not an image",
    "scipy.ndimage.fourier_shift": "works on a Fourier transform (complex), not an image",
    "scipy.ndimage.fourier_uniform": "works on a Fourier transform (complex), not an image",
    "pyclesperanto.gather": "a device utility (gathers values by index)",
    "pyclesperanto.scatter": "a device utility (scatters values by index)",
    "pyclesperanto.range": "a device utility (a sub-range copy)",
}

# Arguments a function needs although its signature gives them a default (scipy's
# filters need size= or footprint=; size= is the one a step gives).
REQUIRED_ARGUMENTS: dict[str, tuple[str, ...]] = {
    f"scipy.ndimage.{name}": ("size",) for name in (
        "black_tophat", "white_tophat", "grey_closing", "grey_dilation", "grey_erosion",
        "grey_opening", "maximum_filter", "minimum_filter", "median_filter",
        "percentile_filter", "rank_filter", "morphological_gradient", "morphological_laplace")
}

# Optional modules an entry needs beyond its library (scikit-image's wavelet functions).
NEEDS: dict[str, str] = {
    "skimage.restoration.denoise_wavelet": "pywt",
    "skimage.restoration.estimate_sigma": "pywt",
}

# pyclesperanto: output kind from the function's categories (first match wins).
CLE_OUTPUT: tuple[tuple[str, str], ...] = (
    ("label measurement", "image"),
    ("label processing", "labels"),
    ("label", "labels"),
    ("binarize", "mask"),
    ("binary processing", "mask"),
)
