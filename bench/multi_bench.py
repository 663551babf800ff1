#!/usr/bin/env python3
"""Two ranks of one host offloading at once (issue 17, deliverable 4):
predicted vs measured step with the shared-host model on and off.

  multi_bench.py compile --out DIR [--graph gpt2] [--device h200]
                         [--budget 50] [--microbatches 8]
      Two parallel forms of the graph, each with the shared-host model on
      (lethe.ranks_per_host = 2: the two ranks share the host's copy
      bandwidth, DeviceProfile.h) and off (= 1: each rank plans as if alone
      on its host): FSDP over world 2 (lethe-insert-fsdp-collectives) and a
      1F1B pair (lethe-expand-pipeline-schedule, 2 stages). Per form, the
      programs
        none      unplanned (policy none): the overhead's reference
        auto      policy auto at --budget % of each program's unplanned peak
                  (the least budget where that is infeasible)
        offload   policy offload-all: every offloadable activation copied,
                  the most host traffic the plan can make
      compiled with the model on and off (`none` once: it copies nothing),
      by `lethe compile` on --device. Each program is predicted with the
      model on and off (its function's lethe.ranks_per_host set to 2 and
      1): an FSDP rank by the simulator, a pipeline pair by the two stage
      programs simulated together (lethe-parallel-bench --programs).
      DIR/programs/NAME/ keeps what lethe compile wrote; DIR/gpu/ travels
      to the GPU machine: programs/NAME.cpp and manifest.json. Programs
      identical to an earlier one are not run again (`same_as`).

  multi_bench.py runs MANIFEST
      (GPU machine) the runs of the device half, one line each:
      NAME RANK0.cpp RANK1.cpp.

  multi_bench.py report --dir DIR --results RESULTS [--out FILE.md]
      RESULTS: the folder bench/gpu_multi.sh device wrote to $OUT
      (multi-json.tar.gz, calibrated.json, device.txt). Every program is
      predicted again, model on and off, on the profile lethe-calibrate
      measured on the same two GPUs in the same call (its host_* figures
      are that host's); measured step = the slower rank's eager median.
      Prints and writes: predicted vs measured step and overhead, copy
      rates per rank, and the issue's target (two ranks offloading at once:
      measured step within 5% of predicted) met or missed with the numbers.
"""
import argparse
import glob
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time

from fidelity_bench import bin_path, card_of, fmt, pct, simulate

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MIB = 2**20
# The issue's target for two ranks offloading at once.
TARGET_PCT = 5.0
RANKS_ATTR = re.compile(r"lethe\.ranks_per_host = \d+ : i64")
# Shared-host model on: both ranks of the pair on one host; off: alone.
MODELS = {"on": 2, "off": 1}


def run(args, **kw):
    return subprocess.run(args, capture_output=True, text=True, **kw)


def with_ranks_per_host(mlir, ranks, folder):
    """A copy of program `mlir` whose function says `ranks` share the host."""
    with open(mlir) as f:
        text = f.read()
    if not RANKS_ATTR.search(text):
        raise RuntimeError(f"{mlir} records no lethe.ranks_per_host")
    out = os.path.join(folder, f"{os.path.basename(os.path.dirname(mlir))}"
                       f"-{os.path.basename(mlir)[:-5]}-k{ranks}.mlir")
    with open(out, "w") as f:
        f.write(RANKS_ATTR.sub(f"lethe.ranks_per_host = {ranks} : i64", text))
    return out


def predict_pair(stage_mlirs, profile, folder):
    """The pipeline step of the stage programs simulated together (us)."""
    out = os.path.join(folder, "pair.json")
    p = run([bin_path("lethe-parallel-bench"),
             "--programs=" + ",".join(stage_mlirs),
             f"--pipeline-device={profile}", f"--json={out}"])
    if p.returncode != 0:
        return None
    with open(out) as f:
        return json.load(f)["step_us"]


def predict(program, folder, profile):
    """Step (us) of `program` (a manifest entry) with the model on and off."""
    result = {}
    for model, ranks in MODELS.items():
        mlirs = [with_ranks_per_host(m, ranks, folder)
                 for m in program["mlir"]]
        if program["form"] == "fsdp":
            sim = simulate(mlirs[0], profile, graph_mode=False)
            result[model] = sim and sim["step_us"]
        else:
            result[model] = predict_pair(mlirs, profile, folder)
    return result


# --------------------------------------------------------------------------
# compile
# --------------------------------------------------------------------------

def lethe_compile(src, target, device, policy, budget):
    """lethe compile at `budget` (a string), or at the least budget when
    that is infeasible; returns (simulation.json: the program compiled, as
    `lethe simulate --json` states it, note) or raises."""
    shutil.rmtree(target, ignore_errors=True)
    base = [bin_path("lethe"), "compile", src, "--device", device,
            "--policy", policy, "-o", target]
    p = run(base + ["--budget", budget])
    note = ""
    if p.returncode != 0:
        m = re.search(r"below the least budget.*?\((\d+) B\)", p.stderr)
        if not m:
            raise RuntimeError(p.stderr.strip()[-400:])
        note = f"{budget} infeasible; least budget {m.group(1)} B"
        p = run(base + ["--budget", m.group(1)])
        if p.returncode != 0:
            raise RuntimeError(p.stderr.strip()[-400:])
    with open(os.path.join(target, "simulation.json")) as f:
        return json.load(f), note


def parallel_forms(args, work):
    """The FSDP and pipeline forms, model on and off: {(form, model):
    [mlir per rank program]}."""
    graph = os.path.join(ROOT, "graphs", f"graph_{args.graph}.json")
    imported = os.path.join(work, "graph.mlir")
    p = run([bin_path("lethe-translate"), "--import-graph-json", graph,
             "-o", imported])
    if p.returncode != 0:
        raise RuntimeError(p.stderr)
    forms = {}
    for model, ranks in MODELS.items():
        fsdp = os.path.join(work, f"fsdp-{model}.mlir")
        passes = [f"--lethe-insert-fsdp-collectives=world=2 "
                  f"ranks-per-host={ranks}"]
        p = run([bin_path("lethe-opt"), imported] + passes + ["-o", fsdp])
        if p.returncode != 0:
            raise RuntimeError(p.stderr)
        forms[("fsdp", model)] = [fsdp]
        stages = []
        for s in (0, 1):
            stage = os.path.join(work, f"pp-{model}-s{s}.mlir")
            p = run([bin_path("lethe-opt"), imported,
                     f"--lethe-expand-pipeline-schedule=stages=2 stage={s} "
                     f"microbatches={args.microbatches} "
                     f"ranks-per-host={ranks}", "-o", stage])
            if p.returncode != 0:
                raise RuntimeError(p.stderr)
            stages.append(stage)
        forms[("pp", model)] = stages
    return forms


def compile_all(args):
    out = args.out
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(os.path.join(out, "gpu", "programs"))
    work = os.path.join(out, "work")
    os.makedirs(work)
    forms = parallel_forms(args, work)
    jobs = []
    for form in ("fsdp", "pp"):
        jobs.append((form, "none", "on", "none", "1000%"))
        for model in MODELS:
            jobs.append((form, "auto", model, "auto", f"{args.budget}%"))
            jobs.append((form, "offload", model, "offload-all", "1000%"))
    programs, seen, failed = [], {}, 0
    for form, variant, model, policy, budget in jobs:
        name = f"{form}-{variant}" + ("" if variant == "none" else f"-{model}")
        entry = {"name": name, "form": form, "variant": variant,
                 "model": model, "policy": policy, "budget": budget,
                 "mlir": [], "ranks": [], "notes": []}
        start = time.time()
        try:
            for rank, src in enumerate(forms[(form, model)]):
                rank_name = f"{name}-r{rank}" if form == "pp" else name
                target = os.path.join(out, "programs", rank_name)
                plan, note = lethe_compile(src, target, args.device, policy,
                                           budget)
                if note:
                    entry["notes"].append(f"rank {rank}: {note}")
                entry["mlir"].append(os.path.join(target, "step.mlir"))
                entry["ranks"].append({
                    "program": rank_name, "step_us": plan.get("step_us"),
                    "peak_bytes": plan.get("peak_bytes"),
                    "arena_bytes": plan.get("arena_bytes"),
                    "busy_us": plan.get("busy_us"),
                    "counts": plan.get("counts")})
        except RuntimeError as e:
            entry["error"] = str(e)
            failed = 1
            print(f"{name:22} failed: {str(e).splitlines()[-1:]}")
            programs.append(entry)
            continue
        entry["compile_s"] = round(time.time() - start, 1)
        # A program identical to an earlier one (every rank's C++) runs once.
        key = tuple(open(os.path.join(os.path.dirname(m), "step.cpp"),
                         "rb").read() for m in entry["mlir"])
        key = (form, hash(key))
        if key in seen:
            entry["same_as"] = seen[key]
        else:
            seen[key] = name
            for m, r in zip(entry["mlir"], entry["ranks"]):
                shutil.copy(os.path.join(os.path.dirname(m), "step.cpp"),
                            os.path.join(out, "gpu", "programs",
                                         r["program"] + ".cpp"))
        with tempfile.TemporaryDirectory() as tmp:
            entry["predicted_us"] = predict(entry, tmp, args.device_path)
        entry["mlir"] = [os.path.relpath(m, out) for m in entry["mlir"]]
        programs.append(entry)
        pred = entry["predicted_us"]
        print(f"{name:22} {entry['compile_s']:6.1f} s  predicted step "
              f"{fmt(pred.get('on') and pred['on'] / 1000, '.2f')} ms (on) "
              f"{fmt(pred.get('off') and pred['off'] / 1000, '.2f')} ms (off)"
              f"{'  = ' + entry['same_as'] if 'same_as' in entry else ''}"
              f"{'  ' + '; '.join(entry['notes']) if entry['notes'] else ''}",
              flush=True)
    shutil.rmtree(work)
    manifest = {"graph": args.graph, "device": args.device,
                "date": time.strftime("%Y-%m-%d"), "budget": args.budget,
                "microbatches": args.microbatches, "programs": programs}
    for path in (os.path.join(out, "manifest.json"),
                 os.path.join(out, "gpu", "manifest.json")):
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)
    return failed


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def load_runs(results):
    """lethe-run reports by file name (NAME.rR.json), and the call's files."""
    folder = results
    archive = os.path.join(results, "multi-json.tar.gz")
    if os.path.exists(archive):
        folder = tempfile.mkdtemp()
        with tarfile.open(archive) as t:
            t.extractall(folder)
    runs = {}
    for path in glob.glob(os.path.join(folder, "*.json")):
        try:
            with open(path) as f:
                runs[os.path.basename(path)[:-len(".json")]] = json.load(f)
        except (OSError, ValueError) as e:
            runs[os.path.basename(path)[:-len(".json")]] = {"error": str(e)}
    extra = {}
    for key, file in (("device", "device.txt"),
                      ("calibrated", "calibrated.json"), ("log", "log.txt")):
        for where in (results, folder):
            if os.path.exists(os.path.join(where, file)):
                extra[key] = os.path.join(where, file)
                break
    return runs, extra


def measured(program, runs):
    """The pair's measured step: the slower rank's eager median (ms), and
    per rank the D2H / H2D rates; None when a rank has no result."""
    ranks = []
    name = program.get("same_as", program["name"])
    for rank in range(2):
        d = runs.get(f"{name}.r{rank}")
        if not d or "step_ms" not in d:
            return {"error": (d or {}).get("error", "no report")}
        ranks.append(d)
    steps = [d["step_ms"]["eager"]["median"] for d in ranks]

    def rate(stream):
        rates = [d.get("streams", {}).get(stream, {}).get("gb_per_s", 0)
                 for d in ranks]
        return statistics.mean(rates) if any(rates) else None
    return {"step_ms": max(steps), "spread_ms": max(steps) - min(steps),
            "d2h": rate("d2h"), "h2d": rate("h2d"),
            "offloaded_mib": sum(d.get("counts", {}).get("bytes_d2h", 0)
                                 for d in ranks) / MIB}


def report(args):
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    runs, extra = load_runs(args.results)
    device = (open(extra["device"]).read().strip().splitlines() or ["?"])[0] \
        if "device" in extra else "?"
    compile_profile = resolve_device(manifest["device"])
    profiles = {"compile": compile_profile}
    if "calibrated" in extra:
        profiles["calibrated"] = extra["calibrated"]
    programs = [p for p in manifest["programs"] if "error" not in p]
    tmp = tempfile.mkdtemp()
    for p in programs:
        p["mlir"] = [os.path.join(args.dir, m) for m in p["mlir"]]
        p["pred"] = {"compile": p["predicted_us"]}
        if "calibrated" in profiles:
            p["pred"]["calibrated"] = predict(p, tmp, profiles["calibrated"])
        p["meas"] = measured(p, runs)
    shutil.rmtree(tmp)

    lines = []
    say = lines.append
    say("# Two ranks of one host offloading at once: predicted vs measured\n")
    say(f"Graph `{manifest['graph']}`, compiled {manifest['date']} on profile "
        f"`{manifest['device']}` (auto at {manifest['budget']}% of each "
        f"program's unplanned peak; pipeline: 2 stages, 1F1B, "
        f"{manifest['microbatches']} micro-batches). Card: {device}. "
        "Measured: eager step, the slower rank's median (lethe-run, both "
        "ranks at once, one process per GPU). Predicted with the shared-host "
        "model on (lethe.ranks_per_host = 2) and off (= 1), on the compile "
        "profile and on the profile lethe-calibrate measured on these two "
        "GPUs in the same call"
        + ("" if "calibrated" in profiles else " (missing from this run)")
        + ". `model` is how the program was planned. Op and collective times "
        "are those the program carries from compile time (the graph's "
        "measured times; collectives by the compile profile's ring model): "
        "the calibrated profile changes the copy, contention, launch and "
        "wait terms.\n")
    cal = None
    if "calibrated" in profiles:
        with open(profiles["calibrated"]) as f:
            cal = json.load(f)
        say("Calibrated host figures: D2H {0} / H2D {1} GB/s alone, host "
            "{2} / {3} / {4} GB/s (D2H / H2D / both, all GPUs together), "
            "duplex {5}.\n".format(*(cal.get(k, "-") for k in (
                "d2h_gb_per_s", "h2d_gb_per_s", "host_d2h_gb_per_s",
                "host_h2d_gb_per_s", "host_both_gb_per_s", "duplex_factor"))))
    say("| program | model | offloaded MiB | measured ms | "
        "compile on | compile off | calibrated on | vs measured | "
        "calibrated off | vs measured | D2H / H2D GB/s per rank |")
    say("|---|---|---|---|---|---|---|---|---|---|---|")
    misses, checked = [], 0
    for p in programs:
        m = p["meas"]
        step = m.get("step_ms")
        pc = p["pred"]["compile"]
        pk = p["pred"].get("calibrated", {})

        def ms(us):
            return fmt(us and us / 1000, ".2f")

        def err(us):
            return fmt(pct(step, us / 1000) if step and us else None, "+.1f",
                       "%")
        rates = ("-" if not step else
                 f"{fmt(m['d2h'], '.1f')} / {fmt(m['h2d'], '.1f')}")
        say(f"| {p['name']} | {p['model'] if p['variant'] != 'none' else '-'}"
            f" | {fmt(m.get('offloaded_mib'), '.0f')} | "
            f"{fmt(step, '.2f') if step else m.get('error', '-')} | "
            f"{ms(pc.get('on'))} | {ms(pc.get('off'))} | {ms(pk.get('on'))} | "
            f"{err(pk.get('on'))} | {ms(pk.get('off'))} | {err(pk.get('off'))}"
            f" | {rates} |")
        if step and pk.get("on") and p["variant"] != "none" and \
                m.get("offloaded_mib"):
            checked += 1
            gap = abs(pct(step, pk["on"] / 1000))
            if gap > TARGET_PCT:
                misses.append(f"{p['name']} {gap:.1f}%")
    say("\nOverhead over the unplanned program of the same form (measured; "
        "predicted on the calibrated profile, model on / off):\n")
    say("| program | measured | predicted on | predicted off |")
    say("|---|---|---|---|")
    for p in programs:
        if p["variant"] == "none":
            continue
        base = next((q for q in programs if q["form"] == p["form"]
                     and q["variant"] == "none"), None)
        if not base:
            continue
        pk = p["pred"].get("calibrated", p["pred"]["compile"])
        bk = base["pred"].get("calibrated", base["pred"]["compile"])
        say(f"| {p['name']} | "
            f"{fmt(pct(p['meas'].get('step_ms'), base['meas'].get('step_ms')), '+.1f', '%')} | "
            f"{fmt(pct(pk.get('on'), bk.get('on')), '+.1f', '%')} | "
            f"{fmt(pct(pk.get('off'), bk.get('off')), '+.1f', '%')} |")
    verdict = ("not checked (no offloading program ran)" if not checked
               else f"met on {checked - len(misses)} of {checked} "
               "offloading programs" + (f"; missed on {', '.join(misses)}"
                                         if misses else ""))
    say("\nTarget (issue 17): two ranks offloading at once, measured step "
        f"within {TARGET_PCT:.0f}% of predicted (calibrated profile, model "
        f"on): {verdict}.")
    errors = [p["name"] + ": " + str(p["error"])[:200]
              for p in manifest["programs"] if "error" in p]
    if errors:
        say("\nNot compiled: " + "; ".join(errors))
    if "log" in extra:
        say("\nDevice log:\n\n```\n" + open(extra["log"]).read().strip()
            + "\n```")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def run_list(args):
    """The device half's runs, one line each: NAME RANK0.cpp RANK1.cpp
    (FSDP: both ranks run the same program)."""
    with open(args.manifest) as f:
        manifest = json.load(f)
    order = {"none": 0, "offload": 1, "auto": 2}
    todo = [p for p in manifest["programs"]
            if "error" not in p and "same_as" not in p]
    # Unplanned first (every overhead needs its form's), the most copies next.
    todo.sort(key=lambda p: (order.get(p["variant"], 3), p["form"],
                             p["model"]))
    for p in todo:
        cpps = [r["program"] + ".cpp" for r in p["ranks"]]
        if len(cpps) == 1:
            cpps *= 2
        print(p["name"], *cpps)
    return 0


def resolve_device(name):
    """A built-in profile's file, or the path given."""
    path = os.path.join(ROOT, "devices", f"{name}.json")
    return path if os.path.exists(path) else name


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("compile")
    c.add_argument("--out", required=True)
    c.add_argument("--graph", default="gpt2")
    c.add_argument("--device", default="h200")
    c.add_argument("--budget", type=int, default=50)
    c.add_argument("--microbatches", type=int, default=8)
    r = sub.add_parser("report")
    r.add_argument("--dir", required=True)
    r.add_argument("--results", required=True)
    r.add_argument("--out")
    ls = sub.add_parser("runs")
    ls.add_argument("manifest")
    args = parser.parse_args()
    if args.cmd == "runs":
        return run_list(args)
    if args.cmd == "compile":
        args.device_path = resolve_device(args.device)
        return compile_all(args)
    return report(args)


if __name__ == "__main__":
    sys.exit(main())
