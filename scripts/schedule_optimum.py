"""The schedule model of docs/scheduling.md as a CP-SAT model, solved per scenario of the
scheduling benchmark (run through scripts/schedule-optimum).

Model, written out independently of kiln's code: every target to build goes to exactly
one node with enough memory; on node n it occupies one of the node's slots for
pull + build + push seconds, where build = work_s / speed_n, push = output_mb * 8 /
link_mbps_n and pull = the output of each dependency that is published or built on
another node, over n's link; it starts once every dependency it builds has ended
(pushed). Published targets cost nothing and are in the registry at 0.

Durations are in tenths of a second rounded down: the proven bound is then a lower bound
of the real model (in seconds, rounded down to 0.1 s).
"""

import argparse
import glob
import json
import math
import os
import sys

from ortools.sat.python import cp_model

UNIT = 10  # tenths of a second


def down(seconds):
    return int(math.floor(seconds * UNIT + 1e-9))


def solve(problem, time_limit):
    nodes, targets = problem["nodes"], problem["targets"]
    todo = [i for i, t in enumerate(targets) if not t["published"]]
    m = cp_model.CpModel()
    horizon = 1
    for i in todo:
        t = targets[i]
        slowest = min(n["speed"] for n in nodes)
        thinnest = min(n["link_mbps"] for n in nodes)
        moved = t["output_mb"] + sum(targets[d]["output_mb"] for d in t["deps"])
        horizon += down(t["work_s"] / slowest + moved * 8 / thinnest) + 1
    start = {i: m.NewIntVar(0, horizon, f"start{i}") for i in todo}
    end = {i: m.NewIntVar(0, horizon, f"end{i}") for i in todo}
    on = {}
    for i in todo:
        for k, n in enumerate(nodes):
            if n["memory_gb"] >= targets[i]["min_memory_gb"]:
                on[i, k] = m.NewBoolVar(f"on{i}_{k}")
        choices = [on[i, k] for k in range(len(nodes)) if (i, k) in on]
        if not choices:
            raise SystemExit(f"{problem['scenario']}: no node can build {targets[i]['name']}")
        m.AddExactlyOne(choices)
    per_node = {k: [] for k in range(len(nodes))}
    for i in todo:
        t = targets[i]
        sizes = {}
        for k, n in enumerate(nodes):
            if (i, k) not in on:
                continue
            fixed = down(t["work_s"] / n["speed"]) + down(t["output_mb"] * 8 / n["link_mbps"])
            pulls = []
            for d in t["deps"]:
                pull = down(targets[d]["output_mb"] * 8 / n["link_mbps"])
                if targets[d]["published"] or (d, k) not in on:
                    fixed += pull  # from the registry, or built elsewhere for sure
                else:
                    pulls.append((pull, on[d, k]))
            most = fixed + sum(x for x, _ in pulls)
            size = m.NewIntVar(fixed, most, f"size{i}_{k}")
            m.Add(size == fixed + sum(x * (1 - b) for x, b in pulls))
            sizes[k] = (size, fixed, most)
            per_node[k].append(
                m.NewOptionalIntervalVar(start[i], size, end[i], on[i, k], f"run{i}_{k}")
            )
        # The duration wherever it runs: bounded below by the cheapest node, so that
        # dependency chains alone already bound the makespan.
        lo = min(fixed for _, fixed, _ in sizes.values())
        hi = max(most for _, _, most in sizes.values())
        dur = m.NewIntVar(lo, hi, f"dur{i}")
        m.Add(end[i] == start[i] + dur)
        for k, (size, _, _) in sizes.items():
            m.Add(dur == size).OnlyEnforceIf(on[i, k])
        for d in t["deps"]:
            if not targets[d]["published"]:
                m.Add(start[i] >= end[d])
    for k, n in enumerate(nodes):
        if n["slots"] == 1:
            m.AddNoOverlap(per_node[k])
        else:
            m.AddCumulative(per_node[k], [1] * len(per_node[k]), n["slots"])
    makespan = m.NewIntVar(0, horizon, "makespan")
    if todo:
        m.AddMaxEquality(makespan, [end[i] for i in todo])
    m.Minimize(makespan)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = max(1, min(8, os.cpu_count() or 1))
    status = solver.Solve(m)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return {"status": solver.StatusName(status), "best_s": None, "bound_s": None}
    return {
        "status": solver.StatusName(status).lower(),
        "best_s": solver.ObjectiveValue() / UNIT,
        "bound_s": solver.BestObjectiveBound() / UNIT,
        "wall_s": solver.WallTime(),
    }


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--root", required=True)
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per scenario")
    ap.add_argument("scenario", nargs="*", help="scenarios to solve (default: all)")
    a = ap.parse_args()
    results_path = os.path.join(a.root, "target", "bench-schedule.json")
    try:
        with open(results_path) as f:
            rows = {r["scenario"]: r for r in json.load(f)["scenarios"]}
    except OSError as e:
        raise SystemExit(
            f"schedule-optimum: cannot read {results_path} ({e.strerror}); "
            "run `cargo bench -p kiln-plan --bench schedule` first"
        )
    files = sorted(glob.glob(os.path.join(a.root, "target", "bench-schedule", "*.json")))
    problems = []
    for path in files:
        with open(path) as f:
            p = json.load(f)
        if (not a.scenario or p["scenario"] in a.scenario) and p["scenario"] in rows:
            problems.append(p)
    if a.scenario:
        missing = set(a.scenario) - {p["scenario"] for p in problems}
        if missing:
            raise SystemExit(f"schedule-optimum: no such scenario: {', '.join(sorted(missing))}")
    problems.sort(key=lambda p: len(p["targets"]))
    head = (
        f"{'scenario':<12} {'targets':>7} {'lower bd':>9} {'tight bd':>9} {'kiln':>9} "
        f"{'solver best':>11} {'solver bd':>9} {'status':>9} {'kiln/best':>9} "
        f"{'kiln/bd':>8} {'LB/bd':>6}"
    )
    print(head)
    out = []
    for p in problems:
        r = rows[p["scenario"]]
        s = solve(p, a.time_limit)
        # The best proven bound: the solver's or kiln's own (both are lower bounds).
        bound = max(x for x in (s["bound_s"], r["tight_lower_bound_s"]) if x is not None)
        best = s["best_s"]
        print(
            f"{p['scenario']:<12} {len(p['targets']):>7} {r['lower_bound_s']:>9.0f} "
            f"{r['tight_lower_bound_s']:>9.0f} {r['kiln_makespan_s']:>9.0f} "
            f"{best if best is not None else float('nan'):>11.1f} {bound:>9.1f} "
            f"{s['status']:>9} "
            f"{(r['kiln_makespan_s'] / best) if best else float('nan'):>9.3f} "
            f"{r['kiln_makespan_s'] / bound:>8.3f} {r['lower_bound_s'] / bound:>6.3f}",
            flush=True,
        )
        out.append({"scenario": p["scenario"], **s, "best_bound_s": bound,
                    "kiln_makespan_s": r["kiln_makespan_s"],
                    "lower_bound_s": r["lower_bound_s"]})
    print(
        "solver bd: the best proven lower bound (the solver's or kiln's tight bound); "
        "kiln/bd <= 1.10 means kiln is within 10 % of the optimum; "
        "LB/bd < 1/1.10 means no schedule can be within 1.10 x the contract's lower bound"
    )
    dest = os.path.join(a.root, "target", "schedule-optimum.json")
    with open(dest, "w") as f:
        json.dump({"time_limit_s": a.time_limit, "scenarios": out}, f, indent=2)
    print(f"wrote {dest}")


if __name__ == "__main__":
    sys.exit(main())
