#!/usr/bin/env bash
# The distributed-worker tests on CUDA: the same tp/pp MLP models as on CPU, but the ranks get
# real GPUs (CUDA_VISIBLE_DEVICES from the frontend's allocator) and the process group is NCCL.
# Needs a machine with >= 2 NVIDIA GPUs (4 for the pipeline-parallel and device-refusal tests),
# the project's venv with a CUDA build of torch, and the frontend jar (make / gradle packageJar).
# Usage: test/gpu/run_distributed_gpu.sh [extra pytest args]
set -euo pipefail
. "$(dirname "$0")/require_gpus.sh" 2

# The tests read this: the ranks' log must show an NCCL process group. (The tests configure
# number_of_gpu=4, which the server caps at the GPUs nvidia-smi lists.)
export TSERVE_DIST_BACKEND=nccl
export PYTHONPATH="$PWD:$PWD/model-archiver${PYTHONPATH:+:$PYTHONPATH}"

select=()
if [ "$gpus" -lt 4 ]; then
    # pp_mlp pins deviceIds [2, 3] and the refusal test counts on 4 devices
    select=(-k "tensor_parallel or inconsistent")
fi
exec timeout 1200 "$PY" -m pytest -q -p no:cacheprovider test/integration/test_distributed.py "${select[@]}" "$@"
