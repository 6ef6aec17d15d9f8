"""Before vs after from several bench/run.sh output dirs per build:

  python3 bench/compare_runs.py --before DIR... --after DIR... [--json OUT.json]

Each DIR is one run.sh --out directory (its pass-*.json files).
Per row (workload, bytes, impl): each run's median/p90 (bench/report.py pooling that run's
passes), the pooled median/p90 of all runs per build, after/before ratios, and the
run-to-run spread per build = (max - min) / min over that build's run medians (or p90s).
"pairs": of all (after run, before run) pairs, how many have the after median above the
before one (16/16 with 4 runs each = every after run slower than every before run).
Verdict "worse": every after run above every before run AND pooled ratio - 1 > the larger
of the two builds' spreads ("better" mirrored)."""
import argparse, glob, json, os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report  # noqa: E402

def rows_of(paths):
    pooled, idle, ranks = report.load(paths)
    return {(r["workload"], r["bytes"], r["impl"]): r
            for r in report.build_rows(pooled, ranks) if not r["reference"]}, report.idle_summary(idle)

parser = argparse.ArgumentParser()
parser.add_argument("--before", nargs="+", required=True)
parser.add_argument("--after", nargs="+", required=True)
parser.add_argument("--json")
args = parser.parse_args()
dirs = {"before": args.before, "after": args.after}
ns = {b: list(range(1, len(dirs[b]) + 1)) for b in dirs}
runs = {(b, n): rows_of(sorted(glob.glob(f"{d}/pass-*.json")))
        for b in dirs for n, d in zip(ns[b], dirs[b])}
pooled = {b: rows_of(sorted(p for d in dirs[b] for p in glob.glob(f"{d}/pass-*.json"))) for b in dirs}
hs = report.human_seconds
def spread(vals):
    return (max(vals) - min(vals)) / min(vals)

keys = list(pooled["before"][0].keys())
out, md = [], []
md.append("| row | impl | median before | median after | after / before | p90 before | p90 after"
          " | after / before | median spread before / after | p90 spread before / after | pairs after > before"
          " | beyond spread |")
md.append("|---" * 12 + "|")
for k in keys:
    pb, pa = pooled["before"][0][k], pooled["after"][0][k]
    rb = [runs[("before", n)][0][k] for n in ns["before"]]
    ra = [runs[("after", n)][0][k] for n in ns["after"]]
    res = {}
    for field in ("median_s", "p90_s"):
        ratio = pa[field] / pb[field]
        vb = [r[field] for r in rb]; va = [r[field] for r in ra]
        sb, sa = spread(vb), spread(va)
        if min(va) > max(vb) and ratio - 1 > max(sb, sa):
            v = "worse"
        elif max(va) < min(vb) and 1 / ratio - 1 > max(sb, sa):
            v = "better"
        else:
            v = "no"
        pairs = sum(a > b for a in va for b in vb)
        res[field] = dict(ratio=ratio, sb=sb, sa=sa, v=v, vb=vb, va=va, pairs=pairs, of=len(va) * len(vb))
    m, p = res["median_s"], res["p90_s"]
    verdict = ", ".join(f"{name} {r['v']}" for name, r in (("median", m), ("p90", p)) if r["v"] != "no") or "no"
    md.append(f"| {report.row_label(k[0], k[1])} | {k[2]} | {hs(pb['median_s'])} | {hs(pa['median_s'])} | {m['ratio']:.2f}"
              f" | {hs(pb['p90_s'])} | {hs(pa['p90_s'])} | {p['ratio']:.2f}"
              f" | {m['sb']*100:.0f} % / {m['sa']*100:.0f} % | {p['sb']*100:.0f} % / {p['sa']*100:.0f} %"
              f" | {m['pairs']}/{m['of']} | {verdict} |")
    out.append({"workload": k[0], "bytes": k[1], "impl": k[2],
                "before": {"median_s": pb["median_s"], "p90_s": pb["p90_s"], "samples": pb["samples"],
                           "run_medians_s": m["vb"], "run_p90s_s": p["vb"]},
                "after": {"median_s": pa["median_s"], "p90_s": pa["p90_s"], "samples": pa["samples"],
                          "run_medians_s": m["va"], "run_p90s_s": p["va"]},
                "median_ratio": m["ratio"], "p90_ratio": p["ratio"],
                "median_spread_before": m["sb"], "median_spread_after": m["sa"],
                "p90_spread_before": p["sb"], "p90_spread_after": p["sa"],
                "median_pairs_after_above_before": m["pairs"],
                "median_verdict": m["v"], "p90_verdict": p["v"]})
md.append("")
order = sorted(runs, key=lambda r: (r[1], r[0] != "before"))
md.append("| run medians | " + " | ".join(f"{b}-{n}" for b, n in order) + " |")
md.append("|---" * (len(order) + 1) + "|")
for k in keys:
    md.append(f"| {report.row_label(k[0], k[1])}, {k[2]} | " + " | ".join(hs(runs[r][0][k]["median_s"]) for r in order) + " |")
md.append("")
md.append("| idle CPU per rank, 3 s | " + " | ".join(f"{b}-{n}" for b, n in order) + " |")
md.append("|---" * (len(order) + 1) + "|")
for impl in report.TROUPE:
    md.append(f"| {impl} | " + " | ".join(" / ".join(f"{s*100:.2f} %" for s in runs[r][1].get(impl, [])) for r in order) + " |")
print("\n".join(md))
if args.json:
    json.dump({"machine": report.machine(), "runs": dirs, "rows": out,
               "idle_cpu_share_per_rank": {f"{b}-{n}": runs[(b, n)][1] for b, n in runs}},
              open(args.json, "w"), indent=1)
