"""A pipeline written as data: a YAML file of steps, objects, measurements and summaries.

Why YAML (not TOML): a pipeline is a list of steps, each with a few options; YAML writes a
list of small mappings one per line (``- gaussian: {sigma: 2}``), with comments, and
reads like CellProfiler's and napari's settings; TOML needs ``[[steps]]`` tables of several
lines each and cannot put a mapping in a list item on one line readably. The file holds only
data (``yaml.safe_load``'s types), never code: what is not a catalog or analysis operation
stays in a Python pipeline file.

Layout::

    name: screen analysis          # Pipeline options: name, pattern, task_by,
    steps:                         # output_format, pyramid_levels, ome_version,
      - max_projection             # pixel_size, pixel_unit, summary
      - identify_primary: {inputs: {image: "channel:1"}, labels: nuclei}
      - measure_intensity:
          inputs: {labels: [nuclei], image: ["channel:1", "channel:2"]}
    summary: {plate_map: plate_map.csv, plate_id: P1}

A step is a name, or a one-key mapping of its name to its options: FunctionStep's
(``name``, ``inputs``, ``labels``, ``materialize``, ``variable_components``,
``group_by``, ``outputs``, ``passes_input``) and the operation's parameters. An input given
as a list makes one step per combination (``labels: [nuclei, cells]`` x ``image: [a, b]``:
four steps). Every error names the file and the line.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Mapping
from typing import Any

from memtype import require
from memtype.errors import MemtypeError, PipelineSpecError
from memtype.pipeline.analysis.summaries import Summary
from memtype.pipeline.model.pipeline import Pipeline, _check_graph
from memtype.pipeline.model.steps import FunctionStep

__all__ = ["SUFFIXES", "is_pipeline_spec", "load_pipeline_spec", "read_pipeline_spec",
           "dump_pipeline_spec", "dump_pipeline_python"]

SUFFIXES = (".yaml", ".yml")
"""The file names read as a pipeline written as data."""

_PIPELINE_KEYS = ("name", "pattern", "task_by", "output_format", "pyramid_levels",
                  "ome_version", "pixel_size", "pixel_unit", "summary")
_STEP_OPTIONS = ("name", "inputs", "labels", "materialize", "variable_components",
                 "group_by", "outputs", "passes_input")


def _yaml() -> Any:
    """PyYAML, or a MissingPackageError naming the extra that installs it."""
    return require("yaml", "Reading pipeline files written as YAML")


def is_pipeline_spec(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a pipeline written as data (by its suffix)."""
    return os.fspath(path).lower().endswith(SUFFIXES)


def _error(source: str, node: Any, message: str) -> PipelineSpecError:
    """An error at a node's line of the file."""
    line = node.start_mark.line + 1 if node is not None else 1
    return PipelineSpecError(f"{source}:{line}: {message}")


def _compose(text: str, source: str) -> Any:
    """The file's YAML node tree (safe: plain data only)."""
    yaml = _yaml()

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        if root is not None:  # every value plain data (a python/... tag refused here)
            yaml.SafeLoader("").construct_object(root, deep=True)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problem = getattr(exc, "problem", None) or str(exc)
        raise PipelineSpecError(f"{source}:{line}: not valid YAML ({problem}).") from None
    except RecursionError:  # PyYAML composes and builds nested values recursively
        raise PipelineSpecError(f"{source}:1: values are nested too deeply to read; expected "
                                "a pipeline of steps and their options.") from None
    _refuse_repeated_keys(root, source, set())
    return root


def _refuse_repeated_keys(node: Any, source: str, visited: set[int]) -> None:
    """A key given twice in one mapping is an error (YAML would keep the last silently).
    Each node is read once (``visited``): an alias repeats a node, and may point back."""
    yaml = _yaml()

    if id(node) in visited:
        return
    visited.add(id(node))
    if isinstance(node, yaml.SequenceNode):
        for item in node.value:
            _refuse_repeated_keys(item, source, visited)
    elif isinstance(node, yaml.MappingNode):
        seen: dict[Any, int] = {}
        for key, value in node.value:
            name = key.value if isinstance(key, yaml.ScalarNode) else id(key)
            if name in seen:
                raise _error(source, key, f"key {name!r} is given twice (first on line "
                                          f"{seen[name]}); expected each key once.")
            seen[name] = key.start_mark.line + 1
            _refuse_repeated_keys(value, source, visited)


def _value(node: Any) -> Any:
    """A node as plain Python data."""
    yaml = _yaml()

    if node is None:
        return None
    return yaml.SafeLoader("").construct_object(node, deep=True)


def _pairs(node: Any, source: str, what: str) -> list[tuple[str, Any, Any]]:
    """A mapping node's ``(key, key node, value node)``; anything else is an error."""
    yaml = _yaml()

    if not isinstance(node, yaml.MappingNode):
        raise _error(source, node, f"{what} must be a mapping; received "
                                   f"{type(_value(node)).__name__}.")
    out = []
    for key, value in node.value:
        name = _value(key)
        if not isinstance(name, str):
            raise _error(source, key, f"{what}: keys are names; received {name!r}.")
        out.append((name, key, value))
    return out


def _expand_inputs(inputs: Any) -> list[dict[str, Any] | None]:
    """``inputs`` with lists as one mapping per combination (None: no inputs)."""
    if not isinstance(inputs, Mapping):
        return [inputs]
    keys = list(inputs)
    choices = [v if isinstance(v, list) else [v] for v in inputs.values()]
    return [dict(zip(keys, combo, strict=True)) for combo in itertools.product(*choices)]


def _steps(node: Any, source: str) -> list[FunctionStep]:
    """The ``steps`` list, each step made and its named inputs checked against the steps
    before it (an error names its line)."""
    yaml = _yaml()

    if not isinstance(node, yaml.SequenceNode) or not node.value:
        raise _error(source, node, "steps must be a list of at least one step (a name, or "
                                   "'- name: {options}').")
    steps = []
    for item in node.value:
        options: Any
        if isinstance(item, yaml.ScalarNode):
            name, options = _value(item), {}
        else:
            pairs = _pairs(item, source, "a step")
            if len(pairs) != 1:
                raise _error(source, item, f"a step is one name with its options; received "
                                           f"{[p[0] for p in pairs]} (indent the options).")
            name, options = pairs[0][0], _value(pairs[0][2]) or {}
        if not isinstance(options, Mapping):
            raise _error(source, item, f"step {name!r}: its options must be a mapping; "
                                       f"received {options!r}.")
        for inputs in _expand_inputs(options.get("inputs")):
            given = {**options, **({"inputs": inputs} if inputs is not None else {})}
            try:
                steps.append(FunctionStep(name, **given))
                _check_graph(steps)
            except (MemtypeError, TypeError, ValueError) as exc:
                raise _error(source, item, str(exc)) from None
    return steps


def read_pipeline_spec(text: str, source: str = "<pipeline>",
                       base: str | os.PathLike[str] = ".") -> Pipeline:
    """A :class:`~memtype.pipeline.Pipeline` from YAML text (see the module docstring).

    ``base``: where relative paths in the file (a plate map) are found.

    Raises
    ------
    PipelineSpecError
        Not valid YAML, an unknown key, or a step memtype cannot make; the message starts
        with ``source:line:`` (a ``ValueError``).
    """
    root = _compose(text, source)
    if root is None:
        raise PipelineSpecError(f"{source}:1: the file is empty; expected 'steps:' and a "
                                "list of steps.")
    options: dict[str, Any] = {}
    steps = None
    for key, key_node, value in _pairs(root, source, "a pipeline file"):
        if key == "steps":
            steps = _steps(value, source)
        elif key in _PIPELINE_KEYS:
            options[key] = _value(value)
        else:
            raise _error(source, key_node, f"unknown key {key!r}; expected 'steps' or one of "
                                           f"{list(_PIPELINE_KEYS)}.")
    if steps is None:
        raise _error(source, root, "no 'steps:'; expected a list of steps.")
    if isinstance(options.get("summary"), Mapping):
        options["summary"] = _summary(options["summary"], base)
    try:
        return Pipeline(steps, **options)
    except (MemtypeError, TypeError, ValueError) as exc:
        raise _error(source, root, str(exc)) from None


def _summary(given: Mapping[str, Any], base: str | os.PathLike[str]) -> Any:
    """The ``summary:`` options, a relative plate map found beside the file."""
    plate_map = given.get("plate_map")
    if isinstance(plate_map, str) and not os.path.isabs(plate_map):
        plate_map = os.path.join(os.fspath(base), plate_map)
    return Summary(**{**given, "plate_map": plate_map})


def load_pipeline_spec(path: str | os.PathLike[str]) -> Pipeline:
    """The pipeline a YAML file says (see :func:`read_pipeline_spec`).

    Raises
    ------
    PipelineSpecError
        The file cannot be read, or does not say a valid pipeline (``file:line:``).
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as fh:
            text = fh.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise PipelineSpecError(f"{name}: cannot read the pipeline file ({exc}).") from None
    return read_pipeline_spec(text, name, os.path.dirname(os.path.abspath(name)))


def dump_pipeline_spec(pipeline: Pipeline) -> str:
    """The pipeline as YAML, where every step is a named operation or catalog function.

    Raises
    ------
    PipelineSpecError
        A step runs a Python function (a pipeline file names operations only).
    """
    yaml = _yaml()

    steps = [_step_data(step) for step in pipeline.steps]
    data: dict[str, Any] = {"name": pipeline.name}
    if pipeline._pattern_given:
        data["pattern"] = pipeline.pattern.template
    if pipeline.task_by != ("well",):
        data["task_by"] = list(pipeline.task_by)
    data["steps"] = steps
    if pipeline.summary is not None:
        data["summary"] = pipeline.summary.as_data()
    return str(yaml.safe_dump(data, sort_keys=False, default_flow_style=None))


def _step_data(step: FunctionStep) -> Any:
    """One step as data: its name, or its name with its options."""
    if step.spec is None:
        raise PipelineSpecError(
            f"step {step.name!r} runs a Python function; a pipeline file names catalog and "
            "analysis operations only (keep this pipeline in a Python file).")
    name, given = step.spec
    options: dict[str, Any] = dict(given)
    if step.name != name:
        options["name"] = step.name
    if step.inputs:
        options["inputs"] = {i.parameter: i.reference for i in step.inputs}
    if step.labels is not None:
        options["labels"] = step.labels
    if step.materialize:
        options["materialize"] = True
    if step.variable_components != ("z",):
        options["variable_components"] = list(step.variable_components)
    return {name: options} if options else name


def dump_pipeline_python(pipeline: Pipeline) -> str:
    """The pipeline as a Python pipeline file (``pipeline = Pipeline([...])``), where every
    step is a named operation or catalog function: the starting point for adding functions.

    Raises
    ------
    PipelineSpecError
        A step runs a Python function (its source is not the pipeline's to write).
    """
    lines = ["from memtype.pipeline import FunctionStep, Pipeline",
             *(["from memtype.pipeline.analysis.summaries import Summary"]
               if pipeline.summary is not None else []),
             "", "pipeline = Pipeline(["]
    for step in pipeline.steps:
        data = _step_data(step)
        name, options = (data, {}) if isinstance(data, str) else next(iter(data.items()))
        arguments = "".join(f", {k}={v!r}" for k, v in options.items())
        lines.append(f"    FunctionStep({name!r}{arguments}),")
    settings = f"], name={pipeline.name!r}"
    if pipeline.summary is not None:
        summary = ", ".join(f"{k}={v!r}" for k, v in pipeline.summary.as_data().items())
        settings += f", summary=Summary({summary})"
    lines.append(settings + ")")
    return "\n".join(lines) + "\n"
