"""Throughput of the image example with and without the preprocess pool (no Java frontend).

Drives ``python -m ts.model_service_worker`` directly with the protocol client, keeping
``preprocessWorkers + 2`` batches in flight as the frontend does, and prints images/s for each
setting, their ratio to the no-pool run, and the inference stage's idle fraction (from PONG).

    python examples/pipeline/bench_pool.py [--workers 0,1,2] [--batches 24] [--batch-size 8] [--blur-passes 2]
        [--device cpu|gpu] [--json results.json]

``--device gpu`` runs inference on cuda:0 (preprocessing stays on the CPU, in the pool).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
from PIL import Image

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "image"))

from build_mar import build  # noqa: E402

from ts.protocol import codec  # noqa: E402
from ts.protocol.client import WorkerProcess  # noqa: E402
from ts.protocol.codec import FrameType, Part, Request  # noqa: E402


def jpeg(seed: int, size: tuple[int, int] = (320, 240)) -> bytes:
    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    Image.fromarray(rng.integers(0, 255, (size[1], size[0], 3), dtype=np.uint8)).save(buf, format="JPEG")
    return buf.getvalue()


def run(model_dir: Path, workers: int, batches: int, batch_size: int, device: str = "cpu"
        ) -> tuple[float, dict, tuple[float, float]]:
    """images/s, the PONG stages, and the measured window (epoch seconds) for GPU samplers."""
    images = [jpeg(i) for i in range(batch_size)]
    with WorkerProcess() as w:
        loaded = w.load({"modelName": "pipeline_image", "modelPath": str(model_dir), "batchSize": batch_size,
                         "preprocessWorkers": workers, "deviceType": device, "gpuId": 0 if device == "gpu" else -1})
        if loaded["status"] != 200:
            raise SystemExit(f"load failed: {loaded['message']}")
        window = workers + 2 if workers else 1  # as the frontend's default maxBatchesInFlight
        sent = done = 0
        start = time.monotonic()
        wall_start = time.time()
        while done < batches:
            while sent < batches and sent - done < window:
                sent += 1
                w.send_batch(sent, [Request(f"{sent}-{i}", [], [Part("body", "image/jpeg", img)])
                                    for i, img in enumerate(images)])
            frame = w.recv_until(FrameType.RESULT, timeout=300)
            assert all(r.status == 200 for r in codec.decode_responses(frame.body))
            done += 1
        elapsed = time.monotonic() - start
        window_s = (wall_start, time.time())
        w.send(codec.encode_frame(FrameType.PING, 999999))
        stages = codec.decode_json_body(w.recv_until(FrameType.PONG, 999999).body)["stages"]
    return batches * batch_size / elapsed, stages, window_s


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workers", default="0,1,2")
    p.add_argument("--batches", type=int, default=24)
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--blur-passes", type=int, default=2)
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu", help="where inference runs")
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        mar = build(Path(tmp), blur_passes=args.blur_passes)
        model_dir = Path(tmp) / "model"
        with zipfile.ZipFile(mar) as zf:
            zf.extractall(model_dir)
        base = None
        print(f"{'preprocessWorkers':>17} {'images/s':>9} {'vs 0':>6} {'inference idle':>15}  stages")
        for n in (int(x) for x in args.workers.split(",")):
            ips, stages, window_s = run(model_dir, n, args.batches, args.batch_size, args.device)
            base = base or ips
            rows.append({"preprocessWorkers": n, "images_per_s": round(ips, 2), "stages": stages,
                         "window": window_s})
            idle = stages.get("inference", {}).get("idleFraction")
            print(f"{n:>17} {ips:>9.1f} {ips / base:>6.2f} {'-' if idle is None else f'{idle:.2f}':>15}  "
                  f"{json.dumps(stages)}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
