"""Shared fixtures of the Python package's tests (tests/python.cmake runs
each file as one CTest test, with PYTHONPATH at the build's package)."""
import os

import pytest

import graphrun

SOURCE_DIR = os.environ.get("GR_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXAMPLES = os.path.join(SOURCE_DIR, "examples")
FASHION = "/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz"

# A small model with inputs: a linear softmax classifier fed by the caller.
LINEAR = """\
input x: f32[4, 3]
input y: i32[4]
var w = zeros([3, 2])
var b = zeros([2])
logits = x @ w + b
loss = mean(softmax_xent(logits, y))
train = sgd(0.5).minimize(loss)
"""


@pytest.fixture
def linear():
    return graphrun.compile_string(LINEAR, name="linear.graph")


@pytest.fixture
def linear_sess(linear):
    with graphrun.Session(linear, threads=1, seed=1) as s:
        yield s


needs_fashion = pytest.mark.skipif(not os.path.exists(FASHION),
                                   reason="dataset-fashion-mnist is not installed")


@pytest.fixture
def mlp_path():
    return os.path.join(EXAMPLES, "fashion_mlp.graph")
