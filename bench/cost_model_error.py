#!/usr/bin/env python3
"""How far the cost model is from measured op times.

For each graph: import it (lethe-translate --import-graph-json), annotate it
twice with lethe-annotate-costs (once keeping the measured times, once with
overwrite=true, which drops them and models every op), and compare the
modelled time of every op with its measured one. Prints, per graph:

- a table per op kind: count, measured µs sum, modelled µs sum, error of the
  sum, median |error| per op, cost source;
- totals for the forward, backward and whole step;
- the matmul / convolution / attention subset (the ops with an analytic
  formula) against the rest.

Usage: bench/cost_model_error.py [--device h200] [--roofline] [--build build]
                                 [--markdown FILE] [GRAPH.json ...]
--roofline drops the profile's kernel_efficiency (every kernel at the peak)
to show what the measured efficiencies change.
Defaults to the bundled graphs/graph_gpt2.json and graphs/graph_resnet50.json.
The model's constants come from the device profile only: this script never
fits anything to the graphs.
"""
import argparse
import datetime
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

NODE = re.compile(r'lethe\.(node "(?P<kind>[^"]+)"|collective (?P<ckind>\w+))'
                  r'.*? (?P<phase>fwd|bwd|opt)\b')
TIME = re.compile(r'\btime_us = (?P<t>[-+0-9.eE]+) : f64')
# The typed attribute (#lethe<cost_source measured>); the quoted string of
# older builds is read too.
SOURCE = re.compile(
    r'lethe\.cost_source = (?:#lethe<cost_source |")(?P<s>\w+)[">]')


def run(cmd):
    result = subprocess.run(cmd, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{result.stderr}")
    return result


def ops_of(mlir_text):
    """(kind, phase, time_us, source) of every node and collective, in order."""
    ops = []
    for line in mlir_text.splitlines():
        match = NODE.search(line)
        if not match:
            continue
        kind = match["kind"] or "lethe.collective." + match["ckind"]
        time = TIME.search(line)
        source = SOURCE.search(line)
        ops.append((kind, match["phase"],
                    float(time["t"]) if time else None,
                    source["s"] if source else None))
    return ops


def rel_error(model, measured):
    return abs(model - measured) / measured if measured > 0 else 0.0


def pct(x):
    return f"{100 * x:.1f}%"


def signed_pct(model, measured):
    if measured <= 0:
        return "n/a"
    return f"{100 * (model - measured) / measured:+.1f}%"


def table(rows, header):
    widths = [max(len(str(r[i])) for r in rows + [header])
              for i in range(len(header))]
    def line(r):
        return "| " + " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w)
                                 for i, (c, w) in enumerate(zip(r, widths))) + " |"
    out = [line(header),
           "|" + "|".join(("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1))
                          for i, w in enumerate(widths)) + "|"]
    out += [line(r) for r in rows]
    return "\n".join(out)


def summarize(pairs):
    """pairs: list of (measured, model). -> count, sums, sum error, median."""
    measured = sum(p[0] for p in pairs)
    model = sum(p[1] for p in pairs)
    median = statistics.median(rel_error(p[1], p[0]) for p in pairs) \
        if pairs else 0.0
    return len(pairs), measured, model, median


def analyse(graph, device, build):
    name = os.path.basename(graph)
    with tempfile.TemporaryDirectory() as tmp:
        imported = os.path.join(tmp, "graph.mlir")
        run([os.path.join(build, "bin", "lethe-translate"),
             "--import-graph-json", graph, "-o", imported])
        opt = os.path.join(build, "bin", "lethe-opt")
        measured_text = run([opt, imported,
                             f"--lethe-annotate-costs=device={device}"]).stdout
        # The kinds with no formula are lethe-annotate-costs' missed
        # remarks, printed when asked for.
        modelled = run([opt, imported,
                        f"--lethe-annotate-costs=device={device} "
                        "overwrite=true",
                        "--remarks-filter=lethe-annotate-costs",
                        "--remark-format=emitRemark"])
    measured_ops = ops_of(measured_text)
    model_ops = ops_of(modelled.stdout)
    assert len(measured_ops) == len(model_ops), "op lists differ"

    records = []  # kind, phase, measured, model, source
    unmeasured = 0
    for (kind, phase, meas, meas_src), (_, _, model, src) in zip(measured_ops,
                                                                  model_ops):
        if meas_src != "measured" or meas is None:
            unmeasured += 1
            continue
        records.append((kind, phase, meas, model, src))

    out = [f"### {name} (device `{device}`)", ""]
    out.append(f"{len(records)} ops with a measured time"
               + (f"; {unmeasured} without, left out" if unmeasured else "")
               + ". Error = (modelled − measured) / measured.")
    remarks = [l for l in modelled.stderr.splitlines() if "remark:" in l]
    out.append(f"Kinds with no formula and not known memory-bound "
               f"(remarked): {len(remarks)}.")
    out.append("")

    by_kind = {}
    for kind, phase, meas, model, src in records:
        by_kind.setdefault(kind, []).append((meas, model, src))
    rows = []
    for kind, items in sorted(by_kind.items(),
                              key=lambda kv: -sum(i[0] for i in kv[1])):
        n, meas, model, median = summarize([(i[0], i[1]) for i in items])
        sources = "/".join(sorted({i[2] for i in items}))
        rows.append((kind.removeprefix("aten."), n, f"{meas:.1f}",
                     f"{model:.1f}", signed_pct(model, meas), pct(median),
                     sources))
    out.append(table(rows, ("op kind", "count", "measured µs", "modelled µs",
                            "sum error", "median abs error", "source")))
    out.append("")

    def group_row(label, selected):
        n, meas, model, median = summarize([(r[2], r[3]) for r in selected])
        return (label, n, f"{meas:.1f}", f"{model:.1f}",
                signed_pct(model, meas), pct(median))

    rows = [group_row("forward", [r for r in records if r[1] == "fwd"]),
            group_row("backward", [r for r in records if r[1] != "fwd"]),
            group_row("step", records),
            group_row("matmul / conv / attention (analytic)",
                      [r for r in records if r[4] == "analytic"]),
            group_row("everything else (bandwidth, views)",
                      [r for r in records if r[4] != "analytic"])]
    out.append(table(rows, ("subset", "ops", "measured µs", "modelled µs",
                            "sum error", "median abs error")))
    out.append("")

    worst = sorted(records, key=lambda r: -abs(r[3] - r[2]))[:8]
    rows = [(r[0].removeprefix("aten."), r[1], f"{r[2]:.1f}", f"{r[3]:.1f}",
             signed_pct(r[3], r[2])) for r in worst]
    out.append("Largest absolute misses:")
    out.append("")
    out.append(table(rows, ("op kind", "phase", "measured µs", "modelled µs",
                            "error")))
    out.append("")
    return "\n".join(out)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("graphs", nargs="*")
    parser.add_argument("--device", default="h200")
    parser.add_argument("--build", default=os.path.join(ROOT, "build"))
    parser.add_argument("--markdown", help="also write the report here")
    parser.add_argument("--roofline", action="store_true",
                        help="ignore the profile's kernel efficiencies")
    args = parser.parse_args()
    device = args.device
    tmp = None
    if args.roofline:
        path = os.path.join(ROOT, "devices", device + ".json")
        if not os.path.exists(path):
            path = device
        with open(path) as f:
            profile = json.load(f)
        profile.pop("kernel_efficiency", None)
        profile.get("notes", {}).pop("kernel_efficiency", None)
        tmp = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
        json.dump(profile, tmp)
        tmp.close()
        device = tmp.name
    graphs = args.graphs or [os.path.join(ROOT, "graphs", g) for g in
                             ("graph_gpt2.json", "graph_resnet50.json")]
    header = (f"Cost model vs measured op times — "
              f"{datetime.date.today().isoformat()}, "
              f"{platform.node() or 'host'} ({platform.machine()}, "
              f"{os.cpu_count()} CPUs); the model runs on the CPU, the "
              f"measured times are the graphs' own (H200).")
    if args.roofline:
        header += (f" Profile `{args.device}` without its kernel "
                   f"efficiencies (every kernel at the peak).")
    report = "\n".join([header, ""] +
                       [analyse(g, device, args.build).replace(
                           f"`{device}`", f"`{args.device}`"
                           + (" roofline" if args.roofline else ""))
                        for g in graphs])
    if tmp:
        os.unlink(tmp.name)
    print(report)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(report + "\n")


if __name__ == "__main__":
    main()
