"""Variables: all of them as numpy, one read and one written."""
import numpy as np
import pytest

import graphrun
from conftest import needs_fashion


def test_variables_returns_every_variable_by_full_name(mlp_path):
    prog = graphrun.compile(mlp_path)
    s = graphrun.Session(prog, threads=1, seed=7)
    v = s.variables()
    assert list(v) == prog.variables
    assert v["model/fc1/w"].shape == (784, 512) and v["model/fc1/w"].dtype == np.float32
    assert v["model/out/b"].shape == (10,) and not v["model/out/b"].any()
    w = v["model/fc1/w"]  # glorot: uniform in +-sqrt(6 / (784 + 512))
    assert 0 < np.abs(w).max() <= np.sqrt(6 / (784 + 512)) + 1e-6


def test_a_read_is_a_copy_the_caller_owns(linear_sess):
    w = linear_sess.variable("w")
    assert w.flags.writeable and w.flags.owndata is False  # wraps the library's tensor
    w[:] = 5  # changes the copy only
    assert not linear_sess.variable("w").any()


def test_assign_writes_one_variable(linear_sess):
    linear_sess.assign("w", np.arange(6, dtype=np.float32).reshape(3, 2))
    np.testing.assert_array_equal(linear_sess.variable("w"), [[0, 1], [2, 3], [4, 5]])
    linear_sess.assign("b", [1, 2])  # ints into f32: same kind of number
    np.testing.assert_array_equal(linear_sess.variable("b"), [1, 2])


def test_assign_checks_shape_and_dtype(linear_sess):
    with pytest.raises(graphrun.ArgumentError, match=r"shape \(2, 3\)"):
        linear_sess.assign("w", np.zeros((2, 3), np.float32))
    with pytest.raises(graphrun.ArgumentError, match="dtype complex128"):
        linear_sess.assign("b", np.zeros(2, complex))
    with pytest.raises(graphrun.ArgumentError):
        linear_sess.variable("nope")


def test_the_same_seed_gives_the_same_variables(mlp_path):
    prog = graphrun.compile(mlp_path)
    a = graphrun.Session(prog, seed=3).variable("model/fc2/w")
    b = graphrun.Session(prog, seed=3).variable("model/fc2/w")
    c = graphrun.Session(prog, seed=4).variable("model/fc2/w")
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


@needs_fashion
def test_training_changes_the_variables_and_eval_sees_it(mlp_path):
    prog = graphrun.compile(mlp_path)
    s = graphrun.Session(prog, threads=2, seed=1)
    before = s.variable("model/out/w")
    acc0 = s.eval("accuracy")
    for _ in range(200):
        s.run("train")
    assert not np.array_equal(before, s.variable("model/out/w"))
    assert s.step == 200
    acc = s.eval("accuracy")
    assert acc > max(0.6, acc0)
    assert s.eval(["accuracy"]) == [acc]
