#!/usr/bin/env bash
# The preprocess-pool benchmark with inference on a CUDA GPU: the image example (CPU-heavy
# preprocess, SmallCNN on cuda:0) with preprocessWorkers 0 and N, while nvidia-smi samples the
# GPU's utilisation (share of time a kernel was running) every 100 ms. Reports images/s, the
# inference stage's idle fraction (PONG) and the GPU busy fraction inside each measured window.
# Needs CUDA and nvidia-smi; exits 2 without them.
#   test/gpu/run_pipeline_gpu.sh [POOL_WORKERS (default 4)] [BATCHES (default 48)] [python]
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
POOL="${1:-4}"
BATCHES="${2:-48}"
PY="${3:-${ROOT}/.venv/bin/python}"
export PYTHONPATH="${ROOT}:${ROOT}/model-archiver${PYTHONPATH:+:${PYTHONPATH}}" HF_HUB_OFFLINE=1
if ! command -v nvidia-smi >/dev/null 2>&1; then
  echo "nvidia-smi not found: this check needs a GPU (it was NOT run)" >&2
  exit 2
fi
if ! "${PY}" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)'; then
  echo "no CUDA device visible to torch: this check needs a GPU (it was NOT run)" >&2
  exit 2
fi
WORK="$(mktemp -d /tmp/tserve-pipeline-gpu-XXXXXX)"
SAMPLER=""
cleanup() {
  if [ -n "${SAMPLER}" ]; then kill "${SAMPLER}" 2>/dev/null || true; fi
  rm -rf "${WORK}"
}
trap cleanup EXIT
OUT="${OUT:-${WORK}}"
mkdir -p "${OUT}"
cd "${ROOT}"
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader -i 0

for N in 0 "${POOL}"; do
  nvidia-smi --query-gpu=timestamp,utilization.gpu --format=csv,noheader,nounits -i 0 -lms 100 \
    > "${WORK}/gpu_${N}.csv" &
  SAMPLER=$!
  "${PY}" examples/pipeline/bench_pool.py --device gpu --workers "${N}" --batches "${BATCHES}" \
    --batch-size 16 --blur-passes 2 --json "${WORK}/bench_${N}.json"
  kill "${SAMPLER}" 2>/dev/null || true
  wait "${SAMPLER}" 2>/dev/null || true
  SAMPLER=""
done

"${PY}" - "${WORK}" "${POOL}" "${OUT}" <<'PYEOF'
import json
import sys
from datetime import datetime
from pathlib import Path

work, pool, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])


def busy_fraction(csv: Path, window: list[float]) -> tuple[float, int]:
    """Mean utilization.gpu (0..1) of the samples taken inside the measured window."""
    values = []
    for line in csv.read_text().splitlines():
        try:
            stamp, util = (x.strip() for x in line.split(","))
            t = datetime.strptime(stamp, "%Y/%m/%d %H:%M:%S.%f").timestamp()
            if window[0] <= t <= window[1]:
                values.append(float(util) / 100.0)
        except ValueError:
            continue  # a header or a partial last line
    return (sum(values) / len(values) if values else float("nan")), len(values)


rows = []
for n in ("0", pool):
    row = json.loads((work / f"bench_{n}.json").read_text())[0]
    busy, samples = busy_fraction(work / f"gpu_{n}.csv", row["window"])
    idle = row["stages"].get("inference", {}).get("idleFraction")
    rows.append({"preprocessWorkers": int(n), "images_per_s": row["images_per_s"],
                 "inference_idle_fraction": idle, "gpu_busy_fraction": round(busy, 4), "samples": samples})
base = rows[0]
print(f"{'preprocessWorkers':>17} {'images/s':>9} {'vs 0':>6} {'inference idle':>15} {'GPU busy':>9} {'samples':>8}")
for r in rows:
    idle = "-" if r["inference_idle_fraction"] is None else f"{r['inference_idle_fraction']:.2f}"
    print(f"{r['preprocessWorkers']:>17} {r['images_per_s']:>9.1f} {r['images_per_s'] / base['images_per_s']:>6.2f} "
          f"{idle:>15} {r['gpu_busy_fraction']:>9.3f} {r['samples']:>8}")
(out / "pipeline_gpu.json").write_text(json.dumps(rows, indent=1))
pooled = rows[1]
if pooled["images_per_s"] <= base["images_per_s"]:
    sys.exit(f"the pool did not raise throughput: {pooled['images_per_s']} <= {base['images_per_s']} images/s")
print("ok: the pool raised throughput and the GPU busy fraction is shown above")
PYEOF
