"""Planned pipelines (issue 15): variants, Pipeline.plan, plan against actual, lazy conversion."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import memtype as mt
from memtype.conversion import ConversionEvent, add_conversion_hook, remove_conversion_hook
from memtype.pipeline import FunctionStep, Pipeline
from memtype.pipeline.model.variants import Variants
from memtype.pipeline.planning import Plan
from tests.pipeline_support import write_plate

NATIVE = {"dtype_conversion": mt.DtypeConversion.NATIVE_OUTPUT}


@pytest.fixture(scope="module")
def plate_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_plate(tmp_path_factory.mktemp("plate"))


# -- implementations (module level: importable by name) -----------------------------------
def scale_np(stack: Any) -> Any:
    return stack * 2.0


def scale_torch(stack: Any) -> Any:
    return stack * 2.0


def scale_jax(stack: Any) -> Any:
    return stack * 2.0


@mt.torch
def torch_only(stack: Any) -> Any:
    return stack + 1.0


@mt.numpy
def numpy_only(stack: Any) -> Any:
    return stack - 1.0


@mt.pyclesperanto
def cle_only(stack: Any) -> Any:
    import pyclesperanto as cle

    return cle.add_image_and_scalar(stack, scalar=1.0)


def _scale_step(name: str = "scale", **kw: Any) -> FunctionStep:
    return FunctionStep(mt.variants(numpy=scale_np, torch=scale_torch, jax=scale_jax),
                        name=name, **NATIVE, **kw)


# -- 1. steps with several implementations -------------------------------------------------
def test_declared_variants_make_a_step_with_implementations() -> None:
    step = _scale_step()
    assert isinstance(step.variants, Variants)
    assert list(step.variants) == ["numpy", "torch", "jax"]
    chosen = step.with_implementation("torch")
    assert chosen.chain[0].input_type == "torch" and step.chain[0].input_type == "numpy"


@pytest.mark.requires("torch")
def test_mt_variants_is_usable_as_a_function() -> None:
    double = mt.variants(torch=scale_torch, numpy=scale_np)
    out = double(np.ones((1, 2, 2), np.float32))  # runs the first implementation (torch)
    assert type(out).__name__ == "Tensor" and float(out.sum()) == 8.0
    assert FunctionStep(double).variants is double


def test_variants_refuse_a_mismatched_decorated_function() -> None:
    with pytest.raises(mt.errors.InvalidArgumentError, match="takes torch"):
        mt.variants(numpy=torch_only)


def test_group_by_dict_still_routes() -> None:
    step = FunctionStep({1: numpy_only, 2: torch_only}, group_by="channel")
    assert step.variants is None and step.routes is not None


def test_a_dict_keyed_by_memory_types_is_a_routing_not_variants() -> None:
    # issue 22 section 5: implementations are declared (mt.variants), never guessed from keys
    with pytest.raises(mt.errors.InvalidArgumentError,
                       match=r"needs group_by=.*keyed \['torch', 'numpy'\].*mt\.variants\("):
        FunctionStep({"torch": scale_torch, "numpy": scale_np})
    step = FunctionStep({"torch": torch_only, "numpy": numpy_only}, group_by="channel")
    assert step.variants is None and step.routes is not None


def test_an_unknown_memory_type_key_is_named() -> None:
    # issue 21 item 18: {"pytorch": f} named only the missing group_by
    with pytest.raises(mt.errors.InvalidArgumentError,
                       match=r"'pytorch': not a memory type \(expected one of numpy, .*torch"):
        FunctionStep({"pytorch": scale_torch})


def test_mt_variants_names_an_unknown_memory_type() -> None:
    with pytest.raises(mt.UnknownMemoryTypeError, match="pytorch"):
        mt.variants(pytorch=scale_torch)


def test_the_variants_module_is_not_shadowed() -> None:
    import types

    import memtype.pipeline
    import memtype.pipeline.model.variants as module

    assert isinstance(memtype.pipeline.model.variants, types.ModuleType)
    assert mt.variants is module.variants and memtype.pipeline.Variants is module.Variants


def test_unknown_implementation_is_refused() -> None:
    with pytest.raises(mt.errors.InvalidArgumentError, match="offers"):
        _scale_step().with_implementation("pyclesperanto")


# -- 2. the plan ---------------------------------------------------------------------------
@pytest.mark.requires("tifffile")
def test_plan_keeps_the_chain_in_one_framework(plate_dir: Path) -> None:
    pipeline = Pipeline([FunctionStep(torch_only, **NATIVE), _scale_step(),
                         FunctionStep(torch_only, name="again", **NATIVE)])
    plan = pipeline.plan(plate_dir)
    assert isinstance(plan, Plan)
    assert plan.choices == {"scale": "torch"}
    assert "scale: chain cost with numpy" in plan.table()
    assert plan.predicted()["scale"] == (0, 0)


@pytest.mark.requires("torch")
def test_plan_ties_go_to_the_declared_order() -> None:
    # torch -> (numpy or torch) -> numpy: one zero-copy conversion either way
    images = np.zeros((3, 16, 16), np.float32)
    both = {"numpy": scale_np, "torch": scale_torch}
    for order in (["numpy", "torch"], ["torch", "numpy"]):
        step = FunctionStep(Variants({k: both[k] for k in order}), name="scale", **NATIVE)
        pipeline = Pipeline([FunctionStep(torch_only, **NATIVE), step, numpy_only])
        assert pipeline.plan(images).choices == {"scale": order[0]}


def test_plan_of_one_step_stays_on_the_host_type() -> None:
    plan = Pipeline([_scale_step()]).plan(np.zeros((3, 16, 16), np.float32))
    assert plan.choices == {"scale": "numpy"} and plan.cost == 0


@pytest.mark.requires("pyclesperanto")
def test_plan_avoids_device_copies() -> None:
    step = FunctionStep(mt.variants(pyclesperanto=cle_only, numpy=numpy_only), name="add")
    plan = Pipeline([step]).plan([np.zeros((16, 16), np.float32)] * 2)
    assert plan.choices == {"add": "numpy"}
    assert f"pyclesperanto {2 * 2 * 16 * 16 * 4 * 8 + 2}," in plan.table()  # 2 host copies


@pytest.mark.requires("pyclesperanto")
def test_plan_of_a_device_step_predicts_host_crossings() -> None:
    plan = Pipeline([FunctionStep(cle_only)]).plan(np.zeros((2, 8, 8), np.float32))
    load = plan.phases[0]
    assert load.conversions[0].crosses_host and not load.conversions[0].zero_copy
    assert load.nbytes == 2 * 8 * 8 * 4
    device = plan.phases[1].device  # the OpenCL device: input and output stacks held there
    assert device != "cpu" and plan.peak_memory[device] == 2 * (2 * 8 * 8 * 4)


def test_plan_refuses_a_2d_array() -> None:
    with pytest.raises(mt.errors.ShapeError, match="3D"):
        Pipeline([FunctionStep(numpy_only)]).plan(np.zeros((4, 4)))


# -- 3. the run follows the plan; plan against actual --------------------------------------
@pytest.mark.parametrize("executor", ["inline", "threads"])
@pytest.mark.requires("tifffile")
def test_run_matches_the_prediction_exactly(plate_dir: Path, tmp_path: Path,
                                            executor: str) -> None:
    # default dtype_conversion (PRESERVE_INPUT): every step keeps the stacks' dtype
    scale = mt.variants(numpy=scale_np, torch=scale_torch, jax=scale_jax)
    steps = [FunctionStep(cle_only), FunctionStep(scale, name="scale"), FunctionStep(torch_only),
             FunctionStep(numpy_only, materialize=True), FunctionStep(scale, name="scale2")]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out", executor=executor)
    report.raise_for_failures()
    assert report.plan is not None
    rows = report.plan_vs_actual()
    assert any(r[1] for r in rows)
    for name, pe, pb, ae, ab in rows:
        assert (pe, pb) == (ae, ab), name
    assert "plan vs actual" in report.summary() and "differs" not in report.summary()


@mt.jax
def jax_scale(stack: Any) -> Any:
    return stack * 2.0


def _zero_copy_events(plan: Plan) -> dict[str, int]:
    return {p.name: sum(c.events for c in p.conversions if c.zero_copy) for p in plan.phases}


@pytest.mark.requires("torch", "jax")
def test_plan_predicts_which_conversions_share_memory(plate_dir: Path, tmp_path: Path) -> None:
    # torch's and XLA's results are 64-byte aligned (a torch result enters JAX zero-copy), and
    # the planner's samples of those types are too; a NumPy result is wherever malloc put it
    # (16-byte aligned, sometimes 64 by chance): predicted as a copy, the worst case
    steps = [FunctionStep(torch_only, **NATIVE), FunctionStep(jax_scale, **NATIVE),
             FunctionStep(numpy_only, **NATIVE), FunctionStep(jax_scale, name="again", **NATIVE)]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    assert report.plan is not None
    predicted = _zero_copy_events(report.plan)
    groups = len(report.done)
    counted = {s.name: s.zero_copy for s in report.steps}
    assert predicted["jax_scale"] > 0  # torch -> jax shares memory, every time
    assert predicted["jax_scale"] * groups == counted["jax_scale"]
    assert predicted["again"] == 0  # numpy -> jax: a copy unless malloc aligned it by chance
    assert predicted["numpy_only"] * groups == counted["numpy_only"]  # jax -> numpy: a view


@pytest.mark.requires("torch", "jax", "scipy")
@pytest.mark.parametrize("opencl", [
    False, pytest.param(True, marks=[pytest.mark.requires("pyclesperanto"), pytest.mark.opencl]),
], ids=["no-opencl", "opencl"])
def test_demo_projects_where_the_data_is(opencl: bool) -> None:
    from memtype.pipeline.demo import demo_pipeline

    plan = demo_pipeline(use_opencl=opencl).plan(np.zeros((8, 64, 64), np.uint16))
    assert plan.choices == {"max_project": "jax"}  # where subtract_background left the data
    costs = plan.phases[3].explanation
    assert costs.startswith("chain cost with jax") and "<- chosen" in costs
    if opencl:  # projecting on the device would move the whole stack there, not one plane
        device = float(costs.rsplit("pyclesperanto ", 1)[1])
        assert device > 3 * plan.cost


@pytest.mark.requires("tifffile")
def test_run_computes_with_the_chosen_implementation(plate_dir: Path, tmp_path: Path) -> None:
    steps = [FunctionStep(torch_only), _scale_step(), FunctionStep(torch_only, name="again")]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    assert report.plan is not None and report.plan.choices == {"scale": "torch"}
    by_name = {s.name: s for s in report.steps}
    assert by_name["scale"].stacks == 8 and by_name["scale"].conversions == 0  # stayed in torch
    assert by_name["[write]"].conversions == 8  # torch -> numpy once per stack, at the end


# -- 4. lazy conversion: producer -> consumer, once ----------------------------------------
@pytest.mark.requires("tifffile")
def test_one_conversion_from_producer_to_consumer(plate_dir: Path, tmp_path: Path) -> None:
    # the per-phase figures come from the conversion hook (memtype.gpu.profile)
    report = Pipeline([FunctionStep(torch_only, **NATIVE),
                       FunctionStep(torch_only, name="t2", **NATIVE),
                       FunctionStep(numpy_only)]).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    conv = {s.name: (s.stacks, s.conversions, s.copied) for s in report.steps}
    # load: numpy -> torch once per stack; torch -> torch none; torch -> numpy once per
    # stack, zero-copy, straight into the consumer; nothing left to convert at the write
    assert conv["[load]"] == (8, 8, 0)
    assert conv["torch_only"] == (8, 0, 0) and conv["t2"] == (8, 0, 0)
    assert conv["numpy_only"] == (8, 8, 0)
    assert conv["[write]"] == (8, 0, 0)


@pytest.mark.requires("torch")
def test_a_hook_sees_the_conversions_of_a_chain_once() -> None:
    events: list[ConversionEvent] = []
    add_conversion_hook(events.append)
    try:
        numpy_only(torch_only(torch_only(np.zeros((2, 4, 4), np.float32))))
    finally:
        remove_conversion_hook(events.append)
    assert [(e.source_type, e.target_type) for e in events] == [("numpy", "torch"),
                                                                ("torch", "numpy")]


@pytest.mark.requires("tifffile")
def test_planning_is_hidden_from_user_hooks(plate_dir: Path) -> None:
    events: list[ConversionEvent] = []
    add_conversion_hook(events.append)
    try:
        plan = Pipeline([FunctionStep(torch_only, **NATIVE), _scale_step()]).plan(plate_dir)
    finally:
        remove_conversion_hook(events.append)
    assert plan.predicted()["[load]"][0] > 0  # the planner did convert samples
    assert events == []


# -- the CLI -------------------------------------------------------------------------------
@pytest.mark.requires("torch")  # the pipeline file builds torch steps, in a subprocess
@pytest.mark.requires("tifffile")
def test_cli_run_plan_prints_and_runs_nothing(plate_dir: Path, tmp_path: Path) -> None:
    file = tmp_path / "pipe.py"
    file.write_text("from memtype.pipeline import FunctionStep, Pipeline\n"
                    "from tests.test_pipeline_plan import _scale_step, torch_only\n"
                    "pipeline = Pipeline([FunctionStep(torch_only), _scale_step()])\n")
    out = tmp_path / "out"
    done = subprocess.run([sys.executable, "-m", "memtype", "run", str(file), "--input",
                           str(plate_dir), "--output", str(out), "--plan"],
                          capture_output=True, text=True, cwd=Path(__file__).parent.parent)
    assert done.returncode == 0, done.stderr
    assert "scale: chain cost" in done.stdout and "<- chosen" in done.stdout
    assert not out.exists()


def test_all_calls_lists_every_implementation() -> None:
    # Pipeline.uses_gpu reads all_calls: a GPU implementation anywhere in a step counts
    types = [c.input_type for c in _scale_step().all_calls()]
    assert types == ["numpy", "torch", "jax"]


def test_variants_step_pickles_by_reference() -> None:
    import pickle

    step = pickle.loads(pickle.dumps(_scale_step()))
    assert step.variants is not None and list(step.variants) == ["numpy", "torch", "jax"]
    chosen = pickle.loads(pickle.dumps(_scale_step().with_implementation("jax")))
    assert chosen.chain[0].input_type == "jax"


@mt.numpy
def project(stack: Any) -> Any:
    return stack.max(axis=0, keepdims=True)


@pytest.mark.requires("tifffile")
def test_prediction_follows_dtype_changes_and_projections(plate_dir: Path,
                                                          tmp_path: Path) -> None:
    # uint16 in; NATIVE_OUTPUT lets torch and numpy widen; the projection keeps one plane
    steps = [FunctionStep(cle_only), _scale_step(), FunctionStep(torch_only, **NATIVE),
             FunctionStep(project, materialize=True), _scale_step(name="scale2")]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    report.raise_for_failures()
    for name, pe, pb, ae, ab in report.plan_vs_actual():
        assert (pe, pb) == (ae, ab), name
    assert report.plan is not None and not report.plan.notes


def test_a_step_that_fails_on_the_sample_is_noted() -> None:
    @mt.numpy
    def needs_bright(stack: Any) -> Any:
        if stack.max() < 1000:  # the sample is a ramp of 1 to 97
            raise ValueError("too dim")
        return stack

    plan = Pipeline([FunctionStep(needs_bright)]).plan(np.zeros((2, 128, 128), np.float32))
    assert "was not tried on a sample (ValueError: too dim)" in plan.table()


def test_a_step_is_tried_on_the_real_shape() -> None:
    @mt.numpy
    def needs_big(stack: Any) -> Any:
        if stack.shape[-1] < 64:
            raise ValueError("too small")
        return stack

    plan = Pipeline([FunctionStep(needs_big)]).plan(np.zeros((2, 128, 128), np.float32))
    assert "was not tried" not in plan.table()


# -- 5. data no framework converts (issue 21 item 2) ---------------------------------------
_HOST_ONLY = {"object": np.dtype(object), "str": np.dtype("<U5"), "bytes": np.dtype("S5"),
              "void": np.dtype("V8"), "structured": np.dtype([("a", "f4"), ("b", "i4")]),
              "structured-object": np.dtype([("a", "f4"), ("b", "O")]),
              "datetime64": np.dtype("M8[s]"), "timedelta64": np.dtype("m8[s]")}


def _as(dtype: np.dtype[Any]) -> Any:
    @mt.numpy
    def as_dtype(stack: Any) -> Any:
        return np.zeros(stack.shape, dtype)

    return as_dtype


@pytest.mark.parametrize("dtype", list(_HOST_ONLY.values()), ids=list(_HOST_ONLY))
@pytest.mark.requires("tifffile")
def test_plan_of_a_step_returning_host_only_data(plate_dir: Path, dtype: np.dtype[Any]) -> None:
    plan = Pipeline([FunctionStep(_as(dtype), **NATIVE), FunctionStep(numpy_only, **NATIVE)]
                    ).plan(plate_dir)
    assert plan.predicted() == {"[load]": (0, 0), "as_dtype": (0, 0), "numpy_only": (0, 0),
                                "[write]": (0, 0)}


@pytest.mark.parametrize("dtype", list(_HOST_ONLY.values()), ids=list(_HOST_ONLY))
def test_plan_of_host_only_images(dtype: np.dtype[Any]) -> None:
    plan = Pipeline([FunctionStep(numpy_only, **NATIVE)]).plan(np.zeros((2, 4, 4), dtype))
    assert plan.dtype == dtype.name and plan.cost == 0


@pytest.mark.requires("torch")
@pytest.mark.parametrize("dtype", list(_HOST_ONLY.values()), ids=list(_HOST_ONLY))
@pytest.mark.requires("tifffile")
def test_plan_refuses_host_only_data_into_torch(plate_dir: Path, dtype: np.dtype[Any]) -> None:
    pipeline = Pipeline([FunctionStep(_as(dtype), **NATIVE), FunctionStep(torch_only, **NATIVE)])
    refusal = (r"No plan.*numpy -> torch is not possible: .*dtype.*torch cannot hold the "
               r"stacks \(\(3, 64, 64\) ")
    with pytest.raises(mt.errors.InvalidArgumentError, match=refusal):
        pipeline.plan(plate_dir)


@pytest.mark.requires("torch")
def test_plan_notes_only_the_trials_of_the_chosen_implementations() -> None:
    # torch is declared first but cannot hold object data: the plan runs numpy, tried fine
    both = FunctionStep(mt.variants(torch=scale_torch, numpy=scale_np), name="scale", **NATIVE)
    plan = Pipeline([both]).plan(np.zeros((2, 4, 4), object))
    assert plan.choices == {"scale": "numpy"}
    assert not [n for n in plan.notes if "was not tried" in n]


@pytest.mark.parametrize("dtype", [np.dtype(object), np.dtype("<U5")], ids=["object", "str"])
@pytest.mark.requires("tifffile")
def test_run_of_host_only_data_fails_each_group_cleanly(plate_dir: Path, tmp_path: Path,
                                                        dtype: np.dtype[Any]) -> None:
    report = Pipeline([FunctionStep(_as(dtype), **NATIVE)]).run(plate_dir, tmp_path / "out")
    assert report.plan is not None and len(report.failed) == 2 and not report.done
    for group in report.failed:
        assert group.error is not None and "StoreFormatError" in group.error


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_run_of_object_data_into_torch_fails_each_group_cleanly(plate_dir: Path,
                                                                 tmp_path: Path) -> None:
    steps = [FunctionStep(_as(np.dtype(object)), **NATIVE), FunctionStep(torch_only, **NATIVE)]
    report = Pipeline(steps).run(plate_dir, tmp_path / "out")
    assert report.plan is None and report.plan_note is not None
    assert "No plan" in report.plan_note and len(report.failed) == 2
    for group in report.failed:
        assert group.error is not None and "MemoryConversionError" in group.error


def _object_plate() -> Any:
    from memtype.storage import MemoryStore

    store = MemoryStore()
    for well in ("A01", "A02"):
        for z in (1, 2):
            plane = np.empty((4, 4), object)
            plane[...] = "x"
            store.save(plane, f"{well}_s1_w1_z{z:03d}.npy")
    return store


OBJECT_PATTERN = "{well}_s{site}_w{channel}_z{z}.npy"


def test_plan_of_object_input_planes() -> None:
    plan = Pipeline([FunctionStep(numpy_only)], pattern=OBJECT_PATTERN).plan(_object_plate())
    assert plan.dtype == "object" and plan.stack_shapes == [(2, 4, 4)] and plan.cost == 0


@pytest.mark.requires("zarr")
def test_run_of_object_input_planes_fails_each_group_cleanly(tmp_path: Path) -> None:
    @mt.numpy
    def keep(stack: Any) -> Any:
        return stack

    report = Pipeline([FunctionStep(keep)], pattern=OBJECT_PATTERN).run(_object_plate(),
                                                                         tmp_path / "out")
    assert report.plan is not None and len(report.failed) == 2
    for group in report.failed:
        assert group.error is not None and "StoreFormatError" in group.error


_OBJECT_PIPELINE = ("import numpy as np\n"
                    "import memtype as mt\n"
                    "from memtype.pipeline import FunctionStep, Pipeline\n"
                    "@mt.numpy\n"
                    "def to_object(stack):\n"
                    "    return stack.astype(object)\n"
                    "@mt.{into}\n"
                    "def into(stack):\n"
                    "    return stack\n"
                    "pipeline = Pipeline([FunctionStep(to_object), FunctionStep(into)])\n")


@pytest.mark.requires("tifffile")
def test_cli_run_plan_of_object_data(plate_dir: Path, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from memtype.cli import main

    file = tmp_path / "object_pipe.py"
    file.write_text(_OBJECT_PIPELINE.format(into="numpy"))
    out = tmp_path / "out"
    assert main(["run", str(file), "--input", str(plate_dir), "--output", str(out),
                 "--plan"]) == 0
    assert "(3, 64, 64) uint16" in capsys.readouterr().out and not out.exists()


@pytest.mark.requires("torch")
@pytest.mark.requires("tifffile")
def test_cli_run_plan_refuses_object_data_into_torch(plate_dir: Path, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from memtype.cli import main

    file = tmp_path / "object_torch_pipe.py"
    file.write_text(_OBJECT_PIPELINE.format(into="torch"))
    out = tmp_path / "out"
    assert main(["run", str(file), "--input", str(plate_dir), "--output", str(out),
                 "--plan"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err  # one error line, no traceback
    assert [line for line in err.splitlines() if "error:" in line] == [
        line for line in err.splitlines() if "numpy -> torch is not possible" in line]
    assert err.strip().splitlines()[-1].startswith("memtype run: error: No plan")
    assert main(["run", str(file), "--input", str(plate_dir), "--output", str(out)]) == 1
    assert "MemoryConversionError" in capsys.readouterr().err


@pytest.mark.parametrize("shape", [(0, 8, 8), (2, 0, 8), (2, 8, 0)],
                         ids=["no-planes", "no-rows", "no-columns"])
def test_plan_of_empty_stacks_tries_every_step(shape: tuple[int, ...]) -> None:
    plan = Pipeline([FunctionStep(numpy_only), FunctionStep(numpy_only, name="again")]).plan(
        np.zeros(shape, np.float32))
    assert not plan.notes and plan.stack_shapes == [shape]


@pytest.mark.parametrize("dtype", [np.dtype(object), np.dtype("<U5"), np.dtype("M8[s]")],
                         ids=["object", "str", "datetime64"])
@pytest.mark.parametrize("input_dtype", [np.uint16, np.float32, np.bool_],
                         ids=["uint16", "float32", "bool"])
def test_default_dtype_policy_leaves_a_non_numeric_result(dtype: np.dtype[Any],
                                                           input_dtype: Any) -> None:
    out = _as(dtype)(np.zeros((2, 4, 4), input_dtype))  # PRESERVE_INPUT: no range to keep
    assert out.dtype == dtype


@pytest.mark.requires("tifffile")
def test_run_of_host_only_data_under_the_default_dtype_policy(plate_dir: Path,
                                                              tmp_path: Path) -> None:
    report = Pipeline([FunctionStep(_as(np.dtype(object)))]).run(plate_dir, tmp_path / "out")
    assert len(report.failed) == 2
    for group in report.failed:
        assert group.error is not None and "StoreFormatError" in group.error
