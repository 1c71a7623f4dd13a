#!/usr/bin/env bash
# The DeepSpeed large-model example with 1 rank on a CUDA GPU (torchrun --nproc-per-node 1),
# compared with the unsplit model on CPU. Needs a GPU and DeepSpeed; exits 2 without CUDA.
#   test/gpu/run_large_models_gpu.sh [python]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${1:-${ROOT}/.venv/bin/python}"
export PYTHONPATH="${ROOT}:${ROOT}/model-archiver${PYTHONPATH:+:${PYTHONPATH}}" HF_HUB_OFFLINE=1
if ! "${PY}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "no CUDA device: this check needs a GPU (it was NOT run)" >&2
  exit 2
fi
"${PY}" -c 'import deepspeed' || { echo "DeepSpeed is not installed" >&2; exit 2; }
WORK="$(mktemp -d /tmp/tserve-gpu-XXXXXX)"
trap 'rm -rf "${WORK}"' EXIT
"${PY}" - "${WORK}" <<'PYEOF'
import sys
from pathlib import Path

import yaml

sys.path.insert(0, "examples/large_models")
import local_check  # noqa: E402

work = Path(sys.argv[1])
cfg = yaml.safe_load(Path("examples/large_models/deepspeed/model-config.yaml").read_text())
cfg.update(deviceType="gpu", parallelLevel=1, torchrun={"nproc-per-node": 1})
cfg_path = work / "model-config.yaml"
cfg_path.write_text(yaml.safe_dump(cfg))
model_dir = local_check.build_and_unpack("deepspeed", work, config_file=cfg_path)
code, result, logs = local_check.run_handler(model_dir, local_check.REQUESTS, work, nproc=1,
                                             timeout=540, torchrun=True)
if code != 0 or "responses" not in result:
    print(logs[-8000:])
    sys.exit(f"DeepSpeed on GPU failed: {result.get('error', f'exit code {code}')}")
if "on cuda" not in logs:
    print(logs[-4000:])
    sys.exit("the handler did not report a CUDA device")
problems = local_check.compare(result["responses"], local_check.reference(model_dir, local_check.REQUESTS),
                               atol=1e-3)
if problems:
    sys.exit("GPU output differs from the unsplit CPU model: " + "; ".join(problems))
print("DeepSpeed 1-rank GPU output matches the unsplit model:", result["responses"][0]["generated_ids"])
PYEOF
