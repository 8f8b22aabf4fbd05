"""Errors are exceptions carrying the message, the .graph file, the line and the column."""
import os

import numpy as np
import pytest

import graphrun


def test_syntax_error_is_a_parse_error_at_its_place():
    with pytest.raises(graphrun.ParseError) as ei:
        graphrun.compile_string("x = [1.0, 2.0]\ny = x @ \n", name="bad.graph")
    e = ei.value
    assert (e.file, e.line, e.col, e.code) == ("bad.graph", 2, 9, "syntax error")
    assert str(e).startswith("bad.graph:2:9: error: unexpected newline\ny = x @ \n        ^")
    assert e.message == str(e)
    assert isinstance(e, graphrun.Error)


def test_shape_error_is_a_compile_error_with_the_source_line_and_caret(tmp_path):
    path = tmp_path / "model.graph"
    path.write_text("a = zeros([2, 3])\nb = zeros([4, 5])\nc = a @ b\n")
    with pytest.raises(graphrun.CompileError) as ei:
        graphrun.compile(path)
    e = ei.value
    assert e.file == str(path) and (e.line, e.col) == (3, 5)
    assert "error: f32[2,3] @ f32[4,5]: inner dimensions 3 and 4 differ" in str(e)
    assert str(e).endswith("c = a @ b\n    ^~~~~")


def test_an_error_in_a_function_points_inside_it(mlp_path, tmp_path):
    text = open(mlp_path).read().replace("x @ w + b", "w @ x + b")
    path = tmp_path / "mlp.graph"
    path.write_text(text)
    with pytest.raises(graphrun.CompileError) as ei:
        graphrun.compile(path)
    line = text.splitlines().index("  return act(w @ x + b)") + 1
    assert (ei.value.file, ei.value.line) == (str(path), line)


def test_unknown_param_is_a_compile_error(mlp_path):
    with pytest.raises(graphrun.CompileError, match="lrr"):
        graphrun.compile(mlp_path, params={"lrr": 0.1})


def test_missing_file_is_a_file_error_and_an_oserror():
    with pytest.raises(graphrun.FileError) as ei:
        graphrun.compile("/nonexistent/model.graph")
    assert isinstance(ei.value, OSError)
    assert "/nonexistent/model.graph: cannot open" in str(ei.value)
    assert ei.value.file is None and ei.value.line is None


def test_runtime_errors_point_at_the_op():
    prog = graphrun.compile_string("input x: f32[2]\ny = log(x)\n", name="num.graph")
    s = graphrun.Session(prog, check_numerics=True)
    with pytest.raises(graphrun.NumericError) as ei:
        s.run("y", feed={"x": [-1.0, 0.0]})
    assert (ei.value.file, ei.value.line, ei.value.col) == ("num.graph", 2, 5)
    assert "log on cpu:0 produced NaN" in str(ei.value)
    assert isinstance(ei.value, ArithmeticError)
    # the session goes on after an error
    np.testing.assert_allclose(s.run("y", feed={"x": [1.0, np.e]}), [0, 1], atol=1e-6)


def test_label_out_of_range_is_a_data_error_at_its_line(linear):
    s = graphrun.Session(linear)
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(graphrun.DataError) as ei:
        s.run("train", feed={"x": x, "y": [0, 1, 5, 0]})
    assert (ei.value.file, ei.value.line) == ("linear.graph", 6)
    assert "label 5" in str(ei.value)


def test_eval_of_a_non_scalar_is_an_argument_error(linear_sess):
    with pytest.raises(graphrun.ArgumentError):
        linear_sess.eval("logits")


def test_closed_session_refuses_calls(linear):
    s = graphrun.Session(linear)
    s.close()
    s.close()  # twice is fine
    assert s.closed
    with pytest.raises(graphrun.ArgumentError, match="closed"):
        s.run("logits", feed={"x": np.zeros((4, 3))})


def test_session_options_out_of_range_are_argument_errors(linear):
    with pytest.raises(graphrun.ArgumentError, match="threads"):
        graphrun.Session(linear, threads=-1)
    with pytest.raises(TypeError):
        graphrun.Session("model.graph")


def test_a_bad_checkpoint_is_an_error_and_changes_nothing(linear_sess, tmp_path):
    bad = tmp_path / "bad.safetensors"
    bad.write_bytes(b"\x08\x00\x00\x00\x00\x00\x00\x00{}garbage")
    linear_sess.assign("w", np.ones((3, 2), np.float32))
    with pytest.raises(graphrun.Error) as ei:
        linear_sess.restore(bad)
    assert str(bad) in str(ei.value)
    assert np.all(linear_sess.variable("w") == 1)
    with pytest.raises(graphrun.FileError):
        linear_sess.restore(os.path.join(tmp_path, "missing.safetensors"))
