#!/usr/bin/env python3
"""The hostile-input campaign of issue 18, reproducible.

Generates mutated JSON graphs (from the fuzzer seeds, the planner's test
inputs and a few of the bundled real exports in graphs/), mutated MLIR files
(the test suite's MLIR steps that `lethe report` accepts, and programs that
`lethe compile` wrote), a list of command-line misuses and a list of Python
calls, runs them all, and checks every run against the issue's targets:

  crash      a signal, an exit status above 1, a hang (timeout), or
             sanitizer / 'LLVM ERROR' / 'Assertion' / stack-dump text
  exit 0     a run that succeeded on an input that is invalid by
             construction (a truncated file, a dangling reference, an
             out-of-range number, a misused flag); mutants whose validity
             the mutation does not decide pass when they succeed only if
             their outputs are valid (below)
  non-JSON   a --json / --trace / plan.json / simulation.json / trace.json output of a
             successful run that is not strict JSON or holds a non-finite
             number (and a --plot SVG that is not XML)
  partial    any file left in the run's output directory by a failed run
  long       an error (its diagnostic, quoted source and notes) of 1 KB or
             more, or a failure with no 'error' at all
  unlocated  an error that names neither a file:line:col nor a node (graph
             mutants), nor the misused flag, value or path (CLI misuse,
             Python calls)

Deterministic for a seed (the mutants and the order of the table; runs go
in parallel). Prints a table; --failures FILE writes every failing case.

  python3 bench/hardening_campaign.py [--build build] [--seed 1]
      [--json-mutants 500] [--mlir-mutants 400] [--jobs N]
"""

import argparse
import concurrent.futures
import json
import math
import os
import random
import re
import shutil
import stat
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ElementTree

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Inputs the mutants start from: small graphs (most runs), and real exports
# (one line of 0.1-0.5 MB each, where a quoted source line is long).
JSON_SEEDS = ["tools/lethe-json-fuzzer/seeds/" + name for name in (
    "collective.json", "dtypes.json", "nophase.json", "slice-gpt2.json",
    "slice-resnet50.json", "step.json")] + [
    "test/Planner/Inputs/four-layers.json",
    "test/Planner/Inputs/one-block.json"]
JSON_REAL = ["graphs/graph_unet.json", "graphs/graph_resnet50.json",
             "graphs/graph_gpt2.json"]
# Share of JSON mutants made from the real exports (they are slower).
REAL_SHARE = 0.06

CRASH_TEXT = re.compile(
    r"AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|"
    r"LLVM ERROR|Assertion .* failed|Stack dump|PLEASE submit a bug report|"
    r"terminate called|UNREACHABLE executed|Segmentation fault|Aborted")
LOCATED = re.compile(r"\S:\d+:\d+: error|\bnode \d+|\bnode '")
INFEASIBLE = re.compile(r"is below the least budget")
DIAGNOSTIC_LINE = re.compile(r"(^|: )(error|warning|remark|note): ")
# The budget mutants are planned at (most of the small seeds cannot meet
# it: the infeasible answer is checked too), and the one they are simulated
# and compiled at (most can: the outputs of success are checked).
BUDGET = "60%"
EASY_BUDGET = "100%"


# --------------------------------------------------------------------------
# Checking one run.
# --------------------------------------------------------------------------

def _finite(value):
    """Whether every number in a parsed JSON value is finite."""
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(_finite(v) for v in value.values())
    if isinstance(value, list):
        return all(_finite(v) for v in value)
    return True


def _refuse_constant(name):
    raise ValueError(f"non-JSON constant {name}")


def json_problem(path):
    """Why the file at `path` is not strict JSON with finite numbers (None
    when it is)."""
    try:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8")
        value = json.loads(text, parse_constant=_refuse_constant)
    except (OSError, ValueError, UnicodeDecodeError) as error:
        return f"{os.path.basename(path)}: {str(error)[:120]}"
    if not _finite(value):
        return f"{os.path.basename(path)}: a non-finite number"
    return None


def svg_problem(path):
    try:
        ElementTree.parse(path)
    except (OSError, ElementTree.ParseError) as error:
        return f"{os.path.basename(path)}: {str(error)[:120]}"
    with open(path, encoding="utf-8", errors="replace") as f:
        if re.search(r'="[^"]*\b(nan|inf)\b', f.read(), re.IGNORECASE):
            return f"{os.path.basename(path)}: nan/inf in an attribute"
    return None


def error_blocks(stderr):
    """The error diagnostics of `stderr` (each with its quoted source lines
    and notes), remarks and warnings left out."""
    blocks, current, keep = [], [], False
    for line in stderr.splitlines(keepends=True):
        match = DIAGNOSTIC_LINE.search(line)
        if match:
            kind = match.group(2)
            if kind != "note":
                if keep and current:
                    blocks.append("".join(current))
                current, keep = [], kind == "error"
        if keep:
            current.append(line)
    if keep and current:
        blocks.append("".join(current))
    return blocks


def files_under(directory):
    found = []
    for root, _, names in os.walk(directory):
        found += [os.path.join(root, name) for name in names]
    return sorted(found)


class Case:
    """One run: `argv` (tool name first, resolved against the build), run
    in `work` with outputs under `work/out`. `invalid`: True when the input
    is invalid by construction, None when only the outputs can tell.
    `json_out`/`svg_out`: outputs a success must have written, relative to
    `work`. `names`: for misuse, what the error must mention (any one)."""

    def __init__(self, group, kind, argv, work, invalid, json_out=(),
                 svg_out=(), names=(), stdin=None, other_out=()):
        self.group, self.kind, self.argv, self.work = group, kind, argv, work
        self.invalid, self.json_out, self.svg_out = invalid, json_out, svg_out
        self.other_out, self.names, self.stdin = other_out, names, stdin
        self.problems = []
        self.returncode = None
        self.infeasible = False
        self.error_bytes = 0


def check(case, returncode, stderr, timed_out, python_result=None):
    problems = []
    out_dir = os.path.join(case.work, "out")
    if timed_out:
        problems.append(("crash", "hang (timeout)"))
    elif returncode < 0 or returncode > 1 or CRASH_TEXT.search(stderr):
        problems.append(("crash", f"exit {returncode}: "
                         + stderr.strip().splitlines()[-1][:200]
                         if stderr.strip() else f"exit {returncode}"))
    if not timed_out and returncode == 0:
        if case.invalid:
            problems.append(("exit0", "succeeded on an invalid input"))
        for names, problem in ((case.json_out, json_problem),
                               (case.svg_out, svg_problem)):
            for name in names:
                path = os.path.join(case.work, name)
                why = (problem(path) if os.path.exists(path)
                       else f"{name}: not written")
                if why:
                    problems.append(("nonjson", why))
        for name in case.other_out:
            if not os.path.exists(os.path.join(case.work, name)):
                problems.append(("nonjson", f"{name}: not written"))
    elif not timed_out and returncode == 1:
        left = files_under(out_dir)
        # A budget no plan meets is an answer, not a failure to read the
        # input: `lethe plan --json` still writes the plan, feasible: false
        # (docs/Planner.md).
        case.infeasible = INFEASIBLE.search(stderr) is not None
        if case.infeasible:
            left = [p for p in left if not infeasible_plan(case, p)]
        if left:
            problems.append(("partial", ", ".join(
                os.path.relpath(p, out_dir) for p in left)[:200]))
        blocks = error_blocks(stderr)
        # LLVM's command-line parser says what is wrong without "error:".
        if not blocks and case.group == "cli" and stderr.strip():
            blocks = [stderr]
        size = sum(len(b.encode()) for b in blocks)
        case.error_bytes = size
        if not blocks:
            problems.append(("long", "no error message: "
                             + stderr.strip()[:200]))
        elif size >= 1024:
            problems.append(("long", f"{size} B of error"))
        # The infeasible verdict is about the budget, which it names.
        if blocks and not case.infeasible and not located(case, blocks[0]):
            problems.append(("unlocated", blocks[0].strip()[:200]))
    if python_result is not None:
        problems += python_result
    case.returncode = returncode
    case.problems = problems
    return case


def infeasible_plan(case, path):
    """Whether `path` is the plan JSON an infeasible `lethe plan` writes."""
    if os.path.relpath(path, case.work) not in case.json_out \
            or json_problem(path):
        return False
    with open(path, encoding="utf-8") as f:
        return json.load(f).get("feasible") is False


def located(case, block):
    if case.names:
        return any(name in block for name in case.names)
    return bool(LOCATED.search(block))


def run_case(case, build, timeout):
    tool = case.argv[0]
    if tool == "python3":
        argv = [sys.executable] + case.argv[1:]
    else:
        argv = [os.path.join(build, "bin", tool)] + case.argv[1:]
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    stdin = open(case.stdin, "rb") if case.stdin else subprocess.DEVNULL
    try:
        result = subprocess.run(argv, cwd=case.work, stdin=stdin,
                                capture_output=True, timeout=timeout,
                                env=env)
        returncode, timed_out = result.returncode, False
        stderr = result.stderr.decode("utf-8", "replace")
        stdout = result.stdout.decode("utf-8", "replace")
    except subprocess.TimeoutExpired:
        returncode, timed_out, stderr, stdout = None, True, "", ""
    finally:
        if case.stdin:
            stdin.close()
    if tool == "python3":
        return check_python(case, returncode, stdout, stderr, timed_out)
    check(case, returncode, stderr, timed_out)
    for name in ("null.json", "stdout.json"):
        if name in case.argv and not os.path.islink(
                os.path.join(case.work, name)):
            case.problems.append(("partial", f"{name}, a link to a device, "
                                  "was replaced by a file"))
    return case


# --------------------------------------------------------------------------
# JSON mutants.
# --------------------------------------------------------------------------

def _numbers(value, path=()):
    """(path, number) of every number in a JSON value."""
    if isinstance(value, bool):
        return
    if isinstance(value, (int, float)):
        yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _numbers(item, path + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _numbers(item, path + (index,))


def _set(root, path, value):
    for key in path[:-1]:
        root = root[key]
    root[path[-1]] = value


def _ops(graph):
    return [n for n in graph["nodes"] if n.get("kind") == "op"]


def json_mutant(rng, text):
    """(kind, invalid, text) of one mutant of the graph `text`."""
    graph = json.loads(text)
    nodes = graph["nodes"]
    kinds = ["truncate", "flip", "delete", "duplicate", "insert",
             "nan", "number", "dangling", "output-index", "negative-dim",
             "huge-shape", "huge-bytes", "remove-key", "wrong-type",
             "duplicate-id", "empty-nodes", "time", "saved", "deep",
             "long-name", "control-chars", "unknown-key", "alias",
             "grad-of", "reorder", "cycle"]
    kind = rng.choice(kinds)
    dump = lambda g, **kw: json.dumps(g, separators=(",", ":"), **kw)
    if kind == "truncate":
        cut = rng.randrange(1, len(text.rstrip()) - 1)
        return kind, True, text[:cut]
    if kind == "flip":
        at = rng.randrange(len(text))
        return kind, None, text[:at] + rng.choice(
            '{}[]",:0123456789-.eE ntfu\\\x00\xff') + text[at + 1:]
    if kind == "delete":
        at = rng.randrange(len(text))
        return kind, None, text[:at] + text[at + rng.randint(1, 64):]
    if kind == "duplicate":
        at = rng.randrange(len(text))
        return kind, None, text[:at] + text[at:at + rng.randint(1, 64)] \
            + text[at:]
    if kind == "insert":
        at = rng.randrange(len(text))
        return kind, None, text[:at] + rng.choice(
            ["{", "}", "[", "]", ",", ":", '"', "null", "1e999", "-0",
             "\ufeff", "//", "'"]) + text[at:]
    if kind == "nan":
        path, _ = rng.choice(list(_numbers(graph)))
        _set(graph, path, rng.choice([math.nan, math.inf, -math.inf]))
        return kind, True, dump(graph)
    if kind == "number":
        path, _ = rng.choice(list(_numbers(graph)))
        _set(graph, path, rng.choice(
            [-1, 0, 1e308, 1e-300, 2**63, 2**64, -2**63, 1.5, 2**53 + 1]))
        return kind, None, dump(graph)
    ops = _ops(graph) or nodes
    node = rng.choice(ops)
    if kind == "dangling":
        node.setdefault("inputs", []).append(
            [rng.choice([len(nodes) + 7, -1, 2**40]), 0])
        return kind, True, dump(graph)
    if kind == "output-index":
        node.setdefault("inputs", []).append([nodes[0]["id"], 99])
        return kind, True, dump(graph)
    with_outputs = [n for n in nodes if n.get("outputs")
                    and isinstance(n["outputs"][0].get("shape"), list)]
    if kind in ("negative-dim", "huge-shape", "huge-bytes", "alias") \
            and with_outputs:
        node = rng.choice(with_outputs)
        output = node["outputs"][0]
        if kind == "negative-dim":
            output["shape"] = list(output["shape"]) + [-rng.randint(1, 9)]
        elif kind == "huge-shape":
            output["shape"] = [2**31] * 4
            output.pop("bytes", None)
        elif kind == "huge-bytes":
            output["bytes"] = 2**63 - rng.randint(0, 64)
        else:
            output["alias"] = len(node.get("inputs", [])) + 3
        return kind, True, dump(graph)
    if kind == "remove-key":
        key = rng.choice(["nodes", "id", "kind", "outputs"])
        if key == "nodes":
            del graph["nodes"]
        else:
            target = rng.choice(ops)
            if key not in target:
                return kind, None, dump(graph)
            del target[key]
        return kind, key != "outputs" or None, dump(graph)
    if kind == "wrong-type":
        key = rng.choice(["id", "inputs", "outputs", "shape", "time_us",
                          "op", "nodes"])
        bad = rng.choice(['"x"', {}, [], None, True, 3.5])
        if bad == [] and key in ("inputs", "outputs"):
            bad = {}
        if key == "nodes":
            graph["nodes"] = bad if bad != [] else "x"
            return kind, True, dump(graph)
        if key == "shape":
            if not node.get("outputs"):
                return kind, None, dump(graph)
            node["outputs"][0]["shape"] = bad if bad not in ([], None) \
                else "x"
            return kind, True, dump(graph)
        if key == "time_us" and bad is None:
            bad = "slow"
        node[key] = bad
        # A time may be any number; an op is read only from kind "op"
        # nodes, and may be any string; not so the others.
        valid = key == "op" or (key == "time_us" and bad == 3.5)
        return kind, not valid or None, dump(graph)
    if kind == "duplicate-id":
        node["id"] = nodes[0]["id"] if node is not nodes[0] else nodes[1]["id"]
        return kind, True, dump(graph)
    if kind == "empty-nodes":
        graph["nodes"] = []
        graph.pop("saved", None)
        return kind, True, dump(graph)
    if kind == "time":
        node["time_us"] = rng.choice([1e308, -1.0, 1e13, -1e-9])
        return kind, True, dump(graph)
    if kind == "saved":
        graph.setdefault("saved", []).append(
            rng.choice([[len(nodes) + 3, 0], [nodes[0]["id"], 50], [-1, 0],
                        "x", [0]]))
        return kind, True, dump(graph)
    if kind == "deep":
        node["args"] = json.loads("[" * 300 + "]" * 300)
        return kind, True, dump(graph)
    if kind == "long-name":
        node["name"] = "n" * rng.choice([5000, 200000])
        return kind, None, dump(graph)
    if kind == "control-chars":
        node["name"] = "\x01\x7f\u202e\ud7ff\"'\\<>{}"
        return kind, None, dump(graph)
    if kind == "unknown-key":
        node["lethe_future_field"] = {"x": [1, 2]}
        return kind, False, dump(graph)
    if kind == "grad-of":
        bwd = [n for n in nodes if n.get("kind") == "output"
               and isinstance(n.get("args"), dict) and "grad_of" in n["args"]]
        if not bwd:
            return kind, None, dump(graph)
        # Gradients whose primal is unknown stay unnamed (the importer's
        # documented leniency), so this may load.
        bwd[0]["args"]["grad_of"] = [len(nodes) + 11]
        return kind, None, dump(graph)
    if kind == "reorder":
        rng.shuffle(nodes)
        return kind, None, dump(graph)
    # cycle: an early op reads a later node.
    later = [n for n in nodes if n["id"] > node["id"]]
    if not later:
        return kind, None, dump(graph)
    node.setdefault("inputs", []).append([rng.choice(later)["id"], 0])
    return kind, True, dump(graph)


def json_cases(rng, count, root):
    seeds = {p: open(os.path.join(REPO, p), encoding="utf-8").read()
             for p in JSON_SEEDS + JSON_REAL}
    cases = []
    for index in range(count):
        pool = JSON_REAL if rng.random() < REAL_SHARE else JSON_SEEDS
        seed = rng.choice(pool)
        kind, invalid, text = json_mutant(rng, seeds[seed])
        work = os.path.join(root, f"json-{index:05d}")
        os.makedirs(work)
        with open(os.path.join(work, "graph.json"), "w",
                  encoding="utf-8", errors="surrogatepass") as f:
            f.write(text)
        cases += graph_commands("json", kind, work, invalid, json_route=True)
    return cases


def graph_commands(group, kind, work, invalid, json_route):
    """The commands run on one mutant `graph.*` in `work`."""
    graph = "graph.json" if json_route else "graph.mlir"
    made = []

    def add(name, argv, **kw):
        case_work = os.path.join(work, name)
        os.makedirs(os.path.join(case_work, "out"))
        made.append(Case(group, kind, argv, case_work, invalid, **kw))

    source = "../" + graph
    add("report", ["lethe", "report", source, "--json", "out/r.json",
                   "--trace", "out/r.trace"],
        json_out=("out/r.json", "out/r.trace"))
    add("plan", ["lethe", "plan", source, "--budget", BUDGET, "--json",
                 "out/p.json", "--trace", "out/p.trace"],
        json_out=("out/p.json", "out/p.trace"))
    add("simulate", ["lethe", "simulate", source, "--budget", EASY_BUDGET,
                     "--json", "out/s.json", "--trace", "out/s.trace",
                     "--plot", "out/s.svg"],
        json_out=("out/s.json", "out/s.trace"), svg_out=("out/s.svg",))
    add("compile", ["lethe", "compile", source, "--budget", EASY_BUDGET, "-o",
                    "out/c"],
        json_out=("out/c/plan.json", "out/c/simulation.json",
                  "out/c/trace.json"),
        other_out=("out/c/step.mlir", "out/c/step.cpp"))
    if json_route:
        add("translate", ["lethe-translate", "--import-graph-json", source,
                          "-o", "out/g.mlir"], other_out=("out/g.mlir",))
    else:
        add("translate", ["lethe-translate", "--lethe-to-cpp", source,
                          "-o", "out/step.cpp"], other_out=("out/step.cpp",))
    return made


# --------------------------------------------------------------------------
# MLIR mutants.
# --------------------------------------------------------------------------

def mlir_bases(build, scratch):
    """The test suite's MLIR files that `lethe report` accepts, and the
    programs `lethe compile` writes for a few of them."""
    found = []
    for directory in ("test", "tools/lethe-mlir-fuzzer/seeds"):
        for root, _, names in os.walk(os.path.join(REPO, directory)):
            found += [os.path.join(root, n) for n in sorted(names)
                      if n.endswith(".mlir")]
    lethe = os.path.join(build, "bin", "lethe")
    bases = []
    for path in sorted(found):
        if subprocess.run([lethe, "report", path], capture_output=True,
                          timeout=60).returncode == 0:
            # Without comment lines: a cut must fall inside the code. A
            # fuzzer seed may hold bytes that are not UTF-8 (in a string or
            # comment the loader skips): the base keeps them replaced.
            bases.append("".join(
                l for l in open(path, encoding="utf-8",
                                errors="replace").readlines()
                if not l.lstrip().startswith("//")))
    programs = []
    for index, text in enumerate(bases[:: max(1, len(bases) // 6)]):
        source = os.path.join(scratch, f"base-{index}.mlir")
        with open(source, "w", encoding="utf-8") as f:
            f.write(text)
        out = os.path.join(scratch, f"compiled-{index}")
        if subprocess.run([lethe, "compile", source, "--budget", EASY_BUDGET,
                           "-o", out], capture_output=True,
                          timeout=120).returncode == 0:
            programs.append(open(os.path.join(out, "step.mlir"),
                                 encoding="utf-8").read())
    return bases, programs


NUMBER = re.compile(r"(?<![\w%#@.])-?\d+(\.\d+)?(e[-+]?\d+)?(?![\w])")
DIMS = re.compile(r"tensor<((\d+x)+)")
FLOAT_ATTR = re.compile(r"(\w+ = )(-?\d+(\.\d+)?(e[-+]?\d+)?)( : f64)")


def mlir_mutant(rng, text):
    kinds = ["truncate", "delete-line", "duplicate-line", "swap-lines",
             "flip", "delete-char", "insert", "dim", "dynamic-dim",
             "element-type", "float-attr", "nan-attr", "number",
             "rename-op", "no-return"]
    kind = rng.choice(kinds)
    lines = text.splitlines(keepends=True)
    if kind == "truncate":
        last = text.rstrip().rfind("}")
        return kind, True, text[:rng.randrange(1, max(2, last))]
    if kind in ("delete-line", "duplicate-line", "swap-lines"):
        body = [i for i, l in enumerate(lines)
                if l.strip() and not l.lstrip().startswith("//")]
        i = rng.choice(body)
        if kind == "delete-line":
            del lines[i]
        elif kind == "duplicate-line":
            lines.insert(i, lines[i])
        else:
            j = rng.choice(body)
            lines[i], lines[j] = lines[j], lines[i]
        return kind, None, "".join(lines)
    if kind == "flip":
        at = rng.randrange(len(text))
        return kind, None, text[:at] + rng.choice(
            "{}()<>%:,=\"x09-.?@#!\x00\xff") + text[at + 1:]
    if kind == "delete-char":
        spots = [m.start() for m in re.finditer(r"[{}()<>%:,=\"]", text)]
        at = rng.choice(spots)
        return kind, None, text[:at] + text[at + 1:]
    if kind == "insert":
        at = rng.randrange(len(text))
        return kind, None, text[:at] + rng.choice(
            ["}", "{", "%", "tensor<", "\"", ">", "^bb1:", "// -----\n",
             "#lethe<", "-9223372036854775809", "0x7FF8000000000000"]) \
            + text[at:]
    matches = list(DIMS.finditer(text))
    if kind in ("dim", "dynamic-dim") and matches:
        m = rng.choice(matches)
        dims = m.group(1).split("x")[:-1]
        k = rng.randrange(len(dims))
        dims[k] = "?" if kind == "dynamic-dim" else str(
            rng.choice([0, 2**31, 2**40, 2**62, 2**63 - 1]))
        new = "tensor<" + "x".join(dims) + "x"
        return kind, True if kind == "dynamic-dim" else None, \
            text[:m.start()] + new + text[m.end():]
    if kind == "element-type":
        types = ["f32", "bf16", "f16", "i1", "i64", "f8E4M3FN", "complex<f32>",
                 "index", "none", "!lethe.x"]
        found = [m for m in re.finditer(r"x(f32|bf16|f16|i1|i64|f64)>",
                                        text)]
        if found:
            m = rng.choice(found)
            return kind, None, text[:m.start() + 1] + rng.choice(types) \
                + text[m.end() - 1:]
    floats = list(FLOAT_ATTR.finditer(text))
    if kind == "nan-attr":
        # The times the graph is priced with; other f64 attributes (the
        # planner's reports) are not read.
        floats = [m for m in floats if m.group(1) == "time_us = "]
    if kind in ("float-attr", "nan-attr") and floats:
        m = rng.choice(floats)
        value = (rng.choice(["0x7FF8000000000000", "0x7FF0000000000000",
                             "0xFFF0000000000000"]) if kind == "nan-attr"
                 else rng.choice(["1e308", "-1.0", "1.0e13", "-0.0",
                                  "4.9e-324"]))
        invalid = True if kind == "nan-attr" else None
        return kind, invalid, text[:m.start(2)] + value + text[m.end(2):]
    if kind == "rename-op":
        found = list(re.finditer(r"lethe\.(node|collective)", text))
        if found:
            m = rng.choice(found)
            return kind, None, text[:m.start()] + "lethe.nodx" \
                + text[m.end():]
    if kind == "no-return":
        found = list(re.finditer(r"^\s*(func\.)?return\b.*\n", text,
                                 re.MULTILINE))
        if found:
            m = rng.choice(found)
            return kind, True, text[:m.start()] + text[m.end():]
    numbers = list(NUMBER.finditer(text))
    if not numbers:
        at = rng.randrange(len(text))
        return "flip", None, text[:at] + "}" + text[at + 1:]
    m = rng.choice(numbers)
    return "number", None, text[:m.start()] + str(rng.choice(
        [-1, 0, 2**31, 2**63, 2**64, "1e400", 99999999999999999999])) \
        + text[m.end():]


def mlir_cases(rng, count, root, bases, programs):
    cases = []
    for index in range(count):
        from_program = programs and rng.random() < 0.2
        base = rng.choice(programs if from_program else bases)
        kind, invalid, text = mlir_mutant(rng, base)
        kind = ("program " if from_program else "") + kind
        work = os.path.join(root, f"mlir-{index:05d}")
        os.makedirs(work)
        with open(os.path.join(work, "graph.mlir"), "w",
                  encoding="utf-8", errors="surrogateescape") as f:
            f.write(text)
        cases += graph_commands("mlir", kind, work, invalid, json_route=False)
    return cases


# --------------------------------------------------------------------------
# Command-line misuse.
# --------------------------------------------------------------------------

# Plannable at BUDGET.
GOOD = "test/Planner/Inputs/four-layers.json"
GOOD_MLIR = "tools/lethe-mlir-fuzzer/seeds/plan-auto-0.mlir"
PROFILE = {"name": "toy", "peak_tflops": {"f32": 60, "bf16": 400},
           "hbm_gb_per_s": 3000, "d2h_gb_per_s": 50, "h2d_gb_per_s": 50,
           "launch_overhead_us": 3, "device_memory_bytes": 8e10,
           "host_pinned_bytes": 1e11}


def cli_cases(root):
    """Every misuse of the tools: (kind, argv, what the error must name)."""
    files = os.path.join(root, "cli-files")
    os.makedirs(files)
    good = os.path.join(REPO, GOOD)
    good_mlir = os.path.join(REPO, GOOD_MLIR)

    def write(name, data):
        path = os.path.join(files, name)
        with open(path, "wb") as f:
            f.write(data if isinstance(data, bytes) else data.encode())
        return path

    graph_text = open(good, encoding="utf-8").read()
    inputs = {
        "missing": (os.path.join(files, "missing.json"), ["missing.json"]),
        "directory": (files, ["cli-files"]),
        "/dev/zero": ("/dev/zero", ["/dev/zero"]),
        "/dev/null": ("/dev/null", ["/dev/null"]),
        "empty file": (write("empty.json", ""), ["empty.json"]),
        "blank file": (write("blank.mlir", " \n\t\n"), ["blank.mlir"]),
        "binary": (write("binary.json", bytes(range(256)) * 4),
                   ["binary.json"]),
        "JSON array": (write("array.json", "[1, 2]"), ["array.json"]),
        "nodes empty": (write("nodes.json", '{"nodes": []}'),
                        ["nodes.json"]),
        "no function": (write("module.mlir", "module {}\n"),
                        ["module.mlir"]),
        "fifo": (os.path.join(files, "graph.fifo"), ["graph.fifo"]),
        "truncated .JSON": (write("trunc.JSON", graph_text[:1000]),
                            ["trunc.JSON"]),
        "JSON named .mlir": (write("graph-as.mlir", graph_text[:700]),
                             ["graph-as.mlir"]),
        "MLIR named .json": (write("step-as.json", "func.func @step(%x: "
                                   "tensor<4xf32>) -> tensor<4xf32> {\n"
                                   "  return %y : tensor<4xf32>\n}\n"),
                             ["step-as.json"]),
    }
    os.mkfifo(inputs["fifo"][0])
    profiles = {
        "unknown device": ("tpu9", ["tpu9"]),
        "empty device": ("", ["device"]),
        "device dir": (files, ["cli-files"]),
        "device /dev/zero": ("/dev/zero", ["/dev/zero"]),
        "device truncated": (write("trunc-profile.json",
                                   json.dumps(PROFILE)[:40]),
                             ["trunc-profile.json"]),
        "device slow link": (write("slow.json", json.dumps(
            dict(PROFILE, d2h_gb_per_s=1e-300))), ["d2h_gb_per_s"]),
        "device no flops": (write("noflops.json", json.dumps(
            dict(PROFILE, peak_tflops={}))), ["peak_tflops"]),
        "device negative memory": (write("negmem.json", json.dumps(
            dict(PROFILE, device_memory_bytes=-1))),
            ["device_memory_bytes"]),
        "device huge memory": (write("hugemem.json", json.dumps(
            dict(PROFILE, device_memory_bytes=1e30))),
            ["device_memory_bytes"]),
        "device string rate": (write("strrate.json", json.dumps(
            dict(PROFILE, hbm_gb_per_s="fast"))), ["hbm_gb_per_s"]),
        "device nan": (write("nan.json", json.dumps(
            dict(PROFILE, launch_overhead_us=math.nan))), ["nan.json"]),
    }
    budgets = ["=", "-1", "-5%", "0", "0%", "99999999999999999999",
               "99999999999999999999%", "1e400", "nan", "inf", "abc",
               "5XB", "9223372036854775808", "18446744073709551616",
               "-0", "%", "60%%", "1e-5%", " ", "0x10"]
    plans = {
        "plan missing": (os.path.join(files, "missing-plan.json"),
                         ["missing-plan.json"]),
        "plan /dev/zero": ("/dev/zero", ["/dev/zero"]),
        "plan garbage": (write("garbage-plan.json", "{\"decisions\": [1,"),
                         ["garbage-plan.json"]),
        "plan unknown node": (write("node-plan.json", json.dumps(
            {"decisions": [{"node": "no_such_node", "output": 0,
                            "decision": "recompute"}]})),
            ["no_such_node"]),
        "plan bad decision": (write("decision-plan.json", json.dumps(
            {"decisions": [{"node_id": 3, "output": 0,
                            "decision": "teleport"}]})), ["teleport"]),
        "plan huge id": (write("id-plan.json", json.dumps(
            {"decisions": [{"node_id": 2**64, "output": 0,
                            "decision": "retain"}]})), ["id-plan.json"]),
    }
    options = [
        ("unknown flag", ["--bogus"], ["bogus"]),
        ("policy bogus", ["--policy", "bogus"], ["bogus"]),
        ("policy empty", ["--policy="], ["policy"]),
        ("n 0", ["--policy", "every-n", "-n", "0"], ["n"]),
        ("n negative", ["--policy", "every-n", "-n", "-3"], ["-3", "n"]),
        ("n overflow", ["-n", "99999999999"], ["99999999999"]),
        ("alignment 3", ["--alignment", "3"], ["alignment"]),
        ("alignment 0", ["--alignment", "0"], ["alignment"]),
        ("alignment negative", ["--alignment", "-256"], ["alignment"]),
        ("alignment 2^62", ["--alignment", "4611686018427387904"],
         ["alignment"]),
        ("alignment overflow", ["--alignment", "9223372036854775808"],
         ["alignment"]),
        ("host budget negative", ["--host-budget", "-1"], ["host"]),
        ("host budget text", ["--host-budget", "lots"], ["lots"]),
        ("min offload text", ["--min-offload-bytes", "zz"], ["zz"]),
        ("solver bogus", ["--solver", "bogus"], ["bogus"]),

        ("contention bogus", ["--contention", "sometimes"], ["sometimes"]),
        ("top negative", ["--top", "-1"], ["top"]),
        ("top overflow", ["--top", "99999999999999999999"], ["top"]),
    ]
    cases = []
    counter = [0]

    def add(kind, argv, names, invalid=True, json_out=(), stdin=None):
        counter[0] += 1
        work = os.path.join(root, f"cli-{counter[0]:04d}")
        os.makedirs(os.path.join(work, "out"))
        cases.append(Case("cli", kind, argv, work, invalid,
                          json_out=json_out, names=names, stdin=stdin))

    commands = ["report", "plan", "simulate", "compile"]
    needs_budget = {"report": [], "plan": ["--budget", BUDGET],
                    "simulate": ["--budget", BUDGET],
                    "compile": ["--budget", BUDGET, "-o", "out/c"]}
    for command in commands:
        extra = needs_budget[command]
        for kind, (path, names) in inputs.items():
            add(f"input: {kind}", ["lethe", command, path] + extra, names)
        add("no graph", ["lethe", command] + extra, ["graph", "argument"])
        add("two graphs", ["lethe", command, good, good] + extra,
            ["argument", good])
        for kind, (device, names) in profiles.items():
            add(f"--device: {kind}", ["lethe", command, good, "--device",
                                      device] + extra, names)
    for command in commands[1:]:
        add("budget missing", ["lethe", command, good]
            + needs_budget[command][2:], ["budget"])
        for budget in budgets:
            argv = ["lethe", command, good] + needs_budget[command][2:]
            argv += ["--budget="] if budget == "=" else ["--budget", budget]
            add(f"--budget {budget}", argv, ["budget"])
        for kind, argv, names in options:
            if command == "plan" and kind.startswith("contention"):
                continue
            add(kind, ["lethe", command, good] + needs_budget[command]
                + argv, names)
        for kind, (path, names) in plans.items():
            add(f"--plan: {kind}", ["lethe", command, good]
                + needs_budget[command] + ["--plan", path], names)
    # Outputs that cannot be written; the others must not be left behind.
    for command in ("report", "plan", "simulate"):
        extra = needs_budget[command]
        for kind, target, names in [
                ("json into missing dir", "out/missing/x.json", ["missing"]),
                ("json is a directory", "out", ["out"]),
                ("json under a file", os.path.join(good, "x.json"),
                 ["x.json"]),
                ("json in /proc", "/proc/lethe-campaign.json", ["/proc"])]:
            add(f"--json: {kind}", ["lethe", command, good] + extra
                + ["--json", target], names)
            add(f"--trace: {kind}, --json fine", ["lethe", command, good]
                + extra + ["--json", "out/ok.json", "--trace", target], names)
    add("--plot: into missing dir", ["lethe", "simulate", good, "--budget",
                                     BUDGET, "--json", "out/s.json",
                                     "--plot", "out/missing/p.svg"],
        ["missing"])
    add("-o: a file", ["lethe", "compile", good, "--budget", BUDGET, "-o",
                       write("a-file", "x")], ["a-file"])
    add("-o: missing", ["lethe", "compile", good, "--budget", BUDGET],
        ["-o", "directory", "output"])
    add("-o: in /proc", ["lethe", "compile", good, "--budget", BUDGET, "-o",
                         "/proc/lethe-campaign"], ["/proc"])
    add("no command", ["lethe"], ["command"])
    add("unknown command", ["lethe", "frobnicate", good], ["frobnicate"])
    # lethe-translate.
    translate_inputs = dict(inputs)
    del translate_inputs["no function"]
    for kind, (path, names) in translate_inputs.items():
        add(f"translate input: {kind}", ["lethe-translate",
                                         "--import-graph-json", path, "-o",
                                         "out/g.mlir"], names)
    add("translate: stdin /dev/zero", ["lethe-translate",
                                       "--import-graph-json", "-o",
                                       "out/g.mlir"], ["stdin"],
        stdin="/dev/zero")
    add("translate: no translation", ["lethe-translate", good, "-o",
                                      "out/g.mlir"],
        ["Translations to perform"])
    add("translate: unknown translation", ["lethe-translate", "--to-tpu",
                                           good], ["to-tpu"])
    add("translate: -o into missing dir", ["lethe-translate",
                                           "--import-graph-json", good, "-o",
                                           "out/missing/g.mlir"],
        ["missing"])
    add("translate: -o a directory", ["lethe-translate",
                                      "--import-graph-json", good, "-o",
                                      "out"], ["out"])
    add("translate: to-cpp of a graph", ["lethe-translate", "--lethe-to-cpp",
                                         good_mlir, "-o", "out/s.cpp"],
        ["plan-auto-0.mlir"])
    # Outputs that are not regular files must be written through, never
    # replaced: a link to a file, a link to /dev/null, a link to a FIFO's
    # reader would be replaced by a regular file if renamed onto.
    add("--json: a link to /dev/null (valid)", ["lethe", "report", good,
                                                "--json", "null.json"],
        [], invalid=False)
    add("--json: a link to /dev/stdout (valid)", ["lethe", "report", good,
                                                  "--json", "stdout.json"],
        [], invalid=False)
    # Controls: valid uses that must succeed.
    add("control: report", ["lethe", "report", good, "--json", "out/r.json"],
        [], invalid=False, json_out=("out/r.json",))
    add("control: --keep-ops= (the default ops)",
        ["lethe", "plan", good, "--budget", BUDGET, "--policy",
         "selective-op", "--keep-ops=", "--json", "out/p.json"], [],
        invalid=False, json_out=("out/p.json",))
    add("control: budget 101%", ["lethe", "plan", good, "--budget", "101%",
                                 "--json", "out/p.json"], [], invalid=False,
        json_out=("out/p.json",))
    return cases


def prepare_links(cases):
    """The links to devices of the misuse cases, made where they run (never
    the devices themselves: a tool that renamed onto one would replace
    it)."""
    for case in cases:
        for name, device in (("null.json", "/dev/null"),
                             ("stdout.json", "/dev/stdout")):
            if name in case.argv:
                os.symlink(device, os.path.join(case.work, name))


def check_devices_intact():
    """Whether /dev/null and /dev/stdout are still what they were (a run
    that renamed a file onto them would have replaced them)."""
    null = os.stat("/dev/null")
    return stat.S_ISCHR(null.st_mode) and os.path.islink("/dev/stdout")


# --------------------------------------------------------------------------
# Python calls.
# --------------------------------------------------------------------------

PY_PRELUDE = r"""
import json, os, sys, traceback
import lethe
from lethe import _native
GOOD = {good!r}
FILES = {files!r}
def _tiny():
    return json.load(open(GOOD))
def _result(**kw):
    print("@@RESULT " + json.dumps(kw))
try:
    value = ({call})
    if isinstance(value, lethe.Plan):
        value = json.loads(value.to_json())
    elif isinstance(value, lethe.Graph):
        value = value.report()
    _result(outcome="ok", value=value if isinstance(value, (dict, list))
            else None)
except BaseException as error:
    _result(outcome="raised", type=type(error).__name__,
            mro=[c.__name__ for c in type(error).__mro__],
            message=str(error))
"""


def python_cases(root):
    files = os.path.join(root, "py-files")
    os.makedirs(files)
    good = os.path.join(REPO, GOOD)
    text = open(good, encoding="utf-8").read()

    def write(name, data):
        path = os.path.join(files, name)
        with open(path, "w", encoding="utf-8") as f:
            f.write(data)
        return path

    os.mkfifo(os.path.join(files, "fifo"))
    huge_time = json.loads(text)
    _ops(huge_time)[0]["time_us"] = 1e308
    dangling = json.loads(text)
    _ops(dangling)[1]["inputs"].append([99999, 0])
    write("huge-time.json", json.dumps(huge_time))
    write("dangling.json", json.dumps(dangling))
    write("trunc.json", text[:900])
    write("empty.json", "")
    write("slow.json", json.dumps(dict(PROFILE, d2h_gb_per_s=1e-300)))
    write("garbage-plan.json", "{\"decisions\": [")
    write("dynamic.mlir",
          "func.func @step(%x: tensor<?x8xf32>) -> tensor<?x8xf32> {\n"
          "  %y = lethe.node \"aten.relu.default\" fwd (%x) "
          "{time_us = 2.0 : f64} : (tensor<?x8xf32>) -> tensor<?x8xf32>\n"
          "  return %y : tensor<?x8xf32>\n}\n")
    write("nan-time.mlir",
          "func.func @step(%x: tensor<8xf32>) -> tensor<8xf32> {\n"
          "  %y = lethe.node \"aten.relu.default\" fwd (%x) "
          "{time_us = 0x7FF8000000000000 : f64} : (tensor<8xf32>) -> "
          "tensor<8xf32>\n  return %y : tensor<8xf32>\n}\n")
    content, argument = [], []
    # Content errors (file:line:col or a node); argument errors (the
    # argument or its value named).
    for name in ["huge-time.json", "dangling.json", "trunc.json",
                 "empty.json", "dynamic.mlir", "nan-time.mlir"]:
        content.append((f"load {name}",
                        f"lethe.load(os.path.join(FILES, {name!r}))"))
        content.append((f"native load {name}",
                        f"_native.Graph.load(os.path.join(FILES, {name!r}),"
                        f" 'h200')"))
    content += [
        ("load dict huge time", "lethe.load(dict(_tiny(), nodes=["
         "dict(n, time_us=1e308) if n['kind']=='op' else n for n in "
         "_tiny()['nodes']]))"),
        ("load dict dangling", "lethe.load(dict(_tiny(), nodes=_tiny()"
         "['nodes'] + [dict(id=9999, op='aten.relu.default', kind='op', "
         "inputs=[[123456, 0]], outputs=[])]))"),
        ("loads text truncated", "_native.Graph.loads(open(GOOD).read()"
         "[:500], 'json', 'cut.json', 'h200')"),
        ("loads mlir garbage", "_native.Graph.loads('func.func @step(', "
         "'mlir', 'cut.mlir', 'h200')"),
    ]
    argument += [
        ("load /dev/zero", "lethe.load('/dev/zero')", ["/dev/zero"]),
        ("native load /dev/zero", "_native.Graph.load('/dev/zero', 'h200')",
         ["/dev/zero"]),
        ("load fifo", "lethe.load(os.path.join(FILES, 'fifo'))", ["fifo"]),
        ("native load fifo", "_native.Graph.load(os.path.join(FILES, "
         "'fifo'), 'h200')", ["fifo"]),
        ("load directory", "lethe.load(FILES)", ["py-files"]),
        ("load missing", "lethe.load(os.path.join(FILES, 'nope.json'))",
         ["nope.json"]),
        ("load empty nodes", "lethe.load({'nodes': []})", ["nodes"]),
        ("load no nodes", "lethe.load({})", ["nodes"]),
        ("load nodes not a list", "lethe.load({'nodes': 'x'})", ["nodes"]),
        ("load dict with NaN", "lethe.load(dict(_tiny(), batch="
         "float('nan')))", ["JSON", "nan", "NaN"]),
        ("load a list", "lethe.load([1, 2])", ["list"]),
        ("load None", "lethe.load(None)", ["NoneType"]),
        ("device unknown", "lethe.load(GOOD, device='tpu9')", ["tpu9"]),
        ("device None", "lethe.load(GOOD, device=None)", ["device"]),
        ("device slow profile", "lethe.load(GOOD, device=os.path.join("
         "FILES, 'slow.json'))", ["d2h_gb_per_s"]),
        ("plan budget -1", "lethe.plan(GOOD, budget=-1)", ["budget"]),
        ("plan budget text", "lethe.plan(GOOD, budget='lots')", ["lots"]),
        ("plan budget empty", "lethe.plan(GOOD, budget='')", ["budget"]),
        ("plan budget -5%", "lethe.plan(GOOD, budget='-5%')", ["-5%"]),
        ("plan budget overflow %", "lethe.plan(GOOD, budget="
         "'99999999999999999999%')", ["99999999999999999999"]),
        ("plan budget 2^70", "lethe.plan(GOOD, budget=2**70)",
         ["1180591620717411303424", "budget"]),
        ("plan budget float", "lethe.plan(GOOD, budget=1.5)", ["budget"]),
        ("plan budget bool", "lethe.plan(GOOD, budget=True)", ["budget"]),
        ("plan budget 1 byte", "lethe.plan(GOOD, budget=1)", ["budget"]),
        ("plan budget braces", "lethe.plan(GOOD, budget='1} x={')",
         ["budget"]),
        ("plan policy bogus", "lethe.plan(GOOD, '60%', 'bogus')", ["bogus"]),
        ("plan policy int", "lethe.plan(GOOD, '60%', 3)", ["policy"]),
        ("plan every_n 0", "lethe.plan(GOOD, '60%', 'every-n', every_n=0)",
         ["every_n"]),
        ("plan alignment 3", "lethe.plan(GOOD, '60%', alignment=3)",
         ["alignment"]),
        ("plan alignment 2^62", "lethe.plan(GOOD, '60%', "
         "alignment=2**62)", ["alignment"]),
        ("plan alignment -256", "lethe.plan(GOOD, '60%', "
         "alignment=-256)", ["alignment"]),
        ("plan alignment str", "lethe.plan(GOOD, '60%', alignment='x')",
         ["alignment"]),
        ("plan solver bogus", "lethe.plan(GOOD, '60%', solver='bogus')",
         ["bogus"]),
        ("plan keep_ops quote", "lethe.plan(GOOD, '60%', 'selective-op', "
         "keep_ops=['a\"b'])", ["keep_ops"]),
        ("plan host_budget -1", "lethe.plan(GOOD, '60%', host_budget=-1)",
         ["host_budget"]),
        ("plan plan_file missing", "lethe.plan(GOOD, '60%', plan_file="
         "os.path.join(FILES, 'nope-plan.json'))", ["nope-plan.json"]),
        ("plan plan_file garbage", "lethe.plan(GOOD, '60%', plan_file="
         "os.path.join(FILES, 'garbage-plan.json'))",
         ["garbage-plan.json"]),
        ("plan plan_file /dev/zero", "lethe.plan(GOOD, '60%', "
         "plan_file='/dev/zero')", ["/dev/zero"]),
        ("report top -1", "lethe.report(GOOD, top=-1)", ["top"]),
        ("trace into missing dir", "lethe.plan(GOOD, '60%').trace("
         "os.path.join(FILES, 'missing', 't.json'))", ["missing"]),
        ("trace is a directory", "lethe.load(GOOD).write_trace(FILES)",
         ["py-files"]),
    ]
    cases = []
    for index, (kind, call, *names) in enumerate(
            [(k, c) for k, c in content] + argument):
        work = os.path.join(root, f"py-{index:03d}")
        os.makedirs(os.path.join(work, "out"))
        code = PY_PRELUDE.format(good=good, files=files, call=call)
        case = Case("python", kind, ["python3", "-c", code], work, True,
                    names=names[0] if names else ())
        cases.append(case)
    for index, (kind, call) in enumerate([
            ("control: plan", "lethe.plan(GOOD, '60%')"),
            ("control: report", "lethe.report(GOOD)")]):
        work = os.path.join(root, f"py-control-{index}")
        os.makedirs(os.path.join(work, "out"))
        cases.append(Case("python", kind, ["python3", "-c",
                                           PY_PRELUDE.format(
                                               good=good, files=files,
                                               call=call)], work, False))
    return cases


# Exceptions a bad call may raise: LetheError for what the library refuses,
# TypeError / ValueError / FileNotFoundError for arguments Python refuses
# before the library sees them. A JSONDecodeError is a ValueError, but
# means the library's output was not JSON.
ALLOWED = {"LetheError", "TypeError", "ValueError", "FileNotFoundError"}


def check_python(case, returncode, stdout, stderr, timed_out):
    problems = []
    line = next((l for l in stdout.splitlines()
                 if l.startswith("@@RESULT ")), None)
    if timed_out or returncode != 0 or line is None or \
            CRASH_TEXT.search(stderr):
        problems.append(("crash", "hang" if timed_out else
                         f"exit {returncode}: {stderr.strip()[-200:]}"))
    else:
        result = json.loads(line[len("@@RESULT "):])
        if result["outcome"] == "ok":
            if case.invalid:
                problems.append(("exit0", "returned on an invalid input"))
            if result.get("value") is not None and \
                    not _finite(result["value"]):
                problems.append(("nonjson", "a non-finite number"))
        else:
            message = result["message"]
            case.error_bytes = len(message.encode())
            if result["type"] == "JSONDecodeError" or \
                    not ALLOWED & set(result["mro"]):
                problems.append(("crash", f"{result['type']}: "
                                 f"{message[:160]}"))
            if not case.invalid:
                problems.append(("exit0", f"valid call raised "
                                 f"{result['type']}: {message[:160]}"))
            if case.error_bytes >= 1024:
                problems.append(("long", f"{case.error_bytes} B"))
            if not (any(n in message for n in case.names) if case.names
                    else re.search(r"\S:\d+:\d+:|\bnode \d+|\bnode '",
                                   message)):
                problems.append(("unlocated", message[:200]))
    left = files_under(os.path.join(case.work, "out"))
    if left:
        problems.append(("partial", ", ".join(left)[:200]))
    # In the table, a call that raised counts as exit 1.
    if returncode == 0 and line is not None:
        returncode = int(json.loads(line[len("@@RESULT "):])["outcome"]
                         == "raised")
    case.returncode = returncode
    case.problems = problems
    return case


# --------------------------------------------------------------------------
# The campaign.
# --------------------------------------------------------------------------

COLUMNS = ["crash", "exit0", "nonjson", "partial", "long", "unlocated"]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--build", default=os.path.join(REPO, "build"))
    parser.add_argument("--seed", type=int, default=1)
    # The campaign had 2,093 and 1,664; a quarter of that takes some
    # 6 minutes on a shared 2-core machine.
    parser.add_argument("--json-mutants", type=int, default=500)
    parser.add_argument("--mlir-mutants", type=int, default=400)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--timeout", type=float, default=120)
    parser.add_argument("--failures", help="write every failing case here")
    parser.add_argument("--keep", action="store_true",
                        help="keep the scratch directory")
    args = parser.parse_args()
    build = os.path.abspath(args.build)
    for tool in ("lethe", "lethe-translate"):
        if not os.access(os.path.join(build, "bin", tool), os.X_OK):
            sys.exit(f"error: {build}/bin/{tool} is not built")

    started = time.time()
    scratch = tempfile.mkdtemp(prefix="lethe-campaign-")
    rng = random.Random(args.seed)
    os.makedirs(os.path.join(scratch, "bases"))
    bases, programs = mlir_bases(build, os.path.join(scratch, "bases"))
    cases = json_cases(rng, args.json_mutants, scratch)
    cases += mlir_cases(rng, args.mlir_mutants, scratch, bases, programs)
    cases += cli_cases(scratch)
    cases += python_cases(scratch)
    prepare_links(cases)
    print(f"{len(cases)} runs: {args.json_mutants} JSON mutants of "
          f"{len(JSON_SEEDS) + len(JSON_REAL)} graphs, {args.mlir_mutants} "
          f"MLIR mutants of {len(bases)} steps and {len(programs)} "
          f"programs, CLI misuse, Python calls; {args.jobs} jobs",
          flush=True)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        done = list(pool.map(lambda c: run_case(c, build, args.timeout),
                             cases))
    devices_ok = check_devices_intact()

    groups = {}
    for case in done:
        groups.setdefault(case.group, []).append(case)
    header = ["group", "inputs", "runs", "exit 0", "exit 1", "infeasible"] \
        + COLUMNS + ["max error B"]
    rows = []
    for group in ("json", "mlir", "cli", "python"):
        runs = groups.get(group, [])
        inputs = len({os.path.dirname(c.work) if group in ("json", "mlir")
                      else c.work for c in runs})
        row = [group, inputs, len(runs),
               sum(c.returncode == 0 for c in runs),
               sum(c.returncode == 1 for c in runs),
               sum(c.infeasible for c in runs)]
        row += [sum(any(p[0] == col for p in c.problems) for c in runs)
                for col in COLUMNS]
        row.append(max((c.error_bytes for c in runs), default=0))
        rows.append(row)
    widths = [max(len(str(r[i])) for r in rows + [header])
              for i in range(len(header))]
    line = lambda r: "| " + " | ".join(str(v).rjust(w) if i else
                                       str(v).ljust(w)
                                       for i, (v, w) in enumerate(
                                           zip(r, widths))) + " |"
    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in rows:
        print(line(row))
    failing = [c for c in done if c.problems]
    print(f"\n{len(failing)} failing runs; /dev/null and /dev/stdout "
          f"{'intact' if devices_ok else 'REPLACED'}; "
          f"{time.time() - started:.0f} s")
    by_kind = {}
    for case in failing:
        for column, why in case.problems:
            by_kind.setdefault((case.group, column, case.kind), []).append(
                (case, why))
    for (group, column, kind), found in sorted(by_kind.items()):
        case, why = found[0]
        command = " ".join(case.argv[:6]) if case.group != "python" \
            else case.kind
        print(f"  {group} {column} [{kind}] x{len(found)}: "
              f"{command[:100]} -- {why[:160]}")
    if args.failures:
        with open(args.failures, "w", encoding="utf-8") as f:
            for case in failing:
                f.write(json.dumps({
                    "group": case.group, "kind": case.kind,
                    "argv": case.argv, "work": case.work,
                    "exit": case.returncode,
                    "problems": case.problems}) + "\n")
    if args.keep or failing:
        print(f"scratch kept: {scratch}")
    else:
        shutil.rmtree(scratch, ignore_errors=True)
    return 1 if failing or not devices_ok else 0


if __name__ == "__main__":
    sys.exit(main())
