"""bench/torch_budget_bench.py's report: issue 10's targets checked on
made-up results (no model is run), and the plan keys that carry a plan
made on CPU onto a CUDA trace."""

import importlib.util
import json
import os

import pytest

pytest.importorskip("torch")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location(
        "torch_budget_bench", os.path.join(ROOT, "bench",
                                           "torch_budget_bench.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run(model, method, ms, gb, **extra):
    return dict(model=model, method=method, step_ms=ms,
                peak_bytes=int(gb * 1e9), **extra)


def checks(bench, runs):
    results = {"runs": runs}
    return {(t, s): (ok, why) for t, s, ok, why in
            bench.check_targets(results)}


def test_faster_at_no_higher_peak(bench):
    rows = checks(bench, [
        run("m", "none", 80, 16), run("m", "full", 110, 5.4),
        run("m", "compile", 54, 9.4),
        run("m", "lethe:48%", 70, 7.0, predicted_peak_bytes=int(7.0e9)),
        run("m", "lethe:least", 100, 5.3, predicted_peak_bytes=int(5.0e9)),
    ])
    # Against full checkpointing, the one Lethe run at <= 5.4 GB is faster.
    assert rows[("faster at <= peak", "m vs full")][0] is True
    # Against compile, the fastest Lethe run under 9.4 GB (70 ms) is slower.
    ok, why = rows[("faster at <= peak", "m vs compile")]
    assert ok is False and "lethe:48%" in why
    # Against none, lethe:48% is at a lower peak and faster.
    assert rows[("faster at <= peak", "m vs none")][0] is True
    # Prediction: exact for 48%, +6% for least.
    assert rows[("peak within 3% of prediction", "m lethe:48%")][0] is True
    assert rows[("peak within 3% of prediction", "m lethe:least")][0] is False


def test_no_lethe_run_below_an_option_fails(bench):
    rows = checks(bench, [run("m", "full", 110, 5.4),
                          run("m", "lethe:80%", 70, 9.0)])
    ok, why = rows[("faster at <= peak", "m vs full")]
    assert ok is False and "no Lethe run" in why


def test_out_of_memory_at_an_accepted_budget_fails(bench):
    rows = checks(bench, [
        dict(model="m", method="lethe:60%", oom=True,
             error="OutOfMemoryError: CUDA out of memory"),
        run("m", "lethe:80%", 70, 9.0, budget_bytes=int(8.5e9),
            capped_step="ok"),
        run("m", "lethe:65%", 75, 7.0, budget_bytes=int(7.5e9),
            capped_step="oom"),
        run("m", "lethe:55%", 80, 6.0, budget_bytes=int(6.5e9),
            capped_step="ok"),
        dict(model="m", method="lethe:42%", skipped="infeasible")])
    key = "no OOM at an accepted budget"
    assert rows[(key, "m lethe:60%")][0] is False
    assert rows[(key, "m lethe:80%")][0] is False   # peak above budget
    assert rows[(key, "m lethe:65%")][0] is False   # capped step ran out
    assert rows[(key, "m lethe:55%")][0] is True
    assert (key, "m lethe:42%") not in rows


def test_report_merges_files_and_writes_plot(bench, tmp_path):
    paths = []
    for model in ("a", "b"):
        doc = {"date": "2026-11-21", "device": "GPU", "torch": "2",
               "tiny": False, "warmup": 1, "steps": 3, "host": "h",
               "runs": [run(model, "none", 10, 2.0, first_step_s=1.0,
                            loss=1.0, grad_norm=2.0),
                        run(model, "lethe:50%", 12, 1.0, first_step_s=3.0,
                            predicted_peak_bytes=int(1e9),
                            predicted_step_us=11000, loss=1.0,
                            grad_norm=2.0)]}
        path = tmp_path / f"{model}.json"
        path.write_text(json.dumps(doc))
        paths.append(str(path))
    results = bench.load_results(paths)
    assert {e["model"] for e in results["runs"]} == {"a", "b"}
    text, rows = bench.report_text(results)
    assert "Device: **GPU**" in text and "2026-11-21" in text
    assert "| a | lethe:50% | 12.0 | 1.00 | 1.00 | 11.0 | 1.000 |" in text
    svg = bench.svg_plot(results)
    assert svg.count("<circle") == 4 and "lethe 50%" in svg


def test_plan_keys_ignore_the_attention_kernel(bench):
    def node(i, op, scope, phase="fwd"):
        return {"id": i, "kind": "op", "op": op, "phase": phase,
                "scope": scope, "name": f"n{i}",
                "outputs": [{"bytes": 8}]}
    cpu = {"nodes": [
        node(0, "aten.mm.default", "blocks.0.attn"),
        node(1, "aten._scaled_dot_product_flash_attention_for_cpu.default",
             "blocks.0.attn"),
        node(2, "aten.mm.default", "blocks.0.attn")]}
    cuda = {"nodes": [
        node(0, "aten.mm.default", "blocks.0.attn"),
        node(1, "aten._scaled_dot_product_cudnn_attention.default",
             "blocks.0.attn"),
        node(2, "aten.mm.default", "blocks.0.attn")]}
    assert bench.node_keys(cpu) == bench.node_keys(cuda)
    assert bench.node_keys(cpu)[2] == "fwd|blocks.0.attn|aten.mm.default#1"


def test_the_compared_step_draws_its_masks_from_one_seed(bench):
    """Methods reach their measured steps after different numbers of
    steps (Lethe's calibration runs hundreds): the step whose loss and
    gradient norm are compared draws from one seed, so that a model with
    dropout compares like for like."""
    import torch
    w = torch.nn.Parameter(torch.ones(4096))

    def step():
        loss = torch.nn.functional.dropout(w * 2.0, 0.5).sum()
        loss.backward()
        return loss.detach()

    firsts = []
    for before in (0, 3):
        for _ in range(before):
            step()
        r = bench.measure(step, [w], False, 1, 1)
        firsts.append((r["loss"], r["grad_norm"]))
    assert firsts[0] == firsts[1]
