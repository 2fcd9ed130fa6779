"""Pipelines: steps of decorated functions run over the groups of a plate.

>>> import memtype as mt
>>> from memtype.pipeline import FunctionStep, Pipeline
>>> @mt.numpy
... def project(stack):
...     return stack.max(axis=0, keepdims=True)
>>> pipeline = Pipeline([FunctionStep(project)])
>>> report = pipeline.run("plate/", output="out/", executor="threads")  # doctest: +SKIP
>>> report = pipeline.run("plate/", "out/", execution=ExecutionOptions("threads", workers=2),
...                       write=WriteOptions(resume=True))  # doctest: +SKIP

Each group (by default each well) is an independent task, run inline, on threads, or on
dask.distributed workers; see ``docs/pipeline.md``.
"""

from __future__ import annotations

from memtype._lazy import lazy_loader
from memtype.pipeline.execution.executors import (
    DaskExecutor,
    Executor,
    InlineExecutor,
    ThreadExecutor,
    make_executor,
)
from memtype.pipeline.execution.report import GroupResult, RunReport, StepStats
from memtype.pipeline.io.patterns import DEFAULT_PATTERN, FilenamePattern, ImageRecord
from memtype.pipeline.model.modules import import_pipeline_file
from memtype.pipeline.model.options import ExecutionOptions, ReadOptions, WriteOptions
from memtype.pipeline.model.pipeline import Pipeline
from memtype.pipeline.model.steps import FunctionStep
from memtype.pipeline.model.variants import Variants
from memtype.pipeline.planning import Plan

# the synthetic plate is an application of the library (the demo's input), imported on first
# use so that importing the library never loads it
_APPLICATION = {"SyntheticPlate": "memtype.pipeline.synthetic",
                "write_synthetic_plate": "memtype.pipeline.synthetic"}

__all__ = [
    "FunctionStep",
    "Pipeline",
    "ReadOptions",
    "ExecutionOptions",
    "WriteOptions",
    "Plan",
    "Variants",
    "FilenamePattern",
    "ImageRecord",
    "DEFAULT_PATTERN",
    "Executor",
    "InlineExecutor",
    "ThreadExecutor",
    "DaskExecutor",
    "make_executor",
    "RunReport",
    "GroupResult",
    "StepStats",
    "SyntheticPlate",
    "write_synthetic_plate",
    "import_pipeline_file",
]

__getattr__ = lazy_loader(globals(), _APPLICATION)
