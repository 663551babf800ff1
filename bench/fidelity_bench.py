#!/usr/bin/env python3
"""Fidelity of Lethe's time model: predicted vs measured steps on a GPU.

  fidelity_bench.py compile --out DIR [--graphs a,b] [--budgets 100,70,50,35]
      Compiles every corpus graph (graphs/graph_*.json) at each budget with
      `lethe compile --build` (100: the unplanned program, --policy none; a
      budget the planner cannot meet is compiled at the least one it can,
      as gpu_e2e.sh does). DIR/programs/NAME/ keeps what lethe compile wrote
      (step.mlir, step.cpp, plan.json, simulation.json with the
      predictions); DIR/gpu/ is what travels to the GPU machine:
      programs/NAME.cpp and manifest.json.

  fidelity_bench.py report --dir DIR --results RESULTS [--out FILE.md]
      RESULTS: the folder holding what bench/gpu_fidelity.sh device wrote
      to $OUT (fidelity-json.tar.gz, calibrated.json, device.txt). Each
      program is simulated again (lethe-opt --test-lethe-simulate-program)
      on three profiles: the card's shipped profile without the run-cost
      figures (the time model before issue 17), the shipped profile, and
      the profile lethe-calibrate measured in the same GPU call; eagerly and
      as a CUDA graph. Prints and writes the tables: predicted vs measured
      step, overhead (planned over unplanned, same graph), copy rates vs
      the profile, per-stream busy time vs simulated, and the issue's
      targets met or missed with the numbers.
"""
import argparse
import concurrent.futures as futures
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

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUDGETS = [100, 70, 50, 35]
# The figures issue 17 added to device profiles (DeviceProfile.h): without
# them a profile predicts as Lethe did before.
RUN_COST_FIELDS = [
    "d2h_fixed_us", "h2d_fixed_us", "host_d2h_gb_per_s", "host_h2d_gb_per_s",
    "host_both_gb_per_s", "matmul_slowdown_with_copies",
    "matmul_slowdown_with_both_copies", "memory_bound_slowdown_with_copies",
    "memory_bound_slowdown_with_both_copies", "copy_slowdown_with_matmul",
    "copy_slowdown_with_memory_bound", "host_launch_us", "graph_kernel_us",
    "graph_launch_us", "event_record_us", "wait_us", "graph_wait_us",
    "collective_fixed_us"]
STREAMS = ["compute", "d2h", "h2d", "comm"]


def bin_path(tool):
    build = os.environ.get("LETHE_BUILD_DIR", os.path.join(ROOT, "build"))
    return os.path.join(build, "bin", tool)


# --------------------------------------------------------------------------
# compile
# --------------------------------------------------------------------------

def compile_one(graph, budget, out, device, build=True):
    name = f"{graph}-{budget}"
    target = os.path.join(out, "programs", name)
    shutil.rmtree(target, ignore_errors=True)
    src = os.path.join(ROOT, "graphs", f"graph_{graph}.json")
    base = [bin_path("lethe"), "compile", src, "--device", device, "-o",
            target] + (["--build"] if build else [])
    # The unplanned program: no decisions, and a budget it always meets
    # (its packed arena can exceed the unplanned peak).
    args = base + (["--budget", "1000%", "--policy", "none"] if budget == 100
                   else ["--budget", f"{budget}%"])
    start = time.time()
    p = subprocess.run(args, capture_output=True, text=True)
    note = ""
    if p.returncode != 0:
        # An infeasible budget is a result: compile at the least one.
        m = re.search(r"below the least budget.*?\((\d+) B\)", p.stderr)
        if not m:
            return {"name": name, "graph": graph, "budget": budget,
                    "error": p.stderr.strip().splitlines()[-1:]}
        least = m.group(1)
        note = f"{budget}% infeasible; least budget {least} B"
        p = subprocess.run(base + ["--budget", least], capture_output=True,
                           text=True)
        if p.returncode != 0:
            return {"name": name, "graph": graph, "budget": budget,
                    "error": p.stderr.strip().splitlines()[-1:]}
    # The program compiled, as `lethe simulate --json` states it.
    with open(os.path.join(target, "simulation.json")) as f:
        plan = json.load(f)
    # The .so built here only shows the program builds; the GPU machine
    # builds its own.
    for so in glob.glob(os.path.join(target, "*.so")):
        os.remove(so)
    shutil.copy(os.path.join(target, "step.cpp"),
                os.path.join(out, "gpu", "programs", name + ".cpp"))
    return {"name": name, "graph": graph, "budget": budget, "note": note,
            "compile_s": round(time.time() - start, 2),
            "step_us": plan.get("step_us"),
            "graph_step_us": plan.get("graph_step_us"),
            "peak_bytes": plan.get("peak_bytes"),
            "arena_bytes": plan.get("arena_bytes"),
            "busy_us": plan.get("busy_us"), "counts": plan.get("counts")}


def compile_all(args):
    graphs = args.graphs.split(",") if args.graphs else sorted(
        os.path.basename(p)[len("graph_"):-len(".json")]
        for p in glob.glob(os.path.join(ROOT, "graphs", "graph_*.json")))
    budgets = [int(b) for b in args.budgets.split(",")]
    os.makedirs(os.path.join(args.out, "gpu", "programs"), exist_ok=True)
    jobs = [(g, b) for g in graphs for b in budgets]
    results = []
    with futures.ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda j: compile_one(j[0], j[1], args.out,
                                                args.device, args.build),
                          jobs):
            status = r.get("error") or r.get("note") or "ok"
            print(f"{r['name']:24} {r.get('compile_s', '-'):>6} s  "
                  f"step {r.get('step_us') or 0:10.1f} us  {status}",
                  flush=True)
            results.append(r)
    # A budget below the least one compiles the same program twice: run it
    # once on the GPU.
    seen = {}
    for r in results:
        if "error" in r:
            continue
        cpp = os.path.join(args.out, "gpu", "programs", r["name"] + ".cpp")
        with open(cpp, "rb") as f:
            key = (r["graph"], hash(f.read()))
        if key in seen:
            r["same_as"] = seen[key]
            os.remove(cpp)
        else:
            seen[key] = r["name"]
    manifest = {"device": args.device, "date": time.strftime("%Y-%m-%d"),
                "programs": results}
    for path in (os.path.join(args.out, "manifest.json"),
                 os.path.join(args.out, "gpu", "manifest.json")):
        with open(path, "w") as f:
            json.dump(manifest, f, indent=1)
    return 1 if any("error" in r for r in results) else 0


# --------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------

def load_results(path):
    """lethe-run reports by program name, and the other files of the call."""
    folder = path
    archive = os.path.join(path, "fidelity-json.tar.gz")
    tmp = None
    if os.path.exists(archive):
        tmp = tempfile.mkdtemp()
        with tarfile.open(archive) as t:
            t.extractall(tmp)
        folder = tmp
    runs = {}
    for p in glob.glob(os.path.join(folder, "*.timing.json")):
        name = os.path.basename(p)[: -len(".timing.json")]
        try:
            with open(p) as f:
                runs[name] = json.load(f)
        except (OSError, ValueError) as e:
            runs[name] = {"error": str(e)}
    extra = {}
    for key, file in (("device", "device.txt"), ("calibrated", "calibrated.json")):
        for where in (path, folder):
            p = os.path.join(where, file)
            if os.path.exists(p):
                extra[key] = p
                break
    return runs, extra


def bad_replay_floors(runs, factor=1.5):
    """Programs whose eager replay floor (lethe-run's `replay_floor_us`)
    lies over `factor` off the call's median: a floor measured while the
    host, not the GPU, set the pace (one H100 program read 18.4 us against
    1.8-2.1 for the other 63; each of its replays then ran up to 16 us
    short and its eager step 6% fast). Their eager steps say nothing of
    the model and are left out of its errors."""
    floors = {name: (run.get("device") or {}).get("replay_floor_us")
              for name, run in runs.items()}
    floors = {n: f for n, f in floors.items() if f and f > 0}
    if len(floors) < 3:
        return {}
    median = statistics.median(floors.values())
    return {n: f for n, f in floors.items()
            if f > factor * median or f * factor < median}


def card_of(device_text):
    m = re.search(r"h100|h200|a100", device_text.lower())
    return m.group(0) if m else None


def simulate(mlir, profile, graph_mode):
    """Step and busy time per stream of a program on a profile."""
    option = f"device={profile}" + (" graph=true" if graph_mode else "")
    p = subprocess.run([bin_path("lethe-opt"), mlir,
                        f"--test-lethe-simulate-program={option}",
                        "-o", os.devnull], capture_output=True, text=True)
    if p.returncode != 0:
        return None
    result = {"busy_us": {}}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "step_us":
            result["step_us"] = float(parts[1])
        elif len(parts) >= 2 and parts[0].startswith("busy_us."):
            result["busy_us"][parts[0][len("busy_us."):]] = float(parts[1])
    return result if "step_us" in result else None


def profile_without_run_costs(profile_path, folder):
    with open(profile_path) as f:
        profile = json.load(f)
    for field in RUN_COST_FIELDS:
        profile.pop(field, None)
    profile["name"] = profile.get("name", "profile") + "-no-run-costs"
    out = os.path.join(folder, os.path.basename(profile_path))
    with open(out, "w") as f:
        json.dump(profile, f)
    return out


def pct(a, b):
    return 100.0 * (a / b - 1.0) if a and b else None


def fmt(value, spec="+.1f", unit=""):
    return "-" if value is None else f"{value:{spec}}{unit}"


def report(args):
    with open(os.path.join(args.dir, "manifest.json")) as f:
        manifest = json.load(f)
    runs, extra = load_results(args.results)
    device_text = open(extra["device"]).read().strip() if "device" in extra else "?"
    card = card_of(device_text) or manifest["device"]
    shipped = os.path.join(ROOT, "devices", f"{card}.json")
    if not os.path.exists(shipped):
        shipped = os.path.join(ROOT, "devices", f"{manifest['device']}.json")
    tmp = tempfile.mkdtemp()
    profiles = {"old": profile_without_run_costs(shipped, tmp),
                "shipped": shipped}
    if "calibrated" in extra:
        profiles["calibrated"] = extra["calibrated"]
    with open(profiles.get("calibrated", shipped)) as f:
        rates = json.load(f)

    programs = [p for p in manifest["programs"] if "error" not in p]
    jobs = [(p["name"], model, mode) for p in programs
            for model in profiles for mode in (False, True)]

    def sim(job):
        name, model, mode = job
        mlir = os.path.join(args.dir, "programs", name, "step.mlir")
        return job, simulate(mlir, profiles[model], mode)

    predicted = {}
    with futures.ThreadPoolExecutor(args.jobs) as pool:
        for (name, model, mode), r in pool.map(sim, jobs):
            predicted[(name, model, "graph" if mode else "eager")] = r

    bad_floors = bad_replay_floors(runs)
    rows = []
    for p in programs:
        run = runs.get(p.get("same_as", p["name"]), {})
        # lethe-run's timing report: step_ms.{eager,graph}.median.
        steps = run.get("step_ms") or {}
        measured = {m: (steps.get(m) or {}).get("median")
                    for m in ("eager", "graph")}
        if p.get("same_as", p["name"]) in bad_floors:
            measured["eager"] = None
        rows.append({"program": p, "run": run,
                     "eager_ms": measured["eager"], "graph_ms": measured["graph"]})
    by_name = {r["program"]["name"]: r for r in rows}

    out = []
    w = out.append
    w("# Time-model fidelity: predicted vs measured steps (issue 17)\n")
    w(f"Card: {device_text}; programs compiled for `{manifest['device']}` on "
      f"{manifest['date']}; report written {time.strftime('%Y-%m-%d')}. "
      "Command: `bench/gpu_fidelity.sh compile`, then on the GPU "
      "`bash .fidelity/gpu/gpu_fidelity.sh device .fidelity/gpu`, then "
      "`bench/gpu_fidelity.sh report .fidelity RESULTS`.\n")
    w("Models: **old** = the card's shipped profile without the run-cost "
      "figures (Lethe before issue 17); **shipped** = `devices/"
      f"{os.path.basename(shipped)}`; **calibrated** = what lethe-calibrate "
      "measured in the same GPU call. Measured: lethe-run medians (eager "
      "steps, CUDA-graph replays).\n")

    def model_errors(model, mode):
        """Step errors (%) of unplanned programs, overhead errors (points)."""
        steps, overheads = [], []
        for r in rows:
            p = r["program"]
            meas = r[f"{mode}_ms"]
            pred = predicted.get((p["name"], model, mode))
            if not meas or not pred:
                continue
            if p["budget"] == 100:
                steps.append(pct(pred["step_us"] / 1000, meas))
                continue
            base = by_name.get(f"{p['graph']}-100")
            base_pred = predicted.get((f"{p['graph']}-100", model, mode))
            if not base or not base[f"{mode}_ms"] or not base_pred:
                continue
            overheads.append(pct(pred["step_us"], base_pred["step_us"]) -
                             pct(meas, base[f"{mode}_ms"]))
        return steps, overheads

    w("## Targets\n")
    w("| model | launch | unplanned step error, median / worst | "
      "overhead error (points), median / worst | programs |")
    w("|---|---|---|---|---|")
    for model in profiles:
        for mode in ("eager", "graph"):
            steps, overheads = model_errors(model, mode)
            worst = lambda xs: max(xs, key=abs) if xs else None
            med = lambda xs: statistics.median(xs) if xs else None
            w(f"| {model} | {mode} | {fmt(med(steps), '+.1f', '%')} / "
              f"{fmt(worst(steps), '+.1f', '%')} | "
              f"{fmt(med(overheads))} / {fmt(worst(overheads))} | "
              f"{len(steps)} + {len(overheads)} |")
    w("\nTargets (issue 17): overhead within 1.5 points on every program; "
      "unplanned step within 3% (CUDA graph) and 5% (eager). A worst value "
      "outside them is a missed target.\n")
    if bad_floors:
        floors = ", ".join(f"{n} {f:.2f} us" for n, f in sorted(bad_floors.items()))
        w(f"Eager steps left out (a replay floor over 1.5x off the call's "
          f"median, measured while the host set the pace): {floors}; their "
          "graph steps are kept.\n")

    w("## Steps and overheads\n")
    w("Overhead: step over the same graph's unplanned step. Predicted "
      "columns: calibrated model (shipped where none was measured).\n")
    best = "calibrated" if "calibrated" in profiles else "shipped"
    w("| program | budget | eager ms | pred. | old pred. | graph ms | pred. "
      "| overhead eager meas. / pred. / old | overhead graph meas. / pred. |")
    w("|---|---|---|---|---|---|---|---|---|")
    ordered = sorted(rows, key=lambda r: (r["program"]["graph"],
                                          -r["program"]["budget"]))
    for r in ordered:
        p = r["program"]
        unplanned = f"{p['graph']}-100"

        def pred(model, mode, name=p["name"]):
            x = predicted.get((name, model, mode))
            return x["step_us"] / 1000 if x else None
        base = by_name.get(unplanned)

        def overhead(mode, model=None):
            if not base:
                return None
            if model is None:
                return pct(r[f"{mode}_ms"], base[f"{mode}_ms"])
            return pct(pred(model, mode), pred(model, mode, unplanned))
        budget = f"{p['budget']}%" + (" (least)" if p.get("note") else "")
        if p["budget"] == 100:
            budget = "unplanned"
        floor = bad_floors.get(p.get("same_as", p["name"]))
        err = ("" if r["eager_ms"] else
               f" (eager left out: replay floor {floor:.1f} us)" if floor else
               f" ({(r['run'].get('error') or 'not run')[:40]})")
        w(f"| {p['graph']}{err} | {budget} | {fmt(r['eager_ms'], '.2f')} | "
          f"{fmt(pred(best, 'eager'), '.2f')} | {fmt(pred('old', 'eager'), '.2f')} | "
          f"{fmt(r['graph_ms'], '.2f')} | {fmt(pred(best, 'graph'), '.2f')} | "
          f"{fmt(overhead('eager'), '+.1f', '%')} / "
          f"{fmt(overhead('eager', best), '+.1f', '%')} / "
          f"{fmt(overhead('eager', 'old'), '+.1f', '%')} | "
          f"{fmt(overhead('graph'), '+.1f', '%')} / "
          f"{fmt(overhead('graph', best), '+.1f', '%')} |")

    w("\n## Copy rates and stream busy time (profiled step)\n")
    w(f"Profile rates ({os.path.basename(profiles.get('calibrated', shipped))}): "
      f"D2H {rates.get('d2h_gb_per_s')} GB/s, H2D {rates.get('h2d_gb_per_s')} "
      "GB/s. Busy time: measured in lethe-run's profiled step (per-op "
      "events) / simulated eagerly on the same profile.\n")
    w("| program | D2H GB/s | H2D GB/s | compute busy ms meas. / sim. | "
      "D2H busy ms | H2D busy ms |")
    w("|---|---|---|---|---|---|")
    for r in ordered:
        p = r["program"]
        if p["budget"] == 100:
            continue
        streams = r["run"].get("streams") or {}
        sim = predicted.get((p["name"], best, "eager")) or {"busy_us": {}}
        def busy(s):
            m = (streams.get(s) or {}).get("busy_ms")
            e = sim["busy_us"].get(s)
            return f"{fmt(m, '.2f')} / {fmt(e / 1000 if e is not None else None, '.2f')}"
        rate = lambda s: fmt((streams.get(s) or {}).get("gb_per_s"), ".1f")
        w(f"| {p['name']} | {rate('d2h')} | {rate('h2d')} | {busy('compute')} "
          f"| {busy('d2h')} | {busy('h2d')} |")
    missing = [p["name"] for p in programs
               if p.get("same_as", p["name"]) not in runs]
    failed = [p["name"] for p in manifest["programs"] if "error" in p]
    if missing or failed:
        w(f"\nNot run on the GPU: {', '.join(missing) or 'none'}. "
          f"Not compiled: {', '.join(failed) or 'none'}.")
    text = "\n".join(out) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    shutil.rmtree(tmp, ignore_errors=True)
    return 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    c = sub.add_parser("compile")
    c.add_argument("--out", default=".fidelity")
    c.add_argument("--graphs", default="")
    c.add_argument("--budgets", default=",".join(map(str, BUDGETS)))
    c.add_argument("--device", default="h200")
    c.add_argument("--jobs", type=int, default=2)
    c.add_argument("--no-build", dest="build", action="store_false",
                   help="skip lethe compile --build (the GPU machine builds "
                        "the programs anyway)")
    r = sub.add_parser("report")
    r.add_argument("--dir", default=".fidelity")
    r.add_argument("--results", required=True)
    r.add_argument("--out", default="")
    r.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    return compile_all(args) if args.command == "compile" else report(args)


if __name__ == "__main__":
    sys.exit(main())
