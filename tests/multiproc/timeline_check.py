"""Checks per-rank timeline files: valid JSON, Horovod's event names, and
every begin matched by an end on the same tensor row.

usage: timeline_check.py FILE [FILE...] [--names NAME,...] [--allow-open]
                         [--no-rows PREFIX,...]
--no-rows: no tensor row may start with these prefixes (written while the
timeline was stopped).
"""
import collections
import json
import sys


def main(argv):
    allow_open = "--allow-open" in argv
    names = []
    no_rows = []
    files = []
    args = iter(a for a in argv if a != "--allow-open")
    for arg in args:
        if arg == "--names":
            names = next(args).split(",")
        elif arg == "--no-rows":
            no_rows = next(args).split(",")
        else:
            files.append(arg)
    for path in files:
        with open(path) as f:
            events = json.load(f)  # raises on a torn file
        seen = {e["name"] for e in events if e["ph"] in "BEi"}
        rows = [e["args"]["name"] for e in events if e["ph"] == "M"]
        stray = [r for r in rows if any(r.startswith(p) for p in no_rows)]
        if stray:
            print(f"FAIL {path}: rows written while stopped: {stray[:5]}")
            return 1
        missing = [n for n in names if n not in seen]
        if missing:
            print(f"FAIL {path}: no {missing}")
            return 1
        depth = collections.Counter()
        for e in events:
            if e["ph"] == "B":
                depth[(e["pid"], e["name"])] += 1
            elif e["ph"] == "E":
                depth[(e["pid"], e["name"])] -= 1
        unbalanced = {k: v for k, v in depth.items() if v != 0}
        if unbalanced and not allow_open:
            print(f"FAIL {path}: unmatched spans {list(unbalanced)[:5]}")
            return 1
        print(f"OK {path}: {len(events)} events")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
