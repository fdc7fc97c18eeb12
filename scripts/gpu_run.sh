#!/usr/bin/env bash
# The device check, as the one prepared command a lent GPU machine runs (docs/gpu.md):
#
#   here, first:  python scripts/gpu_inputs.py                  # writes .gpu/ (the machine has no network)
#   there:        bash scripts/gpu_run.sh                        # the device tool's `run`, carry [".gpu"], timeout 600
#
# It runs the gpu tests (tests/test_gpu.py), then scripts/gpu_check.py (parity, speed, profile), each
# under its own time limit so that one cannot eat the other's, and leaves everything in $OUT (the
# device tool brings $OUT back): pytest.log and pytest.xml, gpu_check.log and gpu_check.json (rewritten
# after every row: a run cut short keeps what it measured), machine.txt. What it prints is short
# (the tool returns only the output's last 12,000 characters): the machine, the tests' summary and
# their measurements, and gpu_check's tables. tests/test_scripts_benchmarks.py runs it on the CPU.
#
# Environment: OUT (default /tmp/minibert-gpu), PYTHON (default python3: the device machine's Python
# with torch), GPU_TESTS (default tests/test_gpu.py; more pytest arguments may follow), GPU_CHECK_ARGS
# (more arguments for gpu_check.py: the CPU dry run passes --device cpu --quick), TESTS_SECONDS and
# CHECK_SECONDS (the two time limits: 180 and 270 s, gpu_check.py's own --budget 200 s inside the
# second: with a machine's start, about 10 of a session's 15 device minutes). It exits non-zero when
# either part did.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-/tmp/minibert-gpu}
PYTHON=${PYTHON:-python3}
export PYTHONPATH="$PWD/src${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
mkdir -p "$OUT"

{
    date -u
    git rev-parse --short HEAD 2>/dev/null
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 || true
    "$PYTHON" -c "import sys, torch, transformers; print(sys.version.split()[0], 'torch', torch.__version__, 'cuda', torch.version.cuda, 'transformers', transformers.__version__)"
} > "$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

# shellcheck disable=SC2086  # GPU_TESTS is a file and pytest's arguments, split on purpose
timeout "${TESTS_SECONDS:-180}" "$PYTHON" -m pytest -q -rA -s -m gpu -p no:cacheprovider ${GPU_TESTS:-tests/test_gpu.py} \
    --junitxml="$OUT/pytest.xml" > "$OUT/pytest.log" 2>&1
tests_exit=$?
echo "gpu tests: exit $tests_exit"
grep -E "max \||waits for the GPU|^(PASSED|FAILED|ERROR|SKIPPED)|passed|failed" "$OUT/pytest.log" | tail -n 40

# shellcheck disable=SC2086
timeout "${CHECK_SECONDS:-270}" "$PYTHON" scripts/gpu_check.py --out "$OUT/gpu_check.json" --budget 200 \
    ${GPU_CHECK_ARGS:-} > "$OUT/gpu_check.log" 2>&1
check_exit=$?
echo "gpu_check: exit $check_exit"
tail -c 7000 "$OUT/gpu_check.log"
[ "$tests_exit" -eq 0 ] && [ "$check_exit" -eq 0 ]
