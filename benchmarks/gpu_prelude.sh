# shellcheck shell=bash
# Sourced (bash) at the start of a run on a lent GPU machine, which has no network: installs the wheels that
# benchmarks/gpu_wheels.sh put in .whl/ (carried along with the working tree) into /tmp/site, puts /tmp/site
# on PYTHONPATH, and prints one line of versions. See benchmarks/README.md, "Preparing a GPU lease".
#
#   source benchmarks/gpu_prelude.sh; bash benchmarks/gpu_check.sh
#
# It is sourced, so it must neither hang nor end the calling shell (which may run under `set -eu`): every step
# runs under `timeout`, and failures are lines starting "gpu_prelude:". GPU_PRELUDE (exported) says how it
# went: "ok", "failed" (an install failed, or some package does not import; the line says which) or
# "no-wheels". Its status is 1 on "failed", except in a shell with `set -e`, which that would end: there it is
# always 0. Wheels install with --no-deps, so the machine's own torch, triton and CUDA libraries stay as they
# are. Should datasets (5.x) not import, datasets from .whl/alt/ (4.4.2) replaces it. mamba-ssm is installed
# without its CUDA extensions, so `import mamba_ssm` fails by design; the line reports whether Mamba2's Triton
# kernels load (primitives/mamba_ssm_triton.py). A second source with the same wheels skips the install.
# Environment: PYTHON (python3), WHEELS (.whl in the repository root), GPU_SITE (/tmp/site),
# GPU_PRELUDE_TIMEOUT (s for each pip install, default 180).

_gpu_prelude_pip() { # LOG WHEEL...: pip install into the site, quietly, under the time limit
    local log=$1
    shift
    timeout -k 10 "${GPU_PRELUDE_TIMEOUT:-180}" "$_GP_PY" -m pip install -q --no-index --no-deps \
        --no-compile --no-cache-dir --upgrade --target "$_GP_SITE" "$@" >"$log" 2>&1
}

_gpu_prelude_error() { # LOG STATUS: one line for a failed pip install
    local reason
    reason=$(grep -E 'ERROR|Error' "$1" 2>/dev/null | tail -1 | cut -c1-160)
    (($2 == 124 || $2 == 137)) && reason="timed out after ${GPU_PRELUDE_TIMEOUT:-180}s"
    echo "${reason:-exit status $2}; log $1"
}

_gpu_prelude() {
    local root wheels log stamp status datasets_error
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." 2>/dev/null && pwd) || {
        echo "gpu_prelude: cannot find the repository root from ${BASH_SOURCE[0]}"
        return 1
    }
    wheels=${WHEELS:-$root/.whl}
    log=$_GP_SITE.pip.log
    if ! compgen -G "$wheels/*.whl" >/dev/null; then
        echo "gpu_prelude: no wheels in $wheels; nothing installed (run benchmarks/gpu_wheels.sh where PyPI" \
            "is reachable, then carry .whl)"
        GPU_PRELUDE=no-wheels
        return 0
    fi

    # -- install (skipped when the site already holds exactly these wheels) ----------------------------------
    stamp=$(cd "$wheels" && ls -l -- *.whl alt/*.whl 2>/dev/null | awk '{print $5, $NF}')
    if [[ -f $_GP_SITE/.gpu_prelude && $(<"$_GP_SITE/.gpu_prelude") == "$stamp" ]]; then
        echo "gpu_prelude: $_GP_SITE already holds these wheels"
    else
        rm -f "$_GP_SITE/.gpu_prelude"
        _gpu_prelude_pip "$log" "$wheels"/*.whl
        status=$?
        if ((status)); then
            echo "gpu_prelude: pip install into $_GP_SITE failed: $(_gpu_prelude_error "$log" "$status")"
            return 1
        fi
        printf '%s\n' "$stamp" >"$_GP_SITE/.gpu_prelude"
    fi
    case ":${PYTHONPATH:-}:" in
    *":$_GP_SITE:"*) ;;
    *) export PYTHONPATH="$_GP_SITE${PYTHONPATH:+:$PYTHONPATH}" ;;
    esac

    # -- datasets 5 needs pyarrow>=24; 4.4.2 in alt/ is the fallback -----------------------------------------
    if ! datasets_error=$(timeout -k 5 60 "$_GP_PY" -c 'import datasets' 2>&1); then
        if compgen -G "$wheels/alt/datasets-*.whl" >/dev/null; then
            echo "gpu_prelude: datasets does not import (${datasets_error##*$'\n'}); installing" \
                "$(cd "$wheels/alt" && echo datasets-*.whl) instead"
            rm -rf "$_GP_SITE"/datasets "$_GP_SITE"/datasets-*.dist-info
            _gpu_prelude_pip "$log" "$wheels"/alt/datasets-*.whl
            status=$?
            ((status)) && echo "gpu_prelude: pip install of the fallback failed:" \
                "$(_gpu_prelude_error "$log" "$status")"
        fi
    fi

    # -- one line of versions --------------------------------------------------------------------------------
    timeout -k 5 120 "$_GP_PY" - "$root" <<'EOF'
import importlib, importlib.metadata, platform, sys

sys.path.insert(0, sys.argv[1])  # the repository: primitives.mamba_ssm_triton
failed = []


def version(module):
    try:
        return getattr(importlib.import_module(module), "__version__", "?")
    except Exception as err:  # noqa: BLE001 - reported, whatever it is
        failed.append(module)
        return f"FAILED ({type(err).__name__}: {(str(err).splitlines() or [''])[0][:80]})"


parts = [f"python {platform.python_version()}"]
torch_version = version("torch")
if "torch" not in failed:
    import torch

    torch_version += f" ({torch.cuda.get_device_name() if torch.cuda.is_available() else 'no CUDA device'})"
parts.append(f"torch {torch_version}")
parts += [f"{module} {version(module)}" for module in
          ("triton", "lightning", "transformers", "pyarrow", "optuna", "datasets", "fla")]
try:
    mamba = importlib.metadata.version("mamba_ssm")
    from primitives.mamba_ssm_triton import load_triton_kernels

    kernels = "loaded" if load_triton_kernels() else "NOT loaded"
    if kernels != "loaded":
        failed.append("mamba_ssm")
    parts.append(f"mamba_ssm {mamba} (Triton kernels {kernels})")
except Exception as err:  # noqa: BLE001
    failed.append("mamba_ssm")
    parts.append(f"mamba_ssm FAILED ({type(err).__name__}: {err})")
print("gpu_prelude: " + ", ".join(parts))
sys.exit(1 if failed else 0)
EOF
    status=$?
    ((status == 124 || status == 137)) && echo "gpu_prelude: the version check timed out after 120s"
    return "$status"
}

_GP_PY=${PYTHON:-python3}
_GP_SITE=${GPU_SITE:-/tmp/site}
export GPU_PRELUDE=ok # _gpu_prelude sets no-wheels
_gpu_prelude || GPU_PRELUDE=failed
[[ $GPU_PRELUDE == no-wheels || ${BASH_SOURCE[0]} != "$0" ]] ||
    echo "gpu_prelude: run, not sourced: $_GP_SITE is installed but this shell's PYTHONPATH is not set;" \
        "use: source benchmarks/gpu_prelude.sh"
unset -f _gpu_prelude _gpu_prelude_pip _gpu_prelude_error
unset _GP_PY _GP_SITE
[[ $GPU_PRELUDE != failed || $- == *e* ]] # the status: 1 on failed, but never one that ends a `set -e` shell
