"""Shared part of the TensorFlow peers (bench/tf_softmax.py, tf_mlp.py, tf_cnn.py).

The seed's own pattern (shared/bench/tf_seed_hogwild.py): tf.compat.v1 graph
mode, variables made with tf.get_variable inside tf.variable_scope, the input
as a tf.data pipeline inside the graph, one tf.Session, and N Python threads
each looping sess.run(train_op) with no coordination (N = 1: a plain loop).

Timing: graph building, session start, data loading and WARMUP steps (TF's
first runs optimise the graph and create its kernels) happen before the clock
starts; only the threads' loop is timed, with time.perf_counter().

Needs TensorFlow 2.x (tensorflow-cpu from PyPI; bench/peers.sh installs it).
"""
import gzip
import os
import struct
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow.compat.v1 as tf  # noqa: E402

tf.disable_v2_behavior()

DATA = "/usr/share/datasets/fashion-mnist/"


def idx(name, image_shape=(784,)):
    """An idx file as float32 images in [0, 1] or int32 labels, like the torch scripts."""
    with gzip.open(DATA + name) as f:
        data = f.read()
    magic, n = struct.unpack(">II", data[:8])
    if magic == 2051:
        return np.frombuffer(data, np.uint8, offset=16).reshape((n,) + image_shape).astype(np.float32) / 255.0
    return np.frombuffer(data, np.uint8, offset=8).astype(np.int32)


_INIT = []  # (initializer, feed_dict) pairs that session() runs


def train_batches(batch, image_shape=(784,)):
    """The training set walked in order, as the torch scripts do, through the
    seed's tf.data pipeline (repeat, batch, prefetch). The arrays are fed once
    through placeholders into an initializable iterator: as graph constants
    (tf_seed_hogwild.py's way) they make session start-up take ~40 s here,
    for the same per-step pipeline."""
    X = idx("train-images-idx3-ubyte.gz", image_shape)
    Y = idx("train-labels-idx1-ubyte.gz")
    xp, yp = tf.placeholder(tf.float32, X.shape), tf.placeholder(tf.int32, Y.shape)
    ds = tf.data.Dataset.from_tensor_slices((xp, yp)).repeat().batch(batch, drop_remainder=True).prefetch(8)
    it = tf.data.make_initializable_iterator(ds)
    _INIT.append((it.initializer, {xp: X, yp: Y}))
    return it.get_next()


def test_set(image_shape=(784,)):
    return idx("t10k-images-idx3-ubyte.gz", image_shape), idx("t10k-labels-idx1-ubyte.gz")


def session(intra, inter):
    cfg = tf.ConfigProto(intra_op_parallelism_threads=intra, inter_op_parallelism_threads=inter)
    sess = tf.Session(config=cfg)
    sess.run(tf.global_variables_initializer())
    for op, feed in _INIT:
        sess.run(op, feed_dict=feed)
    return sess


def run_threads(sess, train_op, total, nthreads, warmup):
    """WARMUP untimed steps, then NTHREADS Python threads each running
    total // nthreads steps of sess.run(train_op). Returns (steps, seconds)."""
    for _ in range(warmup):
        sess.run(train_op)
    per = total // nthreads

    def train_function():
        for _ in range(per):
            sess.run(train_op)

    threads = [threading.Thread(target=train_function) for _ in range(nthreads)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return per * nthreads, time.perf_counter() - t0
