#!/usr/bin/env python3
"""Tables for bench/gpu_e2e.sh from lethe-run's JSON reports.

  gpu_e2e_report.py dry DIR      DIR/*.dry.json (dry runs, no GPU)
  gpu_e2e_report.py device DIR   DIR/*.timing.json, *.checksum.json,
                                 sanitizer-*.txt (a GPU run)
"""
import glob
import json
import os
import sys

MIB = 1 << 20


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


def order(name):
    graph, _, budget = name.rpartition("-")
    if budget == "none":
        return (graph, -1000)
    return (graph, -int(budget)) if budget.isdigit() else (name, 0)


def dry(directory):
    rows = []
    for path in glob.glob(os.path.join(directory, "*.dry.json")):
        name = os.path.basename(path)[: -len(".dry.json")]
        rows.append((name, load(path)))
    print("| program | ok | device arena MiB | host arena MiB | GEMMs | replays "
          "| D2H MiB | H2D MiB | records | waits | releases | planned kernel ms |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    ok = True
    for name, r in sorted(rows, key=lambda row: order(row[0])):
        c = r.get("counts", {})
        ok &= bool(r.get("ok"))
        print(f"| {name} | {r.get('ok', False)} "
              f"| {r.get('device_arena_bytes', 0) / MIB:.0f} "
              f"| {r.get('host_arena_bytes', 0) / MIB:.0f} "
              f"| {c.get('gemms', 0)} | {c.get('replays', 0)} "
              f"| {c.get('bytes_d2h', 0) / MIB:.0f} "
              f"| {c.get('bytes_h2d', 0) / MIB:.0f} "
              f"| {c.get('records', 0)} | {c.get('waits', 0)} "
              f"| {c.get('releases', 0)} "
              f"| {c.get('kernel_us_planned', 0) / 1000:.2f} |")
        if not r.get("ok"):
            print(f"|   {r.get('error', 'failed')} |")
    return 0 if ok and rows else 1


def pct(measured, planned):
    return f"{100.0 * (measured - planned) / planned:+.1f}%" if planned else "-"


def device(directory):
    names = sorted(
        (os.path.basename(p)[: -len(".timing.json")]
         for p in glob.glob(os.path.join(directory, "*.timing.json"))),
        key=order)
    dev = ""
    if os.path.exists(os.path.join(directory, "device.txt")):
        dev = open(os.path.join(directory, "device.txt")).read().strip()
    print(f"Device: {dev}\n")
    print("| program | arena MiB (planned peak) | measured peak MiB | fixed MiB "
          "| unaccounted MiB | step ms eager | step ms graph | planned ms "
          "| eager vs planned | graph vs planned | D2H GB/s | H2D GB/s | MiB each way "
          "| vs unplanned (eager) | checksums |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = {}
    for name in names:
        t = load(os.path.join(directory, name + ".timing.json"))
        if name.endswith("-none"):
            base[name.rpartition("-")[0]] = t
    for name in names:
        t = load(os.path.join(directory, name + ".timing.json"))
        if "error" in t and "step_ms" not in t:
            print(f"| {name} | error: {t['error']} |")
            continue
        m, s = t.get("memory", {}), t.get("streams", {})
        eager = t.get("step_ms", {}).get("eager", {}).get("median", 0)
        graph = t.get("step_ms", {}).get("graph", {}).get("median", 0)
        planned = t.get("planned", {}).get("step_us", 0) / 1000
        b = base.get(name.rpartition("-")[0], {})
        b_eager = b.get("step_ms", {}).get("eager", {}).get("median", 0)
        c = load(os.path.join(directory, name + ".checksum.json"))
        if name.endswith("-none"):
            check = "(reference)"
        elif "compare" in c and "equal" in c:
            n = len(c.get("checksums", {}))
            check = f"{n} equal" if c["equal"] else "DIFFER: " + ", ".join(
                c["compare"].get("mismatched", [])[:4])
        else:
            check = c.get("error", "not run")
        copied = t.get("counts", {}).get("bytes_d2h", 0) / MIB
        print(f"| {name} | {m.get('device_arena', 0) / MIB:.0f} "
              f"| {m.get('peak_since_context', 0) / MIB:.0f} "
              f"| {m.get('fixed_overhead', 0) / MIB:.0f} "
              f"| {m.get('unaccounted', 0) / MIB:.0f} "
              f"| {eager:.2f} | {graph:.2f} | {planned:.2f} "
              f"| {pct(eager, planned)} | {pct(graph, planned)} "
              f"| {s.get('d2h', {}).get('gb_per_s', 0):.1f} "
              f"| {s.get('h2d', {}).get('gb_per_s', 0):.1f} "
              f"| {copied:.0f} | {pct(eager, b_eager)} | {check} |")
    for f in sorted(glob.glob(os.path.join(directory, "sanitizer-*.txt"))):
        lines = open(f, errors="replace").read().strip().splitlines()
        summary = [l for l in lines if "ERROR SUMMARY" in l or "RACECHECK SUMMARY" in l]
        print(f"\n{os.path.basename(f)}: " + (summary[-1] if summary else
              (lines[-1] if lines else "no output")))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("dry", "device"):
        sys.exit(__doc__)
    sys.exit(dry(sys.argv[2]) if sys.argv[1] == "dry" else device(sys.argv[2]))
