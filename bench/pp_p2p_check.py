#!/usr/bin/env python3
"""Checks that pipeline stages' point-to-point transfers pair up.

Usage: bench/pp_p2p_check.py STAGE0.json STAGE1.json ...

Each file is lethe-run's report (dry run or timing) of one stage's program,
given in rank order; its "p2p" list holds the step's sends and receives in
issue order with their NCCL group (-1: issued alone). The check:

- pairing: the k-th send from rank a to rank b and the k-th receive on b
  from a move the same number of bytes, and every send has its receive;
- progress: the ranks issue their groups (and lone transfers) in order on
  one comm stream each; a transfer completes once both sides have issued
  theirs, a group once all its transfers have. Running that to the end
  must finish every rank (no deadlock).

Prints one line per rank and "ok", or the problem; exits 1 on a problem.
"""

import json
import sys
from collections import defaultdict


def units_of(p2p):
    """The rank's issue units: each NCCL group, each lone transfer."""
    units = []
    last_group = None
    for op in p2p:
        if op["group"] >= 0 and op["group"] == last_group:
            units[-1].append(op)
        else:
            units.append([op])
        last_group = op["group"] if op["group"] >= 0 else None
    return units


def check(reports):
    ranks = len(reports)
    # Per channel (from, to): the sends and receives in order.
    sends = defaultdict(list)
    recvs = defaultdict(list)
    ident = {}
    for rank, report in enumerate(reports):
        for op in report.get("p2p", []):
            peer = op["peer"]
            if not 0 <= peer < ranks or peer == rank:
                return f"rank {rank}: {op['op']} names peer {peer}"
            if op["kind"] == "send":
                channel = (rank, peer)
                ident[id(op)] = (channel, len(sends[channel]))
                sends[channel].append(op)
            else:
                channel = (peer, rank)
                ident[id(op)] = (channel, len(recvs[channel]))
                recvs[channel].append(op)
    for channel in set(sends) | set(recvs):
        s, r = sends[channel], recvs[channel]
        if len(s) != len(r):
            return (f"rank {channel[0]} sends {len(s)} tensors to rank "
                    f"{channel[1]}, which receives {len(r)}")
        for k, (a, b) in enumerate(zip(s, r)):
            if a["bytes"] != b["bytes"]:
                return (f"transfer {k} from rank {channel[0]} to "
                        f"{channel[1]}: {a['op']} sends {a['bytes']} bytes, "
                        f"{b['op']} receives {b['bytes']}")

    units = [units_of(r.get("p2p", [])) for r in reports]
    cursor = [0] * ranks
    done = set()
    while True:
        posted = set()
        for rank in range(ranks):
            if cursor[rank] < len(units[rank]):
                for op in units[rank][cursor[rank]]:
                    posted.add((op["kind"],) + ident[id(op)])
        progress = False
        for rank in range(ranks):
            if cursor[rank] >= len(units[rank]):
                continue
            unit = units[rank][cursor[rank]]
            other = {"send": "recv", "recv": "send"}
            if all((other[op["kind"]],) + ident[id(op)] in posted
                   or ident[id(op)] in done for op in unit):
                for op in unit:
                    done.add(ident[id(op)])
                cursor[rank] += 1
                progress = True
        if not progress:
            break
    stuck = [r for r in range(ranks) if cursor[r] < len(units[r])]
    if stuck:
        parts = []
        for r in stuck:
            unit = units[r][cursor[r]]
            parts.append(f"rank {r} waits in " +
                         " + ".join(op["op"] for op in unit))
        return "deadlock: " + "; ".join(parts)
    return None


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    reports = []
    for path in argv[1:]:
        with open(path) as f:
            reports.append(json.load(f))
    for rank, report in enumerate(reports):
        p2p = report.get("p2p", [])
        moved = sum(op["bytes"] for op in p2p)
        groups = len({op["group"] for op in p2p if op["group"] >= 0})
        print(f"rank {rank} ({report.get('program', '?')}): {len(p2p)} "
              f"transfers in {groups} groups, {moved} bytes")
    problem = check(reports)
    if problem:
        print("error: " + problem)
        return 1
    print("ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
