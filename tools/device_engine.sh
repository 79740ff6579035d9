#!/usr/bin/env bash
# Device check of kvcontract inside vLLM's engine on a GPU: the real-engine tests (tests/engines,
# every generated token against the engine without offloading, with their controls) on vLLM's CUDA
# build, vLLM's own CPUOffloadingSpec beside kvcontract's spec, and the engine benchmark with both
# offloading engines side by side (time to first token of a reloaded prefix, workload throughput).
# Sized for one call of under 9 minutes on one H100.
#
# Run from the project root:  bash tools/device_engine.sh
#
# Needs vLLM 0.34 (its CUDA build, with its own torch), transformers, pytest and kvcontract's
# dependencies importable. The device machine has no network: where vLLM is missing, it is
# installed from the wheels in $KVCONTRACT_WHEELS (default .whl; fill it elsewhere with
#   python3 -m pip download -d .whl vllm==0.34.0 pytest hypothesis
# and carry it), or else from the package index.
set -euo pipefail

PYTHON=${PYTHON:-python3}
WHEELS=${KVCONTRACT_WHEELS:-.whl}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
export VLLM_CACHE_ROOT=${VLLM_CACHE_ROOT:-$(mktemp -d)}
start=$SECONDS

step() { printf '\n== %s (%ds)\n' "$1" "$((SECONDS - start))"; }

step "packages"
if ! "$PYTHON" -c "import vllm, transformers, pytest" 2>/dev/null; then
    if [[ -d $WHEELS ]]; then
        "$PYTHON" -m pip install -q --no-index --find-links "$WHEELS" vllm==0.34.0 pytest hypothesis
    else
        "$PYTHON" -m pip install -q vllm==0.34.0 pytest hypothesis
    fi
fi
"$PYTHON" -m pip install -q --no-deps -e . --config-settings editable_mode=compat
"$PYTHON" - <<'PY'
import sys
import torch
from vllm.platforms import current_platform
print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
if not current_platform.is_cuda():
    sys.exit(f"vLLM runs on {type(current_platform).__name__} here: this check needs its CUDA build on a GPU")
print(f"device: {torch.cuda.get_device_name(0)}")
PY

failed=()
step "tests: kvcontract in vLLM's engine, token for token (tests/engines)"
KVCONTRACT_REQUIRE=engine timeout 330 "$PYTHON" -m pytest tests/engines -q -rs -p no:cacheprovider || failed+=(tests)

step "benchmark: tools/bench_engine.py --vllm-spec (kvcontract beside vLLM's CPUOffloadingSpec)"
timeout 180 "$PYTHON" tools/bench_engine.py --vllm-spec --rounds 5 || failed+=(benchmark)

step "done"
if ((${#failed[@]})); then
    echo "failed: ${failed[*]}"
    exit 1
fi
