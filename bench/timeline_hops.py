#!/usr/bin/env python3
"""Where one small collective's time goes, from a rank's timeline.

    timeline_hops.py TRACE.json [TRACE.json ...]

For a job that runs one allreduce after another under one name (e.g.
`allreduce_bench --only allreduce:4 --troupe-only` with TROUPE_TIMELINE set),
prints per rank the medians of: a whole step (submission to submission),
negotiation (NEGOTIATE_ALLREDUCE: submission at the negotiator until the
response list arrived), the hand-off to the backend thread, the backend's
library call, the hand-back, and completion to the next submission (the
caller waking and submitting again). The first 50 steps are skipped."""
import json
import statistics
import sys


def steps(path):
    events = [e for e in json.load(open(path)) if e.get("ph") in ("B", "E") and e.get("pid") == 1]
    out, current = [], {}
    for e in events:
        key = (e["name"], e["ph"])
        if key == ("NEGOTIATE_ALLREDUCE", "B") and current:
            out.append(current)
            current = {}
        current[key] = e["ts"]
    return out[50:]


def main():
    for path in sys.argv[1:]:
        it = steps(path)
        backend = [k for k in it[0] if k[0] not in ("NEGOTIATE_ALLREDUCE", "ALLREDUCE")]
        lib_b = next(k for k in backend if k[1] == "B")
        lib_e = next(k for k in backend if k[1] == "E")
        nb, ne = ("NEGOTIATE_ALLREDUCE", "B"), ("NEGOTIATE_ALLREDUCE", "E")
        ab, ae = ("ALLREDUCE", "B"), ("ALLREDUCE", "E")

        def med(a, b):
            return statistics.median(c[b] - c[a] for c in it if a in c and b in c)

        between = lambda a, b: statistics.median(it[i + 1][b] - it[i][a] for i in range(len(it) - 1))
        print(f"{path}: {len(it)} steps, medians in µs: step {between(nb, nb):.0f} | "
              f"negotiate {med(nb, ne):.0f} | to backend {med(ab, lib_b):.0f} | "
              f"{lib_b[0]} {med(lib_b, lib_e):.0f} | back {med(lib_e, ae):.0f} | "
              f"completion to next submission {between(ae, nb):.0f}")


if __name__ == "__main__":
    main()
