"""Pipeline.run's three option objects: checked when made, printed by what differs, the old
flat keywords refused naming their new place, and memtype run's flags filling them one to one."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.cli import build_parser, main
from memtype.errors import ArgumentTypeError, CommandError, InvalidArgumentError, MemtypeError
from memtype.pipeline import (
    ExecutionOptions,
    InlineExecutor,
    Pipeline,
    ReadOptions,
    WriteOptions,
)
from memtype.pipeline.commands import run_options_from
from memtype.pipeline.execution.progress import Progress
from memtype.pipeline.model.options import OPTIONS, run_options


@mt.numpy  # type: ignore[untyped-decorator]
def np_project(stack: Any) -> Any:
    return stack.max(axis=0, keepdims=True)


FIELDS = {f.name: cls for cls in OPTIONS.values()
          for f in dataclasses.fields(cls)}  # type: ignore[arg-type]


# -- the old flat keywords ----------------------------------------------------------------
@pytest.mark.parametrize("keyword", sorted(set(FIELDS) - {"executor"}))  # still run's own
def test_an_old_flat_keyword_names_its_new_place(keyword: str, tmp_path: Path) -> None:
    param = next(p for p, cls in OPTIONS.items() if cls is FIELDS[keyword])
    old: dict[str, Any] = {keyword: 1}
    with pytest.raises(ArgumentTypeError) as info:
        Pipeline([np_project]).run(tmp_path / "missing", tmp_path / "out", **old)
    assert isinstance(info.value, TypeError) and isinstance(info.value, MemtypeError)
    assert f"{keyword}= is now {param}={FIELDS[keyword].__name__}({keyword}=...)" in str(
        info.value)
    assert not (tmp_path / "out").exists()  # refused before anything is touched


def test_an_unknown_keyword_is_a_type_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(ArgumentTypeError, match=r"wokers= is no argument of it"):
        Pipeline([np_project]).run(tmp_path, tmp_path / "out", wokers=2)  # type: ignore[arg-type]


def test_several_old_keywords_are_named_together(tmp_path: Path) -> None:
    with pytest.raises(ArgumentTypeError, match=r"got workers=, resume=: workers= is now "
                       r"execution=ExecutionOptions\(workers=...\); resume= is now "
                       r"write=WriteOptions\(resume=...\)"):
        # a type checker flags the old keywords too (run's **moved is typed Never)
        Pipeline([np_project]).run(tmp_path, tmp_path / "out",
                                   workers=2, resume=True)  # type: ignore[arg-type]


@pytest.mark.parametrize(("param", "value"), [
    ("execution", WriteOptions()), ("read", ExecutionOptions()), ("write", "resume"),
])
def test_an_option_of_the_wrong_class_is_refused(param: str, value: Any) -> None:
    given: dict[str, Any] = {"execution": None, "read": None, "write": None, param: value}
    with pytest.raises(ArgumentTypeError, match=f"{param}=\\) must be a "
                       f"{OPTIONS[param].__name__}"):
        run_options(None, given["execution"], given["read"], given["write"], {})


# -- the executor shorthand ---------------------------------------------------------------
def test_the_executor_shorthand_fills_the_execution_options() -> None:
    execution, read, write = run_options("threads", ExecutionOptions(workers=2), None, None, {})
    assert execution == ExecutionOptions("threads", workers=2)
    assert (read, write) == (ReadOptions(), WriteOptions())


def test_the_executor_shorthand_beside_another_executor_is_refused() -> None:
    with pytest.raises(ArgumentTypeError, match="expected one executor"):
        run_options("dask", ExecutionOptions("threads"), None, None, {})


def test_a_run_with_the_shorthand_and_options_runs(tmp_path: Path) -> None:
    plate = tmp_path / "plate"
    plate.mkdir()
    for well in ("A01", "A02"):
        for z in (1, 2):
            np.save(plate / f"{well}_s1_c1_z{z}.npy", np.full((4, 4), z, np.uint16))
    pipeline = Pipeline([np_project], pattern="{well}_s{site}_c{channel}_z{z}.npy",
                        output_format="tiff")
    report = pipeline.run(plate, tmp_path / "out", "threads",
                          execution=ExecutionOptions(workers=2, progress=False))
    assert report.ok and len(report.done) == 2 and "threads" in report.executor
    again = pipeline.run(plate, tmp_path / "out", write=WriteOptions(resume=True))
    assert again.ok and len(again.skipped) == 2


# -- checked when made, printed by what differs -------------------------------------------
@pytest.mark.parametrize(("cls", "kwargs", "error", "match"), [
    (ExecutionOptions, {"executor": "slurm"}, InvalidArgumentError, "executor must be one of"),
    (ExecutionOptions, {"workers": 0}, InvalidArgumentError, "workers must be at least 1"),
    (ExecutionOptions, {"workers": True}, ArgumentTypeError, "workers must be an int"),
    (ExecutionOptions, {"max_failures": -1}, InvalidArgumentError, "max_failures"),
    (ExecutionOptions, {"intermediate_budget": -5}, InvalidArgumentError,
     "intermediate_budget must be at least 0"),
    (ExecutionOptions, {"progress": "yes"}, ArgumentTypeError, "progress must be"),
    (ExecutionOptions, {"budgets": {"cpu": "1GB"}}, ArgumentTypeError, "budgets"),
    (ReadOptions, {"pattern": "plain.tif"}, InvalidArgumentError, "has no {field}"),
    (WriteOptions, {"plate": 97}, ValueError, "97"),
    (WriteOptions, {"overview_column": "a:b:c"}, InvalidArgumentError, "overview_column"),
    (WriteOptions, {"resume": True, "overwrite_foreign": True}, InvalidArgumentError,
     "one of resume, overwrite and overwrite_foreign; received resume=True and "
     "overwrite_foreign=True"),
])
def test_a_bad_option_fails_when_made(cls: Any, kwargs: dict[str, Any], error: type,
                                      match: str) -> None:
    with pytest.raises(error, match=match) as info:
        cls(**kwargs)
    assert isinstance(info.value, MemtypeError)


@pytest.mark.parametrize(("options", "text"), [
    (ExecutionOptions(), "ExecutionOptions()"),
    (ExecutionOptions("dask", workers=4, max_failures=0),
     "ExecutionOptions(executor='dask', workers=4, max_failures=0)"),
    (ExecutionOptions(budgets={"cpu": 10}), "ExecutionOptions(budgets={'cpu': 10})"),
    (ReadOptions(pattern="{well}_{z}.tif", layout="pattern"),
     "ReadOptions(pattern='{well}_{z}.tif', layout='pattern')"),
    (WriteOptions(overwrite=True, plate=384), "WriteOptions(overwrite=True, plate=384)"),
])
def test_an_option_prints_what_differs_from_the_defaults(options: Any, text: str) -> None:
    assert repr(options) == str(options) == text


def test_options_are_frozen_and_reusable() -> None:
    options = ExecutionOptions("threads", workers=2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.workers = 3  # type: ignore[misc]
    assert dataclasses.replace(options, workers=3) == ExecutionOptions("threads", workers=3)


def test_a_given_executor_and_progress_are_kept() -> None:
    executor, progress = InlineExecutor(), Progress()
    options = ExecutionOptions(executor, progress=progress)
    assert options.executor is executor and options.progress is progress


# -- memtype run's flags, one to one ------------------------------------------------------
NOT_RUN_OPTIONS = {"help", "pipeline_file", "input", "output", "ome_version", "pixel_size",
                   "pixel_unit", "no_opencl", "plan", "preview"}
"""memtype run's flags that are not Pipeline.run options (the pipeline's own settings, what
the command does)."""
NO_FLAG = {"client"}
"""Fields with no flag: a live dask Client (its command-line form is --scheduler)."""


def _run_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    [sub] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    run: argparse.ArgumentParser = sub.choices["run"]
    return run


def test_every_run_flag_is_a_field_and_every_field_a_flag() -> None:
    dests = {a.dest for a in _run_parser()._actions} - NOT_RUN_OPTIONS
    assert dests == set(FIELDS) - NO_FLAG


FLAG_CASES: list[tuple[list[str], str, Any]] = [
    (["--pattern", "{well}_{z}.tif"], "pattern", "{well}_{z}.tif"),
    (["--layout", "phenix"], "layout", "phenix"),
    (["--executor", "threads"], "executor", "threads"),
    (["--workers", "3"], "workers", 3),
    (["--scheduler", "tcp://host:8786"], "scheduler", "tcp://host:8786"),
    (["--no-progress"], "progress", False),
    (["--max-failures", "0"], "max_failures", 0),
    (["--budget", "cpu=5", "--budget", "opencl:0=7"], "budgets", {"cpu": 5, "opencl:0": 7}),
    (["--intermediate-budget", "1024"], "intermediate_budget", 1024),
    (["--resume"], "resume", True),
    (["--overwrite"], "overwrite", True),
    (["--overwrite-foreign"], "overwrite_foreign", True),
    (["--plate", "384"], "plate", 384),
    (["--overview-column", "nuclei:area"], "overview_column", "nuclei:area"),
]
"""One non-default value per flag, and the field it must fill."""


@pytest.mark.parametrize(("flags", "field", "value"), FLAG_CASES)
def test_a_run_flag_fills_its_field(flags: list[str], field: str, value: Any) -> None:
    args = build_parser().parse_args(["run", "p.py", "--input", "i", "--output", "o", *flags])
    built: dict[type, Any] = {type(o): o for o in run_options_from(args)}
    options = built[FIELDS[field]]
    assert getattr(options, field) == value
    defaults = FIELDS[field]()
    others = [f.name for f in dataclasses.fields(options) if f.name != field]
    assert [getattr(options, n) for n in others] == [getattr(defaults, n) for n in others]


def test_the_flag_table_covers_every_flag() -> None:
    covered = {field for _, field, _ in FLAG_CASES}
    assert covered == set(FIELDS) - NO_FLAG


@pytest.mark.parametrize(("flags", "needle"), [
    (["--pattern", "{well"], "expected '}'"),
    (["--pattern", "plain.tif"], "has no {field}"),
    (["--overview-column", "a:b:c"], "overview_column"),
])
def test_a_flag_the_options_refuse_is_one_line_exit_2(
        flags: list[str], needle: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["run", "missing.py", "--input", "i", "--output", "o", *flags])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and needle in err, err


def test_a_bad_budget_flag_is_a_command_error() -> None:
    with pytest.raises(CommandError, match="--budget must be DEVICE=BYTES"):
        build_parser().parse_args(["run", "p.py", "--input", "i", "--output", "o",
                                   "--budget", "opencl:0"])

