#!/usr/bin/env bash
# One command for a CUDA machine (H100/H200): checks the GPU-only code paths and measures MFU at 1B widths in
# under 10 minutes, then prints one table. Run from anywhere; it works in the repository root.
#
#   bash benchmarks/gpu_check.sh                       # the full check: writes runs/gpu-check/
#   OUT=/some/dir bash benchmarks/gpu_check.sh         # writes there
#   bash benchmarks/gpu_check.sh --quick               # the quick check: one device call (docs/gpu.md, "Quick mode")
#   GPU_CHECK_DRY_RUN=1 bash benchmarks/gpu_check.sh --quick   # its plumbing on a CPU, tiny settings (the tests)
#   bash benchmarks/gpu_check.sh --recall-scale [ARGS]  # issue 50's recall and scale run: one device call
#                                                       # (docs/gpu.md, "Recall and scale run"; ARGS go to
#                                                       # benchmarks/recall_scale.py, e.g. --parts b)
#   bash benchmarks/gpu_check.sh --cost                 # decode and training timings for the cost model: one call
#
# The cost run (--cost): benchmarks/finalist_costs.py measures the constrained search's answer (SADDDD grown with
#   its attention kept), Nemotron-H's, Llama's and Samba's layouts, then the equal-cost report's layouts at
#   Nemotron-H's depth by width (the answer's mixers with an MLP after each, the answer, Nemotron-H:
#   docs/reports/equal-cost-2026-11-29.md) (COST_LAYOUTS) at llama-350m, then llama-3.2-1b
#   (COST_TARGETS), each within the budget left: training tokens/s at COST_TRAIN_BATCH (8) x 4,096, prefill, and ms
#   per decode step at batch 1 and 64 after 4,096 and 8,191 tokens through a CUDA graph of the step
#   (composer.evaluation.bench_cost), every figure beside the cost model's prediction for this GPU (h100 or h200,
#   from its name). It writes $OUT/<target>/finalist_costs.json (rewritten after every model) and cost.log to $OUT
#   (default runs/gpu-cost); GPU_CHECK_BUDGET (default 500 s). GPU_CHECK_DRY_RUN=1: tiny models on the CPU.
#
# The recall and scale run (--recall-scale): benchmarks/recall_scale.py within GPU_CHECK_BUDGET (default 520 s):
#   part a, demo-4m models trained alike for 30M tokens at context 512 and scored by their own recall, then part
#   b, llama-350m models for 10M tokens at 2,048, as many as fit (its header and plan). It writes recall_scale.json,
#   recall_scale.md, recall_scale-files.tar.gz (rewritten after every model) and recall_scale.log to $OUT
#   (default runs/recall-scale); the runs live in GPU_CHECK_WORK (default a new /tmp/recall-scale.*). The carried
#   wheels' prelude only with RECALL_SCALE_PRELUDE=1. GPU_CHECK_DRY_RUN=1: tiny models on the CPU.
#
# The full check:
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
# The quick check (--quick): one device call of at most 9 minutes inside a 15-minute lease. Its parts run in the
# order of their value, so that a timeout loses the least:
#   prelude  sources benchmarks/gpu_prelude.sh (the carried wheels into /tmp/site, PYTHONPATH) when it and the
#            wheels' folder (.whl; the device call carries it) exist: in a child shell under a time limit, whose
#            exported variables are then taken over, so a prelude that hangs or exits cannot take the check with
#            it. Absent or failed, it is recorded and the check goes on with the device's own packages.
#   env      part 0 without pip (the device has no network), and the halving answer grown to 1B widths by the
#            project's extrapolator (`composer extrapolate SDMMSD --target llama-3.2-1b`: (SDMMSD)x6).
#   a.       as in the full check: the CUDA-only tests, and A through flash-attn.
#   c.       as in the full check, MFU_STEPS (20) steps each: (SMWM)x4 (S on mamba-ssm's Triton kernels where the
#            carried wheel imports; about 140 s on an H200 with its autotuning, docs/reports/gpu-runs-2026-11-26.md "Fourth run"), then (AM)x16,
#            the Transformer baseline of the same run. (DMAM)x4 and stacked:SDMMSD are left to QUICK_MFU_PATTERNS:
#            D trains on its PyTorch path on Hopper (fla #640) and its compile alone outlasted a 75 s share.
#   d.       rung 0 of the `gpu` successive-halving ladder (rung-gpu-0: 5M tokens, seq 1024 x 32, search-1m
#            widths, two rates): 3 patterns at RUNG0_FRACTION (0.1) of its tokens, through the search's own training
#            call (`gpu_check.py rung0`), and candidates per hour extrapolated to the full rung.
#   b.       skipped, unless QUICK_STEPS=1: then last, with the time left.
#   It writes four files to $OUT (the device tool brings back at most 8, at most 2 folders down), each rewritten
#   after every part, so a call cut short still returns what ran: quick.json (every part's status and results, the
#   rung-0 candidates/hour, the table), quick-report.txt (the table), quick.log (the console) and
#   quick-files.tar.gz (the parts' logs and JSON files). The runs themselves live in GPU_CHECK_WORK (default: a
#   new /tmp/gpu-check-quick.*). A part that finds less than its floor of the budget left is not started and is
#   recorded as "no time": the whole check ends within the budget, plus its report.
#
# Environment: OUT (output directory), PYTHON (default: python, else python3), GPU_CHECK_INSTALL=0 (never pip
# install), GPU_CHECK_INSTALL_TIMEOUT (s, default 120), GPU_CHECK_BUDGET (s for all parts, default 570; quick 500),
# MFU_SEQ_LEN (2048), MFU_BATCH (8), MFU_STEPS (30; quick 20), MFU_PRESET (llama-3.2-1b), MFU_PATTERNS
# ("(AM)x4 (AM)x16"), MFU_LR (0.001) and MFU_WARMUP (5 steps): part c measures speed, not loss, but train's
# divergence guard still watches the loss, and at train's defaults (lr 3e-3, 5% warmup = 1 step of 20) it stopped
# (DMAM)x4 at step 11 on an H100 (docs/gpu.md),
# STEPS_PRIMITIVES (part b's single-primitive models, default AWMESD), STEPS_ALL_SIX=0 (skip part b's AWMESD
# model, the slowest: a rerun that re-checks a few primitives fits a short device lease),
# GPU_CHECK_KEEP_WEIGHTS=1 (keep the MFU runs' checkpoints and exported weights; default: deleted, ~20 GB).
# Quick check only: QUICK_MFU_PATTERNS ("(SMWM)x4 (AM)x16"; e.g. "(DMAM)x4 stacked:SDMMSD"; stacked:P is P grown to
# MFU_PRESET by the extrapolator), RUNG0_PATTERNS ("AMAMAM,AAMMMM,SMSAMS"), RUNG0_FRACTION (0.1),
# RUNG0_COMPILE=1 (compile each run, as `composer search --compile`; default off, as the search's default),
# QUICK_STEPS=1, GPU_CHECK_PRELUDE (benchmarks/gpu_prelude.sh), GPU_CHECK_WHEELS (.whl: the prelude is sourced only
# where this folder exists), GPU_CHECK_PRELUDE_TIMEOUT (s, default 180), GPU_CHECK_WORK.
# GPU_CHECK_DRY_RUN=1: no CUDA check, and every part at tiny settings on the CPU (preset tiny, 3 steps, fp32, no
# compile; attention through SDPA; rung 0 of the cpu ladder at tiny widths): the plumbing, not the GPU paths.
# Exit status: 0 all passed (skips allowed), 1 something failed (quick: or a part timed out or had no time),
# 2 no CUDA device or a bad argument.
set -u -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 2

die() {
    echo "gpu_check: $*" >&2
    exit 2
}

MODE=full
RECALL_ARGS=()
if [[ ${1-} == --recall-scale ]]; then
    MODE=recall
    RECALL_ARGS=("${@:2}") # passed on to benchmarks/recall_scale.py (--parts b, --layouts-b ...)
elif (($# > 1)); then
    die "one argument at most (--quick, --cost or --recall-scale ARGS...), got $#: $*"
elif (($# == 1)); then
    case $1 in
    --quick) MODE=quick ;;
    --cost) MODE=cost ;;
    *) die "unknown argument '$1': the options are --quick, --cost and --recall-scale (see this script's header)" ;;
    esac
fi
DRY_RUN=${GPU_CHECK_DRY_RUN:-0}
export PYTHONUNBUFFERED=1 # a part killed at its limit still leaves its last lines in its log
# the device's image has python3 and no python
if [[ -n ${PYTHON-} ]]; then
    PY=$PYTHON
elif command -v python >/dev/null 2>&1; then
    PY=python
else
    PY=python3
fi

# -- is this a CUDA machine? --------------------------------------------------------------------------------
check_cuda() {
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
}
[[ $DRY_RUN == 1 ]] || check_cuda

if [[ $MODE == quick ]]; then
    OUT=${OUT:-runs/gpu-check-quick}
    BUDGET=${GPU_CHECK_BUDGET:-500}
elif [[ $MODE == recall ]]; then
    OUT=${OUT:-runs/recall-scale}
    BUDGET=${GPU_CHECK_BUDGET:-520}
elif [[ $MODE == cost ]]; then
    OUT=${OUT:-runs/gpu-cost}
    BUDGET=${GPU_CHECK_BUDGET:-500}
else
    OUT=${OUT:-runs/gpu-check}
    BUDGET=${GPU_CHECK_BUDGET:-570}
fi
mkdir -p "$OUT" || die "cannot create $OUT"
OUT=$(cd "$OUT" && pwd)
if [[ $MODE == recall ]]; then
    WORK=${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/recall-scale.XXXXXX")} || die "cannot create a work directory"
    mkdir -p "$WORK" || die "cannot create $WORK"
    WORK=$(cd "$WORK" && pwd)
    rm -f "$OUT"/recall_scale.{json,md,log} "$OUT/recall_scale-files.tar.gz"
    exec > >(tee "$OUT/recall_scale.log") 2>&1
elif [[ $MODE == cost ]]; then
    WORK=$OUT
    rm -rf "$OUT"/cost.log "$OUT"/*/finalist_costs.json
    exec > >(tee "$OUT/cost.log") 2>&1
elif [[ $MODE == quick ]]; then
    # the runs stay out of $OUT: the device tool brings back 8 files of it, and these are hundreds
    WORK=${GPU_CHECK_WORK:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-check-quick.XXXXXX")} || die "cannot create a work directory"
    mkdir -p "$WORK" || die "cannot create $WORK"
    WORK=$(cd "$WORK" && pwd)
    rm -f "$OUT/quick.json" "$OUT/quick-report.txt" "$OUT/quick-files.tar.gz"
    exec > >(tee "$OUT/quick.log") 2>&1
else
    WORK=$OUT
    exec > >(tee -a "$OUT/gpu_check.log") 2>&1
fi
TEE_PID=$!
# results of an earlier check in the same directory would pass for this one's
rm -f "$WORK"/{parts.tsv,run.json,env.json,env_before.json,install.json,attention.json,steps.json,rung0.json} \
    "$WORK/cuda_tests.xml"
: >"$WORK/parts.tsv"

DEADLINE=$((SECONDS + BUDGET))
STARTED=$(date +%s)
HELPER=benchmarks/gpu_check.py
LABELS=()
echo "gpu_check: $(date -Is), ${MODE} check, output in $OUT, budget ${BUDGET}s"
if [[ $DRY_RUN == 1 ]]; then
    echo "gpu_check: DRY RUN (GPU_CHECK_DRY_RUN=1): no CUDA check, every part at tiny settings on the CPU"
else
    nvidia-smi --query-gpu=name,driver_version,memory.total,memory.used,utilization.gpu --format=csv
fi

# -- settings: 1B widths on CUDA, or (dry run) tiny ones on the CPU through the same commands ------------------
if [[ $DRY_RUN == 1 ]]; then
    MFU_PRESET=${MFU_PRESET:-tiny}
    SEQ=${MFU_SEQ_LEN:-64}
    BATCH=${MFU_BATCH:-2}
    STEPS=${MFU_STEPS:-3}
    : "${MFU_WARMUP:=1}"
    TRAIN_DEVICE=(--device cpu --devices 1 --parallelism auto --precision 32-true --no-compile)
    ATTENTION_ARGS=(--device cpu --kernel-backend sdpa --seq-len 64)
    STEPS_DEVICE=(--device cpu --precision fp32 --preset tiny --seq-len 64 --batch-size 2)
    RUNG0_ARGS=(--budget rung-cpu-0 --fraction "${RUNG0_FRACTION:-0.04}" --widths tiny --precision fp32
        --val-tokens 2048)
else
    MFU_PRESET=${MFU_PRESET:-llama-3.2-1b}
    SEQ=${MFU_SEQ_LEN:-2048}
    BATCH=${MFU_BATCH:-8}
    STEPS=${MFU_STEPS:-$([[ $MODE == quick ]] && echo 20 || echo 30)}
    TRAIN_DEVICE=(--device gpu --devices 1 --parallelism fsdp --precision bf16-mixed --compile)
    ATTENTION_ARGS=()
    STEPS_DEVICE=()
    RUNG0_ARGS=(--budget rung-gpu-0 --fraction "${RUNG0_FRACTION:-0.1}")
fi
[[ ${RUNG0_COMPILE:-0} == 1 ]] && RUNG0_ARGS+=(--compile)

# limit CAP RESERVE [FLOOR]: seconds for the next part: at most CAP, and leave RESERVE for the parts after it, but
# never less than FLOOR (default 20), since a part cut below what it needs is wasted whole
limit() {
    local cap=$1 left=$((DEADLINE - SECONDS - $2)) floor=${3:-20}
    ((left < cap)) && cap=$left
    ((cap < floor)) && cap=$floor
    echo "$cap"
}

# within CAP RESERVE FLOOR: limit's seconds, but never past the deadline; fails (prints nothing) when less than FLOOR
# is left, so that the quick check skips the part instead of overrunning its device call
within() {
    local left=$((DEADLINE - SECONDS)) seconds
    ((left < $3)) && return 1
    seconds=$(limit "$@")
    ((seconds > left)) && seconds=$left
    echo "$seconds"
}

# record_part NAME RC SECONDS LOG LIMIT STATUS DETAIL: one row of parts.tsv (gpu_check.py's parts_table reads it;
# STATUS only for a part not run); the quick check then rewrites its summary
record_part() {
    local detail=${7//$'\t'/ }
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" "$6" "${detail//$'\n'/ }" >>"$WORK/parts.tsv"
    [[ $MODE == quick ]] && summarize
    return 0
}

# skip_part NAME STATUS DETAIL: a part not run (STATUS skipped: on purpose; no time: the budget was spent), said
# and recorded so that the report shows why its results are missing
skip_part() {
    echo
    echo "== $1: $2: $3 =="
    record_part "$1" "" 0 "" "" "$2" "$3"
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
    record_part "$name" "$rc" "$((SECONDS - start))" "$log" "$seconds" "" ""
}

# no_time NAME FLOOR: NAME recorded as not started: less than its FLOOR seconds of the budget were left
no_time() {
    skip_part "$1" "no time" "not run: $((DEADLINE - SECONDS))s of the ${BUDGET}s budget left, it needs ${2}s"
}

# quick_part NAME CAP RESERVE FLOOR LOG COMMAND...: part under within's limit, or no_time
quick_part() {
    local name=$1 cap=$2 reserve=$3 floor=$4 log=$5 seconds
    shift 5
    if seconds=$(within "$cap" "$reserve" "$floor"); then
        part "$name" "$seconds" "$log" "$@"
    else
        no_time "$name" "$floor"
    fi
}

# summarize [final]: quick.json and the table from what the parts left so far, and their small files packed into
# one archive: what a device call cut short brings back is whatever ran before (four files in $OUT)
summarize() {
    local labels rc
    labels=$(
        IFS=,
        echo "${LABELS[*]}"
    )
    if [[ ${1-} == final ]]; then
        "$PY" "$HELPER" report --dir "$WORK" --mfu "$labels" --summary "$OUT/quick.json" \
            --table "$OUT/quick-report.txt" --final
    else
        "$PY" "$HELPER" report --dir "$WORK" --mfu "$labels" --summary "$OUT/quick.json" \
            --table "$OUT/quick-report.txt" --quiet
    fi
    rc=$?
    tar -czf "$OUT/quick-files.tar.gz.part" -C "$WORK" --exclude=checkpoints --exclude=model \
        --exclude=data-cache --exclude='*.tmp' . 2>/dev/null &&
        mv -f "$OUT/quick-files.tar.gz.part" "$OUT/quick-files.tar.gz"
    return $rc
}

# write_plan PART...: run.json, which the report reads: mode, budget, start, and the parts planned (one not yet
# recorded shows as pending in quick.json)
write_plan() {
    "$PY" - "$WORK/run.json" "$MODE" "$DRY_RUN" "$BUDGET" "$STARTED" "$@" <<'EOF'
import json, sys
path, mode, dry_run, budget, started, *planned = sys.argv[1:]
with open(path, "w") as handle:
    json.dump({"mode": mode, "dry_run": dry_run == "1", "budget_s": int(budget), "started": float(started),
               "planned": planned}, handle, indent=2)
EOF
}

# source_prelude LIMIT: source $PRELUDE in a child shell under LIMIT seconds, then take over the variables it
# exported or changed (PYTHONPATH): sourced here, a prelude that hangs (pip asking for a network the device lacks)
# or calls exit would take the whole check with it. Its exports are taken over even when it returns non-zero at
# its end (a final import check), not when it exits midway.
source_prelude() {
    local limit=$1 start=$SECONDS rc exports record name value taken=() detail
    unset GPU_PRELUDE # only the prelude's own word counts
    exports=$(mktemp "$WORK/prelude-env.XXXXXX") || return 1
    echo
    echo "== prelude: source $PRELUDE (limit ${limit}s) =="
    timeout --kill-after=10 "$limit" bash -c 'f=$1 e=$2; shift 2; source "$f"; rc=$?; env -0 >"$e"; exit $rc' \
        prelude "$PRELUDE" "$exports" 2>&1 | tee "$WORK/prelude.log"
    rc=${PIPESTATUS[0]}
    while IFS= read -r -d '' record; do
        name=${record%%=*} value=${record#*=}
        [[ $name =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]] || continue
        case $name in PWD | OLDPWD | SHLVL | _) continue ;; esac
        if [[ ! -v $name || ${!name} != "$value" ]]; then
            export "$name=$value"
            taken+=("$name")
        fi
    done <"$exports"
    rm -f "$exports" # the whole environment: not for the archive
    detail="exports taken over: ${taken[*]:-none}"
    # benchmarks/gpu_prelude.sh says how it went in GPU_PRELUDE: ok, failed or no-wheels (then nothing installed)
    [[ -n ${GPU_PRELUDE-} ]] && detail="GPU_PRELUDE=$GPU_PRELUDE; $detail"
    if [[ ${GPU_PRELUDE-} == no-wheels ]]; then
        detail="no wheels installed; $detail"
        echo "gpu_check: $detail"
        record_part prelude "$rc" "$((SECONDS - start))" "$WORK/prelude.log" "$limit" skipped "$detail"
        return 0
    elif ((rc == 0)); then
        detail="sourced $PRELUDE in $((SECONDS - start))s; $detail"
    elif ((rc == 124 || rc == 137)); then
        detail="$PRELUDE timed out after ${limit}s; $detail; see prelude.log"
    else
        detail="$PRELUDE returned exit status $rc; $detail; see prelude.log"
    fi
    echo "gpu_check: $detail"
    record_part prelude "$rc" "$((SECONDS - start))" "$WORK/prelude.log" "$limit" "" "$detail"
}

# resolve_pattern TOKEN: TOKEN, or for stacked:P the pattern P grown to MFU_PRESET's size by the project's
# extrapolator, in compact form: the halving answer at 1B widths without guessing its number of repeats
resolve_pattern() {
    if [[ $1 != stacked:* ]]; then
        echo "$1"
        return 0
    fi
    timeout 120 "$PY" -m composer extrapolate "${1#stacked:}" --target "$MFU_PRESET" --json |
        "$PY" -c 'import json, sys; print(json.load(sys.stdin)["compact"])'
}

# mfu_part PATTERN LIMIT: `composer train` of PATTERN at MFU_PRESET's widths for STEPS steps, the weights deleted
mfu_part() {
    local pattern=$1 seconds=$2 label run scoring
    label=$(tr -d '()' <<<"$pattern")
    run="$WORK/mfu-$label"
    rm -rf "$run" # composer train refuses an --out that holds checkpoints
    # speed only: the final validation (a recompile of every layer under no_grad) and the 1B export outlasted the
    # quick check's share twice after the timed steps (docs/gpu.md); GPU_CHECK_KEEP_WEIGHTS=1 keeps both
    scoring=(--throughput-only)
    [[ ${GPU_CHECK_KEEP_WEIGHTS:-0} == 1 ]] && scoring=(--val-batches 1 --val-tokens $((SEQ * BATCH)))
    # TORCH_LOGS=recompiles: a recompilation inside the timed steps shows in the log
    part "mfu-$label" "$seconds" "$WORK/mfu-$label.log" \
        env TORCH_LOGS=recompiles "$PY" -c 'import sys; from composer.cli import main; sys.exit(main(sys.argv[1:]))' \
        train --arch "$pattern" --preset "$MFU_PRESET" \
        --seq-len "$SEQ" --batch-size "$BATCH" --tokens $((SEQ * BATCH * STEPS)) \
        --lr "${MFU_LR:-0.001}" --warmup "${MFU_WARMUP:-5}" "${TRAIN_DEVICE[@]}" \
        --max-documents 500 --data-cache "$WORK/data-cache" "${scoring[@]}" \
        --checkpoint-interval 1000000 --log-interval 1 --wandb off --out "$run"
    if [[ ${GPU_CHECK_KEEP_WEIGHTS:-0} != 1 ]]; then
        rm -rf "$run/checkpoints" "$run/model" # GBs at 1B widths; summary.json and logs/ stay
    fi
}

# cuda_test_command: the pytest command of the CUDA-only tests (none: nothing), its JUnit report in $WORK; without
# the dry-run switch, as the no-CUDA test among them runs this script again
cuda_test_command() {
    local tests
    mapfile -t tests < <("$PY" "$HELPER" cuda-tests)
    echo "CUDA-only tests: ${tests[*]}" >&2
    ((${#tests[@]})) || return 1
    printf '%s\0' env -u GPU_CHECK_DRY_RUN "$PY" -m pytest -p no:cacheprovider -q -rA \
        --junitxml "$WORK/cuda_tests.xml" "${tests[@]}"
}

steps_args() {
    STEPS_ARGS=(--primitives "${STEPS_PRIMITIVES:-AWMESD}" "${STEPS_DEVICE[@]}")
    [[ ${STEPS_ALL_SIX:-1} == 0 ]] && STEPS_ARGS+=(--no-all-six)
    return 0
}

# -- the quick check: one device call, the parts by value ----------------------------------------------------
quick_check() {
    # Least time each later part is kept (s), from the H100 and H200 runs (docs/gpu.md): CUDA-only tests 57 s on a
    # fresh machine without mamba-ssm, over 90 s with it (its Triton autotuning); MFU runs 67 s ((AM)x16) to
    # 140 s ((SMWM)x4 on the Triton kernels); the rung-0 runs are search-1m models, about 2 s each for A/M
    local R_TESTS=100 R_ATTENTION=15 R_MFU_RUN=75 R_RUNG0=45 R_REPORT=10 R_STEPS=0 tokens=() patterns=() token
    local resolved tests_command=() i seconds
    [[ ${QUICK_STEPS:-0} == 1 ]] && R_STEPS=60
    read -r -a tokens <<<"${QUICK_MFU_PATTERNS:-(SMWM)x4 (AM)x16}"
    local R_MFU=$((${#tokens[@]} * R_MFU_RUN))
    local planned=(prelude env cuda-tests attention)
    for token in "${tokens[@]}"; do planned+=("mfu-$(tr -d '()' <<<"$token")"); done
    write_plan "${planned[@]}" rung0 steps

    PRELUDE=${GPU_CHECK_PRELUDE:-benchmarks/gpu_prelude.sh}
    local wheel_dir=${GPU_CHECK_WHEELS:-.whl}
    if [[ ! -f $PRELUDE ]]; then
        skip_part prelude skipped "no $PRELUDE: the device's own packages only"
    elif [[ ! -d $wheel_dir ]]; then
        skip_part prelude skipped \
            "no $wheel_dir folder (the device call carries it: carry [\"$wheel_dir\"]): the device's own packages only"
    else
        # no reserve: every later part runs on what it installs; a prelude stopped at its limit hands over nothing
        source_prelude "$(within "${GPU_CHECK_PRELUDE_TIMEOUT:-180}" 0 30 || echo 30)"
    fi

    # env: the kernel packages (no pip: the device has no network), and the stacked patterns
    printf '{"status": "skipped", "detail": "%s"}\n' \
        "quick check: no pip install (the device has no network); carried wheels come through the prelude" \
        >"$WORK/install.json"
    quick_part env 60 $((R_TESTS + R_ATTENTION + R_MFU + R_RUNG0 + R_REPORT)) 30 "$WORK/env.log" \
        "$PY" "$HELPER" env --out "$WORK/env.json" --print-missing
    for token in "${tokens[@]}"; do
        if resolved=$(resolve_pattern "$token") && [[ -n $resolved ]]; then
            echo "MFU pattern: $token -> $resolved"
            patterns+=("$resolved")
            LABELS+=("$(tr -d '()' <<<"$resolved")")
        else
            patterns+=("")
            LABELS+=("$(tr -d '()' <<<"$token")")
            echo "gpu_check: could not resolve $token with composer extrapolate (see above)"
        fi
    done
    planned=(prelude env cuda-tests attention "${LABELS[@]/#/mfu-}" rung0 steps)
    write_plan "${planned[@]}"

    # a. the CUDA-only tests (floor 75 s: 57 s on a fresh H100, a 20 s share ran none; with the mamba-ssm wheel
    #    a 75 s and a 90 s limit both cut the S kernel comparison short on an H200), and A through flash-attn
    mapfile -d '' -t tests_command < <(cuda_test_command)
    if ((${#tests_command[@]})); then
        quick_part cuda-tests 160 $((R_ATTENTION + R_MFU + R_RUNG0 + R_REPORT)) 75 "$WORK/cuda_tests.log" \
            "${tests_command[@]}"
    else
        skip_part cuda-tests skipped "no test with a CUDA skipif found"
    fi
    quick_part attention 45 $((R_MFU + R_RUNG0 + R_REPORT)) 20 "$WORK/attention.log" \
        "$PY" "$HELPER" attention --out "$WORK/attention.json" "${ATTENTION_ARGS[@]}"

    # c. MFU at 1B widths: the hybrids first, the Transformer baseline last
    for i in "${!patterns[@]}"; do
        if [[ -z ${patterns[i]} ]]; then
            skip_part "mfu-${LABELS[i]}" failed "composer extrapolate could not grow ${tokens[i]#stacked:} to $MFU_PRESET"
        elif seconds=$(within 200 $(((${#patterns[@]} - i - 1) * R_MFU_RUN + R_RUNG0 + R_REPORT)) 45); then
            mfu_part "${patterns[i]}" "$seconds"
        else
            no_time "mfu-${LABELS[i]}" 45
        fi
    done

    # d. rung 0 of the gpu ladder: candidates per hour
    quick_part rung0 150 $((R_REPORT + R_STEPS)) 45 "$WORK/rung0.log" \
        "$PY" "$HELPER" rung0 --out "$WORK/rung0.json" "${RUNG0_ARGS[@]}" \
        --patterns "${RUNG0_PATTERNS:-AMAMAM,AAMMMM,SMSAMS}"

    # b. one compiled step per primitive: only on request
    if [[ ${QUICK_STEPS:-0} == 1 ]]; then
        steps_args
        quick_part steps 240 "$R_REPORT" 60 "$WORK/steps.log" "$PY" "$HELPER" steps --out "$WORK/steps.json" \
            "${STEPS_ARGS[@]}"
    else
        skip_part steps skipped "quick check: QUICK_STEPS=1 runs it last, with the time left"
    fi

    echo
    echo "== report (all parts: ${SECONDS}s) =="
    summarize final
}

# -- the full check --------------------------------------------------------------------------------------------
full_check() {
    # Least time each later part is kept (s): a part that runs long eats only into its own share and the slack.
    local R_TESTS=60 R_ATTENTION=20 R_STEPS=120 R_MFU_RUN=130 R_REPORT=10
    read -r -a PATTERNS <<<"${MFU_PATTERNS:-(AM)x4 (AM)x16}"
    local R_MFU=$((${#PATTERNS[@]} * R_MFU_RUN))

    # -- 0. kernel packages ---------------------------------------------------------------------------------
    echo
    echo "== kernel packages (the cuda extra) =="
    "$PY" "$HELPER" env --out "$OUT/env_before.json" --print-missing >"$OUT/missing_before.txt" ||
        echo "gpu_check: the environment probe failed (see above)"
    mapfile -t MISSING <"$OUT/missing_before.txt"
    INSTALL_STATUS="not needed"
    INSTALL_DETAIL="every package of the cuda extra imports"
    if ((${#MISSING[@]})); then
        echo "missing or not importable: ${MISSING[*]}"
        if [[ ${GPU_CHECK_INSTALL:-1} == 0 || $DRY_RUN == 1 ]]; then
            INSTALL_STATUS="skipped"
            INSTALL_DETAIL="$([[ $DRY_RUN == 1 ]] && echo "dry run" || echo "GPU_CHECK_INSTALL=0"); missing: ${MISSING[*]}"
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

    # -- a. CUDA-only tests, and A through flash-attn -------------------------------------------------------
    local tests_command=()
    mapfile -d '' -t tests_command < <(cuda_test_command)
    if ((${#tests_command[@]})); then
        # floor 75 s: on a fresh H100 they took 57 s (imports and Triton's first compile), and a 20 s share ran none
        part cuda-tests "$(limit 150 $((R_ATTENTION + R_STEPS + R_MFU + R_REPORT)) 75)" "$OUT/cuda_tests.log" \
            "${tests_command[@]}"
    fi
    part attention "$(limit 60 $((R_STEPS + R_MFU + R_REPORT)))" "$OUT/attention.log" \
        "$PY" "$HELPER" attention --out "$OUT/attention.json" "${ATTENTION_ARGS[@]}"

    # -- b. one compiled training step per primitive --------------------------------------------------------
    steps_args
    part steps "$(limit 240 $((R_MFU + R_REPORT)))" "$OUT/steps.log" "$PY" "$HELPER" steps --out "$OUT/steps.json" \
        "${STEPS_ARGS[@]}"

    # -- c. MFU at 1B widths, FSDP2, bf16, compile ----------------------------------------------------------
    local remaining=${#PATTERNS[@]} pattern
    for pattern in "${PATTERNS[@]}"; do
        LABELS+=("$(tr -d '()' <<<"$pattern")")
        remaining=$((remaining - 1))
        mfu_part "$pattern" "$(limit 200 $((remaining * R_MFU_RUN + R_REPORT)))"
    done

    # -- the table ------------------------------------------------------------------------------------------
    echo
    echo "== report (all parts: $((SECONDS))s) =="
    MFU_LABELS=$(
        IFS=,
        echo "${LABELS[*]}"
    )
    "$PY" "$HELPER" report --dir "$OUT" --mfu "$MFU_LABELS"
}

# -- the recall and scale run (issue 50): benchmarks/recall_scale.py, one device call ------------------------------
recall_check() {
    local args=(--out "$OUT" --work "$WORK") left
    # the carried wheels only on request: mamba-ssm's cold autotuning (122 s, docs/gpu.md) costs more than its S
    # kernels save on these runs, fla's D backward is refused on Hopper, and the models need no other package
    if [[ ${RECALL_SCALE_PRELUDE:-0} == 1 ]]; then
        PRELUDE=${GPU_CHECK_PRELUDE:-benchmarks/gpu_prelude.sh}
        source_prelude "$(within "${GPU_CHECK_PRELUDE_TIMEOUT:-180}" 0 30 || echo 30)"
    fi
    left=$((DEADLINE - SECONDS))
    args+=(--budget "$left")
    [[ $DRY_RUN == 1 ]] && args+=(--dry-run)
    echo "gpu_check: $PY benchmarks/recall_scale.py ${args[*]} ${RECALL_ARGS[*]}"
    "$PY" benchmarks/recall_scale.py "${args[@]}" "${RECALL_ARGS[@]}"
}

# -- the cost run (issue 58): benchmarks/finalist_costs.py at two sizes, one device call --------------------------
cost_check() {
    local layouts target left device=h200 seq_len=4096 batch=${COST_TRAIN_BATCH:-8}
    read -r -a layouts <<<"${COST_LAYOUTS:-SADDDD:keep nemotron-h:SMSAMS llama:AMAMAM samba:SMWMSM SMDMDMDMAMDMSMDM@nemotron-h SADDDD:keep@nemotron-h nemotron-h:SMSAMS@nemotron-h}"
    read -r -a targets <<<"${COST_TARGETS:-llama-350m llama-3.2-1b}"
    if [[ $DRY_RUN == 1 ]]; then
        device=cpu seq_len=32 batch=2 targets=(tiny)
    elif nvidia-smi -L | grep -q H100; then
        device=h100
    fi
    for target in "${targets[@]}"; do
        left=$((DEADLINE - SECONDS))
        if ((left < 60)); then
            echo "gpu_check: no time for $target ($left s left): a second call runs it: COST_TARGETS=$target bash benchmarks/gpu_check.sh --cost"
            continue
        fi
        echo "gpu_check: $PY benchmarks/finalist_costs.py --target $target --seq-len $seq_len --train-batch $batch --device-here $device ${layouts[*]} (limit $left s)"
        timeout --kill-after=10 "$left" "$PY" benchmarks/finalist_costs.py --target "$target" --seq-len "$seq_len" \
            --train-batch "$batch" --device-here "$device" "${layouts[@]}" --out "$OUT/$target" \
            || echo "gpu_check: $target stopped (status $?): $OUT/$target/finalist_costs.json keeps the models it finished"
    done
}

if [[ $MODE == quick ]]; then
    quick_check
elif [[ $MODE == recall ]]; then
    recall_check
elif [[ $MODE == cost ]]; then
    cost_check
else
    full_check
fi
status=$?
# the log's last lines are written before the script returns (and a device call collects $OUT)
exec >&- 2>&-
wait "$TEE_PID" 2>/dev/null
exit $status
