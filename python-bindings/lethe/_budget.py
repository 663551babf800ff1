"""Budgets as both torch routes (inductor's partitioner, the eager
backend) take and refuse them: the budget's option text, the error of a
budget under what a policy can meet, graphs with nothing to lower, and the
device profile a process plans with by default."""

from __future__ import annotations

import math
import warnings
from typing import Any, Optional

import torch

from lethe import InfeasibleBudgetError, Plan

__all__ = ["normalize_budget", "nothing_to_lower", "least_share",
           "infeasible_error", "warn_nothing_to_lower",
           "default_device_profile"]


def normalize_budget(budget: Any) -> Optional[str]:
    """The budget as Lethe's option text: bytes, "12GiB", "40%"; a float in
    (0, 1] is a share of the unplanned peak. An int is bytes and must be at
    least 1 MiB: `budget=1` is almost surely meant as 100%."""
    if budget is None:
        return None
    if isinstance(budget, bool):
        raise TypeError(f"budget must be bytes, a size string, a share or "
                        f"None, got {budget!r}")
    if isinstance(budget, float):
        if not 0 < budget <= 1:
            raise ValueError(f"a float budget is a share of the unplanned "
                             f"peak in (0, 1], got {budget}")
        return f"{budget * 100:g}%"
    if isinstance(budget, int):
        if budget < 1 << 20:
            raise ValueError(
                f"budget={budget} would be {budget} bytes; give a share as "
                f"a float ({float(budget)!r} or '{budget * 100}%') or bytes "
                "of at least 1 MiB")
        return str(budget)
    if isinstance(budget, str) and budget.strip():
        return budget.strip()
    raise TypeError(f"budget must be bytes (int), a size or share string "
                    f"('12GiB', '40%'), a float share or None, got "
                    f"{budget!r}")


def nothing_to_lower(plan: Plan, budget: Optional[str]) -> bool:
    """Whether `plan` missed a share budget on a graph with nothing to
    lower: its least is its unplanned peak, so no decision moves it (a
    graph break's fragment: 9 ops of HF GPT-2 on torch 2.11; a lone
    nn.Linear). The share cannot apply to such a graph, and raising would
    stop a step whose other graphs meet theirs; a byte budget still
    raises (the step would not fit)."""
    least = plan.least_feasible_budget_bytes
    return not plan.feasible and bool(least) and budget is not None \
        and budget.endswith("%") and bool(plan.baseline_peak_bytes) \
        and least >= plan.baseline_peak_bytes


def least_share(least: int, peak: int) -> str:
    """The least whole share of `peak` (the unplanned peak) that is at
    least `least` bytes, as a budget ("55%")."""
    share = max(1, math.ceil(100 * least / peak))
    while peak * share // 100 < least:
        share += 1
    return f"{share}%"


def infeasible_error(budget: Optional[str], given: str, policy: Optional[str],
                     graph: str, least: Optional[int],
                     peak: Optional[int] = None) -> InfeasibleBudgetError:
    """The error of a budget under what `policy` can meet on `graph`, the
    same from either route (inductor, eager): `given` says what the budget
    came to, `least` is the budget to pass. A share budget is answered
    with a share (`peak`: the graph's unplanned peak): each compiled graph
    takes its share of its own peak, so a share names the least on every
    graph in the form asked, where a byte count applies to each graph
    whole (T5 at 50%: the encoder's least, 8.93 MB, is under the
    decoder's, 12.5 MB)."""
    share = least_share(least, peak) if least and peak and budget \
        and budget.endswith("%") else None
    advice = "" if not least else (
        f"; the least it can meet is {least} B ({least / 2**30:.2f} GiB, "
        f"{share} of its unplanned peak): pass budget=\"{share}\" or more"
        if share else f"; the least it can meet is {least} B "
        f"({least / 2**30:.2f} GiB): pass budget={least} or more")
    return InfeasibleBudgetError(
        f"Lethe: budget {budget}{given} is below what policy '{policy}' "
        f"can meet on {graph}{advice}", least, least_share=share)


def warn_nothing_to_lower(graph: str, least: int, budget: str) -> None:
    warnings.warn(
        f"Lethe: {graph} holds no activation Lethe can lower (its peak, "
        f"{least} B, is the least): the budget {budget} does not apply to "
        "it; compiled as is")


_PROFILE_BY_NAME = (("H200", "h200"), ("H100", "h100"), ("A100", "a100"))


def default_device_profile() -> str:
    """The built-in profile of this process's GPU (h200 without one)."""
    if torch.cuda.is_available():
        name = torch.cuda.get_device_name()
        for key, profile in _PROFILE_BY_NAME:
            if key in name:
                return profile
        warnings.warn(f"Lethe has no device profile for '{name}'; planning "
                      "with the h200 profile (pass device=PROFILE.json)")
    return "h200"
