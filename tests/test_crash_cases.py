"""Inputs that crash the frameworks themselves: memtype routes around each (run in subprocesses)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=180, env={"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""})


def _ok(code: str) -> str:
    proc = _run(code)
    assert proc.returncode == 0, f"exit {proc.returncode}: {proc.stderr[-2000:]}"
    return proc.stdout


@pytest.mark.requires("torch", "jax")
def test_negative_strides_to_torch() -> None:  # torch.from_dlpack aborts on these
    out = _ok("""
        import numpy as np, memtype as mt
        a = np.arange(12, dtype=np.float32).reshape(3, 4)[::-1, ::-1]
        t = mt.convert(a, "torch")
        assert (t.numpy() == a).all()
        j = mt.convert(mt.convert(a, "jax"), "torch")
        assert (j.numpy() == a).all()
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.requires("torch", "tensorflow")
def test_unaligned_buffer_to_tensorflow() -> None:  # TensorFlow aborts on these
    out = _ok("""
        import numpy as np, torch, memtype as mt
        raw = np.zeros(4 * 100 + 65, np.uint8)
        off = (-raw.ctypes.data) % 64 + 4
        a = raw[off:off + 400].view(np.float32); a[:] = np.arange(100)
        t = mt.convert(a, "tensorflow")
        assert (np.asarray(t) == a).all()
        tt = torch.from_numpy(a)
        assert (np.asarray(mt.convert(tt, "tensorflow")) == a).all()
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.requires("torch")
@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_pyclesperanto_to_torch() -> None:  # torch.from_dlpack on a cle array segfaults
    out = _ok("""
        import numpy as np, memtype as mt  # memtype imports pyclesperanto (OpenCL runtime)
        import torch
        c = mt.convert(np.arange(6, dtype=np.float32).reshape(2, 3), "pyclesperanto")
        t = mt.convert(c, "torch")
        assert (t.numpy() == np.arange(6).reshape(2, 3)).all()
        print("ok")
    """)
    assert out.strip() == "ok"


@pytest.mark.requires("tensorflow")
@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_pyclesperanto_after_tensorflow_is_refused_not_crashed() -> None:
    out = _ok("""
        import numpy as np, tensorflow, memtype as mt
        try:
            mt.convert(np.ones(3, np.float32), "pyclesperanto")
        except ImportError as exc:
            print(type(exc).__name__, "before importing tensorflow" in str(exc))
    """)
    assert out.strip().splitlines()[-1] == "ImportOrderError True"


@pytest.mark.requires("tensorflow")
def test_an_absent_framework_is_not_an_import_order_error() -> None:
    # pyclesperanto may not follow tensorflow; when it is not there at all, say that instead
    out = _ok("""
        import sys
        sys.modules["pyclesperanto"] = None  # as if not installed
        import numpy as np, tensorflow, memtype as mt
        try:
            mt.convert(np.ones(3, np.float32), "pyclesperanto")
        except ImportError as exc:
            print(type(exc).__name__)
    """)
    assert out.strip().splitlines()[-1] == "FrameworkNotInstalledError"


@pytest.mark.requires("tensorflow")
@pytest.mark.requires("pyclesperanto")
@pytest.mark.opencl
def test_memtype_imports_pyclesperanto_before_tensorflow() -> None:
    out = _ok("""
        import numpy as np, memtype as mt
        t = mt.convert(np.ones(3, np.float32), "tensorflow")
        c = mt.convert(t, "pyclesperanto")
        print(float(np.asarray(mt.convert(c, "numpy")).sum()))
    """)
    assert out.strip().splitlines()[-1] == "3.0"


@pytest.mark.requires("tensorflow", "torch", "jax")
def test_tensorflow_string_tensor_to_dlpack_targets() -> None:
    # TensorFlow's DLPack export of a string tensor is a CHECK failure that aborts the process
    out = _ok("""
        import torch, jax, tensorflow as tf, memtype as mt
        mt.convert(tf.constant([1.0]), "torch")  # a warm route first: the fast path too
        for target in ("torch", "jax"):
            try:
                mt.convert(tf.constant(["a", "b"]), target)
            except mt.MemoryConversionError as e:
                assert "numeric arrays only" in str(e) and "object" in str(e), e
            else:
                raise AssertionError("a string tensor converted")
        print("ok")
    """)
    assert out.strip() == "ok"


_DONATE = """
    import numpy as np, {modules}, jax, memtype as mt
    raw = np.zeros(4 * 1000 + 64, np.uint8)
    off = (-raw.ctypes.data) % 64
    a = raw[off:off + 4000].view(np.float32)  # 64-byte aligned: shared, not copied
    a[:] = 1
    j = {convert}
    assert mt.shares_memory(a, j)
    print("shared", flush=True)
    del a, raw  # JAX now holds the last reference to the NumPy buffer
    r = jax.jit(lambda x: x * 2 + 1, donate_argnums=(0,))(j)  # exit while it runs
"""


@pytest.mark.requires("jax", "torch", "tensorflow")
@pytest.mark.parametrize("convert", [
    'mt.convert(a, "jax")',
    'mt.jax(contract="any")(lambda x: x)(a)',
    'mt.convert(torch.from_numpy(a), "jax")',  # siblings: NumPy memory through DLPack
    'mt.convert(mt.convert(a, "tensorflow"), "jax")',
])
def test_donating_a_zero_copy_jax_array(convert: str) -> None:
    # jax.dlpack.from_dlpack of a NumPy array aborts the interpreter at exit in about half the
    # runs once JAX donates it (exit 134); 8 runs miss a 50% crash with probability 0.4%
    modules = "torch" if "torch" in convert else "tensorflow" if "tensorflow" in convert else "sys"
    code = textwrap.dedent(_DONATE).format(convert=convert, modules=modules)
    env = {"TF_CPP_MIN_LOG_LEVEL": "3", "PATH": ""}
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(8)]
    for proc in procs:
        out, err = proc.communicate(timeout=180)
        assert proc.returncode == 0, f"exit {proc.returncode}: {err[-2000:]}"
        assert out.strip() == "shared"
