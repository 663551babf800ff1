#!/usr/bin/env python3
"""Device-profile contention factors from `lethe-rt-bench --collectives`.

    bench/collective_profile.py --nvlink A/ --pcie B/ [--write devices/]
                                [--date YYYY-MM-DD] [--json OUT.json]

A and B hold the per-rank JSON reports (files or folders, searched
recursively for *.json with "mode": "collectives") of one run over NVLink
(NCCL defaults) and one with NCCL_P2P_DISABLE=1 (collectives through host
memory over PCIe). For each path this prints the measured figures and the
device-profile fields the simulator reads (lib/Support/DeviceProfile.cpp):

  nvlink_gb_per_s                       all-gather bus bandwidth, alone
  collective_slowdown_with_copies       collective time beside a D2H copy /
                                        alone (mean of all-gather and
                                        reduce-scatter), at least 1
  collective_slowdown_with_both_copies  the same beside D2H + H2D, at least
                                        the one-direction factor
  copy_slowdown_with_collectives        copy rate during a collective /
                                        alone (mean over both collectives
                                        and both directions), at most 1

The table's last columns are the collective beside D2H + H2D copies that
yield to it (letheRtSetCopyYield, --yield-chunk-mib): the factor the
runtime's yielding copies leave (not written to the profiles).

Each figure is the median over ranks of each rank's median over repeats.
The copy bandwidths alone and the duplex factor are printed too, but not
written: they were measured with every rank copying at once.

--write DIR updates DIR/h200-nvlink.json and DIR/h200-pcie.json in place
(those fields and their notes only; the rest of each file is kept).
"""

import argparse
import datetime
import glob
import json
import os
import statistics
import sys

KINDS = ("all_gather", "reduce_scatter")
PROFILES = {"nvlink": "h200-nvlink", "pcie": "h200-pcie"}


def load_reports(paths):
    files = []
    for path in paths:
        if os.path.isdir(path):
            files += sorted(glob.glob(os.path.join(path, "**", "*.json"),
                                      recursive=True))
        else:
            files.append(path)
    reports = []
    for f in files:
        try:
            with open(f) as fh:
                data = json.load(fh)
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and data.get("mode") == "collectives":
            data["_file"] = f
            reports.append(data)
    return reports


def med(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def summarize(reports):
    """Median over ranks of every figure the profile needs."""
    ok = [r for r in reports if r.get("ok")]
    bad = [r for r in reports if not r.get("ok")]
    s = {"ranks": len(ok), "failed": [(r["_file"], r.get("error", "?"))
                                      for r in bad]}
    if not ok:
        return s
    first = ok[0]
    s["world"] = first.get("world")
    s["device"] = first.get("device")
    s["dry_run"] = any(r.get("dry_run") for r in ok)
    s["shard_mib"] = first.get("shard_bytes", 0) / 2**20
    s["copy_mib"] = first.get("copy_bytes", 0) / 2**20
    s["p2p_disable"] = first.get("env_NCCL_P2P_DISABLE", "")
    copies = [r.get("copies", {}) for r in ok]
    for key in ("d2h_gb_per_s", "h2d_gb_per_s", "d2h_gb_per_s_both",
                "h2d_gb_per_s_both"):
        s[key] = med([c.get(key) for c in copies])
    for kind in KINDS:
        ks = [r.get(kind, {}) for r in ok]
        k = {}
        k["alone_ms"] = med([x.get("alone_ms", {}).get("median") for x in ks])
        k["beside_d2h_ms"] = med(
            [x.get("beside_d2h_ms", {}).get("median") for x in ks])
        k["beside_both_ms"] = med(
            [x.get("beside_both_ms", {}).get("median") for x in ks])
        k["beside_both_yield_ms"] = med(
            [x.get("beside_both_yield_ms", {}).get("median") for x in ks])
        k["bus_gb_per_s"] = med([x.get("bus_gb_per_s") for x in ks])
        for key in ("slowdown_beside_d2h", "slowdown_beside_both",
                    "slowdown_beside_both_yield",
                    "d2h_gb_per_s_during", "h2d_gb_per_s_during",
                    "d2h_gb_per_s_both_during", "h2d_gb_per_s_both_during"):
            k[key] = med([x.get(key) for x in ks])
        k["covered"] = all(x.get("covered_d2h", True) and
                           x.get("covered_both", True) and
                           x.get("covered_copies", True) for x in ks)
        s[kind] = k
    return s


def ratio(a, b):
    return a / b if a and b else None


def fields(s):
    """The device-profile fields from a summary (None where unmeasured)."""
    if not s.get("ranks"):
        return {}
    f = {}
    ag, rs = s["all_gather"], s["reduce_scatter"]
    f["nvlink_gb_per_s"] = ag["bus_gb_per_s"] or None
    one = [k["slowdown_beside_d2h"] for k in (ag, rs) if k["slowdown_beside_d2h"]]
    both = [k["slowdown_beside_both"] for k in (ag, rs)
            if k["slowdown_beside_both"]]
    if one:
        f["collective_slowdown_with_copies"] = max(1.0, statistics.mean(one))
    if both:
        f["collective_slowdown_with_both_copies"] = max(
            f.get("collective_slowdown_with_copies", 1.0),
            statistics.mean(both))
    rates = []
    for k in (ag, rs):
        rates.append(ratio(k["d2h_gb_per_s_during"], s["d2h_gb_per_s"]))
        rates.append(ratio(k["h2d_gb_per_s_during"], s["h2d_gb_per_s"]))
    rates = [r for r in rates if r]
    if rates:
        f["copy_slowdown_with_collectives"] = min(1.0, statistics.mean(rates))
    return {k: round(v, 3) for k, v in f.items() if v is not None}


def fmt(v, spec=".2f"):
    return "-" if v is None else format(v, spec)


def print_summary(name, s, f):
    print(f"## {name}: {s.get('ranks', 0)} rank reports"
          + (" (DRY RUN: no device, zeros)" if s.get("dry_run") else ""))
    print()
    for path, err in s.get("failed", []):
        print(f"- FAILED {path}: {err}")
    if not s.get("ranks"):
        print("no usable report\n")
        return
    print(f"world {s['world']}, {s['device']}, {s['shard_mib']:.0f} MiB per "
          f"rank, {s['copy_mib']:.0f} MiB copies, NCCL_P2P_DISABLE="
          f"'{s['p2p_disable']}'\n")
    print("| collective | alone ms | bus GB/s | beside D2H ms | x | beside "
          "D2H+H2D ms | x | D2H GB/s during | H2D GB/s during | covered "
          "| beside yielding D2H+H2D ms | x |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for kind in KINDS:
        k = s[kind]
        print(f"| {kind} | {fmt(k['alone_ms'])} | {fmt(k['bus_gb_per_s'], '.1f')}"
              f" | {fmt(k['beside_d2h_ms'])} | {fmt(k['slowdown_beside_d2h'], '.3f')}"
              f" | {fmt(k['beside_both_ms'])} | {fmt(k['slowdown_beside_both'], '.3f')}"
              f" | {fmt(k['d2h_gb_per_s_during'], '.1f')}"
              f" | {fmt(k['h2d_gb_per_s_during'], '.1f')}"
              f" | {'yes' if k['covered'] else 'NO'}"
              f" | {fmt(k['beside_both_yield_ms'])}"
              f" | {fmt(k['slowdown_beside_both_yield'], '.3f')} |")
    dup = [ratio(s["d2h_gb_per_s_both"], s["d2h_gb_per_s"]),
           ratio(s["h2d_gb_per_s_both"], s["h2d_gb_per_s"])]
    dup = [d for d in dup if d]
    print(f"\nCopies alone (all ranks copying): D2H {fmt(s['d2h_gb_per_s'], '.1f')}"
          f" GB/s, H2D {fmt(s['h2d_gb_per_s'], '.1f')} GB/s; both at once "
          f"{fmt(s['d2h_gb_per_s_both'], '.1f')} + "
          f"{fmt(s['h2d_gb_per_s_both'], '.1f')} GB/s (duplex factor "
          f"{fmt(min(dup) if dup else None, '.3f')}; not written).\n")
    if not all(s[k]["covered"] for k in KINDS):
        print("WARNING: some copy did not cover its collective (or the loop "
              "its copy): the factor understates the contention.\n")
    print("Profile fields:\n")
    print("```json")
    print(json.dumps(f, indent=2))
    print("```\n")


def notes_for(s, f, date):
    where = (f"lethe-rt-bench --collectives, world {s['world']}, "
             f"{s['shard_mib']:.0f} MiB per rank, {s['copy_mib']:.0f} MiB "
             f"pinned copies, {s['device']}, NCCL_P2P_DISABLE="
             f"'{s['p2p_disable']}', median over ranks of medians over "
             f"repeats, {date} (bench/collective_profile.py)")
    ag, rs = s["all_gather"], s["reduce_scatter"]
    n = {}
    if "nvlink_gb_per_s" in f:
        n["nvlink_gb_per_s"] = (
            f"all-gather bus bandwidth alone: {ag['alone_ms']:.3f} ms "
            f"({ag['bus_gb_per_s']:.1f} GB/s; reduce-scatter "
            f"{fmt(rs['alone_ms'], '.3f')} ms = {fmt(rs['bus_gb_per_s'], '.1f')}"
            f" GB/s); {where}")
    if "collective_slowdown_with_copies" in f:
        n["collective_slowdown_with_copies"] = (
            f"mean of all-gather x{fmt(ag['slowdown_beside_d2h'], '.3f')} and "
            f"reduce-scatter x{fmt(rs['slowdown_beside_d2h'], '.3f')} beside a "
            f"D2H copy (at least 1); {where}")
    if "collective_slowdown_with_both_copies" in f:
        n["collective_slowdown_with_both_copies"] = (
            f"mean of all-gather x{fmt(ag['slowdown_beside_both'], '.3f')} and "
            f"reduce-scatter x{fmt(rs['slowdown_beside_both'], '.3f')} beside "
            f"D2H + H2D copies (at least the one-direction factor); {where}")
    if "copy_slowdown_with_collectives" in f:
        n["copy_slowdown_with_collectives"] = (
            f"copy rate during a collective loop / alone, mean of D2H "
            f"{fmt(ag['d2h_gb_per_s_during'], '.1f')} (all-gather) and "
            f"{fmt(rs['d2h_gb_per_s_during'], '.1f')} (reduce-scatter) of "
            f"{fmt(s['d2h_gb_per_s'], '.1f')} GB/s and H2D "
            f"{fmt(ag['h2d_gb_per_s_during'], '.1f')} / "
            f"{fmt(rs['h2d_gb_per_s_during'], '.1f')} of "
            f"{fmt(s['h2d_gb_per_s'], '.1f')} GB/s (at most 1); {where}")
    return n


def write_profile(path, f, notes):
    with open(path) as fh:
        profile = json.load(fh)
    profile.update(f)
    profile.setdefault("notes", {}).update(notes)
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        json.dump(profile, fh, indent=2)
        fh.write("\n")
    os.replace(tmp, path)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nvlink", nargs="+", default=[],
                    help="reports of the NVLink run (files or folders)")
    ap.add_argument("--pcie", nargs="+", default=[],
                    help="reports of the NCCL_P2P_DISABLE=1 run")
    ap.add_argument("--write", metavar="DIR",
                    help="update DIR/h200-nvlink.json and DIR/h200-pcie.json")
    ap.add_argument("--date", default=datetime.date.today().isoformat())
    ap.add_argument("--json", metavar="OUT", help="write the fields as JSON")
    args = ap.parse_args(argv)
    if not args.nvlink and not args.pcie:
        ap.error("give --nvlink and/or --pcie")
    out = {}
    status = 0
    for key, paths in (("nvlink", args.nvlink), ("pcie", args.pcie)):
        if not paths:
            continue
        s = summarize(load_reports(paths))
        f = fields(s)
        print_summary(PROFILES[key], s, f)
        if not s.get("ranks") or s.get("failed"):
            status = 1
        out[PROFILES[key]] = {"fields": f,
                              "notes": notes_for(s, f, args.date) if f else {}}
        if args.write and s.get("dry_run"):
            print(f"not writing {PROFILES[key]}: dry-run reports")
            status = 1
        elif args.write and f:
            path = os.path.join(args.write, PROFILES[key] + ".json")
            write_profile(path, f, out[PROFILES[key]]["notes"])
            print(f"wrote {path}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
            fh.write("\n")
    return status


if __name__ == "__main__":
    sys.exit(main())
