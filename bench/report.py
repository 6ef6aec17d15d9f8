"""Merges the JSON of allreduce_bench and torch_bench.py runs into one table.

  python3 bench/report.py --json OUT.json IN.json...

Samples of the same impl / workload / size are pooled across the input files
(run.sh's passes) before medians are taken. Prints markdown: a summary with
Troupe / best peer per row, the detail per impl, the idle CPU and the issue-4
targets; writes every row to OUT.json. Standard library only.
"""
import argparse
import json
import os

TROUPE = ["troupe-mpi", "troupe-gloo", "troupe-gloo-noshm"]
PEERS = ["raw-mpi", "raw-gloo", "torch-gloo"]
HOROVOD = "horovod-0.28.1 (reference)"

# Horovod 0.28.1 through horovod.torch on this machine, as issue 4 states
# them (not re-measured here): ~1.07 ms for any allreduce up to 1 MiB (its
# 1 ms cycle), ~2.0 GB/s busbw at 64 MiB (mpi), 1.9 ms (mpi) / 6.7 ms (gloo)
# per 200 x 4 KiB step; idle 7-8 % per rank with gloo, 95 % on one mpi rank.
HOROVOD_SECONDS = {
    ("allreduce", 4): 1.07e-3, ("allreduce", 1 << 10): 1.07e-3,
    ("allreduce", 64 << 10): 1.07e-3, ("allreduce", 1 << 20): 1.07e-3,
    ("allreduce", 64 << 20): (64 << 20) / 2.0e9,
    ("small_tensors", 200 * 4096): 1.9e-3,
}
HOROVOD_NOTE = {("small_tensors", 200 * 4096): "1.9 ms mpi / 6.7 ms gloo",
                ("allreduce", 64 << 20): "~2.0 GB/s mpi"}


def quantile(values, q):
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def human_bytes(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return f"{n} B"


def human_seconds(s):
    if s is None:
        return "-"
    if s < 1e-3:
        return f"{s * 1e6:.1f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.2f} s"


def row_label(workload, nbytes):
    if workload == "allreduce":
        return f"allreduce {human_bytes(nbytes)}"
    if workload == "small_tensors":
        return "200 x 4 KiB step"
    if workload == "resnet50_fp16":
        return f"ResNet-50 step, float16 ({nbytes / 2**20:.1f} MiB)"
    return f"ResNet-50 step ({human_bytes(nbytes) if nbytes % (1 << 20) == 0 else f'{nbytes / 2**20:.1f} MiB'})"


def load(paths):
    pooled, idle, ranks = {}, {}, 2
    for path in paths:
        with open(path) as f:
            job = json.load(f)
        ranks = job["ranks"]
        for s in job["series"]:
            key = (s["workload"], s["bytes"], s["tensors"])
            pooled.setdefault(key, {}).setdefault(s["impl"], []).extend(s["seconds"])
        if "idle" in job:
            idle.setdefault(job["idle"]["impl"], []).append(job["idle"]["cpu_share_per_rank"])
    return pooled, idle, ranks


def build_rows(pooled, ranks):
    rows = []
    for (workload, nbytes, tensors), by_impl in pooled.items():
        medians = {impl: quantile(s, 0.5) for impl, s in by_impl.items()}
        peers = [medians[p] for p in PEERS if p in medians]
        best_peer = min(peers) if peers else None
        for impl, seconds in by_impl.items():
            median = medians[impl]
            rows.append({
                "workload": workload, "bytes": nbytes, "tensors": tensors, "impl": impl,
                "median_s": median, "p90_s": quantile(seconds, 0.9),
                "busbw_gbps": 2 * (ranks - 1) / ranks * nbytes / median / 1e9,
                "ratio_to_best_peer": median / best_peer if best_peer else None,
                "samples": len(seconds), "reference": False})
        if (workload, nbytes) in HOROVOD_SECONDS:
            median = HOROVOD_SECONDS[(workload, nbytes)]
            rows.append({
                "workload": workload, "bytes": nbytes, "tensors": tensors, "impl": HOROVOD,
                "median_s": median, "p90_s": None,
                "busbw_gbps": 2 * (ranks - 1) / ranks * nbytes / median / 1e9,
                "ratio_to_best_peer": median / best_peer if best_peer else None,
                "samples": 0, "reference": True,
                "note": HOROVOD_NOTE.get((workload, nbytes),
                                         "issue 4: ~1.07 ms up to 1 MiB (1 ms cycle)")})
    order = {"allreduce": 0, "small_tensors": 1, "resnet50": 2, "resnet50_fp16": 3}
    impls = TROUPE + PEERS + [HOROVOD]
    rows.sort(key=lambda r: (order.get(r["workload"], 9), r["bytes"],
                             impls.index(r["impl"]) if r["impl"] in impls else 99))
    return rows


def print_summary(rows):
    groups = {}
    for r in rows:
        groups.setdefault((r["workload"], r["bytes"]), {})[r["impl"]] = r
    cols = TROUPE + PEERS
    print("| median | " + " | ".join(cols) + " | Horovod (ref.) | "
          + " | ".join(f"{t} / best peer" for t in TROUPE) + " |")
    print("|---" * (len(cols) + len(TROUPE) + 2) + "|")
    for (workload, nbytes), by_impl in groups.items():
        cells = [human_seconds(by_impl[c]["median_s"]) if c in by_impl else "-" for c in cols]
        hvd = by_impl.get(HOROVOD)
        cells.append(human_seconds(hvd["median_s"]) if hvd else "-")
        for t in TROUPE:
            ratio = by_impl[t]["ratio_to_best_peer"] if t in by_impl else None
            cells.append(f"{ratio:.2f}" if ratio is not None else "-")
        print(f"| {row_label(workload, nbytes)} | " + " | ".join(cells) + " |")


def print_detail(rows):
    print("| row | impl | median | p90 | busbw GB/s | / best peer | samples |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r["ratio_to_best_peer"]
        impl = r["impl"] + (f" — {r['note']}" if r.get("note") else "")
        print(f"| {row_label(r['workload'], r['bytes'])} | {impl} | {human_seconds(r['median_s'])}"
              f" | {human_seconds(r['p90_s'])} | {r['busbw_gbps']:.2f}"
              f" | {f'{ratio:.2f}' if ratio is not None else '-'} | {r['samples'] or 'ref.'} |")


def idle_summary(idle):
    """Per impl: each rank's median share over the passes."""
    out = {}
    for impl, passes in idle.items():
        per_rank = list(zip(*passes))
        out[impl] = [quantile(list(shares), 0.5) for shares in per_rank]
    return out


def targets(rows, idle):
    def find(impl, workload, nbytes):
        for r in rows:
            if (r["impl"], r["workload"], r["bytes"]) == (impl, workload, nbytes):
                return r
        return None

    checks = []

    def latency(impl, workload, nbytes, limit_s, what):
        r = find(impl, workload, nbytes)
        value = r["median_s"] if r else None
        checks.append({"target": what, "measured": human_seconds(value),
                       "met": None if value is None else value <= limit_s})

    def busbw(impl, nbytes, limit, what):
        r = find(impl, "allreduce", nbytes)
        value = r["busbw_gbps"] if r else None
        checks.append({"target": what,
                       "measured": f"{value:.2f} GB/s" if value is not None else "-",
                       "met": None if value is None else value >= limit})

    latency("troupe-mpi", "allreduce", 4, 100e-6, "4 B allreduce, mpi <= 100 µs")
    latency("troupe-gloo", "allreduce", 4, 235e-6, "4 B allreduce, gloo <= 235 µs")
    raw_gloo = find("raw-gloo", "allreduce", 4)
    if raw_gloo:
        latency("troupe-gloo-noshm", "allreduce", 4, raw_gloo["median_s"],
                "4 B allreduce, gloo without the shm path <= raw Gloo (issue 15; raw Gloo "
                f"{human_seconds(raw_gloo['median_s'])})")
    busbw("troupe-mpi", 1 << 20, 4.0, "1 MiB busbw, mpi >= 4 GB/s")
    busbw("troupe-mpi", 64 << 20, 3.5, "64 MiB busbw, mpi >= 3.5 GB/s")
    latency("troupe-mpi", "small_tensors", 200 * 4096, 0.5e-3, "200 x 4 KiB step, mpi <= 0.5 ms")
    latency("troupe-gloo", "small_tensors", 200 * 4096, 3e-3, "200 x 4 KiB step, gloo <= 3 ms")
    for impl in TROUPE:
        shares = idle.get(impl)
        worst = max(shares) if shares else None
        checks.append({"target": f"idle, {impl}: < 2 % of a core on every rank",
                       "measured": " / ".join(f"{s * 100:.2f} %" for s in shares) if shares else "-",
                       "met": None if worst is None else worst < 0.02})
    return checks


def machine():
    model = "unknown CPU"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    with open("/proc/meminfo") as f:
        mem_kib = int(f.readline().split()[1])
    return f"{os.cpu_count()} x {model}, {mem_kib / 2**20:.0f} GiB, {os.uname().release}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--json", required=True, help="where to write all rows")
    parser.add_argument("inputs", nargs="+")
    args = parser.parse_args()
    pooled, idle_raw, ranks = load(args.inputs)
    rows = build_rows(pooled, ranks)
    idle = idle_summary(idle_raw)
    checks = targets(rows, idle)
    print(f"Machine: {machine()}; {ranks} ranks on one host.\n")
    print_summary(rows)
    print()
    print_detail(rows)
    print()
    print("| target | measured (median) | met |")
    print("|---|---|---|")
    for c in checks:
        met = "not measured" if c["met"] is None else "yes" if c["met"] else "no"
        print(f"| {c['target']} | {c['measured']} | {met} |")
    with open(args.json, "w") as f:
        json.dump({"machine": machine(), "ranks": ranks, "rows": rows,
                   "idle_cpu_share_per_rank": idle, "targets": checks}, f, indent=1)


if __name__ == "__main__":
    main()
