"""The report of bench/torch_budget_bench.py: issue 10's targets checked
on the runs (`check_targets`), the tables (`report_text`) and the
step-time-vs-peak plot (`svg_plot`) of `torch_budget_bench.py report`."""

import json
import os


def _gb(x):
    return "-" if x is None else f"{x / 1e9:.2f}"


def load_results(paths):
    """Runs of one or more result files (one per model process) merged."""
    merged = None
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        if merged is None:
            merged = dict(doc, runs=[], files=[])
        merged["runs"] += doc["runs"]
        merged["files"].append({k: doc.get(k) for k in (
            "device", "date", "time", "host", "models", "wall_s")})
        merged.setdefault("configs", {}).update(doc.get("configs", {}))
    return merged


def _rel(a, b):
    return None if a is None or not b else abs(a - b) / abs(b)


def check_targets(results):
    """Issue 10's targets, per model: a list of (target, subject, ok, why)
    rows. ok is None where there was nothing to check."""
    rows = []
    by_model = {}
    for e in results["runs"]:
        by_model.setdefault(e["model"], []).append(e)
    for model, runs in by_model.items():
        ok_runs = [e for e in runs if "step_ms" in e
                   and e.get("peak_bytes") is not None]
        lethe = [e for e in ok_runs if e["method"].startswith("lethe:")]
        options = [e for e in ok_runs if not e["method"].startswith("lethe:")]
        # 1. At a peak no higher than the option's, Lethe is faster.
        for o in options:
            under = [e for e in lethe if e["peak_bytes"] <= o["peak_bytes"]]
            if not under:
                rows.append(("faster at <= peak", f"{model} vs {o['method']}",
                             False, f"no Lethe run at <= {_gb(o['peak_bytes'])}"
                             " GB"))
                continue
            best = min(under, key=lambda e: e["step_ms"])
            rows.append(("faster at <= peak", f"{model} vs {o['method']}",
                         best["step_ms"] < o["step_ms"],
                         f"{best['method']} {best['step_ms']:.1f} ms at "
                         f"{_gb(best['peak_bytes'])} GB vs "
                         f"{o['step_ms']:.1f} ms at "
                         f"{_gb(o['peak_bytes'])} GB"))
        # 2. Measured peak within 3% of the prediction.
        for e in lethe:
            pred = e.get("predicted_peak_bytes")
            if not pred:
                continue
            err = (e["peak_bytes"] - pred) / pred
            rows.append(("peak within 3% of prediction",
                         f"{model} {e['method']}", abs(err) <= 0.03,
                         f"measured {_gb(e['peak_bytes'])} GB, predicted "
                         f"{_gb(pred)} GB ({err * 100:+.1f}%)"))
        # 3. No out-of-memory at a budget Lethe accepted.
        for e in runs:
            if not e["method"].startswith("lethe:") or "skipped" in e:
                continue
            budget = e.get("budget_bytes")
            why, ok = [], True
            if e.get("oom"):
                ok = False
                why.append("out of memory")
            elif "error" in e:
                ok = False
                why.append(e["error"][:80])
            if e.get("capped_step"):
                ok = ok and e["capped_step"] == "ok"
                why.append(f"one step with the allocator capped at the "
                           f"budget: {e['capped_step']}")
            if budget and budget < 2 ** 60 and e.get("peak_bytes"):
                fits = e["peak_bytes"] <= budget
                ok = ok and fits
                why.append(f"peak {_gb(e['peak_bytes'])} GB "
                           f"{'<=' if fits else '>'} budget {_gb(budget)} GB")
            rows.append(("no OOM at an accepted budget", f"{model} "
                         f"{e['method']}", ok, "; ".join(why)))
    return rows


def report_text(results):
    files = results.get("files", [])
    hosts = sorted({f.get("host") or "?" for f in files})
    lines = [
        "# Lethe's torch backend against PyTorch's activation-memory options",
        "",
        f"Device: **{results['device']}** "
        + (f"({results['device_memory_bytes'] / 2 ** 30:.0f} GiB)"
           if results.get("device_memory_bytes") else "")
        + f", host {', '.join(hosts)}; torch {results['torch']}; date "
        f"{results['date']}; {'tiny configs; ' if results['tiny'] else ''}"
        f"median of {results['steps']} steps after {results['warmup']} "
        "warm-up steps; one process per model, one GPU each.",
        "",
        "Peak: bytes the step allocates beyond what is resident before it "
        "(parameters, data; gradients are the step's). Lethe's plans were "
        "made on CPU (`bench/torch_budget_bench.py prepare`, analytic op "
        "costs for an H200) and mapped onto the CUDA trace; its forward and "
        "backward run eagerly (no inductor). `capped`: one more step with "
        "the caching allocator capped at reserved + budget. `loss Δ`, "
        "`grad Δ`: relative difference of the first step's loss and global "
        "gradient norm to `none`.",
        "",
        "| model | method | step ms | peak GB | predicted peak GB | "
        "predicted step ms | peak / predicted | decisions "
        "(retain/recompute/offload) | capped | loss Δ | grad Δ | "
        "first step s |",
        "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|"]
    ref = {e["model"]: e for e in results["runs"]
           if e["method"] == "none" and "loss" in e}
    for e in results["runs"]:
        if "step_ms" not in e:
            why = e.get("skipped") or e.get("error")
            lines.append(f"| {e['model']} | {e['method']} | "
                         f"{'OOM: ' if e.get('oom') else ''}{why} "
                         "||||||||||")
            continue
        pred = e.get("predicted_peak_bytes")
        ratio = (f"{e['peak_bytes'] / pred:.3f}" if pred and e.get(
            "peak_bytes") else "-")
        d = e.get("decisions") or {}
        dec = "/".join(str(d.get(k, "")) for k in
                       ("retain", "recompute", "offload")) if d else ""
        if e.get("retained_instead"):
            dec += f" ({e['retained_instead']} kept instead)"
        if e.get("unmapped_decisions"):
            dec += f" ({e['unmapped_decisions']} unmapped)"
        r = ref.get(e["model"], {})
        dl = _rel(e.get("loss"), r.get("loss"))
        dg = _rel(e.get("grad_norm"), r.get("grad_norm"))
        lines.append(
            f"| {e['model']} | {e['method']} | {e['step_ms']:.1f} | "
            f"{_gb(e.get('peak_bytes'))} | {_gb(pred)} | "
            + (f"{e['predicted_step_us'] / 1000:.1f}"
               if e.get("predicted_step_us") else "-")
            + f" | {ratio} | {dec} | {e.get('capped_step', '')} | "
            + ("-" if dl is None else f"{dl:.1e}") + " | "
            + ("-" if dg is None else f"{dg:.1e}")
            + f" | {e.get('first_step_s', 0):.1f} |")
    rows = check_targets(results)
    lines += ["", "## Targets (issue 10)", "",
              "| target | run | met | measured |", "|---|---|---|---|"]
    for target, subject, ok, why in rows:
        mark = "-" if ok is None else ("yes" if ok else "**no**")
        lines.append(f"| {target} | {subject} | {mark} | {why} |")
    met = sum(1 for r in rows if r[2])
    lines += ["", f"{met} of {len(rows)} target checks met."]
    return "\n".join(lines) + "\n", rows


def report(args):
    results = load_results(args.results)
    text, _ = report_text(results)
    if args.svg:
        with open(args.svg, "w") as f:
            f.write(svg_plot(results))
        text += f"\n![peak memory against step time]" \
            f"({os.path.basename(args.svg)})\n"
    if args.md:
        with open(args.md, "w") as f:
            f.write(text)
    print(text)


def svg_plot(results):
    """Peak memory (x) against step time (y), one panel per model."""
    models = []
    for e in results["runs"]:
        if e["model"] not in models:
            models.append(e["model"])
    w, h, pad = 460, 340, 56
    colors = {"lethe": "#d62728", "none": "#1f77b4", "full": "#2ca02c",
              "every2": "#17becf", "selective": "#9467bd",
              "save_on_cpu": "#8c564b", "compile": "#ff7f0e"}
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{w * len(models)}"'
           f' height="{h}" font-family="sans-serif" font-size="11">']
    for m, model in enumerate(models):
        pts = [e for e in results["runs"] if e["model"] == model
               and e.get("peak_bytes") is not None and "step_ms" in e]
        x0 = m * w
        out.append(f'<text x="{x0 + w / 2}" y="16" text-anchor="middle" '
                   f'font-size="13">{model}</text>')
        if not pts:
            continue
        xs = [e["peak_bytes"] / 1e9 for e in pts]
        ys = [e["step_ms"] for e in pts]
        xmax, ymax = max(xs) * 1.1, max(ys) * 1.1

        def px(v):
            return x0 + pad + v / xmax * (w - 1.5 * pad)

        def py(v):
            return h - pad + 10 - v / ymax * (h - 1.8 * pad)
        out.append(f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(xmax)}" '
                   f'y2="{py(0)}" stroke="black"/>')
        out.append(f'<line x1="{px(0)}" y1="{py(0)}" x2="{px(0)}" '
                   f'y2="{py(ymax)}" stroke="black"/>')
        for i in range(5):
            xv, yv = xmax * i / 4, ymax * i / 4
            out.append(f'<text x="{px(xv)}" y="{py(0) + 14}" '
                       f'text-anchor="middle">{xv:.1f}</text>')
            out.append(f'<text x="{px(0) - 4}" y="{py(yv) + 4}" '
                       f'text-anchor="end">{yv:.0f}</text>')
        out.append(f'<text x="{px(xmax / 2)}" y="{h - 8}" '
                   f'text-anchor="middle">peak memory (GB)</text>')
        out.append(f'<text x="{x0 + 12}" y="{py(ymax / 2)}" '
                   f'transform="rotate(-90 {x0 + 12} {py(ymax / 2)})" '
                   f'text-anchor="middle">step time (ms)</text>')
        lethe = sorted((e for e in pts if e["method"].startswith("lethe")),
                       key=lambda e: e["peak_bytes"])
        if len(lethe) > 1:
            path = " ".join(f"{px(e['peak_bytes'] / 1e9):.1f},"
                            f"{py(e['step_ms']):.1f}" for e in lethe)
            out.append(f'<polyline points="{path}" fill="none" '
                       f'stroke="{colors["lethe"]}"/>')
        for e in pts:
            family = e["method"].split(":")[0].split("-")[0]
            color = colors.get(family, "#444")
            cx, cy = px(e["peak_bytes"] / 1e9), py(e["step_ms"])
            out.append(f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="4" '
                       f'fill="{color}"/>')
            label = e["method"].replace("lethe:", "lethe ")
            out.append(f'<text x="{cx + 6:.1f}" y="{cy - 5:.1f}" '
                       f'fill="{color}">{label}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"
