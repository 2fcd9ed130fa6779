#!/bin/sh
# openhcs 0.8.6 in its own venv for benchmarks/openhcs_e2e.py (never in memtype's .venv).
# torch is pinned first to memtype's 2.13.0 CPU build: an unpinned torch pulls a multi-GB
# CUDA build. openhcs brings its own arraybridge 0.3.8 and polystore 0.2.19.
# Usage: sh benchmarks/openhcs_venv.sh [/tmp/ohcs]
set -eu
VENV=${1:-/tmp/ohcs}
python3.11 -m venv "$VENV"
"$VENV/bin/pip" install --upgrade pip
"$VENV/bin/pip" install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu
"$VENV/bin/pip" install torch==2.13.0+cpu openhcs==0.8.6
# the first start discovers openhcs's function registry (about 3 minutes); later ones ~30 s
"$VENV/bin/python" -c "import openhcs.processing.func_registry as r; r.initialize_registry()"
