"""ncu_dur.py CSV: of an `ncu --metrics gpu__time_duration.sum --csv
--print-units base` log, the kernel launched most often: prints its launch
count, median duration (ns) and name (48 characters, spaces as _); nothing
when the log has no rows.  Shared by gemv_ncu.sh and gemv_tiles.sh."""
import csv
import statistics
import sys

rows = list(csv.reader(l for l in open(sys.argv[1]) if l.startswith('"')))
if len(rows) > 1:
    ki, vi = rows[0].index("Kernel Name"), rows[0].index("Metric Value")
    by = {}
    for r in rows[1:]:
        by.setdefault(r[ki], []).append(float(r[vi].replace(",", "")))
    k, v = max(by.items(), key=lambda kv: len(kv[1]))
    print(f"{len(v)} {statistics.median(v):.0f} {k[:48].replace(' ', '_')}")
