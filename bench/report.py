"""Turn bench/run.sh's raw results into the markdown report.

usage: /usr/bin/python3 bench/report.py META RESULTS FAILURES
  META      key=value lines (date, cpu, versions, load, ...)
  RESULTS   key<TAB>rep<TAB>value lines; value is a number, NA or FAIL
  FAILURES  free text, copied into the report when not empty
Standard library only. Every measurement reports the best of its runs.
"""
import sys

FLOOR_GOAL = 1.30  # graphrun's softmax step may take at most 1.3x the C floor's


def read_meta(path):
    meta = {}
    for line in open(path):
        k, _, v = line.rstrip("\n").partition("=")
        meta[k] = v
    return meta


def read_results(path):
    runs = {}  # key -> {rep: value or None}
    for line in open(path):
        parts = line.rstrip("\n").split("\t")
        if len(parts) != 3:
            continue
        key, rep, val = parts
        try:
            v = float(val)
        except ValueError:
            v = None
        runs.setdefault(key, {})[int(rep)] = v
    return runs


def best(runs, key):
    """(best steps/s, rep it came from), or (None, None) when no run succeeded."""
    ok = {r: v for r, v in runs.get(key, {}).items() if v is not None and v > 0}
    if not ok:
        return None, None
    rep = max(ok, key=ok.get)
    return ok[rep], rep


def least(runs, key):
    """The smallest value of key's runs (times, memory), or None."""
    ok = [v for v in runs.get(key, {}).values() if v is not None]
    return min(ok) if ok else None


def at(runs, key, rep):
    return runs.get(key, {}).get(rep) if rep is not None else None


def fmt(v, nd=1):
    return "FAIL" if v is None else f"{v:,.{nd}f}"


def acc_note(a):
    return "" if a is None else f" (acc {a:.4f})"


def deep_report(w, meta, runs):
    """The deep, narrow net (bench/gen_deep.py): compile cost by size, then
    the per-node cost of a training step against PyTorch."""
    layers = meta.get("deep_layers", "").split()
    if not layers:
        return
    base_c, base_r = least(runs, "deepc1_ms"), least(runs, "deepr1_ms")
    base_cm, base_rm = least(runs, "deepc1_mb"), least(runs, "deepr1_mb")
    w("")
    w("Deep, narrow net (bench/gen_deep.py: dense layers of width 16, mse, sgd; nodes are IR nodes "
      "after the passes). `check` is `graphrun check FILE`; `+ run` is `graphrun FILE --steps 1 "
      "--threads 1` (compile, session, plan, executor, one step). Best wall time of "
      f"{meta.get('reps')}×3 runs and that run's peak RSS; \"net\" subtracts a 1-layer net's "
      f"({fmt(base_c, 1)} ms, {fmt(base_cm, 1)} MB for check; {fmt(base_r, 1)} ms, "
      f"{fmt(base_rm, 1)} MB with the run): the process, its libraries and data.")
    w("")
    w("| layers | nodes | check ms | check MB | net ms | net MB | + run ms | + run MB | net ms | net MB |")
    w("|---|---|---|---|---|---|---|---|---|---|")

    def net(v, b):
        return None if v is None or b is None else v - b

    for L in layers:
        n = least(runs, f"deep{L}_nodes")
        c, cm = least(runs, f"deepc{L}_ms"), least(runs, f"deepc{L}_mb")
        r, rm = least(runs, f"deepr{L}_ms"), least(runs, f"deepr{L}_mb")
        w(f"| {L} | {fmt(n, 0)} | {fmt(c)} | {fmt(cm)} | {fmt(net(c, base_c))} | "
          f"{fmt(net(cm, base_cm))} | {fmt(r)} | {fmt(rm)} | {fmt(net(r, base_r))} | "
          f"{fmt(net(rm, base_rm))} |")
    L = meta.get("deep_step_layers")
    n = least(runs, f"deep{L}_nodes")
    w("")
    w(f"Training it, {L} layers ({fmt(n, 0)} nodes), 1 thread; graphrun {meta.get('deep_steps')} steps, "
      f"PyTorch {meta.get('deep_peer_steps')} (bench/torch_deep.py: the same layers, nn.Linear + ReLU, "
      "SGD). At width 1 and batch 1 the kernels do almost nothing: the step is per-node overhead.")
    w("")
    w("| net | graphrun µs/step | PyTorch µs/step | graphrun µs/node | PyTorch µs/node | PyTorch / graphrun |")
    w("|---|---|---|---|---|---|")
    for key, label in (("deep", "width 16, batch 16"), ("deepw1", "width 1, batch 1")):
        g, _ = best(runs, f"{key}_gr_sps")
        p, _ = best(runs, f"{key}_pt_sps")
        gus, pus = (1e6 / g if g else None), (1e6 / p if p else None)
        ratio = f"**{pus / gus:.1f}×**" if gus and pus else "n/a"
        w(f"| {label} | {fmt(gus)} | {fmt(pus)} | {fmt(gus / n if gus and n else None, 3)} | "
          f"{fmt(pus / n if pus and n else None, 3)} | {ratio} |")


def main():
    meta = read_meta(sys.argv[1])
    runs = read_results(sys.argv[2])
    failures = open(sys.argv[3]).read().strip() if len(sys.argv) > 3 else ""
    out = []
    w = out.append

    w("# graphrun vs PyTorch CPU")
    w("")
    w(f"- date: {meta.get('date')}")
    w(f"- CPU: {meta.get('cpu')}, {meta.get('cores')}")
    w(f"- peer: PyTorch {meta.get('torch')}")
    w(f"- peer environment: {meta.get('peer_env')}")
    w(f"- OpenBLAS {meta.get('openblas')}, gcc {meta.get('gcc')}")
    w(f"- {meta.get('graphrun')}")
    w(f"- load average: {meta.get('load')}; the benchmark's own threads count in it")
    w(f"- CPU used by other processes during the benchmark: {meta.get('other')}")
    w(f"- each number is the best of {meta.get('reps')} runs; the whole benchmark took {meta.get('elapsed')} s")
    w("")
    w("| workload | graphrun | PyTorch | C floor | ratio | goal / reference |")
    w("|---|---|---|---|---|---|")

    # 1. softmax regression: compare time per step.
    g, grep_ = best(runs, "sm_gr_sps")
    p, _ = best(runs, "sm_pt_sps")
    c, _ = best(runs, "sm_c_sps")
    gus = 1e6 / g if g else None
    pus = 1e6 / p if p else None
    cus = 1e6 / c if c else None
    ratio = []
    goal = "≤ 1.30× the floor's time: "
    if gus and cus:
        r = gus / cus
        ratio.append(f"graphrun/floor time **{r:.2f}×**")
        goal += "met" if r <= FLOOR_GOAL else "**NOT met**"
    else:
        goal += "unknown (a run failed)"
    if gus and pus:
        ratio.append(f"PyTorch/graphrun time **{pus / gus:.2f}×**")
    gacc = at(runs, "sm_gr_acc", grep_)
    w(f"| softmax regression 784→10, batch 32, SGD 0.1, 1 thread, {meta.get('sm_steps')} steps "
      f"(µs/step, lower is better) | {fmt(gus)}{acc_note(gacc)} | {fmt(pus)} | {fmt(cus)} | "
      f"{'; '.join(ratio) or 'n/a'} | {goal} |")

    # 2-4. throughput workloads: compare steps/s.
    rows = [
        ("mlp2", f"MLP 784-512-256-10, batch 64, SGD 0.05, 2 threads, {meta.get('mlp_steps')} steps", 880),
        ("mlp1", f"MLP 784-512-256-10, batch 64, SGD 0.05, 1 thread, {meta.get('mlp_steps')} steps", 500),
        ("cnn2", f"LeNet CNN, batch 64, SGD 0.05, 2 threads, {meta.get('cnn_steps')} steps", 43),
    ]
    for key, label, ceiling in rows:
        g, gr = best(runs, f"{key}_gr_sps")
        p, pr = best(runs, f"{key}_pt_sps")
        ga = at(runs, f"{key}_gr_acc", gr)
        pa = at(runs, f"{key}_pt_acc", pr)
        if g and p:
            r = g / p
            ratio = f"graphrun/PyTorch **{r:.2f}×**"
            verdict = "beats PyTorch: " + ("yes" if r > 1.0 else "**no**")
        else:
            ratio, verdict = "n/a", "unknown (a run failed)"
        w(f"| {label} (steps/s, higher is better) | {fmt(g)}{acc_note(ga)} | {fmt(p)}{acc_note(pa)} | — | "
          f"{ratio} | {verdict}; DESIGN.md ceiling ~{ceiling} steps/s |")

    # 5. Hogwild!: 2 executors x 1 thread against PyTorch's 2 processes x 1 thread,
    # and against graphrun's own 1 executor x 1 thread (same total steps, so the
    # same number of examples).
    g, gr = best(runs, "hog_gr_sps")
    p, pr = best(runs, "hog_pt_sps")
    one, onr = best(runs, "mlp1_gr_sps")
    ga, pa, oa = at(runs, "hog_gr_acc", gr), at(runs, "hog_pt_acc", pr), at(runs, "mlp1_gr_acc", onr)
    ratio = f"graphrun/PyTorch **{g / p:.2f}×**" if g and p else "n/a"
    verdict = ("goal ≥ 1.3×: " + ("met" if g / p >= 1.3 else "**not met**")) if g and p else "unknown"
    w(f"| MLP Hogwild!, 2 executors × 1 thread vs 2 processes × 1 thread (`torch_mlp.py N 64 1 2`), "
      f"{meta.get('mlp_steps')} steps in total (steps/s) | {fmt(g)}{acc_note(ga)} | {fmt(p)}{acc_note(pa)} | — | "
      f"{ratio} | {verdict} |")
    if g and one:
        sc = g / one
        w(f"| async scaling: 2 executors × 1 thread / 1 executor × 1 thread (total steps/s) | "
          f"{fmt(g)} / {fmt(one)} | — | — | **{sc:.2f}×** | goal ≥ 1.8×: {'met' if sc >= 1.8 else '**not met**'} |")
    if ga is not None and oa is not None:
        d = abs(float(ga) - float(oa))
        w(f"| convergence: test accuracy after the same examples, 2 async executors vs 1 | "
          f"{float(ga):.4f} vs {float(oa):.4f} | — | — | {100 * d:.2f} points | goal ≤ 1 point: "
          f"{'met' if d <= 0.01 else '**not met**'} |")

    deep_report(w, meta, runs)
    w("")
    s1, _ = best(runs, "sgemm1_gflops")
    s2, _ = best(runs, "sgemm2_gflops")
    w(f"Context: OpenBLAS sgemm on MLP-sized matrices (shared/bench/blas_concurrency.c) reaches "
      f"{fmt(s1)} GFLOP/s with 1 thread and {fmt(s2)} GFLOP/s with 2 concurrent single-threaded callers.")
    w("Accuracy is on the 10,000-image test set after training; torch_cnn.py does not measure it.")
    w("graphrun draws shuffled batches; the PyTorch scripts and the C floor walk the training set in order.")
    w("")
    w("All runs (steps/s; softmax as µs/step):")
    w("")
    names = [("sm_gr_sps", "softmax graphrun", True), ("sm_pt_sps", "softmax PyTorch", True),
             ("sm_c_sps", "softmax C floor", True),
             ("mlp2_gr_sps", "MLP 2t graphrun", False), ("mlp2_pt_sps", "MLP 2t PyTorch", False),
             ("mlp1_gr_sps", "MLP 1t graphrun", False), ("mlp1_pt_sps", "MLP 1t PyTorch", False),
             ("hog_gr_sps", "Hogwild! graphrun 2x1", False), ("hog_pt_sps", "Hogwild! PyTorch 2x1", False),
             ("cnn2_gr_sps", "CNN 2t graphrun", False), ("cnn2_pt_sps", "CNN 2t PyTorch", False),
             ("deep_gr_sps", "deep net graphrun", False), ("deep_pt_sps", "deep net PyTorch", False),
             ("deepw1_gr_sps", "deep net width 1 graphrun", False),
             ("deepw1_pt_sps", "deep net width 1 PyTorch", False)]
    for key, label, as_us in names:
        vals = [runs.get(key, {}).get(r) for r in sorted(runs.get(key, {}))]
        shown = ["FAIL" if v is None else (f"{1e6 / v:.1f}" if as_us else f"{v:.1f}") for v in vals]
        w(f"- {label}: {', '.join(shown) or 'not run'}")
    if failures:
        w("")
        w("Failed runs:")
        w("")
        w(failures)
    print("\n".join(out))


if __name__ == "__main__":
    main()
