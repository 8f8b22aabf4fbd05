"""The GIL is released during run: Python threads train one session together (Hogwild!)."""
import threading
import time

import numpy as np
import pytest

import graphrun
from conftest import needs_fashion


def test_threads_share_one_session_with_feeds(linear):
    s = graphrun.Session(linear, threads=2, executors=4, seed=1)
    x = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], np.float32)
    y = np.array([0, 1, 0, 1], np.int32)
    errors = []

    def work():
        try:
            for _ in range(100):
                s.run("train", feed={"x": x, "y": y})
                loss = s.run("loss", feed={"x": x, "y": y})
                assert loss.shape == ()
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=work) for _ in range(4)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert not errors
    assert s.step == 400
    assert s.run("loss", feed={"x": x, "y": y}) < 0.1


def test_the_gil_is_released_while_the_library_runs():
    # One long run (five 1000x1000 matmuls, about half a second):
    # a thread that holds the GIL for a call blocks every other thread's
    # Python for all of it, so the other thread's longest pause would be the
    # whole call.  Released, that thread goes on (pauses of a few ms, more
    # only when the OS runs something else).
    n = 1000
    prog = graphrun.compile_string(f"input a: f32[{n}, {n}]\nb = sum(" + " @ ".join(["a"] * 6)
                                   + ")\n", name="mm.graph")
    s = graphrun.Session(prog, threads=1)
    a = np.eye(n, dtype=np.float32)
    s.run("b", feed={"a": a})  # plan and arena made outside the timing
    stop = threading.Event()
    stamps = []

    def count():
        while not stop.is_set():
            stamps.append(time.perf_counter())

    t = threading.Thread(target=count)
    t.start()
    try:
        time.sleep(0.02)
        t0 = time.perf_counter()
        b = s.run("b", feed={"a": a})
        t1 = time.perf_counter()
        time.sleep(0.02)
    finally:
        stop.set()
        t.join()
    assert b == n
    inside = [x for x in stamps if t0 <= x <= t1]
    gaps = np.diff([t0] + inside + [t1])
    assert t1 - t0 > 0.05, "the run was too short to tell"
    assert gaps.max() < 0.5 * (t1 - t0), (gaps.max(), t1 - t0, len(inside))


@needs_fashion
def test_hogwild_threads_train_the_mlp(mlp_path):
    prog = graphrun.compile(mlp_path)
    sess = graphrun.Session(prog, threads=2, executors=2, seed=1)
    losses = {}

    def train(k):
        for _ in range(150):
            _, loss = sess.run(["train", "loss"])
        losses[k] = float(loss)

    ts = [threading.Thread(target=train, args=(k,)) for k in range(2)]
    [t.start() for t in ts]
    [t.join() for t in ts]
    assert sess.step == 300
    assert all(np.isfinite(v) and v < 1.5 for v in losses.values()), losses
    assert sess.eval("accuracy") > 0.6


@needs_fashion
def test_save_and_variable_reads_run_beside_training(mlp_path, tmp_path):
    prog = graphrun.compile(mlp_path)
    sess = graphrun.Session(prog, threads=2, executors=2, seed=1)
    done = threading.Event()

    def train():
        for _ in range(200):
            sess.run("train")
        done.set()

    t = threading.Thread(target=train)
    t.start()
    saves = 0
    while not done.is_set():
        sess.save(tmp_path / "ck.safetensors")
        w = sess.variable("model/out/w")
        assert np.all(np.isfinite(w))
        saves += 1
    t.join()
    assert saves >= 1
    other = graphrun.Session(prog)
    other.restore(tmp_path / "ck.safetensors")
    assert 0 <= other.step <= 200


def test_close_while_another_thread_runs_is_refused():
    prog = graphrun.compile_string("input a: f32[300, 300]\nb = a @ a @ a @ a @ a\n")
    s = graphrun.Session(prog, threads=1)
    a = np.ones((300, 300), np.float32) / 300
    started = threading.Event()
    stop = threading.Event()

    def loop():
        while not stop.is_set():
            started.set()
            s.run("b", feed={"a": a})

    t = threading.Thread(target=loop)
    t.start()
    started.wait()
    refused = 0
    for _ in range(200):
        try:
            s.close()
        except graphrun.ArgumentError as e:
            assert "another thread is running" in str(e)
            refused += 1
            continue
        break
    stop.set()
    t.join()
    s.close()
    assert refused >= 1 or s.closed
