#!/usr/bin/env bash
# Every CUDA path tserve has, on one GPU, in under 8 minutes (each check has its own time limit;
# the limits add up to 8 minutes), then one summary table; exits 1 when any check failed.
#
#   test/gpu/run_all.sh            on a machine with an NVIDIA GPU
#   test/gpu/run_all.sh --dry      on CPU (CI runs this, test/unit/test_gpu_run_all.py): every
#                                  check runs what it can without CUDA -- the engine checks on
#                                  the CPU, each GPU script's syntax and its "no CUDA" refusal
#   ... --only NAME[,NAME]         only these checks
#   ... --check NAME=COMMAND       one more check (a command line; may be given several times)
#
# PYTHON: the interpreter (default .venv/bin/python). RUN_ALL_LOGS: where each check's output
# goes (default a temporary folder, kept and named at the end).
#
# Checks: cuda (the device, torch's CUDA and NCCL, bf16), llm-f32 / llm-bf16 (the LLM engine's
# attention paths -- rectangle cache, paged cache on the fast forward and behind Hugging Face's
# forward -- against generate, test/gpu/llm_engine_check.py), llm-serving (run_llm_gpu.sh: the
# engine tests on CUDA and the server assigning the GPU to an LLM worker, vLLM when installed),
# torchrun-nccl (run_large_models_gpu.sh: a 1-rank torchrun job with NCCL, DeepSpeed), tp-pp-nccl
# and multinode (run_distributed_gpu.sh, run_multinode_gpu.sh: they need 2+ GPUs and root, so on
# one GPU they are listed as skipped), preprocess-pool (run_pipeline_gpu.sh: CPU preprocess
# workers feeding inference on the GPU), llm-bench (benchmarks/llm_paged.py: the engine's decode
# rate against the bare loop, and the shared-prefix scenario, short), llm-real-bf16 / llm-real-bench
# (the same two on the realistic model of issue 42 in bfloat16: hidden 1024, 16 layers, 190 M
# parameters; tokens within bfloat16's argmax margin of generate's, decode against the bare loop).
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
cd "${ROOT}"
PY="${PYTHON:-${ROOT}/.venv/bin/python}"
export PYTHONPATH="${ROOT}:${ROOT}/model-archiver${PYTHONPATH:+:${PYTHONPATH}}" HF_HUB_OFFLINE=1
DRY=0
ONLY=""
EXTRA=()
while [ $# -gt 0 ]; do
  case "$1" in
    --dry) DRY=1 ;;
    --only) ONLY="$2"; shift ;;
    --check) EXTRA+=("$2"); shift ;;
    *) echo "usage: $0 [--dry] [--only NAME,...] [--check NAME=COMMAND]" >&2; exit 2 ;;
  esac
  shift
done
LOGS="${RUN_ALL_LOGS:-$(mktemp -d /tmp/tserve-gpu-all-XXXXXX)}"
mkdir -p "${LOGS}"
GPUS=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | grep -c '^[0-9]' || true)
GPUS=${GPUS:-0}
if [ "${DRY}" = 0 ] && ! "${PY}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "no CUDA device visible to ${PY}: run on a GPU machine, or --dry for the CPU paths" >&2
  exit 2
fi

if [ "${DRY}" = 0 ] && [ ! -f ts/frontend/tserve-frontend.jar ]; then
  gradle --no-daemon -q packageJar  # the server checks start the real frontend
fi

# "refuses" checks a GPU script on CPU: valid bash, and it stops with exit 2 ("needs a GPU")
refuses() { bash -n "$1" && { CUDA_VISIBLE_DEVICES="" "$1" "${PY}" >/dev/null 2>&1; [ $? -eq 2 ]; }; }
names=() ; statuses=() ; times=() ; notes=()
failed=0
check() {  # check NAME LIMIT_S COMMAND (a string run by bash; "SKIP: why" to skip)
  local name="$1" limit="$2" cmd="$3" started status note rc
  if [ -n "${ONLY}" ] && [[ ",${ONLY}," != *",${name},"* ]]; then return; fi
  started=$(date +%s%N)
  if [[ "${cmd}" == SKIP:* ]]; then
    status=skip; note="${cmd#SKIP: }"
  else
    echo "== ${name}: ${cmd}" >"${LOGS}/${name}.log"
    PY="${PY}" timeout --kill-after=10 "${limit}" bash -c "${cmd}" >>"${LOGS}/${name}.log" 2>&1
    rc=$?
    note="$(grep -v '^\s*$' "${LOGS}/${name}.log" | tail -n 1 | cut -c1-90)"
    if [ ${rc} -eq 0 ]; then status=pass
    elif [ ${rc} -eq 124 ] || [ ${rc} -eq 137 ]; then status=FAIL; note="over its ${limit} s limit"
    else status=FAIL; fi
    if [ "${status}" = FAIL ]; then failed=1; fi
  fi
  names+=("${name}"); statuses+=("${status}"); notes+=("${note}")
  times+=("$(( ($(date +%s%N) - started) / 1000000 ))")  # milliseconds
}

if [ "${DRY}" = 1 ]; then
  check cuda 20 '"$PY" -c "import torch; print(\"dry: torch\", torch.__version__, \"cuda\", torch.cuda.is_available())"'
  check llm-f32 60 '"$PY" test/gpu/llm_engine_check.py --device cpu --dtype float32 --new-tokens 8'
  check llm-bf16 60 '"$PY" test/gpu/llm_engine_check.py --device cpu --dtype bfloat16 --new-tokens 8'
  check llm-serving 20 "$(declare -f refuses); refuses test/gpu/run_llm_gpu.sh && echo 'dry: refuses without CUDA'"
  check torchrun-nccl 20 "$(declare -f refuses); refuses test/gpu/run_large_models_gpu.sh && echo 'dry: refuses without CUDA'"
  check tp-pp-nccl 10 'bash -n test/gpu/run_distributed_gpu.sh && bash -n test/gpu/require_gpus.sh && echo "dry: syntax"'
  check multinode 10 'bash -n test/gpu/run_multinode_gpu.sh && echo "dry: syntax"'
  check preprocess-pool 20 "$(declare -f refuses); refuses test/gpu/run_pipeline_gpu.sh && echo 'dry: refuses without CUDA'"
  check llm-bench 90 '"$PY" -m benchmarks.llm_paged --device cpu --seconds 0.3 --dry'
  check llm-real-bf16 300 '"$PY" test/gpu/llm_engine_check.py --device cpu --dtype bfloat16 --model realistic --new-tokens 2'
else
  check cuda 20 '"$PY" -c "import torch; assert torch.distributed.is_nccl_available(), \"no NCCL\"; print(torch.cuda.get_device_name(0), \"torch\", torch.__version__, \"bf16\", torch.cuda.is_bf16_supported())"'
  check llm-f32 40 '"$PY" test/gpu/llm_engine_check.py --device cuda --dtype float32'
  check llm-bf16 40 '"$PY" test/gpu/llm_engine_check.py --device cuda --dtype bfloat16'
  check llm-serving 150 'test/gpu/run_llm_gpu.sh "$PY"'
  check torchrun-nccl 100 'test/gpu/run_large_models_gpu.sh "$PY"'
  if [ "${GPUS}" -ge 2 ]; then
    check tp-pp-nccl 300 'PYTHON="$PY" test/gpu/run_distributed_gpu.sh'
  else
    check tp-pp-nccl 0 "SKIP: needs 2 GPUs (NCCL puts one rank per device), ${GPUS} here"
  fi
  check multinode 0 "SKIP: needs root and 2 GPUs: sudo test/gpu/run_multinode_gpu.sh"
  check preprocess-pool 80 'test/gpu/run_pipeline_gpu.sh 2 16 "$PY"'
  check llm-bench 50 '"$PY" -m benchmarks.llm_paged --device cuda --seconds 2'
  # issue 42: the realistic model (hidden 1024, 16 layers, 190 M parameters) in bfloat16
  check llm-real-bf16 120 '"$PY" test/gpu/llm_engine_check.py --device cuda --dtype bfloat16 --model realistic'
  check llm-real-bench 150 '"$PY" -m benchmarks.llm_paged --device cuda --model realistic --dtype bfloat16 --seconds 2'
fi
for extra in "${EXTRA[@]+"${EXTRA[@]}"}"; do
  check "${extra%%=*}" 300 "${extra#*=}"
done

printf '\n%-16s %-6s %8s  %s\n' check result seconds "last line of its output (logs: ${LOGS})"
secs() { printf '%d.%d' "$(($1 / 1000))" "$(($1 % 1000 / 100))"; }
total=0
for i in "${!names[@]}"; do
  printf '%-16s %-6s %8s  %s\n' "${names[$i]}" "${statuses[$i]}" "$(secs "${times[$i]}")" "${notes[$i]}"
  total=$((total + times[i]))
done
printf '%-16s %-6s %8s\n' total "$([ ${failed} = 0 ] && echo pass || echo FAIL)" "$(secs "${total}")"
for i in "${!names[@]}"; do
  if [ "${statuses[$i]}" = FAIL ]; then
    echo; echo "--- ${names[$i]} (last 20 lines of ${LOGS}/${names[$i]}.log)"; tail -n 20 "${LOGS}/${names[$i]}.log"
  fi
done
exit ${failed}
