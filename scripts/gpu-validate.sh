#!/usr/bin/env bash
# The one command of the GPU validation (issue 7, docs/gpu-validation.md), for a machine with an
# NVIDIA GPU. From the repository root of a checkout (memtype need not be installed):
#
#   scripts/gpu-validate.sh            # results in ${OUT:-gpu-out}/
#
# 1. installs the wheels carried in .whl/ (scripts/gpu-wheels.sh) into /tmp/site, if present;
# 2. records nvidia-smi and the versions in environment.txt;
# 3. runs every GPU test: pytest -m gpu (log pytest-gpu.log, JUnit XML pytest-gpu.xml), among
#    them every cucim.skimage catalog entry once and every CuPy operation against its
#    reference (tests/test_catalog*.py), which need cucim and scikit-image from .whl/;
# 4. runs benchmarks/gpu.py into gpu.md (log bench-gpu.log), even when tests failed.
# The whole script ends within 9 minutes (TOTAL_S, default 520 s): pytest gets at most
# TEST_BUDGET_S (default 330 s), the catalog's GPU tests CATALOG_BUDGET_S (default 120 s,
# log pytest-catalog-gpu.log), the benchmark the rest. The exit status is non-zero when the
# tests or the benchmark failed.
set -uo pipefail
cd "$(dirname "$0")/.."

START=$(date +%s)
TOTAL_S=${TOTAL_S:-520}
TEST_BUDGET_S=${TEST_BUDGET_S:-330}
PY=${PYTHON:-python3}
RESULTS=${OUT:-gpu-out}
mkdir -p "$RESULTS"
export PYTHONUNBUFFERED=1

if compgen -G ".whl/*.whl" > /dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/site .whl/*.whl || echo "warning: installing .whl/ failed" >&2
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD/src:$PWD${PYTHONPATH:+:$PYTHONPATH}"

{
    echo "== date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
    echo "== commit: $(git rev-parse HEAD 2>/dev/null || echo unknown) $(git status --porcelain 2>/dev/null | wc -l) changed files"
    echo "== nvidia-smi"
    nvidia-smi || echo "nvidia-smi failed"
    echo "== versions"
    "$PY" - <<'PYEOF'
import importlib.metadata as md
import platform
import sys

print("python", platform.python_version(), sys.executable)
for name in ("numpy", "torch", "cupy-cuda13x", "cupy-cuda12x", "cucim-cu13", "cucim-cu12",
             "scikit-image", "scipy", "jax", "jaxlib",
             "jax-cuda13-plugin", "jax-cuda13-pjrt", "nvidia-ml-py", "pytest", "pytest-timeout",
             "hypothesis", "psutil", "arraybridge", "tensorflow", "pyclesperanto", "zarr"):
    try:
        print(f"{name} {md.version(name)}")
    except md.PackageNotFoundError:
        print(f"{name} -")
try:
    import torch

    print("torch.cuda", torch.version.cuda, "available", torch.cuda.is_available(),
          "devices", torch.cuda.device_count())
except ImportError as exc:
    print("torch not importable:", exc)
import memtype

print("memtype", memtype.__version__, memtype.__file__)
PYEOF
} 2>&1 | tee "$RESULTS/environment.txt"

# --continue-on-collection-errors: one module that cannot be imported here (a framework that
# is not installed) must not stop the other GPU tests; it still fails the run.
CATALOG_TESTS=(tests/test_catalog.py tests/test_catalog_operations.py tests/test_catalog_cucim.py)
timeout -k 15 "$TEST_BUDGET_S" "$PY" -m pytest -m gpu -p no:cacheprovider -ra \
    --continue-on-collection-errors --timeout=240 "${CATALOG_TESTS[@]/#/--ignore=}" \
    --junitxml="$RESULTS/pytest-gpu.xml" 2>&1 | tee "$RESULTS/pytest-gpu.log"
TESTS_RC=${PIPESTATUS[0]}
echo "== pytest exit status: $TESTS_RC" | tee -a "$RESULTS/pytest-gpu.log"

# The catalog's GPU tests on their own budget (CATALOG_BUDGET_S, default 120 s), so that
# compiling cucim's CuPy kernels on a fresh machine cannot starve the checks above: every
# cucim.skimage entry once on the coins crops, every CuPy operation against its reference.
timeout -k 15 "${CATALOG_BUDGET_S:-120}" "$PY" -m pytest -m gpu -p no:cacheprovider -ra \
    --timeout=60 --junitxml="$RESULTS/pytest-catalog-gpu.xml" "${CATALOG_TESTS[@]}" 2>&1 \
    | tee "$RESULTS/pytest-catalog-gpu.log"
CATALOG_RC=${PIPESTATUS[0]}
echo "== catalog pytest exit status: $CATALOG_RC" | tee -a "$RESULTS/pytest-catalog-gpu.log"
if [ "$TESTS_RC" -eq 0 ] && [ "$CATALOG_RC" -ne 0 ]; then TESTS_RC=$CATALOG_RC; fi

LEFT=$(( TOTAL_S - ($(date +%s) - START) ))
if [ "$LEFT" -lt 90 ]; then LEFT=90; fi
MODE=()
if [ "$LEFT" -lt 240 ]; then MODE=(--quick); fi
timeout -k 15 "$LEFT" "$PY" benchmarks/gpu.py ${MODE[@]+"${MODE[@]}"} --budget-s $(( LEFT - 45 )) \
    --out "$RESULTS/gpu.md" 2>&1 | tee "$RESULTS/bench-gpu.log"
BENCH_RC=${PIPESTATUS[0]}
echo "== benchmark exit status: $BENCH_RC" | tee -a "$RESULTS/bench-gpu.log"

echo "== done in $(( $(date +%s) - START )) s: pytest $TESTS_RC, benchmark $BENCH_RC; results in $RESULTS/"
[ "$TESTS_RC" -eq 0 ] && [ "$BENCH_RC" -eq 0 ]
