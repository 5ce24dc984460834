#!/usr/bin/env bash
# Fills .whl/ with the wheels a lent GPU machine lacks, for benchmarks/gpu_prelude.sh to install there. The
# GPU machine has no network, so run this here (PyPI reachable) before a lease and carry .whl/ along; see
# benchmarks/README.md, "Preparing a GPU lease".
#
#   bash benchmarks/gpu_wheels.sh                 # fills .whl/ in the repository root
#   WHEELS=/some/dir bash benchmarks/gpu_wheels.sh
#
# The GPU machine's python3 (3.12, torch 2.11 + CUDA 13, triton 3.6, lightning, transformers, pyarrow 25,
# einops) lacks optuna, datasets, flash-linear-attention and mamba-ssm. All wheels are for CPython 3.12 on
# manylinux x86_64, installed there with --no-deps, so every dependency they need beyond the machine's is
# pinned here too. Pins: the versions installed and used on an H100 lease (issue 35); fla 0.6.0 is the release
# whose kernels were verified there, and datasets 5.2.0 needs pyarrow>=24, which the machine has (25).
# datasets 4.4.2 goes to .whl/alt/ as the prelude's fallback should datasets 5 not import there.
#
# mamba-ssm ships only an sdist whose setup.py imports torch and compiles CUDA extensions (pip download cannot
# even read its metadata), so its wheel is built here without them: MAMBA_SKIP_CUDA_BUILD=TRUE leaves the
# compiled extensions out, MAMBA_FORCE_BUILD=TRUE makes setup.py build instead of fetching a prebuilt CUDA
# wheel for this machine's python and torch. Needs torch importable by $PYTHON; `wheel` (setup.py imports it)
# and setuptools are installed into a temporary folder, not into this environment.
# primitives/mamba_ssm_triton.py loads the Triton kernels Mamba2 uses from such a build.
#
# Idempotent: present wheels are kept, wheels of other versions (stale pins) are removed, the mamba-ssm wheel
# is built once. Environment: PYTHON (default python3), WHEELS (default .whl). Exit status: 0 done, 1 failed.
set -u -o pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.." || exit 1
PY=${PYTHON:-python3}
WHEELS=${WHEELS:-.whl}

PINS=(
    optuna==5.0.0 alembic==1.20.1 mako==1.4.3 sqlalchemy==2.1.9 greenlet==3.5.6 colorlog==6.12.0 # optuna
    datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19                                              # datasets
    fla-core==0.6.0 flash-linear-attention==0.6.0                                                  # D
)
ALT_PINS=(datasets==4.4.2)
MAMBA_VERSION=2.3.2.post1
MAMBA_SDIST_SHA256=104cc47e9101e5401a675fa2b784f2952b9b037f3b1dd83b5ac544394e95d028
BUILD_TOOLS=(wheel==0.45.1 setuptools==80.9.0 packaging==25.0)
TARGET=(--python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64
    --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
    --platform manylinux1_x86_64)

die() {
    echo "gpu_wheels: $*" >&2
    exit 1
}

TMP=$(mktemp -d) || die "cannot create a temporary folder"
trap 'rm -rf "$TMP"' EXIT

# last_error LOG: the last error line of a pip log, for a one-line message
last_error() {
    { grep -E 'ERROR|[Ee]rror' "$1" || tail -1 "$1"; } | tail -1 | cut -c1-200
}

# -- PyPI reachable? (also gives mamba-ssm's sdist URL) ----------------------------------------------------
SDIST_URL=$(
    "$PY" - "$MAMBA_VERSION" 2>&1 <<'EOF'
import json, sys, urllib.request
try:
    with urllib.request.urlopen("https://pypi.org/pypi/mamba-ssm/json", timeout=20) as response:
        releases = json.load(response)["releases"]
except Exception as err:  # noqa: BLE001 - any failure here means no PyPI
    sys.exit(f"offline: {type(err).__name__}: {err}")
urls = [u["url"] for u in releases.get(sys.argv[1], []) if u["packagetype"] == "sdist"]
if not urls:
    sys.exit(f"PyPI lists no sdist of mamba-ssm {sys.argv[1]}")
print(urls[0])
EOF
) || {
    [[ $SDIST_URL == offline:* ]] &&
        die "cannot reach PyPI (${SDIST_URL#offline: }); run this where PyPI is reachable, before the lease"
    die "${SDIST_URL##*$'\n'}"
}

# -- the folder, kept out of git -----------------------------------------------------------------------------
mkdir -p "$WHEELS/alt" || die "cannot create $WHEELS/alt"
# /.whl/ is in the tracked .gitignore (every clone ignores it, so no one commits 10 MB of wheels by accident);
# a WHEELS elsewhere in the checkout that nothing ignores goes to this clone's .git/info/exclude.
if git rev-parse --git-dir >/dev/null 2>&1 && ! git check-ignore -q "$WHEELS/probe.whl" 2>/dev/null; then
    relative=$(realpath --relative-to="$(git rev-parse --show-toplevel)" "$WHEELS")
    if [[ $relative != ..* ]]; then
        echo "/$relative/" >>"$(git rev-parse --git-path info/exclude)" ||
            die "cannot write .git/info/exclude"
        echo "gpu_wheels: added /$relative/ to .git/info/exclude"
    fi
fi

# -- wheels from PyPI ----------------------------------------------------------------------------------------
download() { # FOLDER PIN...
    local folder=$1
    shift
    "$PY" -m pip download -q --retries 1 --timeout 30 --no-deps --only-binary=:all: "${TARGET[@]}" \
        -d "$folder" "$@" >"$TMP/pip.log" 2>&1 || die "pip download failed: $(last_error "$TMP/pip.log")"
}
download "$WHEELS" "${PINS[@]}"
download "$WHEELS/alt" "${ALT_PINS[@]}"

# -- mamba-ssm without its CUDA extensions -------------------------------------------------------------------
MAMBA_WHEEL=mamba_ssm-$MAMBA_VERSION-py3-none-any.whl
if [[ ! -f $WHEELS/$MAMBA_WHEEL ]]; then
    "$PY" -c 'import torch' 2>/dev/null || die "building mamba-ssm's wheel needs torch importable by $PY" \
        "(its setup.py imports it): pip install torch"
    message=$(
        "$PY" - "$SDIST_URL" "$TMP/mamba.tar.gz" "$MAMBA_SDIST_SHA256" 2>&1 <<'EOF'
import hashlib, sys, urllib.request
url, path, sha256 = sys.argv[1:]
try:
    urllib.request.urlretrieve(url, path)
except Exception as err:  # noqa: BLE001 - one line, whatever went wrong
    sys.exit(f"{url}: {type(err).__name__}: {err}")
digest = hashlib.sha256(open(path, "rb").read()).hexdigest()
if digest != sha256:
    sys.exit(f"sha256 {digest}, expected {sha256} (pinned here)")
EOF
    ) || die "mamba-ssm's sdist: ${message##*$'\n'}"
    mkdir -p "$TMP/src" && tar -xzf "$TMP/mamba.tar.gz" -C "$TMP/src" || die "cannot unpack mamba-ssm's sdist"
    "$PY" -m pip install -q --retries 1 --timeout 30 --target "$TMP/build-tools" "${BUILD_TOOLS[@]}" \
        >"$TMP/pip.log" 2>&1 || die "pip install ${BUILD_TOOLS[*]} failed: $(last_error "$TMP/pip.log")"
    # SOURCE_DATE_EPOCH: fixed timestamps in the archive, so every build gives the same bytes
    PYTHONPATH="$TMP/build-tools" MAMBA_SKIP_CUDA_BUILD=TRUE MAMBA_FORCE_BUILD=TRUE SOURCE_DATE_EPOCH=315532800 \
        "$PY" -m pip wheel -q --no-deps --no-build-isolation -w "$TMP/dist" \
        "$TMP/src/mamba_ssm-$MAMBA_VERSION" >"$TMP/build.log" 2>&1 ||
        die "building mamba-ssm's wheel failed: $(last_error "$TMP/build.log")"
    [[ -f $TMP/dist/$MAMBA_WHEEL ]] || die "the mamba-ssm build made $(ls "$TMP/dist"), not $MAMBA_WHEEL"
    if "$PY" -m zipfile -l "$TMP/dist/$MAMBA_WHEEL" | grep -q '\.so '; then
        die "the mamba-ssm wheel holds compiled code; it should have none"
    fi
    mv "$TMP/dist/$MAMBA_WHEEL" "$WHEELS/" || die "cannot move $MAMBA_WHEEL into $WHEELS"
fi

# -- exactly one wheel per pin (gpu_prelude.sh installs every wheel in the folder) --------------------------
normalize() { # a distribution name as wheel filenames write it: lower case, runs of -_. as one _
    tr 'A-Z' 'a-z' <<<"$1" | sed -E 's/[-_.]+/_/g'
}
# prune FOLDER PIN...: removes FOLDER's wheels that match no PIN (other versions: stale pins); fails where two
# wheels match one PIN (pip would refuse to install both, and which one pip download chose is not known here)
prune() {
    local folder=$1 pin file dist version _
    shift
    local -A found=()
    for pin in "$@"; do
        found["$(normalize "${pin%%==*}")==${pin##*==}"]=""
    done
    for file in "$folder"/*.whl; do
        [[ -e $file ]] || continue
        IFS=- read -r dist version _ <<<"${file##*/}"
        pin="$(normalize "$dist")==$version"
        if [[ ! -v found[$pin] ]]; then
            rm -f "$file" && echo "gpu_wheels: removed ${file##*/} (not pinned here)"
        elif [[ -n ${found[$pin]} ]]; then
            die "two wheels of $pin in $folder: ${found[$pin]} and ${file##*/}; delete both and rerun"
        else
            found[$pin]=${file##*/}
        fi
    done
}
prune "$WHEELS" "${PINS[@]}" "mamba_ssm==$MAMBA_VERSION"
prune "$WHEELS/alt" "${ALT_PINS[@]}"

count=$(find "$WHEELS" -type f -name '*.whl' | wc -l)
bytes=$(find "$WHEELS" -type f -name '*.whl' -printf '%s\n' | awk '{s += $1} END {print s + 0}')
mib=$(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1048576}')
echo "gpu_wheels: $count wheels, $mib MiB in $WHEELS (carried with the working tree: 64 MiB for all)"
((bytes < 48 * 1048576)) || echo "gpu_wheels: warning: over 48 MiB; little room is left for the working tree"
