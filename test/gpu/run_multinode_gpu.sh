#!/usr/bin/env bash
# The two-node test (test/integration/test_multinode.py) on CUDA with NCCL: two network
# namespaces on this host share its GPUs, one device each (the leader's rank on GPU 0, the
# member's on GPU 1, pinned by the member's config.properties models entry); NCCL talks over the
# veth pair (NCCL_SOCKET_IFNAME). Needs root (ip netns), >= 2 NVIDIA GPUs, the project's venv with
# a CUDA build of torch, and the frontend jar (make / gradle packageJar).
# Usage: sudo test/gpu/run_multinode_gpu.sh [extra pytest args]
set -euo pipefail
if [ "$(id -u)" -ne 0 ]; then
    echo "error: needs root for network namespaces" >&2
    exit 1
fi
. "$(dirname "$0")/require_gpus.sh" 2

# The test reads this: deviceType gpu, one device per node, and the ranks' log must show NCCL.
export TSERVE_DIST_BACKEND=nccl
export PYTHONPATH="$PWD:$PWD/model-archiver${PYTHONPATH:+:$PYTHONPATH}"
exec timeout 900 "$PY" -m pytest -q -s -p no:cacheprovider test/integration/test_multinode.py "$@"
