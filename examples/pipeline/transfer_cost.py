"""Measure what it costs to move a preprocessed batch from a pool process to the inference process.

Compares torch.multiprocessing's shared-memory tensor passing (what the preprocess pool uses)
with sending a pickled copy of the same bytes, over the same spawn-context Pipe.

    python examples/pipeline/transfer_cost.py [--reps 15] [--batches 1,8,32,64]

Prints one line per size: median milliseconds per transfer (send in the child -> tensor usable
in the parent) for both methods, and their ratio.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch
import torch.multiprocessing as tmp


def _child(conn, strategy: str) -> None:
    torch.set_num_threads(1)
    tmp.set_sharing_strategy(strategy)
    while True:
        msg = conn.recv()
        if msg is None:
            return
        mode, shape = msg
        t = torch.rand(shape)
        t0 = time.perf_counter()
        if mode == "shm":
            conn.send((t0, t))
        else:
            conn.send((t0, (tuple(t.shape), t.numpy().tobytes())))


def measure(conn, mode: str, shape: tuple[int, ...], reps: int) -> float:
    times = []
    for _ in range(reps + 2):  # two warm-ups
        conn.send((mode, shape))
        t0, payload = conn.recv()
        if mode == "shm":
            tensor = payload
        else:
            shp, raw = payload
            tensor = torch.frombuffer(bytearray(raw), dtype=torch.float32).reshape(shp)
        float(tensor[0].sum())  # touch it: the data must be usable
        times.append(time.perf_counter() - t0)
    return statistics.median(times[2:]) * 1000


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--reps", type=int, default=15)
    p.add_argument("--batches", default="1,8,32,64", help="batch sizes of 3x224x224 float32 images")
    p.add_argument("--strategy", default="file_descriptor", choices=["file_descriptor", "file_system"],
                   help="torch.multiprocessing sharing strategy (the pool uses the default, file_descriptor)")
    args = p.parse_args()
    tmp.set_sharing_strategy(args.strategy)
    ctx = tmp.get_context("spawn")
    parent, child = ctx.Pipe()
    proc = ctx.Process(target=_child, args=(child, args.strategy), daemon=True)
    proc.start()
    print(f"sharing strategy: {args.strategy}")
    print(f"{'batch':>5} {'MB':>7} {'shared-memory ms':>17} {'pickled-copy ms':>16} {'copy/shm':>9}")
    try:
        for b in (int(x) for x in args.batches.split(",")):
            shape = (b, 3, 224, 224)
            mb = b * 3 * 224 * 224 * 4 / 1e6
            shm = measure(parent, "shm", shape, args.reps)
            copy = measure(parent, "copy", shape, args.reps)
            print(f"{b:>5} {mb:>7.1f} {shm:>17.2f} {copy:>16.2f} {copy / shm:>9.1f}")
    finally:
        parent.send(None)
        proc.join(10)


if __name__ == "__main__":
    main()
