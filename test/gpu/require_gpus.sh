# Sourced by the test/gpu scripts: cd to the repository, PY, and the checks they share.
# Usage: . "$(dirname "$0")/require_gpus.sh" MIN_GPUS   (sets $gpus and $PY; exits 1 if unmet)
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
PY="${PYTHON:-.venv/bin/python}"
gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c '^[0-9]' || true)
if [ "${gpus:-0}" -lt "$1" ]; then
    echo "error: needs at least $1 NVIDIA GPUs, nvidia-smi lists ${gpus:-0}" >&2
    exit 1
fi
if ! "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() and torch.distributed.is_nccl_available() else 1)'; then
    echo "error: $PY has no CUDA/NCCL build of torch" >&2
    exit 1
fi
[ -f ts/frontend/tserve-frontend.jar ] || gradle --offline --no-daemon -q packageJar
