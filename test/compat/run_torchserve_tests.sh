#!/usr/bin/env bash
# Runs TorchServe 0.12's own integration tests (test/pytest of pytorch/serve at tag v0.12.0,
# unmodified) against this tree's tserve, offline, with and without compatibility=torchserve-0.12.
#
#   test/compat/run_torchserve_tests.sh SERVE_GIT_DIR [TEST_FILE...]
#
# SERVE_GIT_DIR: a git directory of pytorch/serve holding the v0.12.0 tag (SERVE_REF=<commit> for a
# snapshot without tags: v0.12.0 is 6bdb1baf7254c2bfc40a6669b0d922c08ba5f37a). The snapshot's
# model-archiver/model_archiver is replaced by this tree's (TorchServe's conftest loads
# model_packaging.py by path); `ts` is this tree's, plus two TorchServe test utilities it does not
# ship (ts/launcher.py, ts/torch_handler/unit_tests/) taken from the snapshot. The tests use the
# fixed ports 8080/8081/8082: nothing else may listen there. Not part of `make test` (minutes).
set -euo pipefail
SERVE_GIT=${1:?usage: $0 SERVE_GIT_DIR [TEST_FILE...]}; shift
TSERVE=$(cd "$(dirname "$0")/../.." && pwd)
FILES=("$@")
REF=${SERVE_REF:-v0.12.0}
# Default selection: every test file of v0.12.0's test/pytest whose models are built from the
# snapshot's own files (the `model_archiver` fixture or torch-model-archiver; weights the snapshot
# lacks or would download are built locally by build_standins.py; no prebuilt .mar), less those its
# conftest already ignores and test_ipex_serving (needs Intel's extension)
[ ${#FILES[@]} -gt 0 ] || FILES=(test_async_worker_comm.py test_auto_recover.py test_continuous_batching.py
    test_device_config.py test_example_micro_batching.py test_example_stateful_sequence_batching_http.py
    test_example_stateful_sequence_continuous_batching_http.py test_handler_traceback_logging.py
    test_mnist_template.py test_model_config.py test_parallelism.py
    test_send_intermediate_prediction_response.py test_startup_timeout.py test_torch_compile.py test_url_path.py)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ts-compat.XXXXXX")
[ -n "${KEEP:-}" ] || trap 'rm -rf "$WORK"' EXIT   # KEEP=1 keeps it to rerun one test by hand
# the snapshot's Git LFS objects (weights, prebuilt .mar files) are not in it: left out
PATHS=(test/pytest test/resources test/postman test/config_ts.properties ts_scripts examples ts/launcher.py ts/torch_handler/unit_tests
    model-archiver)
EXCLUDES=()
for f in $(git -C "$SERVE_GIT" ls-tree -r "$REF" "${PATHS[@]}" | awk '{print $3 " " $4}' \
        | while read -r obj path; do git -C "$SERVE_GIT" cat-file -e "$obj" 2>/dev/null || echo "$path"; done); do
    EXCLUDES+=(":(exclude)$f")
done
git -C "$SERVE_GIT" archive "$REF" "${PATHS[@]}" "${EXCLUDES[@]}" | tar -x -C "$WORK"
# TorchServe's handlers import torchvision: the tests run on a venv layered on PYTHON that adds it
# (layered_venv.sh: built once under .bench/, --no-deps so PYTHON's torch stays the only one)
VENV=${COMPAT_VENV:-$TSERVE/.bench/torchserve-compat-venv}
"$TSERVE/test/compat/layered_venv.sh" "${PYTHON:-$(command -v python)}" "$VENV"
PY_BIN=$VENV/bin/python
# The stateful examples' requirements.txt (lru-dict), which their config (install_py_dep_per_model)
# has the server pip-install per model: downloaded once beside the venv, and pip in the tests finds
# it there with no index (PIP_NO_INDEX/PIP_FIND_LINKS, which the server's pip inherits)
WHEELS=$VENV/wheels
[ -n "$(ls "$WHEELS"/lru_dict-1.4.1-* 2>/dev/null)" ] \
    || "$PY_BIN" -m pip download -q --disable-pip-version-check --no-deps -d "$WHEELS" lru-dict==1.4.1
export PIP_NO_INDEX=1 PIP_FIND_LINKS=$WHEELS
# the weights the tests load that the snapshot lacks or downloads, built locally (build_standins.py)
"$PY_BIN" -W ignore "$TSERVE/test/compat/build_standins.py" "$WORK"
rm -rf "$WORK/model-archiver/model_archiver"
ln -s "$TSERVE/model-archiver/model_archiver" "$WORK/model-archiver/model_archiver"
mkdir -p "$WORK/overlay/ts/torch_handler"
mv "$WORK/ts/launcher.py" "$WORK/overlay/ts/"
mv "$WORK/ts/torch_handler/unit_tests" "$WORK/overlay/ts/torch_handler/"
# TorchServe's test_utils imports orjson (loads/dumps only): the standard json stands in
cat > "$WORK/overlay/orjson.py" <<'PY'
import json
loads = json.loads
def dumps(obj, *args, **kwargs):
    return json.dumps(obj).encode()
PY
# the two utilities join tserve's packages; nothing else of TorchServe's `ts` is importable
cat > "$WORK/overlay/sitecustomize.py" <<PY
import ts, ts.torch_handler
ts.__path__.append("$WORK/overlay/ts")
ts.torch_handler.__path__.append("$WORK/overlay/ts/torch_handler")
PY
# the tests run `torchserve` and `torch-model-archiver`: the layered venv's, on its python
PATH="$VENV/bin:$PATH"
export PATH
# One pytest per file under a time limit: some of these tests read the server's output line by
# line with no deadline (pytest-timeout is not installed here) and wait for ever on a line tserve
# does not write; a file past the limit counts as failed and its server is stopped.
PER_FILE_S=${PER_FILE_S:-300}
run() {   # $1: label
    echo "== $1"
    local passed=0 failed=0 file out
    for file in "${FILES[@]}"; do
        out=$(cd "$WORK/test/pytest" && PYTHONPATH="$WORK/overlay:$TSERVE:$TSERVE/model-archiver:$WORK" \
            HF_HUB_OFFLINE=1 timeout -k 10 "$PER_FILE_S" "$PY_BIN" -m pytest -q -p no:cacheprovider -rfE "$file" 2>&1) \
            || true
        local summary
        summary=$(printf '%s\n' "$out" | grep -E "^[0-9]+ (passed|failed|skipped|error)|^no tests ran" | tail -1 || true)
        [ -n "$summary" ] || { summary="timed out after ${PER_FILE_S} s"; (cd "$WORK/test/pytest" && torchserve --stop >/dev/null 2>&1 || true); }
        printf '%-48s %s\n' "$file" "$summary"
        printf '%s\n' "$out" | grep -E "^(FAILED|ERROR) " | sed 's/^/    /' || true
        passed=$((passed + $(printf '%s' "$summary" | grep -oE "[0-9]+ passed" | grep -oE "[0-9]+" || echo 0)))
        failed=$((failed + $(printf '%s' "$summary" | grep -oE "[0-9]+ (failed|error)" | grep -oE "[0-9]+" | paste -sd+ | bc || echo 0)))
    done
    echo "total: $passed passed, $failed failed or errors (files timed out not counted in either)"
}
[ -n "${ONLY_SWITCH:-}" ] || run "tserve (no switch)"   # ONLY_SWITCH=1: the second run alone
# The switch for every server the tests start: ./config.properties of their working directory
# (read without --ts-config), and a `torchserve` in front of the real one that hands the frontend a
# copy of a test's own --ts-config with the one line added.
printf 'compatibility=torchserve-0.12\n' > "$WORK/test/pytest/config.properties"
mkdir -p "$WORK/switch/bin" "$WORK/switch/configs"
cat > "$WORK/switch/bin/torchserve" <<PY
#!$(command -v "$PY_BIN")
import os, sys, tempfile
args = sys.argv[1:]
if "--ts-config" in args:
    i = args.index("--ts-config") + 1
    fd, copy = tempfile.mkstemp(suffix=".properties", dir="$WORK/switch/configs")
    with os.fdopen(fd, "w") as out, open(args[i]) as src:
        out.write(src.read() + "\ncompatibility=torchserve-0.12\n")
    args[i] = copy
real = "$(command -v torchserve)"
os.execv(real, [real, *args])
PY
chmod +x "$WORK/switch/bin/torchserve"
PATH="$WORK/switch/bin:$PATH" run "tserve with compatibility=torchserve-0.12"
