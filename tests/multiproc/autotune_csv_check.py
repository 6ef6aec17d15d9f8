"""Checks an autotune CSV (Horovod's format) written by one process set's tuner.

autotune_csv_check.py FILE --rows N --finalists F [--varies COL,...] [--fixed COL=VALUE,...]
                      [--explicit-chunks K]

N scored settings (the configured one first), F finalists scored again (the
configured one last), then the frozen one again as the last row (the best
finalist, or the configured one when none beat it by the tuner's margin); the columns
named by --varies take more than one value among the N, those named by --fixed
only the one given; with --explicit-chunks, K of the N name a chunk other
than the configured one (-1).
"""
import argparse
import csv
import sys

HEADER = ["hierarchical_allreduce", "hierarchical_allgather", "torus_allreduce",
          "cache_enabled", "cycle_time_ms", "tensor_fusion_threshold", "score",
          "fusion_chunk_bytes"]
SCORE = HEADER.index("score")


def setting(row):
    """Every column but the score."""
    return row[:SCORE] + row[SCORE + 1:]


def fail(path, why):
    print(f"FAIL {path}: {why}")
    sys.exit(1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("path")
    ap.add_argument("--rows", type=int, required=True)
    ap.add_argument("--finalists", type=int, required=True)
    ap.add_argument("--varies", default="")
    ap.add_argument("--fixed", default="")
    ap.add_argument("--explicit-chunks", type=int)
    args = ap.parse_args()
    with open(args.path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows or rows[0] != HEADER:
        fail(args.path, f"header {rows[:1]}")
    body, best = rows[1:-1], rows[-1] if len(rows) > 1 else None
    if len(body) != args.rows + args.finalists:
        fail(args.path, f"{len(body)} rows before the last, want {args.rows} scored and "
                        f"{args.finalists} finalists: {rows}")
    scored, finalists = body[:args.rows], body[args.rows:]
    for row in rows[1:]:
        if len(row) != len(HEADER) or row[:3] != ["0", "0", "0"] or row[3] not in ("0", "1"):
            fail(args.path, f"malformed row {row}")
        if float(row[SCORE]) <= 0:
            fail(args.path, f"score not positive in {row}")
        if int(row[-1]) < -1:
            fail(args.path, f"chunk below -1 in {row}")
    if setting(finalists[-1]) != setting(scored[0]):
        fail(args.path, f"the last finalist {finalists[-1]} is not the configured {scored[0]}")
    for row in finalists:
        if not any(setting(row) == setting(s) for s in scored):
            fail(args.path, f"finalist {row} was never scored before")
    # The frozen setting: the best finalist, or the configured one when no
    # other beat it by the re-scoring's margin (which the file does not
    # hold); never a finalist below another non-configured one.
    top = max(finalists, key=lambda r: float(r[SCORE]))
    if best not in (top, finalists[-1]):
        fail(args.path, f"last row {best} is neither the best finalist {top} nor the "
                        f"configured {finalists[-1]}")
    for col in filter(None, args.varies.split(",")):
        values = {r[HEADER.index(col)] for r in scored}
        if len(values) < 2:
            fail(args.path, f"{col} never changed: {values}")
    for item in filter(None, args.fixed.split(",")):
        col, value = item.split("=")
        values = {r[HEADER.index(col)] for r in rows[1:]}
        if values != {value}:
            fail(args.path, f"{col} took {values}, want only {value}")
    if args.explicit_chunks is not None:
        explicit = [r for r in scored if r[-1] != "-1"]
        if len(explicit) != args.explicit_chunks:
            fail(args.path, f"{len(explicit)} scored rows name a chunk, want "
                            f"{args.explicit_chunks}: {explicit}")
    print(f"PASS {args.path}: {len(scored)} settings scored, {len(finalists)} again, best {best}")


if __name__ == "__main__":
    main()
