"""Asks Lethe for a plan of an exported training step.

One function, `plan_json`, hides how: through the compiled bindings
(`lethe.plan`, when the `_lethe` extension is built) or, as a fallback, the
driver (`lethe plan GRAPH --json FILE`). Both return the same document.
`parse_plan` turns it into the decisions the partitioner follows.
"""

import json
import os
import re
import shutil
import subprocess
import tempfile

from lethe import LetheError
from lethe._partition import OFFLOAD, RECOMPUTE, RETAIN, Decision


class PlanError(RuntimeError):
    """Lethe could not plan the graph (bad input, tool missing)."""


class InfeasibleBudgetError(LetheError):
    """The budget is below the least one the policy can meet."""

    def __init__(self, message, least_feasible_budget=None):
        super().__init__(message)
        self.least_feasible_budget = least_feasible_budget


def find_driver():
    """The `lethe` driver with a `plan` subcommand: $LETHE_BIN,
    $LETHE_BUILD_DIR/bin, the build tree's bin, or PATH."""
    candidates = [os.environ.get("LETHE_BIN")]
    if os.environ.get("LETHE_BUILD_DIR"):
        candidates.append(os.path.join(os.environ["LETHE_BUILD_DIR"], "bin",
                                       "lethe"))
    here = os.path.dirname(os.path.abspath(__file__))
    # The source tree's build/bin, or build/bin seen from build/python/lethe.
    candidates.append(os.path.join(here, "..", "..", "build", "bin", "lethe"))
    candidates.append(os.path.join(here, "..", "..", "bin", "lethe"))
    candidates.append(shutil.which("lethe"))
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK) \
                and _plans(os.path.abspath(c)):
            return os.path.abspath(c)
    return None


_driver_plans = {}


def _plans(driver):
    """Whether this driver has the `plan` subcommand."""
    if driver not in _driver_plans:
        try:
            run = subprocess.run([driver, "--help"], stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True,
                                 timeout=60)
            _driver_plans[driver] = "lethe plan" in run.stdout or \
                "\n  plan " in run.stdout
        except (OSError, subprocess.SubprocessError):
            _driver_plans[driver] = False
    return _driver_plans[driver]


def _binding():
    """The package, when its compiled module (and so `lethe.plan`) is
    there."""
    import lethe
    if getattr(lethe, "_lethe", None) is None or not hasattr(lethe, "plan"):
        return None
    return lethe


# Planner options: the backend's names -> lethe.plan's keyword names.
_BINDING_NAMES = {"n": "every_n"}


def _option_flags(options):
    flags = []
    for key, value in sorted(options.items()):
        if value is None:
            continue
        flag = "--" + key.replace("_", "-")
        if isinstance(value, bool):
            flags.append(f"{flag}={'true' if value else 'false'}")
        elif isinstance(value, (list, tuple)):
            flags.append(f"{flag}={','.join(str(v) for v in value)}")
        else:
            flags.append(f"{flag}={value}")
    return flags


def plan_json(graph, budget, policy="auto", device="h200", **options):
    """Lethe's plan (the `lethe plan --json` document) of `graph`, a graph
    dict in graphs/SCHEMA.md's layout. `options` are the planner's further
    options (`host_budget`, `replay_rng`, `n`, `keep_ops`, ...)."""
    budget = str(budget) if budget is not None else ""
    with tempfile.TemporaryDirectory(prefix="lethe-plan-") as tmp:
        path = os.path.join(tmp, "step.json")
        with open(path, "w") as f:
            json.dump(graph, f, allow_nan=False)
        binding = _binding()
        if binding is not None:
            kwargs = {_BINDING_NAMES.get(k, k): v for k, v in options.items()
                      if v is not None}
            try:
                plan = binding.plan(path, budget=budget or None, policy=policy,
                                    device=device, allow_infeasible=True,
                                    **kwargs)
            except binding.LetheError as e:
                raise PlanError(f"Lethe could not plan the step: {e}") from e
            return json.loads(plan.to_json())
        driver = find_driver()
        if driver is None:
            tools = _find_pass_tools()
            if tools is not None:
                return _plan_with_pass(tools, path, budget, policy, device,
                                       options)
            raise PlanError(
                "no Lethe planner: build the Python extension (lethe._lethe) "
                "or the driver (build/bin/lethe; set LETHE_BIN to its path)")
        out = os.path.join(tmp, "plan.json")
        cmd = [driver, "plan", path, f"--policy={policy}",
               f"--device={device}", f"--json={out}"]
        # No budget: no limit (the driver needs one).
        cmd.append(f"--budget={budget or 2 ** 62}")
        cmd += _option_flags(options)
        run = subprocess.run(cmd, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        if os.path.exists(out):
            with open(out) as f:
                return json.load(f)
        message = (run.stderr or run.stdout).strip()
        return _infeasible_or_raise(message or
                                    f"'{' '.join(cmd)}' exited {run.returncode}")


def _infeasible_or_raise(message):
    if "least budget" in message or "infeasible" in message:
        first = message.splitlines()[0]
        least = re.findall(r"\((\d+) B\)", first)
        raise InfeasibleBudgetError(first, int(least[-1]) if least else None)
    raise PlanError(f"Lethe could not plan the step: {message}")


# --- the lethe-plan pass, for builds without the driver's `plan` ----------

def _find_pass_tools():
    """lethe-translate and lethe-opt from where the driver would be."""
    dirs = [os.path.join(os.environ["LETHE_BUILD_DIR"], "bin")] \
        if os.environ.get("LETHE_BUILD_DIR") else []
    here = os.path.dirname(os.path.abspath(__file__))
    dirs.append(os.path.join(here, "..", "..", "build", "bin"))
    dirs.append(os.path.join(here, "..", "..", "bin"))
    for d in dirs:
        tools = [os.path.join(d, t) for t in ("lethe-translate", "lethe-opt")]
        if all(os.access(t, os.X_OK) for t in tools):
            return tools
    return None


def _plan_with_pass(tools, path, budget, policy, device, options):
    """Runs `lethe-translate --import-graph-json | lethe-opt --lethe-plan`
    and reads the decisions and figures back from the attributes."""
    translate, opt = tools
    pass_options = [f"policy={policy}", f"device={device}"]
    if budget:
        pass_options.append(f"budget={budget}")
    for key, value in sorted(options.items()):
        if value is None:
            continue
        if isinstance(value, bool):
            value = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            value = ",".join(str(v) for v in value)
        pass_options.append(f"{key.replace('_', '-')}={value}")
    imported = subprocess.run([translate, "--import-graph-json", path],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    if imported.returncode != 0:
        raise PlanError(f"Lethe could not import the step: "
                        f"{imported.stderr.strip()}")
    planned = subprocess.run(
        [opt, f"--lethe-plan={' '.join(pass_options)}"], input=imported.stdout,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if planned.returncode != 0:
        message = planned.stderr.strip()
        message = message[message.find("lethe-plan:"):] \
            if "lethe-plan:" in message else message
        return _infeasible_or_raise(message)
    return _read_planned_mlir(planned.stdout)


_NODE = re.compile(r"\blethe\.(node|collective)\b")


def _read_planned_mlir(text):
    plan = {"decisions": []}
    figures = re.search(r"lethe\.plan = \{([^}]*)\}", text)
    if figures:
        for key, value in re.findall(r"(\w+) = (\"[^\"]*\"|[^,]+)",
                                     figures.group(1)):
            value = value.strip().split(" : ")[0]
            if value.startswith('"'):
                plan[key] = value.strip('"')
            elif value in ("true", "false"):
                plan[key] = value == "true"
            else:
                number = float(value)
                plan[key] = int(number) if number.is_integer() and \
                    key.endswith("bytes") else number
    index = -1
    for line in text.splitlines():
        if not _NODE.search(line) or "=" not in line.split("lethe.", 1)[0]:
            continue
        index += 1
        decisions = re.search(r"lethe\.decisions = \[([^\]]*)\]", line)
        if not decisions:
            continue
        kinds = re.findall(r"#lethe<decision (\w+)>|\bunit\b",
                           decisions.group(1))
        placement = re.search(r"lethe\.placement = \[(.*?)\]\s*[,}]", line)
        places = _split_top(placement.group(1)) if placement else []
        for result, kind in enumerate(kinds):
            if not kind:
                continue
            entry = {"node": index, "result": result, "decision": kind}
            where = places[result] if result < len(places) else ""
            for key in ("release_after", "prefetch_after", "restore_before"):
                found = re.search(key + r" = (-?\d+)", where)
                if found:
                    entry[key] = int(found.group(1))
            plan["decisions"].append(entry)
    return plan


def _split_top(text):
    """Splits "a, {b, c}, unit" at its top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "{[<(":
            depth += 1
        elif ch in "}]>)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    parts.append(text[start:].strip())
    return parts


def _node_id(ref, graph, op_ids):
    """A JSON node id from a plan's node reference: a name, or the index of
    an op node among the graph's op nodes (Lethe's node numbering)."""
    if ref is None or ref == -1:
        return None
    if isinstance(ref, str):
        return graph["_ids_by_name"].get(ref)
    if isinstance(ref, dict):
        return _node_id(ref.get("name", ref.get("node")), graph, op_ids)
    if isinstance(ref, int) and 0 <= ref < len(op_ids):
        return op_ids[ref]
    return None


class LethePlan:
    """A plan's figures and its decisions keyed by storage owner
    (JSON node id, output index)."""

    def __init__(self, raw, decisions):
        self.raw = raw
        self.decisions = decisions
        get = raw.get
        self.policy = get("policy")
        self.feasible = bool(get("feasible", True))
        self.budget_bytes = get("budget_bytes")
        self.peak_bytes = get("peak_bytes")
        self.step_us = get("step_us")
        self.baseline_peak_bytes = get("baseline_peak_bytes")
        self.baseline_step_us = get("baseline_step_us")
        self.least_feasible_budget = get("least_feasible_budget_bytes",
                                         get("least_feasible_budget"))

    def counts(self):
        counts = {RETAIN: 0, RECOMPUTE: 0, OFFLOAD: 0}
        for d in self.decisions.values():
            counts[d.kind] += 1
        return counts


def parse_plan(raw, graph):
    """Decisions of `raw` (a plan document) for the graph it was made of."""
    nodes = graph["nodes"]
    ids = {}
    for e in nodes:
        ids.setdefault(e["name"], e["id"])
        if "graph_name" in e:
            ids.setdefault(e["graph_name"], e["id"])
    graph = dict(graph, _ids_by_name=ids)
    op_ids = [e["id"] for e in nodes if e["kind"] == "op"]
    decisions = {}
    # `lethe plan --json` lists "values" named "NODE#RESULT (op kind)" (no
    # "#RESULT" for single-result nodes), node references as Lethe's node
    # numbers; the pass route and hand-made plans give "decisions" with
    # "name"/"node" and "result".
    entries = raw.get("values", raw.get("decisions", []))
    for d in entries:
        kind = d.get("decision")
        name = d.get("node", d.get("name"))
        index = d.get("result", 0)
        if isinstance(name, str) and name.endswith(")") and " (" in name:
            name = name.rsplit(" (", 1)[0]
            if "#" in name:
                name, result = name.rsplit("#", 1)
                index = int(result)
        nid = _node_id(name, graph, op_ids) if name is not None else None
        if nid is None:
            raise PlanError(f"plan decision {d!r} names no node of the graph")
        placement = d.get("placement", d)
        decisions[(nid, int(index))] = Decision(
            kind,
            release_after=_node_id(placement.get("release_after"), graph,
                                   op_ids),
            prefetch_after=_node_id(placement.get("prefetch_after"), graph,
                                    op_ids),
            restore_before=_node_id(placement.get("restore_before",
                                                  placement.get(
                                                      "first_backward_use")),
                                    graph, op_ids))
    return LethePlan(raw, decisions)
