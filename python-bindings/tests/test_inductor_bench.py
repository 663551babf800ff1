"""bench/torch_inductor_bench.py on the CPU: each method in a process of
its own (--isolate), and a method's failure in its process is that
method's row. Needs torch.compile (torch >= 2); the methods run here do
not need Lethe's library."""

import json
import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
if not hasattr(torch, "compile"):
    pytest.skip("this torch has no torch.compile", allow_module_level=True)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
BENCH = os.path.join(ROOT, "bench", "torch_inductor_bench.py")


def _run(tmp_path, *args):
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [sys.executable, BENCH, "run", "--model", "llama-8l", "--tiny",
         "--out", str(out), "--lethe-budgets", "--steps", "1",
         "--warmup", "1", *args], capture_output=True, text=True,
        timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(out.read_text())


def test_each_method_runs_in_a_process_of_its_own(tmp_path):
    doc = _run(tmp_path, "--methods", "none", "aot_eager", "--isolate", "on")
    rows = doc["results"]
    assert set(rows) == {"none", "aot_eager"}
    for r in rows.values():
        assert r["step_ms"] > 0 and "error" not in r
    pids = {r["pid"] for r in rows.values()}
    assert len(pids) == 2 and os.getpid() not in pids
    # A method that fails in its process (no budget "x") is a row that
    # says why, beside the other methods' rows.
    doc = _run(tmp_path, "--methods", "none", "compile-x", "--isolate", "on")
    rows = doc["results"]
    assert rows["none"]["step_ms"] > 0
    assert "ValueError" in rows["compile-x"]["error"]
    assert "pid" in rows["compile-x"]


def test_in_process_runs_have_no_process_of_their_own(tmp_path):
    doc = _run(tmp_path, "--methods", "none", "--isolate", "off")
    assert "pid" not in doc["results"]["none"]


def test_interleaved_methods_are_timed_in_turns(tmp_path):
    # --interleave 3: each method's process stays after its first round and
    # times two more rounds while the others wait; a row is the median of
    # all its steps, with each round's median.
    doc = _run(tmp_path, "--methods", "none", "full", "--isolate", "on",
               "--interleave", "3")
    rows = doc["results"]
    assert set(rows) == {"none", "full"}
    for r in rows.values():
        assert "error" not in r and r["interleaved_rounds"] == 3
        assert len(r["step_ms_rounds"]) == 3 and len(r["step_ms_all"]) == 3
        assert min(r["step_ms_all"]) <= r["step_ms"] <= max(r["step_ms_all"])
    assert len({r["pid"] for r in rows.values()}) == 2


def test_cuda_graph_runs_keep_each_steps_loss(tmp_path):
    # --cudagraphs: compile as mode="reduce-overhead" (Lethe with
    # triton.cudagraphs). On the CPU inductor makes no CUDA graphs; the
    # steps must still run and say how they were asked.
    doc = _run(tmp_path, "--methods", "compile", "--isolate", "off",
               "--cudagraphs")
    r = doc["results"]["compile"]
    assert "error" not in r and r["step_ms"] > 0 and r["cudagraphs"]
