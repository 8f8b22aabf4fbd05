# hogwild.py - the seed's program on graphrun: THREADS Python threads each calling sess.run(train_op)
# with no coordination, on one session (Hogwild!), the Fashion-MNIST MLP 784-512-256-10 of
# examples/fashion_mlp.graph, batch 64, SGD 0.05.  The seed's tf.compat.v1 code
# (shared/bench/tf_seed_hogwild.py) line for line, the model coming from the .graph file.
# Usage: python3 examples/python/hogwild.py [TOTAL_STEPS] [THREADS] [INTRA_OP_THREADS]   (import graphrun: docs/python.md)
import os, sys, threading, time
import graphrun
G = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fashion_mlp.graph")
args = [int(a) for a in sys.argv[1:4]]
total, nthreads, intra = (args + [2000, 2, 1][len(args):])[:3]
prog = graphrun.compile(G, params={"batch": 64, "lr": 0.05})
train_op = prog.default_target  # "train": sgd(lr).minimize(loss)
sess = graphrun.Session(prog, threads=intra * nthreads, executors=nthreads, seed=1)
per = total // nthreads
def train_function():
    for _ in range(per): sess.run(train_op)
sess.run(train_op)  # warm-up
threads = [threading.Thread(target=train_function) for _ in range(nthreads)]
t0 = time.perf_counter(); [t.start() for t in threads]; [t.join() for t in threads]; dt = time.perf_counter() - t0
print(f"graphrun {graphrun.version()} python seed-hogwild steps={per*nthreads} threads={nthreads} intra={intra} time={dt:.3f}s steps/s={per*nthreads/dt:.1f} test_acc={sess.eval('accuracy'):.4f}")
