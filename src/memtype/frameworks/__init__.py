"""THE framework table: one row per memory type, one :class:`Adapter` subclass per framework
(with the facets it has: :class:`DeviceAdapter`, :class:`DeviceTiming`, :class:`PinnedSpills`,
:class:`Diagnostics`).

A row (:class:`Framework`) holds what must be known before the framework is imported; its
adapter class (a subclass of :class:`Adapter`, whose methods are the defaults) holds the rest.
Adding a framework means one row (here, or at run time with :func:`register_framework`) plus
one module defining the subclass. Nothing else in memtype names a framework.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import MappingProxyType, ModuleType
from typing import Any, cast

from memtype.errors import (
    ArgumentTypeError,
    FrameworkNotInstalledError,
    ImportOrderError,
    InvalidArgumentError,
    UnknownMemoryTypeError,
)
from memtype.frameworks._adapter import Adapter, data_nbytes
from memtype.frameworks._device import (
    CPU,
    GPU_KIND,
    Device,
    DeviceProperties,
    gpu_index,
    managed_gpu,
)
from memtype.frameworks._facets import (
    HOST_OOM_ERRORS,
    DeviceAdapter,
    DeviceTiming,
    Diagnostics,
    PinnedSpills,
    diagnostics,
    ran_out_of_memory,
)
from memtype.frameworks._host import KIN as DTYPE_KIN
from memtype.frameworks._host import aligned_copy
from memtype.frameworks._settings import Setting
from memtype.frameworks._startup import quiet_startup

__all__ = [
    "unusable_reason",
    "NO_OPENCL_VARIABLE",
    "Adapter",
    "DeviceAdapter",
    "DeviceTiming",
    "PinnedSpills",
    "Diagnostics",
    "HOST_OOM_ERRORS",
    "ran_out_of_memory",
    "diagnostics",
    "data_nbytes",
    "CPU",
    "Device",
    "DeviceProperties",
    "GPU_KIND",
    "managed_gpu",
    "gpu_index",
    "DTYPE_KIN",
    "aligned_copy",
    "Setting",
    "gpu_adapters",
    "is_loaded",
    "is_installed",
    "Framework",
    "builtin_frameworks",
    "FRAMEWORKS",
    "register_framework",
    "unregister_framework",
    "is_registered",
    "get_framework",
    "iter_frameworks",
    "load_adapter",
    "array_types",
    "loaded_frameworks",
    "known_names",
    "on_table_change",
    "ready_module",
]

NO_OPENCL_VARIABLE = "MEMTYPE_NO_OPENCL"
"""Set to 1, OpenCL is turned off: pyclesperanto has no device (``--no-opencl``)."""


@dataclass(frozen=True, kw_only=True)
class Framework:
    """One row of the framework table: what is known before the framework is imported.

    Parameters
    ----------
    name : str
        The memory type value (``"torch"``); lower case.
    module : str
        Top-level module that must be in ``sys.modules`` before an array can be one of ours.
    array_types : tuple of str
        ``"module:Attr"`` names of the array classes, resolved only once ``module`` is loaded.
    adapter : str
        ``"module:Class"``, the framework's :class:`Adapter` subclass (imported with the
        framework, after it).
    device_kinds : tuple of str
        Where arrays may live: ``"cpu"``, ``"cuda"``, ``"opencl"``. The first is the default.
    install_hint : str
        What to run to install it.
    extra : str
        memtype's optional extra that installs it (``pip install 'memtype[extra]'``); ``""``
        for none.
    import_before : tuple of str
        Installed modules memtype imports before this one (preferred order when both are used).
    crashes_after : tuple of str
        Modules that, once imported, make importing this framework crash the interpreter;
        memtype refuses that import with :class:`ImportOrderError` instead.
    prepare : str
        ``"module:function"`` memtype calls (no arguments) right before it first imports
        the framework, e.g. to choose its runtime; ``""`` for none.
    runtime_check : str
        ``"module:function"`` returning why the framework cannot hold arrays here although
        it is installed (``""`` when it can), found without importing the framework (e.g. no
        OpenCL runtime compiles); ``""`` for no such check.
    quiet_import : tuple of str
        Regular expressions of warnings the framework's import emits about a state memtype
        reports itself (with a better hint); silenced during the import memtype makes.
    quiet_stderr : tuple of str
        Regular expressions of the lines the framework's import writes straight to file
        descriptor 2 that are start-up chatter, not warnings (TensorFlow's absl INFO lines);
        dropped where ``MEMTYPE_QUIET_STARTUP=1`` (the ``memtype`` command), see
        :mod:`memtype.frameworks._startup`.
    settings : tuple of Setting
        Its memory settings (``memtype.gpu.configure`` keywords and their environment
        variables); a loaded framework applies the non-start-up ones (adapter
        ``apply_setting``).
    array_api : bool
        array-api-compat gives its arrays a namespace declaring the Array API standard, so
        ``@mt.array_api`` functions run on them as they are (what a plan offers before the
        framework is imported; ``memtype.array_api_functions.covers`` decides once it is).
    """

    name: str
    module: str
    array_types: tuple[str, ...]
    adapter: str
    device_kinds: tuple[str, ...]
    install_hint: str
    extra: str = ""
    import_before: tuple[str, ...] = field(default=())
    crashes_after: tuple[str, ...] = field(default=())
    prepare: str = ""
    runtime_check: str = ""
    quiet_import: tuple[str, ...] = field(default=())
    quiet_stderr: tuple[str, ...] = field(default=())
    settings: tuple[Setting, ...] = field(default=())
    array_api: bool = False

    @property
    def gpu_only(self) -> bool:
        """True when the framework has no host (``cpu``) arrays."""
        return "cpu" not in self.device_kinds

    @property
    def gpu_kind(self) -> str | None:
        """Its accelerator kind (the first device kind other than ``"cpu"``), or None."""
        return next((k for k in self.device_kinds if k != CPU.kind), None)

    @property
    def managed_gpu(self) -> bool:
        """True when its arrays may live on a managed GPU (:data:`GPU_KIND`)."""
        return GPU_KIND in self.device_kinds


_BUILTIN: tuple[Framework, ...] = (
    Framework(name="numpy", module="numpy", array_types=("numpy:ndarray",),
              adapter="memtype.frameworks.numpy_adapter:NumpyAdapter", device_kinds=("cpu",),
              install_hint="pip install numpy", array_api=True),
    Framework(name="cupy", module="cupy", array_types=("cupy:ndarray",),
              adapter="memtype.frameworks.cupy_adapter:CupyAdapter", device_kinds=("cuda",),
              install_hint="pip install 'memtype[cupy]'  (cupy-cuda12x; needs a CUDA GPU)",
              extra="cupy", array_api=True),
    Framework(name="torch", module="torch", array_types=("torch:Tensor",),
              adapter="memtype.frameworks.torch_adapter:TorchAdapter",
              device_kinds=("cpu", "cuda"), extra="torch", array_api=True,
              install_hint="pip install 'memtype[torch]'  (torch==2.13.0)",
              settings=(Setting("torch_allocator", "PYTORCH_CUDA_ALLOC_CONF", "text",
                                doc="PyTorch's CUDA caching allocator settings, e.g. "
                                    "'expandable_segments:True'"),)),
    Framework(name="tensorflow", module="tensorflow",
              array_types=("tensorflow:Tensor", "tensorflow:Variable"),
              adapter="memtype.frameworks.tensorflow_adapter:TensorflowAdapter",
              device_kinds=("cpu", "cuda"), extra="tensorflow",
              install_hint="pip install 'memtype[tensorflow]'  "
                           "(tensorflow-cpu, or tensorflow[and-cuda] on GPU)",
              import_before=("torch", "pyclesperanto"),
              # absl's INFO lines (I<mmdd> <time> <thread> <file>:<line>] ...), the line absl
              # writes before its first one, and cpu_feature_guard's second line
              quiet_stderr=(r"^I\d{4} [\d:.]+ +\d+ [\w.]+:\d+\] ",
                            r"^WARNING: All log messages before absl::InitializeLog\(\) is "
                            r"called are written to STDERR$",
                            r"^To enable the following instructions: .*rebuild TensorFlow"),
              settings=(Setting("tensorflow_memory_growth", "TF_FORCE_GPU_ALLOW_GROWTH", "flag",
                                startup=False, default=True,
                                doc="TensorFlow allocates GPU memory as needed instead of all "
                                    "at start"),)),
    Framework(name="jax", module="jax", array_types=("jax:Array",),
              adapter="memtype.frameworks.jax_adapter:JaxAdapter", device_kinds=("cpu", "cuda"),
              install_hint="pip install 'memtype[jax]'  (jax[cuda12] on GPU)", extra="jax",
              array_api=True,
              settings=(
                  Setting("jax_preallocate", "XLA_PYTHON_CLIENT_PREALLOCATE", "flag",
                          unset="true", default=False,
                          doc="JAX grabs most of GPU memory at start; memtype's default False "
                              "lets several frameworks share a GPU"),
                  Setting("jax_memory_fraction", "XLA_PYTHON_CLIENT_MEM_FRACTION", "fraction",
                          unset="0.75", doc="the fraction of GPU memory JAX may use"),
                  Setting("jax_enable_x64", "JAX_ENABLE_X64", "flag", startup=False,
                          doc="64-bit JAX arrays; may be changed at any time"))),
    Framework(name="pyclesperanto", module="pyclesperanto", array_types=("pyclesperanto:Array",),
              adapter="memtype.frameworks.pyclesperanto_adapter:PyclesperantoAdapter",
              device_kinds=("opencl",), extra="cle",
              install_hint="pip install 'memtype[cle]'  "
                           "(with pocl, a CPU OpenCL runtime, on Linux x86-64; "
                           "'memtype[cle-intel]' adds Intel's, for CPUs pocl cannot build for)",
              # With the pocl OpenCL runtime, importing pyclesperanto after tensorflow segfaults.
              crashes_after=("tensorflow",), prepare="memtype.frameworks._opencl:prepare",
              runtime_check="memtype.frameworks._opencl:unusable_reason",
              # its hint (install a backend) is wrong when the backend lacks an OpenCL runtime;
              # memtype says what is missing (no_device_reason, memtype info)
              quiet_import=("No pyclesperanto backend installed",)),
    Framework(name="mlx", module="mlx", array_types=("mlx.core:array",),
              adapter="memtype.frameworks.mlx_adapter:MlxAdapter", device_kinds=("cpu",),
              install_hint="pip install 'memtype[mlx]'  (mlx[cpu] on Linux)", extra="mlx"),
)

_table: dict[str, Framework] = {fw.name: fw for fw in _BUILTIN}
FRAMEWORKS: MappingProxyType[str, Framework] = MappingProxyType(_table)
"""Read-only view of the table, keyed by memory type value, in registration order."""

_adapters: dict[str, Adapter] = {}
_resolved_types: dict[str, tuple[type, ...]] = {}
_on_change: list[Callable[[], None]] = []
# One loader at a time: a framework is imported once while other threads wait, and no thread
# sees a half-built adapter. Re-entrant, since loading one framework first loads those in its
# ``import_before``. Python's per-module import locks cannot deadlock against it: nothing
# memtype imports under it calls back into memtype's loader.
_loader_lock = threading.RLock()


def ready_module(name: str) -> ModuleType | None:
    """``sys.modules[name]`` once its import has finished, else None (never imported, blocked
    with ``None``, or still being imported by some thread: a half-initialised module lacks
    attributes and must not be looked into). Nothing is imported here."""
    module = sys.modules.get(name)
    if module is None or getattr(getattr(module, "__spec__", None), "_initializing", False):
        return None  # importlib itself marks a module being executed with spec._initializing
    return module


def on_table_change(callback: Callable[[], None]) -> None:
    """Call ``callback`` (a cache's ``clear``) whenever a row is added or removed."""
    _on_change.append(callback)


def builtin_frameworks() -> tuple[Framework, ...]:
    """The rows memtype ships (the ``MemoryType`` members and the decorators made for them)."""
    return _BUILTIN


def known_names() -> tuple[str, ...]:
    """Memory type values in the table, in order."""
    return tuple(_table)


def is_registered(name: str) -> bool:
    """Whether ``name`` is a memory type value in the table."""
    return name in _table


def iter_frameworks() -> Iterator[Framework]:
    """The table's rows, in order."""
    return iter(tuple(_table.values()))


def get_framework(name: object) -> Framework:
    """The row for a memory type (a ``MemoryType`` or its string value).

    Raises
    ------
    UnknownMemoryTypeError
        If no row has that name.
    """
    key = getattr(name, "value", name)
    if isinstance(key, str):
        row = _table.get(key) or _table.get(key.lower())
        if row is not None:
            return row
    raise UnknownMemoryTypeError(
        f"Unknown memory type {name!r}. Expected one of: {', '.join(_table)}."
    )


def register_framework(framework: Framework, *, replace: bool = False) -> None:
    """Add a row to the table (a seventh framework is one row plus one module with its
    :class:`Adapter` subclass).

    Raises
    ------
    UnknownMemoryTypeError
        If the name is taken and ``replace`` is false, or the name is not lower case.
    InvalidArgumentError
        If ``adapter`` is not ``"module:Class"``.
    """
    if framework.name != framework.name.lower() or not framework.name.isidentifier():
        raise UnknownMemoryTypeError(
            f"Framework name must be a lower-case identifier; received {framework.name!r}."
        )
    if framework.adapter.count(":") != 1 or not all(framework.adapter.split(":")):
        raise InvalidArgumentError(
            f"Framework {framework.name!r}: adapter must name its Adapter subclass as "
            f"'module:Class'; received {framework.adapter!r}."
        )
    if framework.name in _table and not replace:
        raise UnknownMemoryTypeError(
            f"Memory type {framework.name!r} is already registered; "
            "pass replace=True to replace it."
        )
    _table[framework.name] = framework
    _forget(framework.name)


def unregister_framework(name: str) -> None:
    """Remove a run-time registered row (built-in rows cannot be removed)."""
    if any(fw.name == name for fw in _BUILTIN):
        raise UnknownMemoryTypeError(f"Built-in memory type {name!r} cannot be unregistered.")
    get_framework(name)
    del _table[name]
    _forget(name)


def _forget(name: str) -> None:
    _adapters.pop(name, None)
    _resolved_types.pop(name, None)
    for callback in _on_change:
        callback()


def _installed(module: str) -> bool:
    """Whether ``module`` can be found (a blocked or unfindable one: the import explains)."""
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # ValueError: sys.modules[module] is None (blocked)
        return False


def _check_import_order(framework: Framework) -> None:
    """Refuse an import that is known to crash the interpreter in the current state (a
    framework that is not installed is not refused: its import error says so instead)."""
    late = [m for m in framework.crashes_after if sys.modules.get(m) is not None]
    if late and _installed(framework.module):
        raise ImportOrderError(
            f"{framework.module!r} cannot be imported after {', '.join(late)!s}: that order "
            f"crashes the interpreter (seen with the pocl OpenCL runtime). Import "
            f"{framework.module} (or call memtype.frameworks.load_adapter({framework.name!r})) "
            f"before importing {', '.join(late)}."
        )


def _row_of_module(module: str) -> Framework | None:
    return next((fw for fw in _table.values() if fw.module == module), None)


def _run_prepare(framework: Framework) -> None:
    """Call the row's ``prepare`` hook (before the framework's first import)."""
    if not framework.prepare:
        return
    module_name, _, attr = framework.prepare.partition(":")
    hook = getattr(importlib.import_module(module_name), attr)
    hook()


def _import_framework_module(framework: Framework) -> ModuleType:
    _check_import_order(framework)
    for first in framework.import_before:  # crash workarounds: see Framework.import_before
        if ready_module(first) is None and _installed(first):
            row = _row_of_module(first)
            if row is None:
                importlib.import_module(first)
            else:
                _import_framework_module(row)
    loaded = ready_module(framework.module)
    if loaded is not None:
        return loaded
    if sys.modules.get(framework.module) is not None:  # another thread is importing it
        return importlib.import_module(framework.module)  # waits for that import to finish
    _run_prepare(framework)
    try:
        with warnings.catch_warnings(), quiet_startup(framework.quiet_stderr):
            for pattern in framework.quiet_import:
                warnings.filterwarnings("ignore", message=pattern)
            return importlib.import_module(framework.module)
    except ImportError as exc:
        raise FrameworkNotInstalledError(
            f"Memory type {framework.name!r} needs the {framework.module!r} package, which "
            f"cannot be imported ({exc}). Install it with: {framework.install_hint}"
        ) from exc
    except Exception as exc:  # installed, but its runtime fails while importing
        raise FrameworkNotInstalledError(
            f"Memory type {framework.name!r}: the {framework.module!r} package is installed "
            f"but fails to import ({type(exc).__name__}: {exc}). Reinstall it with: "
            f"{framework.install_hint}"
        ) from exc


def load_adapter(name: object) -> Adapter:
    """The adapter of a memory type (one instance per framework), importing the framework if
    needed.

    Raises
    ------
    UnknownMemoryTypeError
        Unknown name.
    FrameworkNotInstalledError
        The framework is not installed.
    ArgumentTypeError
        The row's adapter is not a subclass of :class:`Adapter`.
    """
    framework = get_framework(name)
    adapter = _adapters.get(framework.name)
    if adapter is None:
        with _loader_lock:
            adapter = _adapters.get(framework.name)
            if adapter is None:
                if ready_module(framework.module) is None:
                    _import_framework_module(framework)
                adapter = _adapter_class(framework)()
                _adapters[framework.name] = adapter
    return adapter


def _adapter_class(framework: Framework) -> type[Adapter]:
    module_name, _, attr = framework.adapter.partition(":")
    found = getattr(importlib.import_module(module_name), attr, None)
    if not (isinstance(found, type) and issubclass(found, Adapter)):
        raise ArgumentTypeError(
            f"Framework {framework.name!r}: its adapter {framework.adapter!r} must be a subclass "
            f"of memtype.frameworks.Adapter; received {found!r}."
        )
    return found


def array_types(framework: Framework) -> tuple[type, ...]:
    """The framework's array classes; empty while its module is not loaded."""
    resolved = _resolved_types.get(framework.name)
    if resolved is not None:
        return resolved
    if ready_module(framework.module) is None:  # not loaded, blocked, or still importing
        return ()
    classes: list[type] = []
    for spec in framework.array_types:
        module_name, _, attr = spec.partition(":")
        module: Any = ready_module(module_name)
        if module is None:
            if sys.modules.get(module_name) is not None:
                return ()  # a submodule still being imported: not loaded yet
            module = importlib.import_module(module_name)
        for part in attr.split("."):
            module = getattr(module, part)
        classes.append(cast(type, module))
    _resolved_types[framework.name] = tuple(classes)
    return tuple(classes)


def is_loaded(framework: Framework) -> bool:
    """Whether the framework's top-level module is imported (a module blocked with
    ``sys.modules[name] = None`` is not, nor one another thread is still importing);
    nothing is imported here."""
    return ready_module(framework.module) is not None


def is_installed(framework: Framework) -> bool:
    """Whether the framework's top-level module can be found (a blocked one cannot);
    nothing is imported here."""
    return _installed(framework.module)


def unusable_reason(framework: Framework) -> str:
    """Why an installed framework cannot hold arrays here, found without importing it
    (its row's ``runtime_check``); ``""`` when nothing is known against it."""
    if not framework.runtime_check:
        return ""
    module_name, _, attr = framework.runtime_check.partition(":")
    check = getattr(importlib.import_module(module_name), attr)
    return str(check())


def loaded_frameworks() -> list[Framework]:
    """Rows whose top-level module is already imported (nothing is imported here)."""
    return [fw for fw in _table.values() if is_loaded(fw)]


def gpu_adapters(*, started: bool = True, every_kind: bool = False
                 ) -> Iterator[tuple[Framework, DeviceAdapter]]:
    """``(row, adapter)`` of each loaded framework that may use a managed GPU (with
    ``every_kind``: a device of any accelerator kind, :attr:`Framework.gpu_kind`) and whose
    adapter has device memory (:class:`DeviceAdapter`).

    With ``started`` (the default), only those whose runtime has started: asking the others
    would start it (JAX's backend preallocates most of the GPU). Nothing is imported.
    """
    for fw in loaded_frameworks():
        if not (fw.managed_gpu or (every_kind and fw.gpu_kind is not None)):
            continue
        adapter = load_adapter(fw.name)
        if isinstance(adapter, DeviceAdapter) and (not started or adapter.runtime_started()):
            yield fw, adapter
