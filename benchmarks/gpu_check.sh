#!/usr/bin/env bash
# One command for a CUDA machine (H100/H200): checks the GPU-only code paths and measures MFU at 1B widths in
# under 10 minutes, then prints one table. Run from anywhere; it works in the repository root.
#
#   bash benchmarks/gpu_check.sh                       # writes runs/gpu-check/
#   OUT=/some/dir bash benchmarks/gpu_check.sh         # writes there
#
#   0. kernel packages: which of the `cuda` extra's packages (pyproject.toml: flash-attn, mamba-ssm,
#      causal-conv1d, flash-linear-attention) import; the missing ones are pip-installed if that works within
#      GPU_CHECK_INSTALL_TIMEOUT (no network: it fails fast and says so). torch is pinned to the installed build.
#   a. the tests that skip without CUDA (found by `gpu_check.py cuda-tests`: kernels vs the pure-PyTorch
#      references), and A attention through flash-attn vs SDPA (no test covers it).
#   b. one training step per primitive, bf16 autocast, eager vs torch.compile (apply_compile, as
#      `composer train --compile`): AWMESD, then AM WM MM EM SM DM at llama-3.2-1b widths; finite losses,
#      compiled losses close to eager.
#   c. `composer train` at llama-3.2-1b widths, FSDP2 (1 GPU), bf16-mixed, --compile: (AM)x4 and (AM)x16, on the
#      offline corpus; tokens/s and MFU from each run's summary.json (and a steady-state figure from its CSV log).
#
# Environment: OUT (output directory), PYTHON (default: python), GPU_CHECK_INSTALL=0 (never pip install),
# GPU_CHECK_INSTALL_TIMEOUT (s, default 120), GPU_CHECK_BUDGET (s for all parts, default 570),
# MFU_SEQ_LEN (2048), MFU_BATCH (8), MFU_STEPS (30), MFU_PATTERNS ("(AM)x4 (AM)x16"), MFU_LR (0.001) and
# MFU_WARMUP (5 steps): part c measures speed, not loss, but train's divergence guard still watches the loss, and
# at train's defaults (lr 3e-3, 5% warmup = 1 step of 20) it stopped (DMAM)x4 at step 11 on an H100 (docs/gpu.md),
# STEPS_PRIMITIVES (part b's single-primitive models, default AWMESD), STEPS_ALL_SIX=0 (skip part b's AWMESD
# model, the slowest: a rerun that re-checks a few primitives fits a short device lease),
# GPU_CHECK_KEEP_WEIGHTS=1 (keep the MFU runs' checkpoints and exported weights; default: deleted, ~20 GB).
# Exit status: 0 all passed (skips allowed), 1 something failed, 2 no CUDA device.
set -u -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2
PY=${PYTHON:-python}

die() {
    echo "gpu_check: $*" >&2
    exit 2
}

# -- is this a CUDA machine? --------------------------------------------------------------------------------
if ! command -v nvidia-smi >/dev/null 2>&1; then
    die "no CUDA device: this script is for GPU machines (nvidia-smi not found)"
fi
if ! nvidia-smi -L >/dev/null 2>&1; then
    die "no CUDA device: this script is for GPU machines (nvidia-smi lists no GPU)"
fi
if ! "$PY" -c 'import torch, sys; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
    die "no CUDA device: this script is for GPU machines (nvidia-smi sees a GPU but torch does not:" \
        "$("$PY" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda)' 2>&1 | tail -1))"
fi

OUT=${OUT:-runs/gpu-check}
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
exec > >(tee -a "$OUT/gpu_check.log") 2>&1
: >"$OUT/parts.tsv"

BUDGET=${GPU_CHECK_BUDGET:-570}
DEADLINE=$((SECONDS + BUDGET))
HELPER=benchmarks/gpu_check.py
echo "gpu_check: $(date -Is), output in $OUT, budget ${BUDGET}s"
nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu --format=csv

# Least time each later part is kept (s): a part that runs long eats only into its own share and the slack.
R_TESTS=60 R_ATTENTION=20 R_STEPS=120 R_MFU_RUN=130 R_REPORT=10
read -r -a PATTERNS <<<"${MFU_PATTERNS:-(AM)x4 (AM)x16}"
R_MFU=$((${#PATTERNS[@]} * R_MFU_RUN))

# limit CAP RESERVE [FLOOR]: seconds for the next part: at most CAP, and leave RESERVE for the parts after it, but
# never less than FLOOR (default 20), since a part cut below what it needs is wasted whole
limit() {
    local cap=$1 left=$((DEADLINE - SECONDS - $2)) floor=${3:-20}
    ((left < cap)) && cap=$left
    ((cap < floor)) && cap=$floor
    echo "$cap"
}

# part NAME LIMIT LOG COMMAND...: run it under a time limit, output to the screen and LOG, record its status
part() {
    local name=$1 seconds=$2 log=$3 start=$SECONDS rc
    shift 3
    echo
    echo "== $name (limit ${seconds}s) =="
    timeout --kill-after=20 "$seconds" "$@" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    ((rc == 124 || rc == 137)) && echo "gpu_check: $name timed out after ${seconds}s"
    printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$((SECONDS - start))" "$log" >>"$OUT/parts.tsv"
    return 0
}

# -- 0. kernel packages -------------------------------------------------------------------------------------
echo
echo "== kernel packages (the cuda extra) =="
"$PY" "$HELPER" env --out "$OUT/env_before.json" --print-missing >"$OUT/missing_before.txt" ||
    echo "gpu_check: the environment probe failed (see above)"
mapfile -t MISSING <"$OUT/missing_before.txt"
INSTALL_STATUS="not needed"
INSTALL_DETAIL="every package of the cuda extra imports"
if ((${#MISSING[@]})); then
    echo "missing or not importable: ${MISSING[*]}"
    if [[ ${GPU_CHECK_INSTALL:-1} == 0 ]]; then
        INSTALL_STATUS="skipped"
        INSTALL_DETAIL="GPU_CHECK_INSTALL=0; missing: ${MISSING[*]}"
    else
        # Only the missing requirements, straight from the extra (no rebuild of this package, which would need
        # setuptools from the network); torch pinned so pip cannot swap the CUDA build; no build isolation, as
        # flash-attn/mamba-ssm/causal-conv1d build against the installed torch.
        "$PY" -c 'import torch; print("torch==" + torch.__version__)' >"$OUT/constraints.txt"
        seconds=$(limit "${GPU_CHECK_INSTALL_TIMEOUT:-120}" $((R_TESTS + R_ATTENTION + R_STEPS + R_MFU + R_REPORT)))
        echo "pip install ${MISSING[*]} (limit ${seconds}s, log $OUT/pip_install.log)"
        timeout --kill-after=20 "$seconds" "$PY" -m pip install --retries 0 --timeout 15 --no-build-isolation \
            -c "$OUT/constraints.txt" "${MISSING[@]}" >"$OUT/pip_install.log" 2>&1
        rc=$?
        if ((rc == 0)); then
            INSTALL_STATUS="installed"
            INSTALL_DETAIL="pip install ${MISSING[*]}"
        else
            INSTALL_STATUS="failed"
            ((rc == 124)) && INSTALL_STATUS="timed out"
            last_error=$(grep -E 'ERROR|error:' "$OUT/pip_install.log" | tail -1 | cut -c1-160)
            INSTALL_DETAIL="pip exit status $rc: ${last_error:-no error line}; see pip_install.log"
        fi
        echo "install: $INSTALL_STATUS: $INSTALL_DETAIL"
    fi
fi
"$PY" "$HELPER" env --out "$OUT/env.json" --print-missing >"$OUT/missing.txt"
STATUS="$INSTALL_STATUS" DETAIL="$INSTALL_DETAIL" "$PY" -c '
import json, os, sys
json.dump({"status": os.environ["STATUS"], "detail": os.environ["DETAIL"],
           "still_missing": open(sys.argv[2]).read().split()}, open(sys.argv[1], "w"), indent=2)
' "$OUT/install.json" "$OUT/missing.txt"
if [[ -s "$OUT/missing.txt" ]]; then
    echo "gpu_check: still missing (their primitives run the pure-PyTorch path; their tests will SKIP):" \
        "$(tr '\n' ' ' <"$OUT/missing.txt")"
fi

# -- a. CUDA-only tests, and A through flash-attn -----------------------------------------------------------
mapfile -t CUDA_TESTS < <("$PY" "$HELPER" cuda-tests)
echo
echo "CUDA-only tests: ${CUDA_TESTS[*]}"
if ((${#CUDA_TESTS[@]})); then
    # floor 75 s: on a fresh H100 they took 57 s (imports and Triton's first compile), and a 20 s share ran none
    part cuda-tests "$(limit 150 $((R_ATTENTION + R_STEPS + R_MFU + R_REPORT)) 75)" "$OUT/cuda_tests.log" \
        "$PY" -m pytest -p no:cacheprovider -q -rA --junitxml "$OUT/cuda_tests.xml" "${CUDA_TESTS[@]}"
fi
part attention "$(limit 60 $((R_STEPS + R_MFU + R_REPORT)))" "$OUT/attention.log" \
    "$PY" "$HELPER" attention --out "$OUT/attention.json"

# -- b. one compiled training step per primitive --------------------------------------------------------------
STEPS_ARGS=(--primitives "${STEPS_PRIMITIVES:-AWMESD}")
[[ ${STEPS_ALL_SIX:-1} == 0 ]] && STEPS_ARGS+=(--no-all-six)
part steps "$(limit 240 $((R_MFU + R_REPORT)))" "$OUT/steps.log" "$PY" "$HELPER" steps --out "$OUT/steps.json" \
    "${STEPS_ARGS[@]}"

# -- c. MFU at 1B widths, FSDP2, bf16, compile --------------------------------------------------------------
SEQ=${MFU_SEQ_LEN:-2048}
BATCH=${MFU_BATCH:-8}
STEPS=${MFU_STEPS:-30}
LABELS=()
remaining=${#PATTERNS[@]}
for pattern in "${PATTERNS[@]}"; do
    label=$(tr -d '()' <<<"$pattern")
    LABELS+=("$label")
    run="$OUT/mfu-$label"
    rm -rf "$run" # composer train refuses an --out that holds checkpoints
    remaining=$((remaining - 1))
    # TORCH_LOGS=recompiles: a recompilation inside the timed steps shows in the log
    part "mfu-$label" "$(limit 200 $((remaining * R_MFU_RUN + R_REPORT)))" "$OUT/mfu-$label.log" \
        env TORCH_LOGS=recompiles "$PY" -c 'import sys; from composer.cli import main; sys.exit(main(sys.argv[1:]))' \
        train --arch "$pattern" --preset llama-3.2-1b \
        --seq-len "$SEQ" --batch-size "$BATCH" --tokens $((SEQ * BATCH * STEPS)) \
        --lr "${MFU_LR:-0.001}" --warmup "${MFU_WARMUP:-5}" \
        --accelerator gpu --devices 1 --strategy fsdp --precision bf16-mixed --compile \
        --max-documents 500 --data-cache "$OUT/data-cache" --val-batches 1 --val-tokens $((SEQ * BATCH)) \
        --checkpoint-interval 1000000 --log-interval 1 --wandb off --out "$run"
    if [[ ${GPU_CHECK_KEEP_WEIGHTS:-0} != 1 ]]; then
        rm -rf "$run/checkpoints" "$run/model" # GBs at 1B widths; summary.json and logs/ stay
    fi
done

# -- the table ----------------------------------------------------------------------------------------------
echo
echo "== report (all parts: $((SECONDS))s) =="
MFU_LABELS=$(
    IFS=,
    echo "${LABELS[*]}"
)
"$PY" "$HELPER" report --dir "$OUT" --mfu "$MFU_LABELS"
exit $?
