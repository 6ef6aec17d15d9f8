import json,sys,statistics,glob
d=sys.argv[1]
for v in ("old","new"):
    meds=[];tc=[];cs=[]
    for f in sorted(glob.glob(f"{d}/{v}-*.json")):
        j=json.load(open(f)); meds.append(statistics.median(j["series"][0]["seconds"])*1e3)
        for r in (0,1):
            try:
                for line in open(f[:-5]+f".{r}.txt"):
                    parts=line.split(",")
                    if len(parts)>2 and parts[2]=="task-clock": tc.append(float(parts[0]))
                    if len(parts)>2 and parts[2]=="context-switches": cs.append(float(parts[0]))
            except FileNotFoundError: pass
    print(v, "step ms medians", " ".join("%.3f"%m for m in meds), "| median %.3f"%statistics.median(meds), "| task-clock ms/rank", "%.0f"%statistics.median(tc) if tc else "-", "| ctx", "%.0f"%statistics.median(cs) if cs else "-")
