#!/usr/bin/env bash
# `make bench`: install the peers (idempotent), then run the comparison.
#   bash benchmarks/run.sh [benchmarks.run options, e.g. --duration 3 --only echo]
#   bash benchmarks/run.sh --profile      # profile tserve's hot path instead (JFR + py-spy)
# TorchServe 0.12.0, torch-model-archiver 0.12.0 and LitServe 0.2.19 go into their own venv
# (.bench/venv), never into tserve's .venv: both packages are called `ts`.
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH=.bench
VENV=$BENCH/venv
PIP="$VENV/bin/python -m pip --disable-pip-version-check -q"
LOCK=/tmp/tserve-pip.lock

if [ ! -x "$VENV/bin/python" ]; then
  echo "Creating $VENV"
  python3 -m venv "$VENV"
fi
mkdir -p "$BENCH"
printf 'torch==2.13.0\n' > "$BENCH/constraints.txt"
if ! "$VENV/bin/python" -c "import torch; assert torch.__version__.startswith('2.13.0')" 2>/dev/null; then
  echo "Installing torch==2.13.0 (CPU) into $VENV"
  flock "$LOCK" $PIP install torch==2.13.0
fi
if ! "$VENV/bin/python" - <<'PY' 2>/dev/null
from importlib.metadata import version
assert version("torchserve") == "0.12.0"
assert version("torch-model-archiver") == "0.12.0"
assert version("litserve") == "0.2.19"
PY
then
  echo "Installing torchserve==0.12.0 torch-model-archiver==0.12.0 litserve==0.2.19 into $VENV"
  flock "$LOCK" $PIP install -c "$BENCH/constraints.txt" torchserve==0.12.0 \
    torch-model-archiver==0.12.0 litserve==0.2.19 pyyaml
fi
# The LLM scenario's TorchServe handler (batch-and-generate) needs transformers: the same
# version as tserve's .venv (pyproject's pin), so both servers run the same modeling code.
TF_VERSION=$(.venv/bin/python -c "from importlib.metadata import version; print(version('transformers'))" \
  2>/dev/null || echo 5.24.0)
if ! "$VENV/bin/python" -c "from importlib.metadata import version; assert version('transformers') == '$TF_VERSION'" 2>/dev/null; then
  echo "Installing transformers==$TF_VERSION into $VENV (LLM scenario)"
  flock "$LOCK" $PIP install -c "$BENCH/constraints.txt" "transformers==$TF_VERSION"
fi
if [ "${1:-}" = "--profile" ] && ! "$VENV/bin/py-spy" --version >/dev/null 2>&1; then
  echo "Installing py-spy into $VENV"
  flock "$LOCK" $PIP install -c "$BENCH/constraints.txt" py-spy
fi
if ! command -v wrk >/dev/null 2>&1; then
  echo "Installing wrk (apt)"
  SUDO=$([ "$(id -u)" = 0 ] || echo sudo)
  { $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq wrk >/dev/null; } \
    || echo "wrk could not be installed: its second-opinion cells are skipped"
fi
command -v java >/dev/null || { echo "benchmarks: Java 17 is needed by both servers (make install)" >&2; exit 1; }

export PYTHONPATH="$PWD:$PWD/model-archiver${PYTHONPATH:+:$PYTHONPATH}"
if [ "${1:-}" = "--profile" ]; then
  shift
  exec .venv/bin/python -m benchmarks.profile "$@"
fi
exec .venv/bin/python -m benchmarks.run "$@"
