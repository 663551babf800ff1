"""Asks Lethe for a plan of an exported training step.

`plan_json` plans a graph dict in process, through the native library
(`lethe.plan`), and returns the `lethe plan --json` document, infeasible
plans included. `parse_plan` makes it a `lethe.Plan` whose `owners` are the
decisions the partitioner follows.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Optional, Tuple, Union

import lethe
from lethe import InfeasibleBudgetError, LetheError, Plan
from lethe._partition import Decision

__all__ = ["InfeasibleBudgetError", "PlanError", "available", "compute_times",
           "default_policy", "parse_plan", "plan_json"]


class PlanError(LetheError, RuntimeError):
    """Lethe could not plan the graph (bad input, library missing). A
    LetheError, as every error Lethe raises (a RuntimeError as before)."""


def available() -> bool:
    """Whether Lethe's native library, and so `plan_json`, is there."""
    from lethe import _native
    return _native.available()


# Planner options: the backend's names -> lethe.plan's keyword names.
_OPTION_NAMES = {"n": "every_n"}


def default_policy() -> str:
    """The lethe-plan pass's default policy, read from the native library
    (lethePlanOptionDefaults: Passes.td's declaration), so that a front end
    that takes `policy=None` states no default of its own."""
    from lethe import _native
    try:
        return _native.plan_option_defaults()["policy"]
    except ImportError as e:
        raise PlanError(f"no Lethe planner: {e}") from e


def plan_json(graph: Dict[str, Any], budget: Union[int, str, None],
              policy: Optional[str] = None, device: Optional[str] = None,
              trace: Optional[str] = None,
              **options: Any) -> Dict[str, Any]:
    """Lethe's plan (the `lethe plan --json` document) of `graph`, a graph
    dict in graphs/SCHEMA.md's layout, under `budget` (bytes, "40GiB",
    "50%"; None or "": no limit). `options` are the planner's further
    options (`host_budget`, `replay_rng`, `n` or `every_n`, `keep_ops`,
    `min_offload_bytes`, `solver`, ...); None means the default. A budget
    no plan meets is not an error: the document says `feasible: false` and
    gives `least_feasible_budget_bytes`. None: the lethe-plan pass's
    default. `trace`: a file to write the plan's simulated step to (a
    Chrome trace, `Plan.trace`)."""
    kwargs = {_OPTION_NAMES.get(k, k): v for k, v in options.items()
              if v is not None}
    budget = None if budget is None or budget == "" else str(budget)
    try:
        plan = lethe.plan(graph, budget=budget, policy=policy, device=device,
                          allow_infeasible=True, **kwargs)
    except ImportError as e:
        raise PlanError(f"no Lethe planner: {e}") from e
    except LetheError as e:
        raise PlanError(f"Lethe could not plan the step: {e}") from e
    if trace is not None:
        plan.trace(trace)
    return json.loads(plan.to_json())


def compute_times(trace: str) -> Dict[str, Tuple[float, int]]:
    """The compute stream's time (µs) and runs per node name of a plan's
    simulated step (`plan_json(trace=...)`): a recomputed node runs more
    than once. An event names its op (`aten.mm.default`) and carries its
    node's name in `args.name`; keyed by the op, no node matched the
    profiled ones, and the calibration scaled the whole step as modelled
    (BERT's re-plan predicted 37.1 ms for a 34.8 ms replay on an H200,
    bench/results/torch-inductor.md, 2026-11-27 k1)."""
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    names = {e.get("tid"): e.get("args", {}).get("name") for e in events
             if e.get("ph") == "M" and e.get("name") == "thread_name"}
    compute = next((t for t, n in names.items() if n == "compute"), 0)
    times: Dict[str, Tuple[float, int]] = {}
    for e in events:
        if e.get("ph") == "X" and e.get("tid") == compute:
            name = e.get("args", {}).get("name", e["name"])
            us, runs = times.get(name, (0.0, 0))
            times[name] = (us + float(e["dur"]), runs + 1)
    return times


def _node_id(ref: Any, graph: Dict[str, Any]) -> Optional[int]:
    """A JSON node id from a plan's node reference: the node's id (Lethe
    names nodes by their exported id, never by position), its name, or an
    object with either."""
    if ref is None:
        return None
    if isinstance(ref, str):
        return graph["_ids_by_name"].get(ref)
    if isinstance(ref, dict):
        if "node_id" in ref:
            return _node_id(ref["node_id"], graph)
        return _node_id(ref.get("name", ref.get("node")), graph)
    if isinstance(ref, int) and not isinstance(ref, bool) \
            and ref in graph["_ids"]:
        return ref
    return None


class PlanRecord:
    """What a backend planned for one compiled graph: the plan and the time
    planning took; the routes add what their partition did."""

    def __init__(self, plan: Plan, plan_s: float) -> None:
        self.plan = plan
        self.plan_s = plan_s

    @property
    def predicted_peak_bytes(self) -> int:
        return self.plan.peak_bytes

    @property
    def predicted_step_us(self) -> float:
        return self.plan.step_us

    def dump(self, directory: str, graph: Dict[str, Any],
             summary: Dict[str, Any]) -> None:
        """Writes graphK.json, planK.json and summaryK.json into
        `directory`, K counting the graphs already there."""
        os.makedirs(directory, exist_ok=True)
        k = sum(1 for f in os.listdir(directory)
                if f.startswith("graph") and f.endswith(".json"))
        for name, doc in ((f"graph{k}.json", graph),
                          (f"plan{k}.json", self.plan.document),
                          (f"summary{k}.json", summary)):
            with open(os.path.join(directory, name), "w") as f:
                json.dump(doc, f, indent=1, default=str)


def parse_plan(raw: Dict[str, Any], graph: Dict[str, Any]) -> Plan:
    """The plan `raw` (a plan document) with its decisions keyed by the
    graph it was made of (`Plan.owners`)."""
    nodes = graph["nodes"]
    ids = {}
    for e in nodes:
        ids.setdefault(e["name"], e["id"])
        if "graph_name" in e:
            ids.setdefault(e["graph_name"], e["id"])
    json_ids = {e["id"] for e in nodes}
    graph = dict(graph, _ids_by_name=ids, _ids=json_ids)
    decisions: Dict[Tuple[int, int], Decision] = {}
    # `lethe plan --json` lists "values" naming the exported node
    # ("node_id", "node") and its "output", and node references by their
    # exported ids; older documents name values "NODE#RESULT (op kind)" (no
    # "#RESULT" for single-result nodes); hand-made plans give "decisions"
    # with "name"/"node" and "output" or "result".
    entries = raw.get("values", raw.get("decisions", []))
    for d in entries:
        kind = d.get("decision")
        index = d.get("output", d.get("result", 0))
        nid = d.get("node_id")
        if nid is not None:
            if nid not in json_ids:
                raise PlanError(f"plan decision {d!r} names no node of the "
                                "graph")
        else:
            name = d.get("node", d.get("name"))
            if isinstance(name, str) and name.endswith(")") and " (" in name:
                name = name.rsplit(" (", 1)[0]
                if "#" in name:
                    name, result = name.rsplit("#", 1)
                    index = int(result)
            nid = _node_id(name, graph) if name is not None else None
            if nid is None:
                raise PlanError(f"plan decision {d!r} names no node of the "
                                "graph")
        placement = d.get("placement", d)

        def point(field: str, *others: str) -> Optional[int]:
            ref = placement.get(field)
            for other in others:
                ref = placement.get(other) if ref is None else ref
            node = _node_id(ref, graph)
            if ref is not None and node is None:
                raise PlanError(f"plan decision {d!r}: '{field}' names no "
                                "node of the graph")
            return node

        decisions[(nid, int(index))] = Decision(
            kind, release_after=point("release_after"),
            prefetch_after=point("prefetch_after"),
            restore_before=point("restore_before", "first_backward_use"))
    plan = Plan.from_document(raw)
    plan.owners = decisions
    return plan
