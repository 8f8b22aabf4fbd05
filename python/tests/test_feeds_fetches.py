"""Feeds and fetches: numpy in, numpy out, dtypes and shapes checked."""
import numpy as np
import pytest

import graphrun
from conftest import needs_fashion

X = np.array([[1, 0, 0], [0, 1, 0], [1, 1, 0], [0, 0, 1]], np.float32)
Y = np.array([0, 1, 0, 1], np.int32)


def test_fetch_returns_numpy_with_the_tensors_dtype_and_shape(linear_sess):
    logits = linear_sess.run("logits", feed={"x": X})
    assert isinstance(logits, np.ndarray)
    assert logits.dtype == np.float32 and logits.shape == (4, 2)
    assert np.all(logits == 0)  # zero weights
    loss = linear_sess.run("loss", feed={"x": X, "y": Y})
    assert loss.shape == () and loss.dtype == np.float32
    assert loss == pytest.approx(np.log(2), rel=1e-6)


def test_a_list_of_fetches_gives_a_list_a_tuple_a_tuple_a_dict_a_dict(linear_sess):
    feed = {"x": X, "y": Y}
    l1, g1 = linear_sess.run(["loss", "logits"], feed=feed)
    assert l1.shape == () and g1.shape == (4, 2)
    t = linear_sess.run(("loss",), feed=feed)
    assert isinstance(t, tuple) and len(t) == 1
    d = linear_sess.run({"L": "loss", "G": "logits"}, feed_dict=feed)
    assert set(d) == {"L", "G"} and d["G"].shape == (4, 2)


def test_train_target_gives_none_and_trains(linear_sess):
    feed = {"x": X, "y": Y}
    before = linear_sess.run("loss", feed=feed)
    assert linear_sess.run("train", feed=feed) is None
    assert linear_sess.step == 1
    out = linear_sess.run(["train", "loss"], feed=feed)
    assert out[0] is None and out[1] < before
    for _ in range(50):
        linear_sess.run("train", feed=feed)
    assert linear_sess.step == 52
    assert linear_sess.run("loss", feed=feed) < 0.2


def test_values_match_numpy(linear_sess):
    w = np.array([[1, -1], [2, 0], [0.5, 3]], np.float32)
    linear_sess.assign("w", w)
    linear_sess.assign("b", [0.25, -0.25])
    logits = linear_sess.run("logits", feed={"x": X})
    np.testing.assert_allclose(logits, X @ w + np.array([0.25, -0.25], np.float32), rtol=1e-6)


def test_python_lists_and_same_kind_dtypes_are_converted(linear_sess):
    a = linear_sess.run("logits", feed={"x": X.tolist()})
    b = linear_sess.run("logits", feed={"x": X.astype(np.float64)})
    c = linear_sess.run("loss", feed={"x": X.astype(np.int64), "y": Y.astype(np.int64)})
    assert a.shape == b.shape == (4, 2) and c.shape == ()


def test_a_non_contiguous_feed_is_copied_right(linear_sess):
    w = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    linear_sess.assign("w", w)
    big = np.zeros((4, 6), np.float32)
    big[:, ::2] = X
    np.testing.assert_allclose(linear_sess.run("logits", feed={"x": big[:, ::2]}), X @ w)
    np.testing.assert_allclose(linear_sess.run("logits", feed={"x": np.asfortranarray(X)}), X @ w)


def test_wrong_dtype_is_an_argument_error_naming_the_feed(linear_sess):
    with pytest.raises(graphrun.ArgumentError, match=r"feed 'y': dtype float32 cannot be fed "
                                                     r"to a int32 input"):
        linear_sess.run("loss", feed={"x": X, "y": Y.astype(np.float32)})
    with pytest.raises(graphrun.ArgumentError, match="feed 'x': dtype <U1"):
        linear_sess.run("logits", feed={"x": np.full((4, 3), "a")})
    with pytest.raises(ValueError):  # ArgumentError is a ValueError too
        linear_sess.run("loss", feed={"x": X, "y": Y.astype(np.float64)})


def test_wrong_shape_is_an_argument_error_with_both_shapes(linear_sess):
    with pytest.raises(graphrun.ArgumentError,
                       match=r"feed 'x': shape \(3, 4\) differs from the input's \(4, 3\)"):
        linear_sess.run("logits", feed={"x": X.T})
    with pytest.raises(graphrun.ArgumentError, match=r"shape \(12,\)"):
        linear_sess.run("logits", feed={"x": X.reshape(-1)})


def test_unknown_names_and_missing_feeds_are_library_errors(linear_sess):
    with pytest.raises(graphrun.ArgumentError, match="feed 'nope': the program has no input"):
        linear_sess.run("logits", feed={"nope": X})
    with pytest.raises(graphrun.ArgumentError, match="named 'nope'"):
        linear_sess.run("nope")
    with pytest.raises(graphrun.ArgumentError, match="input 'x' must be fed"):
        linear_sess.run("logits")
    with pytest.raises(TypeError):
        linear_sess.run([3])


@needs_fashion
def test_data_sources_feed_themselves(mlp_path):
    prog = graphrun.compile(mlp_path, params={"batch": 32})
    with graphrun.Session(prog, threads=1, seed=3) as s:
        logits = s.run("logits")
        assert logits.shape == (32, 10) and logits.dtype == np.float32
        assert prog.tensor_info("z") == (np.dtype(np.float32), (32, 100))


def test_program_introspection(linear):
    assert linear.variables[:2] == ["w", "b"]
    assert linear.default_target == "train"
    assert linear.target_info("train")["is_train"]
    assert linear.target_info("loss")["is_scalar"]
    z = linear.zeros("x")
    assert z.shape == (4, 3) and z.dtype == np.float32 and not z.any()
    assert linear.files == []
    assert graphrun.version()
    kernels, better = graphrun.blas_kernels()
    assert kernels and (better is None or isinstance(better, str))


def test_params_and_devices_reach_the_compiler(mlp_path):
    prog = graphrun.compile(mlp_path, params={"batch": 16, "lr": 0.1}, devices="cpu:0")
    assert prog.tensor_info("z")[1] == (16, 100)
    assert prog.files[0].endswith("fashion_mlp.graph")
    prog = graphrun.compile(mlp_path, params=[("batch", 8)], devices=["cpu:0"])
    assert prog.tensor_info("logits")[1] == (8, 10)
