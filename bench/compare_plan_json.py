"""Compares `lethe plan --json` documents made before and after issue 19's
stable node references: the old ones name placement nodes by position
(Lethe's node index), the new ones by exported node id. Positions are mapped
to ids through the imported MLIR's node order, `solve_ms` (a timing) is
dropped, and the rest must be equal.

    python3 bench/compare_plan_json.py BUILD GRAPHS BEFORE AFTER CASE...

CASE is GRAPH-POLICY: BEFORE/CASE.json and AFTER/CASE.json were written by
`lethe plan GRAPHS/graph_GRAPH.json ... --json`. Exit 1 if any differs.
"""
import json
import re
import subprocess
import sys


def node_ids(build, path):
    """The `lethe.node_id` of every node, in program order."""
    mlir = subprocess.run([f"{build}/bin/lethe-translate",
                           "--import-graph-json", path], check=True,
                          capture_output=True, text=True).stdout
    return [int(re.search(r"lethe\.node_id = (-?\d+)", line).group(1))
            for line in mlir.splitlines()
            if re.search(r"lethe\.(node|collective) ", line)
            and "lethe.node_id" in line]


def main(build, graphs, before, after, *cases):
    differ = 0
    for case in cases:
        graph = case.split("-", 1)[0]
        ids = node_ids(build, f"{graphs}/graph_{graph}.json")
        old = json.load(open(f"{before}/{case}.json"))
        new = json.load(open(f"{after}/{case}.json"))
        for doc in (old, new):
            doc.pop("solve_ms", None)
            doc.get("lower_bound", {}).pop("solve_ms", None)
        for value in old["values"]:
            for field in ("restore_before", "release_after", "prefetch_after"):
                if field in value:
                    value[field] = ids[value[field]]
            for field in ("recomputed_ops", "rederived_views"):
                if field in value:
                    value[field] = [{"node_id": ids[op["node"]], "op": op["op"]}
                                    for op in value[field]]
        same = old == new
        differ += not same
        print(f"{case}: {len(ids)} nodes, {len(new['values'])} values, "
              f"peak {new['peak_bytes']} B, step {new['step_us']:.3f} us: "
              f"{'identical' if same else 'DIFFERENT'}")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
