#!/usr/bin/env bash
# Device check of the transfer engine: on a GPU machine, run the transfer tests (CUDA cases
# included), the transfer benchmark and the vLLM worker adapter's CUDA test, all in under 7 minutes.
#
# Run from the project root:  bash tools/device_check.sh
#
# Packages: torch, numpy, pytest, hypothesis, rich, typing_extensions and beartype must be
# importable. Missing ones are installed into a scratch directory from the wheels in
# $KVCONTRACT_WHEELS (default .whl, for machines without network: fill it elsewhere with
#   python3 -m pip download --no-deps --only-binary=:all: -d .whl beartype
# and carry it), or else from the package index.
#
# The benchmark runs twice: with the worker's own choice of copy path, then with memcpy
# runs forced (batches of 16 and more), so the two CUDA paths can be compared.
#
# KVCONTRACT_ALLOW_CPU=1 skips the "a GPU is present" assertion, so the script's CPU part
# can be tried on a machine without one (the CUDA tests are then skipped and the benchmark
# runs on the CPU).
set -euo pipefail

PYTHON=${PYTHON:-python3}
WHEELS=${KVCONTRACT_WHEELS:-.whl}
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
start=$SECONDS

step() { printf '\n== %s (%ds)\n' "$1" "$((SECONDS - start))"; }

step "packages"
missing=()
for module in torch numpy pytest hypothesis rich typing_extensions beartype; do
    "$PYTHON" -c "import $module" 2>/dev/null || missing+=("$module")
done
if ((${#missing[@]})); then
    packages=("${missing[@]/typing_extensions/typing-extensions}")
    echo "installing: ${packages[*]}"
    if [[ -d $WHEELS ]]; then
        site=$(mktemp -d)
        "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --target "$site" \
            --find-links "$WHEELS" "${packages[@]}"
        export PYTHONPATH="$PYTHONPATH:$site"
    else
        "$PYTHON" -m pip install -q "${packages[@]}"
    fi
fi
"$PYTHON" - <<'EOF'
import os, sys
import torch
print(f"python {sys.version.split()[0]}, torch {torch.__version__}")
if torch.cuda.is_available():
    print(f"device: {torch.cuda.get_device_name(0)}")
elif os.environ.get("KVCONTRACT_ALLOW_CPU") == "1":
    print("no GPU: KVCONTRACT_ALLOW_CPU=1, running the CPU part only")
else:
    sys.exit("no CUDA device visible to torch: this check needs a GPU (KVCONTRACT_ALLOW_CPU=1 to try the CPU part)")
EOF

failed=()
step "tests: pytest tests/transfer"
timeout 170 "$PYTHON" -m pytest tests/transfer -q -p no:cacheprovider || failed+=(tests)

step "benchmark: tools/bench_transfer.py"
timeout 110 "$PYTHON" tools/bench_transfer.py || failed+=(benchmark)

step "benchmark: tools/bench_transfer.py --copy-path memcpy --batches 16,64,256,1024"
timeout 70 "$PYTHON" tools/bench_transfer.py --copy-path memcpy --batches 16,64,256,1024 ||
    failed+=("memcpy benchmark")

step "tests: vLLM's worker calls on CUDA KV caches (test_cuda.py, test_device_pointers.py)"
# Needs vLLM 0.34 or 0.33 importable (requirements/vllm.txt); without it the modules are not
# collected and test_vllm_available.py reports why, as a skip. On vLLM 0.34 the connector hands
# the worker CUDA device pointers, which it checks against the CUDA caches before any copy.
timeout 150 "$PYTHON" -m pytest tests/integrations/vllm/test_cuda.py tests/integrations/vllm/test_device_pointers.py \
    tests/integrations/vllm/test_vllm_available.py -q -rs -p no:cacheprovider || failed+=("vllm cuda tests")

step "done"
if ((${#failed[@]})); then
    echo "failed: ${failed[*]}"
    exit 1
fi
