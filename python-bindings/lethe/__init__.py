"""Lethe: training-time activation memory planning.

    import lethe
    report = lethe.report("step.json")           # dict: lethe report --json
    p = lethe.plan("step.json", budget="50%")    # Plan: numbers, decisions
    p.to_json(); p.trace("plan.trace.json")
    graph = lethe.load(exported_dict, device="h100")
    graph.write_trace("step.trace.json")

`lethe.torch` exports a PyTorch training step as Lethe's graph JSON,
`lethe.jax` a JAX one as generic StableHLO, `lethe.schema` checks graph
files. `load`, `report`, `plan` and `Graph` call Lethe's C API in the native
library liblethe-c.so (lethe._native, through ctypes), which the wheel and
the CMake build (build/python/lethe) put beside this file; without it they
raise ImportError.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Union

from lethe import _native
from lethe._native import LetheError

__version__ = "0.1.0"
__all__ = ["Graph", "InfeasibleBudgetError", "LetheError", "Plan", "load",
           "plan", "report"]

GraphSource = Union[str, "os.PathLike[str]", Dict[str, Any], "Graph"]
Budget = Union[int, str, None]


def _check_device(device: object) -> None:
    if not isinstance(device, str) or not device:
        raise TypeError(f"device must be a profile name or a profile file "
                        f"path, got {device!r}")


class Graph:
    """A training step loaded into Lethe's canonical form."""

    def __init__(self, native: _native.Graph, device: str,
                 source: str) -> None:
        self._native = native
        self.device = device
        self.source = source

    def __repr__(self) -> str:
        return f"<lethe.Graph {self.source} on {self.device}>"

    @property
    def mlir(self) -> str:
        """The step in Lethe's canonical MLIR form (text)."""
        return self._native.mlir()

    def report(self, top: int = 10) -> Dict[str, Any]:
        """The unplanned step's memory profile and predicted time, as the
        dict `lethe report --json` writes."""
        if not isinstance(top, int) or isinstance(top, bool) or top < 0:
            raise ValueError(f"top must be an integer >= 0, got {top!r}")
        return json.loads(self._native.report(top))

    def write_trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the unplanned step's Chrome-trace / Perfetto timeline."""
        self._native.write_trace(os.fspath(path))


class Plan:
    """A retain / recompute / offload plan of a step under a budget: the
    one plan class of the Python API, whichever route made it.

    Numbers (bytes, microseconds) are the simulator's predictions on the
    graph's device; `decisions` has one dict per activation (id, name,
    bytes, decision, reason, restore point, recomputed ops / copies), as
    `lethe plan --json` lists them under "values". `owners` is filled by
    the framework routes (`lethe.torch`): the same decisions keyed by the
    exported graph's (node id, output index), as `lethe._partition.Decision`
    objects, which is how a partitioner applies them."""

    def __init__(self, native: Optional[_native.Plan] = None, *,
                 document: Optional[Dict[str, Any]] = None) -> None:
        if (native is None) == (document is None):
            raise TypeError("Plan takes a native plan or a document")
        self._native = native
        doc = json.loads(native.json()) if native is not None else document
        self._doc: Dict[str, Any] = doc
        get = doc.get
        self.feasible: bool = bool(get("feasible", True))
        self.policy: Optional[str] = get("policy")
        self.budget_bytes: Optional[int] = get("budget_bytes")
        self.peak_bytes: Optional[int] = get("peak_bytes")
        self.step_us: Optional[float] = get("step_us")
        self.baseline_peak_bytes: Optional[int] = get("baseline_peak_bytes")
        self.baseline_step_us: Optional[float] = get("baseline_step_us")
        self.overhead: Optional[float] = get("overhead")
        # A planner passed to the torch backend (`planner=`) may say
        # "least_feasible_budget".
        self.least_feasible_budget_bytes: Optional[int] = get(
            "least_feasible_budget_bytes", get("least_feasible_budget"))
        # With `bound`: no plan's overhead at this budget is lower, and this
        # plan's overhead minus it (None without `bound`, or when no plan
        # fits).
        self.lower_bound_overhead: Optional[float] = get(
            "lower_bound_overhead")
        self.gap: Optional[float] = get("gap")
        self.decisions: List[Dict[str, Any]] = get(
            "values", get("decisions", []))
        self.owners: Dict[Any, Any] = {}
        counts = get("counts")
        if counts is None:
            counts = {"retain": 0, "recompute": 0, "offload": 0}
            for d in self.decisions:
                if d.get("decision") in counts:
                    counts[d["decision"]] += 1
        self.counts: Dict[str, int] = counts

    @classmethod
    def from_document(cls, document: Dict[str, Any]) -> "Plan":
        """A plan from its JSON document (`lethe plan --json`, or what a
        custom planner returned); `to_json` gives it back, `trace` needs a
        plan made by the native library."""
        return cls(document=document)

    @property
    def document(self) -> Dict[str, Any]:
        """The plan's JSON document, as a dict (do not modify)."""
        return self._doc

    def figures(self) -> Dict[str, Any]:
        """The plan's numbers, as the torch backends' records summarize
        them."""
        return {"policy": self.policy, "feasible": self.feasible,
                "budget_bytes": self.budget_bytes,
                "peak_bytes": self.peak_bytes, "step_us": self.step_us,
                "baseline_peak_bytes": self.baseline_peak_bytes,
                "baseline_step_us": self.baseline_step_us,
                "decisions": dict(self.counts)}

    def __repr__(self) -> str:
        step = f"{self.step_us:.1f}" if self.step_us is not None else "?"
        return (f"<lethe.Plan {self.policy} budget={self.budget_bytes} "
                f"peak={self.peak_bytes} step_us={step} "
                f"feasible={self.feasible}>")

    def to_json(self) -> str:
        """The same JSON text as `lethe plan --json`."""
        if self._native is None:
            return json.dumps(self._doc, indent=2)
        return self._native.json()

    def trace(self, path: Union[str, "os.PathLike[str]"]) -> None:
        """Writes the planned step's simulated Chrome-trace timeline."""
        if self._native is None:
            raise LetheError("this plan was read from a document: only a "
                             "plan made by lethe.plan can write its trace")
        self._native.write_trace(os.fspath(path))


class InfeasibleBudgetError(LetheError):
    """No plan of the policy meets the budget. `least_feasible_budget` is
    the least budget it can meet, in bytes (None if unknown); `least_share`
    the same as a share of the unplanned peak ("55%"), where the budget was
    given as one (the torch backend); `plan` the infeasible plan, when
    `lethe.plan` raised it (the torch backend raises it with the budget
    only)."""

    def __init__(self, message: str,
                 least_feasible_budget: Optional[int] = None, *,
                 plan: Optional[Plan] = None,
                 least_share: Optional[str] = None) -> None:
        super().__init__(message)
        if least_feasible_budget is None and plan is not None:
            least_feasible_budget = plan.least_feasible_budget_bytes
        self.least_feasible_budget = least_feasible_budget
        self.least_share = least_share
        self.plan = plan


def _option_text(name: str, value: Budget) -> Optional[str]:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise TypeError(f"{name} must be bytes (an int) or a string such as "
                        f"'40GiB' or '50%', got {value!r}")
    if isinstance(value, int) and value < 0:
        raise ValueError(f"{name} must be >= 0 bytes, got {value}")
    # An empty budget would mean no limit (None says so); `lethe plan
    # --budget=` refuses it too.
    if name == "budget" and isinstance(value, str) and not value.strip():
        raise ValueError("budget must be bytes, a size such as '40GiB' or a "
                         "share such as '50%', got an empty string")
    return str(value)


# Keywords of `plan` whose lethe-plan option (Passes.td) is not the keyword
# with '-' for '_'.
_PASS_OPTION_NAMES = {"every_n": "n"}


def _pass_options(options: Dict[str, Any]) -> str:
    """`options` (keyword: value; None: the pass's default) as the lethe-plan
    pass's option text, "budget=50% n=3", which the C API parses with the
    pass's own parser: the defaults are the pass's, in one place."""
    parts = []
    for key, value in options.items():
        if value is None or value == "":
            continue
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif isinstance(value, (list, tuple)):
            text = ",".join(value)
        else:
            text = str(value)
        if any(c in text for c in "{}'\""):
            raise ValueError(f"{key} must not contain braces or quotes, got "
                             f"{value!r}")
        name = _PASS_OPTION_NAMES.get(key, key.replace("_", "-"))
        # A value with spaces goes in braces, as the pass prints it.
        parts.append(f"{name}={{{text}}}" if " " in text else f"{name}={text}")
    return " ".join(parts)


def plan(graph: GraphSource, budget: Budget = None,
         policy: Optional[str] = None, device: Optional[str] = None, *,
         every_n: Optional[int] = None,
         keep_ops: Union[str, Iterable[str]] = (),
         offload_kept: Optional[bool] = None,
         min_offload_bytes: Budget = None, host_budget: Budget = None,
         solver: Optional[str] = None, replay_rng: Optional[bool] = None,
         bound: Optional[bool] = None, alignment: Optional[int] = None,
         plan_file: Optional[str] = None, threads: Optional[int] = None,
         allow_infeasible: bool = False) -> Plan:
    """Plans `graph` (anything `load` takes) under `budget`: bytes, a size
    ("40GiB") or a share of the unplanned peak ("50%"); None: no limit.
    `policy`: auto, none, full, every-n, selective-op, offload-all. The
    options are the `lethe-plan` pass's (docs/Generated/LethePasses.md;
    `every_n` is its `n`), None meaning its default (`device` too:
    lethe._native.plan_option_defaults()), so that the same graph and
    options plan as `lethe plan`, `lethe compile` and `lethe-opt` do;
    `alignment` (default 256, the arena's) rounds every storage up before
    planning. When no plan meets the budget, raises InfeasibleBudgetError
    (carrying the plan) unless `allow_infeasible`. `bound`: also compute a
    lower bound on any plan's overhead at the budget
    (Plan.lower_bound_overhead, Plan.gap). `threads`: threads the `auto`
    solver may use (its plans are the same whatever the number; 0: the
    idle cores)."""
    if policy is not None and not isinstance(policy, str):
        raise TypeError(f"policy must be a string, got {policy!r}")
    if every_n is not None and (not isinstance(every_n, int)
                                or isinstance(every_n, bool) or every_n < 1):
        raise ValueError(f"every_n must be an integer >= 1, got {every_n!r}")
    if alignment is not None and (not isinstance(alignment, int)
                                  or isinstance(alignment, bool)):
        raise TypeError(f"alignment must be an integer, got {alignment!r}")
    if threads is not None and (not isinstance(threads, int)
                                or isinstance(threads, bool) or threads < 0):
        raise ValueError(f"threads must be an integer >= 0, got {threads!r}")
    if isinstance(keep_ops, str):
        keep_ops = (keep_ops,)
    options = _pass_options({
        "budget": _option_text("budget", budget), "policy": policy,
        "every_n": every_n, "keep_ops": tuple(keep_ops) or None,
        "offload_kept": offload_kept,
        "min_offload_bytes": _option_text("min_offload_bytes",
                                          min_offload_bytes),
        "host_budget": _option_text("host_budget", host_budget),
        "solver": solver, "replay_rng": replay_rng, "bound": bound,
        "alignment": alignment, "plan_file": plan_file, "threads": threads})
    result = Plan(load(graph, device)._native.plan(options))
    if not result.feasible and not allow_infeasible:
        least = result.least_feasible_budget_bytes
        raise InfeasibleBudgetError(
            f"budget {result.budget_bytes} B is below the least budget "
            f"policy '{result.policy}' can meet on this graph"
            + (f" ({least} B)" if least is not None else ""), plan=result)
    return result


def load(graph: GraphSource, device: Optional[str] = None) -> Graph:
    """Loads a training step: the path of a graph file, an exported graph
    dict (as `lethe.torch.export_training_step` returns), or a Graph
    (returned as it is). `device` costs the ops that carry no time (None:
    the lethe-plan pass's default device, h200). A file
    is read as Lethe's graph JSON when its text starts with `{`, else as
    MLIR, whatever its name (as the `lethe` tools do)."""
    if isinstance(graph, Graph):
        return graph
    _native.library()  # ImportError first when the library is missing
    if device is None:
        device = _native.plan_option_defaults()["device"]
    _check_device(device)
    if isinstance(graph, dict):
        text = json.dumps(graph, allow_nan=False)
        return Graph(_native.Graph.loads(text, "json", "<dict>", device),
                     device, "<dict>")
    if isinstance(graph, (str, os.PathLike)):
        path = os.fspath(graph)
        # The format comes from the content (the C API sniffs it): exports
        # are named anything, `step.JSON`, `graph`, `model.txt`.
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no graph file '{path}'")
        return Graph(_native.Graph.load(path, device), device, path)
    raise TypeError("graph must be a path (graph JSON or MLIR), an exported "
                    "graph dict or a lethe.Graph, got "
                    f"{type(graph).__name__}")


def report(graph: GraphSource, device: Optional[str] = None,
           top: int = 10) -> Dict[str, Any]:
    """`lethe report --json` of `graph` (anything `load` takes), as a dict."""
    return load(graph, device).report(top)
