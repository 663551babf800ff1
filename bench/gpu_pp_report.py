#!/usr/bin/env python3
"""Tables for bench/gpu_pp.sh (two pipeline stages on two GPUs).

  gpu_pp_report.py dry PROGRAMS           the compile step: PROGRAMS/*.dry.json
                                          (dry runs), *.pairs.txt, *.sim.json
  gpu_pp_report.py device JSON PROGRAMS   a GPU run: JSON/<variant>-s<rank>.
                                          {timing,checksum}.json beside the
                                          compile step's files in PROGRAMS
"""
import glob
import json
import os
import sys

MIB = 1 << 20
VARIANTS = ["none", "auto", "full", "every-n"]


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as e:
        return {"error": f"{os.path.basename(path)}: {e}"}


def read(path):
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return ""


def variants_in(directory, suffix):
    found = {os.path.basename(p).split("-s")[0]
             for p in glob.glob(os.path.join(directory, "*" + suffix))}
    return [v for v in VARIANTS if v in found] + sorted(found - set(VARIANTS))


def sim_of(programs, v):
    return load(os.path.join(programs, f"{v}.sim.json"))


def dry(programs):
    print("Compile step (no GPU): both stages dry-run as ranks 0 and 1; "
          "their transfers paired by bench/pp_p2p_check.py; simulated "
          "together on the device profile.\n")
    print("| variant | stage | ok | device arena MiB | host arena MiB "
          "| transfers | groups | simulated step ms (alone / together) |")
    print("|---|---|---|---|---|---|---|---|")
    ok = True
    variants = variants_in(programs, ".dry.json")
    for v in variants:
        sim = sim_of(programs, v)
        for s in (0, 1):
            r = load(os.path.join(programs, f"{v}-s{s}.dry.json"))
            ok &= bool(r.get("ok"))
            p2p = r.get("p2p", [])
            groups = len({p["group"] for p in p2p if p["group"] >= 0})
            st = (sim.get("stages") or [{}, {}])[s] if "stages" in sim else {}
            print(f"| {v} | {s} | {r.get('ok', False)} "
                  f"| {r.get('device_arena_bytes', 0) / MIB:.0f} "
                  f"| {r.get('host_arena_bytes', 0) / MIB:.0f} "
                  f"| {len(p2p)} | {groups} "
                  f"| {st.get('alone_step_us', 0) / 1000:.2f} / "
                  f"{st.get('step_us', 0) / 1000:.2f} |")
            if not r.get("ok"):
                print(f"|   {r.get('error', 'failed')} |")
        pairs = read(os.path.join(programs, f"{v}.pairs.txt"))
        last = pairs.splitlines()[-1] if pairs else "missing"
        ok &= last == "ok"
        print(f"| {v} | pairs | {last} | | | | | pipeline "
              f"{sim.get('step_us', 0) / 1000:.2f} |")
    return 0 if ok and variants else 1


def pct(measured, reference):
    if not reference:
        return "-"
    return f"{100.0 * (measured - reference) / reference:+.1f}%"


def p2p_split(timing):
    """Comm-stream time of the NCCL groups and of lone sends and receives
    (medians over the profiled steps; lethe-run keys them by the first word
    of the op label)."""
    kinds = timing.get("collectives_ms", {})
    def med(kind):
        return kinds.get(kind, {}).get("median", 0.0)
    return f"{med('group:'):.2f} / {med('send'):.2f} / {med('recv'):.2f}"


def device(json_dir, programs):
    print(f"Device: {read(os.path.join(json_dir, 'device.txt')) or '?'}; "
          f"date {read(os.path.join(json_dir, 'date.txt')) or '?'}\n")
    print("Per stage: eager step time (median of 5, after 2 warm-up steps), "
          "the device memory the process used since its CUDA context "
          "(peak) against the program's arena (planned buffers + resident "
          "inputs) plus the runtime's fixed overhead (cuBLASLt workspace, "
          "scratch, NCCL, library state), and the comm stream's busy time in "
          "the profiled step (sends and receives, waiting for the peer "
          "included), split into NCCL groups and lone transfers.\n")
    print("| variant | stage | step ms | simulated ms | vs sim | arena MiB "
          "| fixed MiB | peak MiB | peak - arena - fixed MiB | comm busy ms "
          "| groups / lone send / lone recv ms | comm MiB "
          "| checksums vs none |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    base = {}
    for s in (0, 1):
        c = load(os.path.join(json_dir, f"none-s{s}.checksum.json"))
        base[s] = c.get("checksums") if isinstance(c.get("checksums"),
                                                   dict) else None
    pipeline = []
    for v in variants_in(json_dir, ".timing.json"):
        sim = sim_of(programs, v)
        steps = []
        for s in (0, 1):
            t = load(os.path.join(json_dir, f"{v}-s{s}.timing.json"))
            c = load(os.path.join(json_dir, f"{v}-s{s}.checksum.json"))
            if "error" in t and "step_ms" not in t:
                print(f"| {v} | {s} | error: {t['error']} |")
                continue
            step = t.get("step_ms", {}).get("eager", {}).get("median", 0.0)
            steps.append(step)
            simulated = sim.get("step_us", 0.0) / 1000
            m = t.get("memory", {})
            comm = t.get("streams", {}).get("comm", {})
            sums = c.get("checksums")
            if c.get("mode") == "dry-run":
                verdict = "dry run" if c.get("ok") else c.get("error", "?")
            elif not isinstance(sums, dict):
                verdict = c.get("error", "no run")
            elif v == "none":
                verdict = "reference" + ("" if c.get("stable", True) else
                                         " (unstable)")
            elif base.get(s) is None:
                verdict = "no reference"
            else:
                diff = [k for k in sums if base[s].get(k) != sums[k]]
                verdict = ("equal" if not diff and len(sums) == len(base[s])
                           else f"{len(diff)} of {len(sums)} differ")
            print(f"| {v} | {s} | {step:.2f} | {simulated:.2f} "
                  f"| {pct(step, simulated)} "
                  f"| {m.get('device_arena', 0) / MIB:.0f} "
                  f"| {m.get('fixed_overhead', 0) / MIB:.0f} "
                  f"| {m.get('peak_since_context', 0) / MIB:.0f} "
                  f"| {m.get('unaccounted', 0) / MIB:+.0f} "
                  f"| {comm.get('busy_ms', 0):.2f} | {p2p_split(t)} "
                  f"| {comm.get('bytes', 0) / MIB:.0f} | {verdict} |")
            if "error" in t:
                print(f"|   | {s} | error: {t['error']} |")
        if len(steps) == 2:
            pipeline.append((v, max(steps), sim.get("step_us", 0.0) / 1000))
    if pipeline:
        print("\nPipeline step (the slower stage) against the two programs "
              "simulated together, and against `none`:\n")
        print("| variant | step ms | simulated ms | vs sim | vs none (GPU) "
              "| vs none (sim) |")
        print("|---|---|---|---|---|---|")
        none = next((p for p in pipeline if p[0] == "none"), None)
        for v, step, simulated in pipeline:
            print(f"| {v} | {step:.2f} | {simulated:.2f} "
                  f"| {pct(step, simulated)} "
                  f"| {pct(step, none[1]) if none else '-'} "
                  f"| {pct(simulated, none[2]) if none else '-'} |")
    skipped = read(os.path.join(json_dir, "skipped.txt"))
    if skipped:
        print("\n" + skipped)
    return 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "dry":
        return dry(argv[2])
    if len(argv) >= 4 and argv[1] == "device":
        return device(argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
