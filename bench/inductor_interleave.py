"""Interleaved timing for bench/torch_inductor_bench.py (`--interleave R`).

The host's time to issue one step wandered by up to 30% within one process
on the lent H200 hosts, and with each method in a process of its own
(`--isolate`), two methods were timed minutes apart (T5 under compile-0.5
and under Lethe: -1.4% in one call, +6.3% in the next;
bench/results/torch-inductor.md, 2026-11-27). Here each method's process,
after its first timed round, stays alive with its compiled step and waits;
the parent then lets the processes time R - 1 more rounds in turns (each
round in the reverse order of the one before), one process at a time, so
every method is timed in every stretch of the host's wander. A method's
row is the median over all its rounds.

Protocol (files in one directory, polled): the child writes
`NAME.round0.json` (its row after the first round) and waits; the parent
writes `go-NAME-K` for round K and waits for `done-NAME-K`; `end-NAME`
lets the child finish (the one-off probes after timing) and write its
final row. A child that exits early is its row as it stands.
"""

import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Callable, Dict, List, Optional

# Polling period (s): against rounds of tens of ms of steps, and no CPU
# taken from the process that is timing.
_POLL_S = 0.005
ENV = "LETHE_BENCH_TURNS"  # DIR:NAME, set by the parent for its child


class Turns:
    """The child's side: more rounds of timed steps while the parent asks."""

    def __init__(self, spec: str) -> None:
        self.dir, _, self.name = spec.rpartition(":")

    @staticmethod
    def from_env() -> Optional["Turns"]:
        spec = os.environ.get(ENV)
        return Turns(spec) if spec else None

    def rounds(self, row: Dict[str, Any],
               time_more: Callable[[], List[float]]) -> None:
        """Publishes `row` (after round 0) and times rounds while asked;
        `row` then holds every round's times and their median."""
        _write(os.path.join(self.dir, f"{self.name}.round0.json"), row)
        rounds = [list(row.get("step_ms_all") or [row["step_ms"]])]
        parent = os.getppid()
        k = 1
        while True:
            go = os.path.join(self.dir, f"go-{self.name}-{k}")
            end = os.path.join(self.dir, f"end-{self.name}")
            while not (os.path.exists(go) or os.path.exists(end)):
                if os.getppid() != parent:  # the parent died: no turns
                    break
                time.sleep(_POLL_S)
            if not os.path.exists(go):
                break
            rounds.append(time_more())
            open(os.path.join(self.dir, f"done-{self.name}-{k}"), "w").close()
            k += 1
        row["step_ms_rounds"] = [statistics.median(r) for r in rounds]
        row["step_ms_all"] = [t for r in rounds for t in r]
        row["step_ms"] = statistics.median(row["step_ms_all"])


class Interleaver:
    """The parent's side: children started one after another (a later
    method's budget may be an earlier one's measured peak), then timed in
    turns."""

    def __init__(self, directory: str) -> None:
        self.dir = directory
        self.children: Dict[str, subprocess.Popen] = {}
        self.outs: Dict[str, str] = {}

    def start(self, name: str, argv: List[str], out: str) -> Dict[str, Any]:
        """Starts a child and returns its row after round 0 (or its final
        row if it exited before)."""
        env = dict(os.environ, **{ENV: f"{self.dir}:{name}"})
        proc = subprocess.Popen(argv, env=env, stderr=sys.stderr)
        self.children[name], self.outs[name] = proc, out
        first = os.path.join(self.dir, f"{name}.round0.json")
        while not os.path.exists(first) and proc.poll() is None:
            time.sleep(_POLL_S)
        if os.path.exists(first):
            return _read(first)
        return self._final(name)

    def rounds(self, count: int) -> None:
        """Rounds 1 .. count - 1, each child in turn, the order reversed
        every round."""
        names = list(self.children)
        for k in range(1, count):
            for name in (names if k % 2 == 0 else names[::-1]):
                proc = self.children[name]
                if proc.poll() is not None:
                    continue
                open(os.path.join(self.dir, f"go-{name}-{k}"), "w").close()
                done = os.path.join(self.dir, f"done-{name}-{k}")
                while not os.path.exists(done) and proc.poll() is None:
                    time.sleep(_POLL_S)

    def finish(self) -> Dict[str, Dict[str, Any]]:
        """Lets each child finish, one at a time; their final rows."""
        rows = {}
        for name, proc in self.children.items():
            open(os.path.join(self.dir, f"end-{name}"), "w").close()
            proc.wait()
            rows[name] = self._final(name)
        return rows

    def _final(self, name: str) -> Dict[str, Any]:
        proc = self.children[name]
        proc.wait()
        if not os.path.exists(self.outs[name]):
            raise RuntimeError(f"the process of {name} exited with "
                               f"{proc.returncode} and no result")
        return _read(self.outs[name])


def _write(path: str, doc: Dict[str, Any]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, default=str)
    os.replace(tmp, path)  # the parent never reads half a file


def _read(path: str) -> Dict[str, Any]:
    with open(path) as f:
        return json.load(f)
