"""Framework memory settings as table data (:attr:`Framework.settings`).

A :class:`Setting` names one ``memtype.gpu.configure`` keyword, the environment variable the
framework reads, and how a value is spelled there. It is data, usable before the framework is
imported (``configure`` must not import frameworks); what only the loaded framework can do
(TensorFlow's ``set_memory_growth``, JAX's ``config.update``) is its adapter's
``apply_setting`` hook.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Literal

from memtype.errors import ArgumentTypeError, ConfigurationError

__all__ = ["Setting", "ALREADY"]

ALREADY = "already in effect"
"""What ``configure`` reports for a setting that needed no change."""


@dataclass(frozen=True)
class Setting:
    """One framework memory setting.

    Parameters
    ----------
    name : str
        The ``memtype.gpu.configure`` keyword (``"jax_preallocate"``).
    env : str
        The environment variable the framework reads (``"XLA_PYTHON_CLIENT_PREALLOCATE"``).
    kind : {"flag", "fraction", "text"}
        A bool (spelled ``"true"`` / ``"false"``), a float in (0, 1], or a string.
    startup : bool
        True: read once when the framework's runtime starts (later, a different value is a
        :class:`ConfigurationError`); False: the adapter's ``apply_setting`` applies it to a
        loaded framework at any time.
    unset : str or None
        The value in effect when the variable is not set (None: none).
    default : bool, float, str or None
        What ``configure()`` applies when the keyword is not given (None: nothing).
    doc : str
        One line for ``configure``'s documentation.
    """

    name: str
    env: str
    kind: Literal["flag", "fraction", "text"]
    startup: bool = True
    unset: str | None = None
    default: bool | float | str | None = None
    doc: str = ""

    def spell(self, value: object) -> str:
        """``value`` as the environment variable's text.

        Raises
        ------
        ArgumentTypeError
            A value of the wrong type (a flag that is not a bool...).
        ConfigurationError
            A fraction outside (0, 1].
        """
        if self.kind == "flag":
            if not isinstance(value, bool):
                raise ArgumentTypeError(f"{self.name} must be a bool or None; received {value!r}.")
            return "true" if value else "false"
        if self.kind == "fraction":
            number = math.nan
            if isinstance(value, numbers.Real) and not isinstance(value, bool):
                number = float(value)
            if not 0.0 < number <= 1.0:
                raise ConfigurationError(f"{self.name} must be in (0, 1]; received {value!r}.")
            return f"{number:g}"
        if not isinstance(value, str):
            raise ArgumentTypeError(f"{self.name} must be a str or None; received {value!r}.")
        return value
