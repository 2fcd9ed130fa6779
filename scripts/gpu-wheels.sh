#!/usr/bin/env bash
# Download into .whl/ the wheels that the GPU validation run (scripts/gpu-validate.sh) needs and
# the GPU machine lacks: arraybridge 0.5.2 (the benchmark's peer column) and its dependencies,
# and cucim (the function catalog's cucim.skimage entries and CuPy operations) with
# scikit-image, its reference, and their dependencies (about 40 MB together).
# The GPU machine has no network; .whl/ travels with the device run (carry [".whl"]) and is
# installed there into /tmp/site. .whl/ is git-ignored locally (.git/info/exclude), never
# committed. Everything else the tests and the benchmark use is installed on that machine
# (torch, cupy, jax, numpy, pytest, pytest-timeout, hypothesis, psutil, nvidia-ml-py, rich, ...).
#
# Usage: scripts/gpu-wheels.sh        (from anywhere; PYTHON=... picks the interpreter)
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WHEELS=(
    arraybridge==0.5.2          # the peer library of benchmarks/gpu.py
    metaclass-registry==0.4.1   # arraybridge's dependency
    python-introspect==0.3.0    # arraybridge's dependency
    annotated-types==0.7.0      # python-introspect's dependency
    # cucim for the machine's CUDA 13 CuPy (cupy-cuda13x); memtype[cucim] is cucim-cu12
    cucim-cu13==26.10.0         # cucim.skimage: the catalog's GPU entries (16.7 MB)
    lazy-loader==0.6            # cucim's and scikit-image's dependency
    scikit-image==0.26.0        # the reference the cucim entries and operations are checked against
    networkx==3.6.1             # scikit-image's dependency
    imageio==2.38.1             # scikit-image's dependency
    pillow==13.0.0              # scikit-image's dependency
)

mkdir -p .whl
"$PYTHON" -m pip download --quiet --no-deps --only-binary=:all: \
    --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    --platform manylinux1_x86_64 \
    -d .whl "${WHEELS[@]}"

exclude=$(git rev-parse --git-path info/exclude)
mkdir -p "$(dirname "$exclude")"
grep -qxF '/.whl/' "$exclude" 2>/dev/null || echo '/.whl/' >> "$exclude"

ls -l .whl
echo "total: $(du -sh .whl | cut -f1) in .whl (the device run carries at most 64 MiB)"
