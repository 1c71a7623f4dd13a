#!/usr/bin/env bash
# Runs TorchServe 0.12's own integration tests (test/pytest of pytorch/serve at tag v0.12.0,
# unmodified) offline, three ways: on TorchServe 0.12 itself (its PyPI wheels), on this tree's
# tserve, and on tserve with compatibility=torchserve-0.12; then writes a per-file table.
#
#   test/compat/run_torchserve_tests.sh SERVE_GIT_DIR [TEST_FILE...]
#
# SERVE_GIT_DIR: a git directory of pytorch/serve holding the v0.12.0 tag (SERVE_REF=<commit> for a
# snapshot without tags: v0.12.0 is 6bdb1baf7254c2bfc40a6669b0d922c08ba5f37a).
# RUNS (default "torchserve tserve switch") picks the runs. As root, each run has a network
# namespace of its own (unshare --net, loopback only: truly offline, and the tests' fixed ports
# 8080/8081/8082 are its own), so the three run side by side; otherwise they run one after the
# other on this host's loopback, where nothing else may listen on those ports (NETNS=0 forces it).
# OUT (default .bench/torchserve-compat) gets, per run, <run>.log (pytest's output per file),
# <run>.outcomes (one "outcome node-id" line per test) and <run>.summary, and table.md
# (TABLE_FROM=<an earlier OUT>: its results, with the files run now replaced, make the table).
# Not part of `make test` (an hour or more).
#
# tserve runs: the snapshot's model-archiver/model_archiver is replaced by this tree's (TorchServe's
# conftest loads model_packaging.py by path); `ts` is this tree's, plus two TorchServe test utilities
# it does not ship (ts/launcher.py, ts/torch_handler/unit_tests/) taken from the snapshot.
# The TorchServe run: torchserve 0.12.0, torch-model-archiver 0.12.0 and torch-workflow-archiver
# 0.2.15 from PyPI, in a venv of their own layered on PYTHON (its torch).
set -euo pipefail
TSERVE=$(cd "$(dirname "$0")/../.." && pwd)
if [ "${1:-}" = "--one" ]; then   # internal: one run, in its namespace when there is one
    shift
    LABEL=$1 WORK=$2 OUT=$3
    shift 3
    FILES=("$@")
    [ -z "${IN_NETNS:-}" ] || ip link set lo up
    # shellcheck source=/dev/null
    source "$WORK/run.env"
    PER_FILE_S=${PER_FILE_S:-600}
    : > "$OUT/$LABEL.log"
    : > "$OUT/$LABEL.outcomes"
    : > "$OUT/$LABEL.summary"
    for file in "${FILES[@]}"; do
        # One pytest per file under a time limit: some of these tests read the server's output line
        # by line with no deadline; a file past the limit counts as timed out and its server is stopped.
        out=$(cd "$WORK/test/pytest" && timeout -k 10 "$PER_FILE_S" python -m pytest -q -p no:cacheprovider \
            -p compat_mirror -rA "$file" 2>&1) || true
        summary=$(printf '%s\n' "$out" | grep -E "^=* ?[0-9]+ (passed|failed|skipped|error|deselected)|^=* ?no tests ran" \
            | tail -1 | sed 's/=//g; s/^ *//; s/ *$//' || true)
        if [ -z "$summary" ]; then
            summary="timed out after ${PER_FILE_S} s"
            (cd "$WORK/test/pytest" && torchserve --stop >/dev/null 2>&1 || true)
            echo "TIMEOUT $file" >> "$OUT/$LABEL.outcomes"
        fi
        printf '%s\t%s\n' "$file" "$summary" >> "$OUT/$LABEL.summary"
        { echo "===== $file: $summary"; printf '%s\n' "$out"; } >> "$OUT/$LABEL.log"
        printf '%s\n' "$out" | grep -E "^(PASSED|FAILED|ERROR|XFAIL|XPASS) [^ ]+\.py" | sed -E 's/ - .*//' \
            | awk '{print $1 " " $2}' >> "$OUT/$LABEL.outcomes" || true
    done
    (cd "$WORK/test/pytest" && torchserve --stop >/dev/null 2>&1 || true)   # a server a test left running
    exit 0
fi

SERVE_GIT=${1:?usage: $0 SERVE_GIT_DIR [TEST_FILE...]}; shift
FILES=("$@")
REF=${SERVE_REF:-v0.12.0}
RUNS=${RUNS:-torchserve tserve switch}
OUT=${OUT:-$TSERVE/.bench/torchserve-compat}
PYTHON=${PYTHON:-$(command -v python)}
# Default selection: every test file of v0.12.0's test/pytest, less the four its conftest ignores
# (collect_ignore), the two helper modules without tests, and the files that need what a CPU
# machine without the network cannot have: a GPU (test_tp_llama, test_example_gpt_fast,
# test_example_vllm, test_distributed_inference_handler), TorchServe's C++ backend build
# (test_cpp_backend), torch_xla (test_torch_xla), Intel's extension (test_ipex_serving,
# test_example_intel_extension_for_pytorch), onnxruntime (test_onnx).
EXCLUDED="conftest.py test_gRPC_utils.py test_utils.py test_example_torchrec_dlrm.py
    test_example_near_real_time_video.py test_dali_preprocess.py test_example_scriptable_tokenzier.py
    test_tp_llama.py test_example_gpt_fast.py test_example_vllm.py test_distributed_inference_handler.py
    test_cpp_backend.py test_torch_xla.py test_ipex_serving.py test_example_intel_extension_for_pytorch.py test_onnx.py"
if [ ${#FILES[@]} -eq 0 ]; then
    for f in $(git -C "$SERVE_GIT" ls-tree --name-only "$REF" test/pytest/ | sed 's|.*/||' | grep -E '^test_.*\.py$'); do
        case " $(echo $EXCLUDED) " in *" $f "*) ;; *) FILES+=("$f") ;; esac
    done
fi
ROOT=$(mktemp -d "${TMPDIR:-/tmp}/tsc.XXXX")   # short: TorchServe's worker sockets live under TMPDIR
[ -n "${KEEP:-}" ] || trap 'rm -rf "$ROOT"' EXIT   # KEEP=1 keeps it to rerun one test by hand
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)

# ---- what every run shares: the snapshot (less its Git LFS objects, absent here), stand-ins ----
PATHS=(test/pytest test/resources test/postman test/config_ts.properties ts_scripts examples ts/launcher.py
    ts/torch_handler/unit_tests model-archiver frontend/server/src/main/resources/proto)
EXCLUDES=()
for f in $(git -C "$SERVE_GIT" ls-tree -r "$REF" "${PATHS[@]}" | awk '{print $3 " " $4}' \
        | while read -r obj path; do git -C "$SERVE_GIT" cat-file -e "$obj" 2>/dev/null || echo "$path"; done); do
    EXCLUDES+=(":(exclude)$f")
done
TEMPLATE=$ROOT/template
mkdir -p "$TEMPLATE"
git -C "$SERVE_GIT" archive "$REF" "${PATHS[@]}" "${EXCLUDES[@]}" | tar -x -C "$TEMPLATE"
# TorchServe's handlers import torchvision: the tserve runs use a venv layered on PYTHON that adds it
# (layered_venv.sh: built once under .bench/, --no-deps so PYTHON's torch stays the only one)
VENV=${COMPAT_VENV:-$TSERVE/.bench/torchserve-compat-venv}
"$TSERVE/test/compat/layered_venv.sh" "$PYTHON" "$VENV"
# The stateful examples' requirements.txt (lru-dict), which their config (install_py_dep_per_model)
# has the server pip-install per model: downloaded once beside the venv, and pip in the tests finds
# it there with no index (PIP_NO_INDEX/PIP_FIND_LINKS, which the server's pip inherits)
WHEELS=$VENV/wheels
[ -n "$(ls "$WHEELS"/lru_dict-1.4.1-* 2>/dev/null)" ] \
    || "$VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$WHEELS" lru-dict==1.4.1
# the weights and archives the tests load that the snapshot lacks or downloads, built locally
STANDINS=$OUT/standins
"$VENV/bin/python" -W ignore "$TSERVE/test/compat/build_standins.py" "$TEMPLATE" "$STANDINS"
mkdir -p "$TEMPLATE/overlay"
cp "$TSERVE/test/compat/compat_mirror.py" "$TEMPLATE/overlay/"
# the gRPC tests' client stubs, generated as TorchServe's regression script does (its google/rpc
# submodule is not in the snapshot: tserve's copy of status.proto stands in, its module in overlay/)
PROTO=$TEMPLATE/frontend/server/src/main/resources/proto RPC=$TSERVE/frontend/src/main/proto/third_party
"$VENV/bin/python" -m grpc_tools.protoc -I "$RPC" --python_out="$TEMPLATE/overlay" "$RPC/google/rpc/status.proto"
(cd "$TEMPLATE/test/pytest" && "$VENV/bin/python" -m grpc_tools.protoc -I "$RPC" --proto_path="$PROTO" --python_out=. \
    --grpc_python_out=. "$PROTO/inference.proto" "$PROTO/management.proto")
# TorchServe's test_utils imports orjson (loads/dumps only): the standard json stands in
cat > "$TEMPLATE/overlay/orjson.py" <<'PY'
import json
loads = json.loads
def dumps(obj, *args, **kwargs):
    return json.dumps(obj).encode()
PY
if [[ " $RUNS " == *" torchserve "* ]]; then
    TS_VENV=${TORCHSERVE_VENV:-$TSERVE/.bench/torchserve-0.12-venv}
    if [ ! -f "$TS_VENV/.torchserve-0.12.0" ]; then
        "$TSERVE/test/compat/layered_venv.sh" "$PYTHON" "$TS_VENV"
        TS_WHEELS=$TS_VENV/wheels
        # captum (and matplotlib, which it imports): TorchServe's vision handlers import it at load
        "$TS_VENV/bin/python" -m pip download -q --disable-pip-version-check --no-deps -d "$TS_WHEELS" \
            torchserve==0.12.0 torch-model-archiver==0.12.0 torch-workflow-archiver==0.2.15 captum matplotlib \
            contourpy cycler fonttools kiwisolver pyparsing
        # --force-reinstall: the wheels' console scripts replace layered_venv.sh's tserve ones
        "$TS_VENV/bin/python" -m pip install -q --disable-pip-version-check --no-deps --force-reinstall \
            "$TS_WHEELS"/*.whl wheel
        touch "$TS_VENV/.torchserve-0.12.0"
    fi
fi

# ---- one tree per run ----
prepare() {   # $1: label; writes $ROOT/$1 and its run.env
    local label=$1 work=$ROOT/$1
    cp -a "$TEMPLATE" "$work"
    mkdir -p "$work/tmp/workspace/model_store"   # test_utils.MODEL_STORE, which TorchServe's CI makes beforehand
    local venv=$VENV pythonpath="$work/overlay:$TSERVE:$TSERVE/model-archiver:$work"
    if [ "$label" = torchserve ]; then
        venv=$TS_VENV
        pythonpath="$work/overlay:$work"   # TorchServe's ts/launcher.py comes with its wheel
    else
        rm -rf "$work/model-archiver/model_archiver"
        ln -s "$TSERVE/model-archiver/model_archiver" "$work/model-archiver/model_archiver"
        mkdir -p "$work/overlay/ts/torch_handler"
        mv "$work/ts/launcher.py" "$work/overlay/ts/"
        mv "$work/ts/torch_handler/unit_tests" "$work/overlay/ts/torch_handler/"
        # the two utilities join tserve's packages; nothing else of TorchServe's `ts` is importable
        cat > "$work/overlay/sitecustomize.py" <<PY
import ts, ts.torch_handler
ts.__path__.append("$work/overlay/ts")
ts.torch_handler.__path__.append("$work/overlay/ts/torch_handler")
PY
    fi
    local path="$venv/bin:$PATH"
    if [ "$label" = switch ]; then
        # The switch for every server the tests start: ./config.properties of their working directory
        # (read without --ts-config), and a `torchserve` in front of the real one that hands the
        # frontend a copy of a test's own --ts-config with the one line added.
        printf 'compatibility=torchserve-0.12\n' > "$work/test/pytest/config.properties"
        mkdir -p "$work/switch/bin" "$work/switch/configs"
        cat > "$work/switch/bin/torchserve" <<PY
#!$venv/bin/python
import os, sys, tempfile
args = sys.argv[1:]
if "--ts-config" in args:
    i = args.index("--ts-config") + 1
    fd, copy = tempfile.mkstemp(suffix=".properties", dir="$work/switch/configs")
    with os.fdopen(fd, "w") as out, open(args[i]) as src:
        out.write(src.read() + "\ncompatibility=torchserve-0.12\n")
    args[i] = copy
real = "$venv/bin/torchserve"
os.execv(real, [real, *args])
PY
        chmod +x "$work/switch/bin/torchserve"
        path="$work/switch/bin:$path"
    fi
    cat > "$work/run.env" <<ENV
export PATH="$path" PYTHONPATH="$pythonpath" TMPDIR="$work/tmp"
export HF_HUB_OFFLINE=1 PIP_NO_INDEX=1 PIP_FIND_LINKS="$WHEELS" COMPAT_STANDINS="$STANDINS"
ENV
}

NETNS=${NETNS:-$( [ "$(id -u)" = 0 ] && unshare --net true 2>/dev/null && echo 1 || echo 0)}
pids=()
for label in $RUNS; do
    prepare "$label"
    if [ "$NETNS" = 1 ]; then
        IN_NETNS=1 unshare --net "$0" --one "$label" "$ROOT/$label" "$OUT" "${FILES[@]}" &
        pids+=($!)
    else
        "$0" --one "$label" "$ROOT/$label" "$OUT" "${FILES[@]}"
    fi
done
for pid in "${pids[@]}"; do wait "$pid"; done
"$PYTHON" "$TSERVE/test/compat/compat_table.py" "${TABLE_FROM:+$TABLE_FROM,}$OUT" $RUNS | tee "$OUT/table.md"
