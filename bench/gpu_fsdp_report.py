#!/usr/bin/env python3
"""Tables of bench/gpu_fsdp.sh: FSDP programs compiled and run on N GPUs.

    gpu_fsdp_report.py meta OUTDIR META.json --graph G --world N ...
        (compile step) the compiler's predictions for one program, from
        `lethe compile`'s plan.json and trace.json: planned arena, simulated
        step, all-gather / reduce-scatter time on the comm stream, offloaded
        bytes; and `alias` when an earlier variant of the same row compiled
        to the same program (it is then not run again).
    gpu_fsdp_report.py dry PROGRAMS
        (compile step) the predictions and the per-rank dry runs
        (*.dry.rR.json): every rank ok, the same calls on every rank.
    gpu_fsdp_report.py device RESULTS PROGRAMS
        (after the GPU run) per path, world, budget and variant: measured
        all-gather and reduce-scatter ms (comm-stream time per step, mean
        over ranks), step ms (slowest rank's median), peak per rank against
        the planned arena, simulated step and collectives, the change
        against `off`, the same-program check across ranks, and issue 8's
        targets: collectives within 5% of `off` and step no worse than the
        better of `naive` and `off`.

Exit status: 0, or 1 when a program or a rank failed (the tables are
printed anyway).
"""

import argparse
import glob
import hashlib
import json
import os
import statistics
import sys

MIB = 2**20
VARIANT_ORDER = ["off", "naive", "separate", "yield", "aware"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


#===-------------------------------------------------------------------------===
# meta
#===-------------------------------------------------------------------------===

def sim_collectives(trace):
    """Simulated comm-stream time per collective kind (ms) from a trace."""
    events = trace.get("traceEvents", trace) if isinstance(trace, dict) else trace
    comm_tid = None
    for e in events:
        if e.get("ph") == "M" and e.get("name") == "thread_name" and \
                e.get("args", {}).get("name") == "comm":
            comm_tid = e.get("tid")
    out = {}
    for e in events:
        if e.get("ph") != "X" or (comm_tid is not None and e.get("tid") != comm_tid):
            continue
        name = str(e.get("name", ""))
        if not name.startswith("collective."):
            continue
        kind = name[len("collective."):]
        out[kind] = out.get(kind, 0.0) + e.get("dur", 0.0) / 1000.0
    return out


def step_hash(outdir):
    """Hash of the compiled program (the allocated MLIR), to find variants
    that compiled to the same program."""
    h = hashlib.sha256()
    with open(os.path.join(outdir, "step.mlir"), "rb") as f:
        h.update(f.read())
    return h.hexdigest()


def cmd_meta(args):
    # `lethe compile`: plan.json is the plan (`lethe plan --json`),
    # simulation.json the program compiled (`lethe simulate --json`).
    plan = load(os.path.join(args.outdir, "plan.json"))
    sim = load(os.path.join(args.outdir, "simulation.json"))
    trace = load(os.path.join(args.outdir, "trace.json")) or {}
    if plan is None or sim is None:
        print(f"gpu_fsdp_report: no plan.json or simulation.json in "
              f"{args.outdir}", file=sys.stderr)
        return 1
    coll = sim_collectives(trace)
    offloaded = sum(v.get("bytes", 0) for v in plan.get("values", [])
                    if v.get("decision") == "offload")
    meta = {
        "name": os.path.basename(args.out)[:-len(".meta.json")],
        "graph": args.graph, "world": args.world, "profile": args.profile,
        "path": args.profile.replace("h200-", ""),
        "budget_label": args.budget_label,
        "budget_asked_percent": args.budget_asked,
        "budget_percent": args.budget_percent,
        "variant": args.variant, "options": args.options,
        "step_hash": step_hash(args.outdir),
        "plan": dict({k: sim.get(k) for k in (
            "budget_bytes", "arena_bytes", "peak_bytes", "host_arena_bytes",
            "plan_attempts", "plan_budget_bytes", "predicted_step_us",
            "counts")},
            plan_baseline_peak_bytes=plan.get("baseline_peak_bytes"),
            plan_baseline_step_us=plan.get("baseline_step_us")),
        "sim": {
            "step_ms": (sim.get("step_us") or 0) / 1000.0,
            "planner_step_ms": (sim.get("predicted_step_us") or 0) / 1000.0,
            "comm_busy_ms": sim.get("busy_us", {}).get("comm", 0) / 1000.0,
            "exposed_comm_ms": (sim.get("exposed_comm_us") or 0) / 1000.0,
            "all_gather_ms": coll.get("all_gather", 0.0),
            "reduce_scatter_ms": coll.get("reduce_scatter", 0.0),
            "offloaded_mib": offloaded / MIB,
            "arena_mib": (sim.get("arena_bytes") or 0) / MIB,
        },
    }
    # An earlier variant of the same row (graph, world, profile, budget
    # label) with the same program: this one is its alias.
    for other in sorted(glob.glob(os.path.join(args.programs, "*.meta.json"))):
        m = load(other)
        if not m or m.get("alias") or other == args.out:
            continue
        if (m["graph"], m["world"], m["profile"], m["budget_label"]) == \
                (args.graph, args.world, args.profile, args.budget_label) and \
                m["step_hash"] == meta["step_hash"]:
            meta["alias"] = m["variant"]
    with open(args.out, "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    return 0


#===-------------------------------------------------------------------------===
# shared
#===-------------------------------------------------------------------------===

def metas(programs):
    out = {}
    for path in sorted(glob.glob(os.path.join(programs, "*.meta.json"))):
        m = load(path)
        if m:
            out[m["name"]] = m
    return out


def row_key(m):
    return (m["graph"], m["path"], m["world"],
            int(m["budget_asked_percent"]) * -1, m["budget_label"])


def variant_rank(v):
    return VARIANT_ORDER.index(v) if v in VARIANT_ORDER else len(VARIANT_ORDER)


def rows(ms):
    """Programs grouped by (graph, path, world, budget), variants in order."""
    groups = {}
    for m in ms.values():
        groups.setdefault(row_key(m), []).append(m)
    for key in sorted(groups):
        yield key, sorted(groups[key], key=lambda m: variant_rank(m["variant"]))


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def pct(a, b):
    if a is None or not b:
        return "-"
    return f"{(a / b - 1) * 100:+.1f}%"


#===-------------------------------------------------------------------------===
# dry
#===-------------------------------------------------------------------------===

def cmd_dry(args):
    ms = metas(args.programs)
    if not ms:
        print("no programs")
        return 1
    bad = 0
    print("# FSDP programs (compile step): predictions and dry runs\n")
    print("Simulated on the program's device profile (lethe compile's trace). "
          "Dry run: the program's every runtime call validated as each rank "
          "(lethe-run --mode=dry-run --world=N --rank=R); `same` = every "
          "rank's report equal but for its rank.\n")
    print("| graph | path | world | budget | variant | arena MiB | offloaded "
          "MiB | sim AG ms | sim RS ms | sim comm exposed ms | sim step ms | "
          "vs off | dry run |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, group in rows(ms):
        off = next((m for m in group if m["variant"] == "off"), None)
        for m in group:
            s = m["sim"]
            dry = [load(p) for p in sorted(glob.glob(os.path.join(
                args.programs, m["name"] + ".dry.r*.json")))]
            if m.get("alias"):
                status = f"= {m['alias']}"
            elif len(dry) != m["world"] or not all(d and d.get("ok") for d in dry):
                status = "FAILED"
                bad += 1
            else:
                strip = [{k: v for k, v in d.items() if k != "rank"} for d in dry]
                same = all(x == strip[0] for x in strip)
                status = f"ok x{len(dry)}" + (", same" if same else ", DIFFER")
                bad += 0 if same else 1
            budget = f"{m['budget_percent']}%"
            if m["budget_percent"] != m["budget_asked_percent"]:
                budget += f" (asked {m['budget_asked_percent']}%)"
            print(f"| {m['graph']} | {m['path']} | {m['world']} | {budget} | "
                  f"{m['variant']} | {s['arena_mib']:.0f} | {s['offloaded_mib']:.0f} | "
                  f"{s['all_gather_ms']:.2f} | {s['reduce_scatter_ms']:.2f} | "
                  f"{s['exposed_comm_ms']:.2f} | {s['step_ms']:.2f} | "
                  f"{pct(s['step_ms'], off['sim']['step_ms'] if off else None)} | "
                  f"{status} |")
    return 1 if bad else 0


#===-------------------------------------------------------------------------===
# device
#===-------------------------------------------------------------------------===

def measured(results, m):
    """Per-rank reports of one program, summarized (None if none ran)."""
    reports = []
    for r in range(m["world"]):
        d = load(os.path.join(results, f"{m['name']}.r{r}.json"))
        reports.append(d)
    ok = [d for d in reports if d and not d.get("error") and d.get("step_ms")]
    if any(d and d.get("mode") == "dry-run" for d in reports):
        return {"ranks": 0, "world": m["world"], "errors": [
            (r, "dry run " + ("ok" if d and d.get("ok") else "FAILED"))
            for r, d in enumerate(reports)]}
    out = {"ranks": len(ok), "world": m["world"],
           "errors": [(r, (d or {}).get("error", "no report"))
                      for r, d in enumerate(reports)
                      if not (d and not d.get("error") and d.get("step_ms"))]}
    if not ok:
        return out
    coll = [d.get("collectives_ms", {}) for d in ok]
    out["ag_ms"] = statistics.mean(c.get("all_gather", {}).get("median", 0) for c in coll)
    out["rs_ms"] = statistics.mean(c.get("reduce_scatter", {}).get("median", 0) for c in coll)
    out["comm_ms"] = statistics.mean(d.get("comm_busy_ms", {}).get("median", 0) for d in ok)
    out["step_ms"] = max(d["step_ms"]["eager"]["median"] for d in ok)
    out["step_spread"] = (max(d["step_ms"]["eager"]["median"] for d in ok) -
                          min(d["step_ms"]["eager"]["median"] for d in ok))
    mem = [d.get("memory", {}) for d in ok]
    out["peak_mib"] = max(x.get("peak_since_context", 0) for x in mem) / MIB
    out["arena_mib"] = max(x.get("device_arena", 0) for x in mem) / MIB
    out["unaccounted_mib"] = max(x.get("unaccounted", 0) for x in mem) / MIB
    out["planned_peak_mib"] = max(d.get("planned", {}).get("peak_bytes", 0)
                                  for d in ok) / MIB
    out["d2h_gbps"] = statistics.mean(d.get("streams", {}).get("d2h", {})
                                      .get("gb_per_s", 0) for d in ok)
    files = {d.get("program_file_hash") for d in ok}
    ops = {d.get("step_ops_hash") for d in ok}
    stable = all(d.get("step_ops_hash_stable", False) for d in ok)
    out["same_program"] = len(files) == 1 and len(ops) == 1 and stable and \
        len(ok) == m["world"]
    return out


def cmd_device(args):
    ms = metas(args.programs)
    print("# FSDP on GPUs: measured\n")
    device = os.path.join(args.results, "device.txt")
    if os.path.exists(device):
        with open(device) as f:
            first = f.read().strip().splitlines()
        print("Device: " + "; ".join(first[:8]) + "\n")
    print("AG / RS: all-gather / reduce-scatter time on the comm stream per "
          "step (profiled steps' median, mean over ranks; includes waiting for "
          "peers). Step: eager step median of the slowest rank. Peak: largest "
          "device memory any rank added (peak_since_context) and the planned "
          "arena (planned buffers + resident inputs). Sim: the compiler's "
          "simulation on the program's profile. `vs off`: change against the "
          "no-offload program of the row (compiled at its own least budget "
          "when the row's budget needs offload). Targets (issue 8), for "
          "variants that offload: `coll` = AG + RS within 5% of off; `step` = "
          "step no worse than min(naive, off). `same`: every rank loaded the "
          "same program file and enqueued the same ops.\n")
    failed = 0
    shown = 0
    for key, group in rows(ms):
        graph, path, world, _, label = key
        results = {m["variant"]: measured(args.results, m)
                   for m in group if not m.get("alias")}
        ran = any(os.path.exists(os.path.join(args.results, f"{m['name']}.r0{ext}"))
                  for m in group if not m.get("alias") for ext in (".json", ".err"))
        if not ran:
            continue  # not part of this run
        shown += 1
        by = {m["variant"]: m for m in group}
        asked = group[0]["budget_asked_percent"]
        print(f"## {graph}, {path}, world {world}, budget {asked}%\n")
        print("| variant | budget | AG ms | RS ms | vs off (AG+RS) | step ms | "
              "vs off | peak MiB / rank | planned arena MiB | sim AG ms | "
              "sim RS ms | sim step ms | offloaded MiB | same | targets |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")

        def res(v):
            m = by.get(v)
            if m is None:
                return None
            return results.get(m.get("alias") or v)

        off, naive = res("off"), res("naive")
        for m in group:
            v = m["variant"]
            r = res(v) or {"ranks": 0, "errors": [(0, "not run")]}
            s = m["sim"]
            name = v + (f" (= {m['alias']})" if m.get("alias") else "")
            budget = f"{m['budget_percent']}%"
            err = ""
            if r["errors"]:
                failed += 0 if m.get("alias") else 1
                err = "FAILED: " + "; ".join(
                    f"rank {i}: {e}" for i, e in r["errors"])[:200]
                if not r["ranks"]:
                    print(f"| {name} | {budget} | {err} |" + " |" * 12)
                    continue
            coll = r["ag_ms"] + r["rs_ms"]
            off_coll = off["ag_ms"] + off["rs_ms"] if off and off.get("ranks") else None
            targets = "-"
            if v != "off" and s["offloaded_mib"] > 0 and off and off.get("ranks"):
                ok_coll = coll <= 1.05 * off_coll
                best = min(x["step_ms"] for x in (off, naive) if x and x.get("ranks"))
                ok_step = r["step_ms"] <= best
                targets = f"coll {'ok' if ok_coll else 'MISS'}, step " \
                          f"{'ok' if ok_step else 'MISS'} ({pct(r['step_ms'], best)})"
            if err:
                targets = err if targets == "-" else f"{targets}; {err}"
            print(f"| {name} | {budget} | {r['ag_ms']:.2f} | {r['rs_ms']:.2f} | "
                  f"{pct(coll, off_coll)} | {r['step_ms']:.2f} | "
                  f"{pct(r['step_ms'], off['step_ms'] if off and off.get('ranks') else None)} | "
                  f"{r['peak_mib']:.0f} | {r['planned_peak_mib']:.0f} | "
                  f"{s['all_gather_ms']:.2f} | {s['reduce_scatter_ms']:.2f} | "
                  f"{s['step_ms']:.2f} | {s['offloaded_mib']:.0f} | "
                  f"{'yes' if r['same_program'] else 'NO'} | {targets} |")
        print()
    if not shown:
        print("No program results in this folder.\n")
    # The collective bench, when this part ran it.
    for w in (2, 4):
        prof = os.path.join(args.results, f"profile-w{w}.md")
        if os.path.exists(prof):
            print(f"## Collectives beside host copies (lethe-rt-bench, world {w})\n")
            with open(prof) as f:
                print(f.read())
    return 1 if failed else 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("meta")
    m.add_argument("outdir")
    m.add_argument("out")
    m.add_argument("--graph", required=True)
    m.add_argument("--world", type=int, required=True)
    m.add_argument("--profile", required=True)
    m.add_argument("--budget-label", required=True)
    m.add_argument("--budget-asked", type=int, required=True)
    m.add_argument("--budget-percent", type=int, required=True)
    m.add_argument("--variant", required=True)
    m.add_argument("--options", default="")
    m.add_argument("--programs", required=True)
    d = sub.add_parser("dry")
    d.add_argument("programs")
    v = sub.add_parser("device")
    v.add_argument("results")
    v.add_argument("programs")
    args = ap.parse_args(argv)
    return {"meta": cmd_meta, "dry": cmd_dry, "device": cmd_device}[args.cmd](args)


if __name__ == "__main__":
    sys.exit(main())
