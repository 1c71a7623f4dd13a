#!/usr/bin/env bash
# LLM serving on a CUDA GPU: the engine's greedy-equality test on CUDA, the tiny Llama served
# through the server with deviceType gpu (continuous batching, streaming, the openai client), and
# vllm_handler when vLLM is installed. Needs a GPU; exits 2 without CUDA.
#   test/gpu/run_llm_gpu.sh [python]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
PY="${1:-${ROOT}/.venv/bin/python}"
cd "${ROOT}"
export PYTHONPATH="${ROOT}:${ROOT}/model-archiver${PYTHONPATH:+:${PYTHONPATH}}" HF_HUB_OFFLINE=1
if ! "${PY}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "no CUDA device: this check needs a GPU (it was NOT run)" >&2
  exit 2
fi
# the engine on CUDA (the CUDA-only equality test runs instead of being skipped)
"${PY}" -m pytest -q -p no:cacheprovider test/unit/test_llm_engine.py test/unit/test_llm_handler.py
# through the server: with a GPU present the server's default deviceType is gpu (worker on cuda:0)
"${PY}" -m pytest -q -p no:cacheprovider test/integration/test_llm_serving.py
if "${PY}" -c 'import vllm' 2>/dev/null; then
  WORK="$(mktemp -d /tmp/tserve-gpu-XXXXXX)"
  trap 'rm -rf "${WORK}"' EXIT
  "${PY}" - "${WORK}" <<'PYEOF'
import json, sys
from pathlib import Path
from ts.context import Context
from ts.testing.tiny_llm import build_model, build_tokenizer
from ts.torch_handler.vllm_handler import VLLMHandler
work = Path(sys.argv[1])
tok = build_tokenizer()
build_model(tok).save_pretrained(work / "m")
tok.save_pretrained(work / "m")
h = VLLMHandler()
h.initialize(Context("m", str(work), {"model": {}}, 4, 0, "gpu", model_yaml_config={"handler": {"model_path": "m"}}))
h.add_request("r", json.dumps({"prompt": "Once upon a time", "max_new_tokens": 8}).encode(), {})
final = None
while h.has_work():
    for ev in h.step():
        final = ev.final or final
print("vllm_handler:", json.loads(final))
PYEOF
else
  echo "vLLM is not installed: vllm_handler was NOT run on the GPU"
fi
echo "LLM GPU checks passed"
