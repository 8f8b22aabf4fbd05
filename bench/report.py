"""Turn bench/run.sh's raw results into the markdown report.

usage: /usr/bin/python3 bench/report.py META RESULTS FAILURES
  META      key=value lines (date, cpu, versions, load, ...)
  RESULTS   key<TAB>rep<TAB>value lines; value is a number, NA or FAIL
  FAILURES  free text, copied into the report when not empty
Standard library only. Every measurement reports the best of its runs.

Keys: <workload>_<side>_sps (steps/s) and _acc, workloads sm, mlp2, mlp1,
hog, cnn2; sides gr (graphrun), pt (Debian PyTorch 1.13), pt2 (PyPI PyTorch),
tf (TensorFlow, the seed's pattern); sm_c_sps (the C floor); sgemm1_gflops,
sgemm2_gflops (shared/bench/blas_concurrency.c with 1 and 2 callers).
"""
import sys

FLOOR_GOAL = 1.30  # graphrun's softmax step may take at most 1.3x the C floor's

# FLOPs of one training step (forward, weight gradients, and the input
# gradients of every layer but the first: nothing needs d(loss)/d(images)).
MLP_FLOP = 2 * 64 * (3 * (784 * 512 + 512 * 256 + 256 * 10) - 784 * 512)  # 154.1 M
CNN_FLOP = 2 * 64 * (
    2 * 28 * 28 * 32 * 5 * 5 * 1        # conv1: forward + weight gradient
    + 3 * 14 * 14 * 64 * 5 * 5 * 32     # conv2: forward + weight and input gradients
    + 3 * 3136 * 1024 + 3 * 1024 * 10)  # fc1, out                             # 5.25 G
# graphrun's CPU runs conv2 by Winograd F(2x2, 5x5) (docs/architecture.md):
# 36 multiplies per 2x2 outputs where the direct convolution does 100.
WINO_SHARE = 36 / 100
CNN_FLOP_WINO = CNN_FLOP - 2 * 64 * 3 * 14 * 14 * 64 * 5 * 5 * 32 * (1 - WINO_SHARE)  # 2.78 G

PEERS = [("pt", "PyTorch 1.13 (Debian)"), ("pt2", "PyTorch (PyPI)"), ("tf", "TF seed pattern")]


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

    def ran(key):  # was this side run at all (a FAIL counts as run)
        return bool(runs.get(key))

    def cell(key, as_us=False, acc=True):
        if not ran(key + "_sps"):
            return "—"
        v, r = best(runs, key + "_sps")
        if v is None:
            return "FAIL"
        a = at(runs, key + "_acc", r) if acc else None
        return (fmt(1e6 / v) if as_us else fmt(v)) + acc_note(a)

    def best_peer(w_):
        """(steps/s, peer label) of the fastest peer that ran, or (None, None)."""
        cands = [(best(runs, f"{w_}_{k}_sps")[0], name) for k, name in PEERS]
        cands = [c for c in cands if c[0]]
        return max(cands) if cands else (None, None)

    w("# graphrun vs the strongest peers")
    w("")
    w(f"- date: {meta.get('date')}")
    w(f"- CPU: {meta.get('cpu')}, {meta.get('cores')}")
    w(f"- peer: PyTorch {meta.get('torch')}; environment: {meta.get('peer_env')}")
    if meta.get("torch2"):
        w(f"- peer: PyTorch {meta.get('torch2')}")
    if meta.get("tf"):
        w(f"- peer: TensorFlow {meta.get('tf')}: tf.compat.v1 graph, variables in tf.variable_scope, "
          "N Python threads looping sess.run(train_op) (bench/tf_*.py)")
    if not meta.get("torch2") and not meta.get("tf"):
        w(f"- PyPI PyTorch and TensorFlow peers: {meta.get('peers_venv')}")
    w(f"- OpenBLAS {meta.get('openblas')} ({meta.get('blas_core', '?')}), gcc {meta.get('gcc')}")
    w(f"- {meta.get('graphrun')}")
    w(f"- load average: {meta.get('load')}; the benchmark's own threads count in it")
    w(f"- CPU used by other processes during the benchmark: {meta.get('other')}")
    w(f"- each number is the best of {meta.get('reps')} runs; the whole benchmark took {meta.get('elapsed')} s")
    w("")
    s1, _ = best(runs, "sgemm1_gflops")
    s2, _ = best(runs, "sgemm2_gflops")
    ceil1 = s1 * 1e9 / MLP_FLOP if s1 else None
    ceil2 = s2 * 1e9 / MLP_FLOP if s2 else None
    ceilc = s2 * 1e9 / CNN_FLOP if s2 else None

    w("| workload | graphrun | PyTorch 1.13 (Debian) | PyTorch (PyPI) | TF (seed pattern) | best peer | "
      "graphrun vs best peer | goal | ceiling |")
    w("|---|---|---|---|---|---|---|---|---|")

    # softmax regression: compare time per step; the ceiling is the C floor.
    g, grep_ = best(runs, "sm_gr_sps")
    c, _ = best(runs, "sm_c_sps")
    b, bname = best_peer("sm")
    gus, bus, cus = (1e6 / g if g else None), (1e6 / b if b else None), (1e6 / c if c else None)
    verdict, ratio = "unknown (a run failed)", "n/a"
    if g and b:
        r = bus / gus
        ratio = f"best peer's time / graphrun's **{r:.2f}×**"
        if r >= 3.0:
            verdict = "≥ 3×: met"
        elif cus and bus / cus < 3.0:
            verdict = (f"≥ 3×: **not met**, out of reach: 3× needs {bus / 3:.1f} µs/step, "
                       f"below the C floor's {cus:.1f}")
        else:
            verdict = "≥ 3×: **not met**"
    w(f"| softmax regression 784→10, batch 32, SGD 0.1, 1 thread, {meta.get('sm_steps')} steps "
      f"(µs/step, lower is better) | {cell('sm_gr', True)} | {cell('sm_pt', True)} | {cell('sm_pt2', True)} | "
      f"{cell('sm_tf', True)} | {fmt(bus)} ({bname or '—'}) | {ratio} | {verdict} | "
      f"C floor {fmt(cus)} µs |")
    # the C floor row: graphrun's time against the hand-written floor
    fverdict = "unknown (a run failed)"
    fratio = "n/a"
    if gus and cus:
        fr = gus / cus
        fratio = f"graphrun takes **{fr:.2f}×** the floor's time"
        fverdict = f"≤ {FLOOR_GOAL:.2f}× the floor's time: " + ("met" if fr <= FLOOR_GOAL else "**not met**")
    w(f"| softmax regression: hand-written C + OpenBLAS floor (`c_softmax_floor.c`, µs/step) | "
      f"{fmt(gus)} | — | — | — | floor: {fmt(cus)} | {fratio} | {fverdict} | — |")

    # throughput workloads: steps/s against the best peer, and the GEMM ceiling.
    rows = [
        ("mlp1", f"MLP 784-512-256-10, batch 64, SGD 0.05, 1 thread, {meta.get('mlp_steps')} steps", 1.2,
         ceil1, "1 thread's sgemm rate"),
        ("hog", f"MLP Hogwild!/async, 2 workers × 1 thread, {meta.get('mlp_steps')} steps in total "
                "(graphrun `--executors 2`; PyTorch 2 processes, `torch_mlp.py N 64 1 2`; "
                "TF 2 threads on one session)", 1.4, ceil2, "2 callers' sgemm rate"),
        ("cnn2", f"LeNet CNN, batch 64, SGD 0.05, 2 threads, {meta.get('cnn_steps')} steps", 1.45,
         ceilc, "2 cores' sgemm rate at the direct convolution's FLOPs"),
        ("mlp2", f"MLP 784-512-256-10, batch 64, SGD 0.05, 2 threads, {meta.get('mlp_steps')} steps", None,
         ceil2, "2 cores' sgemm rate"),
    ]
    for key, label, goal, ceil, ceil_what in rows:
        g, _ = best(runs, f"{key}_gr_sps")
        b, bname = best_peer(key)
        ratio, verdict = "n/a", ("—" if goal is None else "unknown (a run failed)")
        if g and b:
            r = g / b
            ratio = f"**{r:.2f}×**"
            if goal is not None:
                if r >= goal:
                    verdict = f"≥ {goal}×: met"
                elif ceil and goal * b > ceil:
                    verdict = (f"≥ {goal}×: **not met**, out of reach: {goal}× needs {goal * b:,.0f} steps/s, "
                               f"above the ceiling ({100 * g / ceil:.0f}% of it reached)")
                elif ceil:
                    verdict = (f"≥ {goal}×: **not met**; {goal}× needs {goal * b:,.0f} steps/s, "
                               f"{100 * goal * b / ceil:.0f}% of the ceiling")
                else:
                    verdict = f"≥ {goal}×: **not met**"
        ctext = f"{fmt(ceil, 0)} ({ceil_what})" if ceil else "—"
        if key == "cnn2" and ceil:
            ctext += (f"; {fmt(ceil * CNN_FLOP / CNN_FLOP_WINO, 0)} at the {CNN_FLOP_WINO / 1e9:.2f} GFLOP "
                      f"graphrun's Winograd conv2 leaves ({100 * g / (ceil * CNN_FLOP / CNN_FLOP_WINO):.0f}% "
                      "of it reached)" if g else "")
        elif ceil and g and g > ceil:
            ctext += ": understated, graphrun exceeds it (was the sgemm probe run under load?)"
        w(f"| {label} (steps/s, higher is better) | {cell(key + '_gr')} | {cell(key + '_pt')} | "
          f"{cell(key + '_pt2')} | {cell(key + '_tf')} | {fmt(b)} ({bname or '—'}) | {ratio} | {verdict} | {ctext} |")

    # graphrun's own async scaling and convergence (against 1 executor x 1 thread,
    # same total steps, so the same number of examples).
    g, gr = best(runs, "hog_gr_sps")
    one, onr = best(runs, "mlp1_gr_sps")
    ga, oa = at(runs, "hog_gr_acc", gr), at(runs, "mlp1_gr_acc", onr)
    if g and one:
        sc = g / one
        w(f"| graphrun's async scaling: 2 executors × 1 thread / 1 executor × 1 thread (total steps/s) | "
          f"{fmt(g)} / {fmt(one)} | — | — | — | — | **{sc:.2f}×** | ≥ 1.8×: {'met' if sc >= 1.8 else '**not met**'} | "
          f"{fmt(ceil2 / ceil1 if ceil1 and ceil2 else None, 2)}× (sgemm, 2 callers / 1) |")
    if ga is not None and oa is not None:
        d = abs(float(ga) - float(oa))
        w(f"| graphrun's convergence: test accuracy after the same examples, 2 async executors vs 1 | "
          f"{float(ga):.4f} vs {float(oa):.4f} | — | — | — | — | {100 * d:.2f} points | ≤ 1 point: "
          f"{'met' if d <= 0.01 else '**not met**'} | — |")

    w("")
    w(f"Ceilings: OpenBLAS sgemm on MLP-sized matrices (`shared/bench/blas_concurrency.c`) reaches "
      f"{fmt(s1)} GFLOP/s with 1 thread and {fmt(s2)} GFLOP/s with 2 concurrent single-threaded callers; "
      f"a training step is {MLP_FLOP / 1e6:.1f} MFLOP for the MLP and {CNN_FLOP / 1e9:.2f} GFLOP for the CNN "
      "(forward, weight gradients, input gradients of all layers but the first), so the ceiling in steps/s "
      "is that rate divided by the step's FLOPs. For the softmax regression the ceiling is the C floor.")
    w("Goals are against the best peer of each row. Accuracy is on the 10,000-image test set after training "
      "(the CNN and softmax peers do not measure it). graphrun draws shuffled batches; the peers and the "
      "C floor walk the training set in order. The TF scripts run some untimed warm-up steps first "
      "(TF optimises its graph on the first runs); every side times only its training loop.")
    w("")
    deep_report(w, meta, runs)
    w("")
    w("All runs (steps/s; softmax as µs/step):")
    w("")
    sides = [("gr", "graphrun")] + PEERS
    for wk, wlabel, as_us in [("sm", "softmax", True), ("mlp1", "MLP 1t", False), ("hog", "Hogwild! 2x1", False),
                              ("cnn2", "CNN 2t", False), ("mlp2", "MLP 2t", False)]:
        for side, slabel in sides:
            key = f"{wk}_{side}_sps"
            if not ran(key):
                continue
            vals = [runs[key][r] for r in sorted(runs[key])]
            shown = ["FAIL" if v is None else (f"{1e6 / v:.1f}" if as_us else f"{v:.1f}") for v in vals]
            w(f"- {wlabel} {slabel}: {', '.join(shown)}")
        if wk == "sm" and ran("sm_c_sps"):
            vals = [runs["sm_c_sps"][r] for r in sorted(runs["sm_c_sps"])]
            w("- softmax C floor: " + ", ".join("FAIL" if v is None else f"{1e6 / v:.1f}" for v in vals))
    for key, label in [("deep_gr_sps", "deep net graphrun"), ("deep_pt_sps", "deep net PyTorch"),
                       ("deepw1_gr_sps", "deep net width 1 graphrun"),
                       ("deepw1_pt_sps", "deep net width 1 PyTorch")]:
        if ran(key):
            vals = [runs[key][r] for r in sorted(runs[key])]
            w(f"- {label}: " + ", ".join("FAIL" if v is None else f"{v:.1f}" for v in vals))
    if failures:
        w("")
        w("Failed runs:")
        w("")
        w(failures)
    print("\n".join(out))


if __name__ == "__main__":
    main()
