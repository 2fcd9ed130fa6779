"""The catalog's pipeline steps: :func:`step` (a catalog entry) and :func:`operation` (an
operation over its implementations), each a :class:`~memtype.pipeline.FunctionStep`.

The rest of the catalog (entries, calls, operations, the naming of steps) builds no step, so
:class:`~memtype.pipeline.FunctionStep` can resolve a name through it and every import points
one way: this module -> ``memtype.pipeline.model.steps`` -> ``catalog.naming`` -> the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memtype.pipeline.catalog.calls import CALL_OPTIONS, _check_arguments, _volume, catalog_function
from memtype.pipeline.catalog.entry import get
from memtype.pipeline.catalog.operations import _operation, _parameters, variants_of
from memtype.pipeline.model.steps import FunctionStep

__all__ = ["step", "operation"]


def step(function: str, /, *, volume: bool | None = None, name: str | None = None,
         variable_components: Sequence[str] = ("z",), materialize: bool = False,
         outputs: Sequence[str] | None = None, **kwargs: Any) -> FunctionStep:
    """A pipeline step running the catalog entry ``function`` with keyword arguments.

    Parameters
    ----------
    function : str
        A catalog entry, e.g. ``"skimage.filters.gaussian"`` (``memtype functions`` lists them).
    volume : bool, optional
        Run on the whole stack at once. Default: for ``nd`` entries when the stack holds
        only z-planes (``variable_components`` within ``("z",)``), so channels and sites
        never mix; ``2d`` entries always run per slice, ``3d`` ones (projections) on the
        volume.
    name, variable_components, materialize, outputs
        As for :class:`~memtype.pipeline.FunctionStep`. A side output (scalar,
        coordinates, table) is named after the step unless ``outputs`` says otherwise.
    **kwargs
        The function's keyword arguments; ``dtype_conversion`` and the other call options
        of memtype functions go to the step.

    Returns
    -------
    FunctionStep

    Raises
    ------
    ValueError
        An unknown entry, a missing required argument, an argument the function does not
        take, or ``volume=True`` for a 2D-only function.

    Examples
    --------
    >>> from memtype.pipeline import catalog
    >>> blur = catalog.step("skimage.filters.gaussian", sigma=2)
    >>> blur.name
    'gaussian'
    """
    entry = get(function)
    options = {k: v for k, v in kwargs.items() if k in CALL_OPTIONS}
    arguments = {k: v for k, v in kwargs.items() if k not in CALL_OPTIONS}
    _check_arguments(entry, arguments)
    runs_volume = _volume(entry, volume, variable_components)
    func = catalog_function(entry, volume=runs_volume)
    # the arguments go with the call (not into the function), so a run's record names them
    return FunctionStep((func, arguments), name or entry.function,
                        variable_components=variable_components, materialize=materialize,
                        outputs=outputs, **options)


def operation(name: str, /, *, step_name: str | None = None,
              variable_components: tuple[str, ...] = ("z",), materialize: bool = False,
              outputs: tuple[str, ...] | None = None, **params: Any) -> FunctionStep:
    """A step computing the operation ``name`` in whichever framework the plan picks.

    Parameters
    ----------
    name : str
        An operation of :data:`~memtype.pipeline.catalog.OPERATIONS` (``memtype functions
        --operations`` lists them).
    step_name, variable_components, materialize, outputs
        As ``name``, ``variable_components``, ``materialize`` and ``outputs`` of
        :class:`~memtype.pipeline.FunctionStep` (``outputs``: the table of a ``table``
        operation, named after the step by default).
    **params
        The operation's parameters (``sigma=``, ``radius=``).

    Returns
    -------
    FunctionStep
        Over :class:`~memtype.pipeline.Variants`, one implementation per memory type.

    Raises
    ------
    ValueError
        An unknown operation or parameter.

    Examples
    --------
    >>> from memtype.pipeline import catalog
    >>> blur = catalog.operation("gaussian", sigma=2)
    >>> list(blur.variants)
    ['numpy', 'pyclesperanto', 'torch', 'jax']
    """
    _parameters(_operation(name), params)
    return FunctionStep((variants_of(name), params), step_name or name,
                        variable_components=variable_components, materialize=materialize,
                        outputs=outputs)
