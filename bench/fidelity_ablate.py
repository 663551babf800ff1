"""Which run-cost term of a profile moves the fidelity bench's overhead error
(issue 17), and what a change of the time model does to it offline: every
program of a fidelity run simulated on a profile with one group of terms
changed, the overhead error (predicted - measured, points) summarised per
variant, eagerly and as a CUDA graph, against the run's recorded steps.

  python3 bench/fidelity_ablate.py DIR RESULTS [--profile calibrated|shipped|FILE]
      [--modes eager,graph] [--variants FILE.json] [--table VARIANT,...]
  DIR: bench/gpu_fidelity.sh compile's folder (.fidelity); RESULTS: the
  device call's $OUT (or a folder of its reports, e.g. an unpacked
  bench/results/fidelity-*-json.tar.gz). --variants: a JSON object
  {name: {field: value or null (removed)}} replacing the built-in set;
  "calibrated" (no change) is always run first; where RESULTS holds
  calibrate-samples.json, "gemm-loop" (the matmul slowdowns of the pure
  GEMM loop, as lethe-calibrate derived them before the mixed loop) too.
  --table: per-program overhead errors of these variants (markdown).

Eager steps whose replay floor was measured while the host set the pace
(fidelity_bench.bad_replay_floors) are left out, as the report does.
"""
import argparse, json, os, statistics, sys, tempfile
from concurrent import futures
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fidelity_bench as fb  # noqa: E402

parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
parser.add_argument("dir")
parser.add_argument("results")
parser.add_argument("--profile", default="calibrated")
parser.add_argument("--modes", default="eager")
parser.add_argument("--variants", default="")
parser.add_argument("--table", default="")
parser.add_argument("--jobs", type=int, default=2)
args = parser.parse_args()
manifest = json.load(open(os.path.join(args.dir, "manifest.json")))
runs, extra = fb.load_results(args.results)
if args.profile == "calibrated":
    profile_path = extra["calibrated"]
elif args.profile == "shipped":
    profile_path = os.path.join(fb.ROOT, "devices", manifest["device"] + ".json")
else:
    profile_path = args.profile
base = json.load(open(profile_path))
K = ['matmul_slowdown_with_copies', 'matmul_slowdown_with_both_copies',
     'memory_bound_slowdown_with_copies',
     'memory_bound_slowdown_with_both_copies']
if args.variants:
    variants = json.load(open(args.variants))
else:
    variants = {
      'no-memory-bound-slowdown': {k: 1.0 for k in K if k.startswith('memory')},
      'no-matmul-slowdown': {k: 1.0 for k in K if k.startswith('matmul')},
      'slowdowns-halved': {k: 1 + (base.get(k, 1) - 1) * 0.5 for k in K},
      'no-slowdowns': {k: 1.0 for k in K},
      'no-wait': {'wait_us': 0.0},
      'no-host-launch': {'host_launch_us': None},
      'no-fixed-copy': {'d2h_fixed_us': None, 'h2d_fixed_us': None},
    }
# The same call's GEMM-loop factors (lethe-calibrate --samples): the profile
# as calibrated before the mixed loop, to compare with on the same run.
samples_path = os.path.join(args.results, 'calibrate-samples.json')
if os.path.exists(samples_path):
    g = json.load(open(samples_path)).get('matmul') or {}
    one = [g.get('slowdown_beside_d2h', 0), g.get('slowdown_beside_h2d', 0)]
    if all(x > 0 for x in one) and g.get('slowdown_beside_both', 0) > 0:
        variants['gemm-loop'] = {
            'matmul_slowdown_with_copies': round(max(1.0, sum(one) / 2), 3),
            'matmul_slowdown_with_both_copies':
                round(max(1.0, g['slowdown_beside_both']), 3)}
variants = {'calibrated': {}, **{k: v for k, v in variants.items()
                                 if k != 'calibrated'}}
modes = args.modes.split(",")
tmp = tempfile.mkdtemp()
paths = {}
for name, ch in variants.items():
    p = dict(base)
    for k, v in ch.items():
        if v is None: p.pop(k, None)
        else: p[k] = v
    paths[name] = os.path.join(tmp, name + '.json')
    json.dump(p, open(paths[name], 'w'))
progs = [p for p in manifest['programs'] if 'error' not in p]
jobs = [(p['name'], v, m) for p in progs for v in variants for m in modes]
def sim(job):
    name, v, mode = job
    return job, fb.simulate(os.path.join(args.dir, 'programs', name, 'step.mlir'),
                            paths[v], mode == 'graph')
pred = {}
with futures.ThreadPoolExecutor(args.jobs) as pool:
    for job, r in pool.map(sim, jobs):
        pred[job] = r['step_us'] / 1e3 if r else None
bad = fb.bad_replay_floors(runs)
meas = {}
for p in progs:
    key = p.get('same_as', p['name'])
    run = runs.get(key, {})
    for m in modes:
        step = ((run.get('step_ms') or {}).get(m) or {}).get('median')
        meas[(p['name'], m)] = None if (m == 'eager' and key in bad) else step
errors = {}
for v in variants:
    for m in modes:
        errs = []
        for p in progs:
            if p['budget'] == 100: continue
            u = f"{p['graph']}-100"
            xs = (meas.get((p['name'], m)), meas.get((u, m)),
                  pred.get((p['name'], v, m)), pred.get((u, v, m)))
            if not all(xs): continue
            mo = xs[0] / xs[1] - 1; po = xs[2] / xs[3] - 1
            errs.append(((po - mo) * 100, p['name']))
            errors[(p['name'], v, m)] = (po - mo) * 100
        if not errs: continue
        e = sorted(x for x, _ in errs)
        worst = max(errs, key=lambda x: abs(x[0]))
        within = sum(abs(x) <= 1.5 for x in e)
        print(f'{v:24s} {m:5s} n={len(e)} median {statistics.median(e):+.2f} '
              f'mean {statistics.mean(e):+.2f} worst {worst[0]:+.2f} '
              f'({worst[1]}) within1.5 {within}/{len(e)}')
if bad:
    print('eager left out (replay floor):', ', '.join(sorted(bad)))
if args.table:
    table = args.table.split(",")
    print('\n| program | ' + ' | '.join(f'{v} {m}' for m in modes for v in table) + ' |')
    print('|---|' + '---|' * (len(modes) * len(table)))
    for p in progs:
        if p['budget'] == 100: continue
        cells = [errors.get((p['name'], v, m)) for m in modes for v in table]
        print(f"| {p['name']} | " + ' | '.join(
            '-' if c is None else f'{c:+.1f}' for c in cells) + ' |')
