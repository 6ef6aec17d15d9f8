"""torch.distributed (gloo) on the workloads of allreduce_bench, same JSON.

Run by bench/run.sh as `troupe-run -np 2 /usr/bin/python3 bench/torch_bench.py
--json F`: troupe-run exports RANK and WORLD_SIZE, run.sh exports MASTER_ADDR
and MASTER_PORT for the env:// rendezvous. The workload list and iteration
counts mirror bench/workloads.cpp; keep the two in step.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))


def iterations_for(nbytes):
    if nbytes <= 64 << 10:
        return 100
    if nbytes <= 1 << 20:
        return 40
    if nbytes <= 16 << 20:
        return 8
    if nbytes <= 64 << 20:
        return 3
    return 2


def read_counts(path):
    with open(path) as f:
        return [int(line.split()[0]) for line in f if line.strip() and not line.startswith("#")]


def workloads(quick):
    sizes = [4, 1 << 10, 64 << 10] if quick else [
        4, 1 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20, 256 << 20]
    out = [("allreduce", [b // 4], 5 if quick else iterations_for(b), torch.float32)
           for b in sizes]
    out.append(("small_tensors", [1024] * 200, 3 if quick else 50, torch.float32))
    resnet = read_counts(os.path.join(HERE, "data", "resnet50_gradients.txt"))
    out.append(("resnet50", resnet, 1 if quick else 3, torch.float32))
    out.append(("resnet50_fp16", resnet, 1 if quick else 3, torch.float16))
    return out


def allreduce_all(tensors):
    """One blocking call for one tensor; otherwise all in flight, then wait."""
    if len(tensors) == 1:
        dist.all_reduce(tensors[0])
        return
    for work in [dist.all_reduce(t, async_op=True) for t in tensors]:
        work.wait()


def measure(counts, iterations, rounds, dtype):
    tensors = [torch.full((n,), float(dist.get_rank() + 1), dtype=dtype) for n in counts]
    allreduce_all(tensors)  # also the warm-up step
    size = dist.get_world_size()
    expected = size * (size + 1) / 2
    if any(t[0].item() != expected or t[-1].item() != expected for t in tensors):
        raise RuntimeError("torch.distributed computed a wrong sum")
    seconds = []
    for _ in range(rounds * iterations):
        start = time.perf_counter()
        allreduce_all(tensors)
        seconds.append(time.perf_counter() - start)
    return seconds


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    dist.init_process_group("gloo", init_method="env://")
    series = []
    for name, counts, iterations, dtype in workloads(args.quick):
        element = torch.tensor([], dtype=dtype).element_size()
        series.append({"impl": "torch-gloo", "workload": name,
                       "bytes": element * sum(counts), "tensors": len(counts),
                       "seconds": measure(counts, iterations, args.rounds, dtype)})
    if dist.get_rank() == 0:
        with open(args.json, "w") as f:
            json.dump({"ranks": dist.get_world_size(), "rounds": args.rounds,
                       "series": series}, f)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
