"""Which run-cost term of a calibrated profile moves the fidelity bench's
overhead error (issue 17): every program of a fidelity run simulated
eagerly on the calibrated profile with one group of terms removed, the
overhead error (predicted - measured, points) summarised per variant.

  python3 bench/fidelity_ablate.py DIR RESULTS   (DIR: bench/gpu_fidelity.sh
      compile's folder, .fidelity; RESULTS: the device call's $OUT)
"""
import json, os, statistics, sys, tempfile
from concurrent import futures
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
if len(sys.argv) != 3:
    sys.exit(__doc__)
DIR, RESULTS = sys.argv[1:3]
import fidelity_bench as fb  # noqa: E402
manifest = json.load(open(os.path.join(DIR, 'manifest.json')))
runs, extra = fb.load_results(RESULTS)
base = json.load(open(extra['calibrated']))
K = ['matmul_slowdown_with_copies', 'matmul_slowdown_with_both_copies',
     'memory_bound_slowdown_with_copies',
     'memory_bound_slowdown_with_both_copies']
variants = {
  'calibrated': {},
  'no-memory-bound-slowdown': {k: 1.0 for k in K if k.startswith('memory')},
  'no-matmul-slowdown': {k: 1.0 for k in K if k.startswith('matmul')},
  'slowdowns-halved': {k: 1 + (base[k] - 1) * 0.5 for k in K},
  'no-slowdowns': {k: 1.0 for k in K},
  'no-wait': {'wait_us': 0.0},
  'no-host-launch': {'host_launch_us': None},
  'no-fixed-copy': {'d2h_fixed_us': None, 'h2d_fixed_us': None},
}
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
jobs = [(p['name'], v) for p in progs for v in variants]
def sim(job):
    name, v = job
    return job, fb.simulate(os.path.join(DIR, 'programs', name, 'step.mlir'), paths[v], False)
pred = {}
with futures.ThreadPoolExecutor(2) as pool:
    for job, r in pool.map(sim, jobs):
        pred[job] = r['step_us'] / 1e3 if r else None
meas = {}
for p in progs:
    run = runs.get(p.get('same_as', p['name']), {})
    meas[p['name']] = ((run.get('step_ms') or {}).get('eager') or {}).get('median')
for v in variants:
    errs = []
    for p in progs:
        if p['budget'] == 100: continue
        g = p['graph']; u = f'{g}-100'
        if not (meas.get(p['name']) and meas.get(u) and pred.get((p['name'], v)) and pred.get((u, v))): continue
        mo = meas[p['name']] / meas[u] - 1; po = pred[(p['name'], v)] / pred[(u, v)] - 1
        errs.append(((po - mo) * 100, p['name']))
    e = sorted(x for x, _ in errs)
    worst = max(errs, key=lambda x: abs(x[0]))
    within = sum(abs(x) <= 1.5 for x in e)
    print(f'{v:16s} n={len(e)} median {statistics.median(e):+.2f} mean {statistics.mean(e):+.2f} worst {worst[0]:+.2f} ({worst[1]}) within1.5 {within}/{len(e)}')
