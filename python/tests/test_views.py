"""Zero-copy views (copy=False) where the lifetime is safe; they never dangle silently."""
import gc
import threading

import numpy as np
import pytest

import graphrun

SRC = "input x: f32[3]\ny = x * 2\nz = y + 1\n"


@pytest.fixture
def sess():
    return graphrun.Session(graphrun.compile_string(SRC, name="v.graph"), threads=1)


def test_a_view_holds_the_runs_value_read_only(sess):
    y = sess.run("y", feed={"x": [1, 2, 3]}, copy=False)
    assert y.tolist() == [2, 4, 6] and y.dtype == np.float32
    assert not y.flags.writeable and not y.flags.owndata
    with pytest.raises(ValueError):
        y[0] = 1
    del y


def test_the_next_run_is_refused_while_a_view_lives(sess):
    y = sess.run("y", feed={"x": [1, 2, 3]}, copy=False)
    with pytest.raises(graphrun.ViewError, match="1 zero-copy view .* still alive"):
        sess.run("y", feed={"x": [0, 0, 0]})
    with pytest.raises(graphrun.ViewError):
        sess.eval("y")
    assert y.tolist() == [2, 4, 6]  # untouched
    part = y[1:]  # a slice keeps the view alive too
    del y
    gc.collect()
    with pytest.raises(graphrun.ViewError):
        sess.run("y", feed={"x": [0, 0, 0]})
    assert part.tolist() == [4, 6]
    del part
    assert sess.run("y", feed={"x": [0, 1, 0]}).tolist() == [0, 2, 0]


def test_copies_are_never_affected_by_later_runs(sess):
    a = sess.run("y", feed={"x": [1, 1, 1]})
    b = sess.run("y", feed={"x": [2, 2, 2]})
    assert a.tolist() == [2, 2, 2] and b.tolist() == [4, 4, 4]
    assert a.flags.owndata and a.flags.writeable


def test_several_views_and_a_copy_of_one(sess):
    y, z = sess.run(["y", "z"], feed={"x": [1, 2, 3]}, copy=False)
    keep = z.copy()
    assert sess._s.live_views == 2
    del y, z
    assert sess._s.live_views == 0
    assert keep.tolist() == [3, 5, 7]
    sess.run("z", feed={"x": [0, 0, 0]})


def test_views_are_per_thread(sess):
    y = sess.run("y", feed={"x": [1, 2, 3]}, copy=False)
    out = []
    t = threading.Thread(target=lambda: out.append(sess.run("z", feed={"x": [1, 1, 1]})))
    t.start()
    t.join()
    assert out[0].tolist() == [3, 3, 3]
    assert y.tolist() == [2, 4, 6]  # another thread's run did not overwrite it
    del y


def test_a_view_keeps_its_session_and_close_waits_for_it():
    s = graphrun.Session(graphrun.compile_string(SRC), threads=1)
    y = s.run("y", feed={"x": [1, 2, 3]}, copy=False)
    with pytest.raises(graphrun.ViewError, match="close"):
        s.close()
    del s
    gc.collect()
    assert y.tolist() == [2, 4, 6]  # the session lives on under the view


def test_variable_reads_are_zero_copy_and_owned(sess):
    p = graphrun.compile_string("var w = ones([2, 3])\ny = sum(w)\n")
    s = graphrun.Session(p)
    w = s.variable("w")
    assert w.base is not None  # wraps the library's tensor, no second copy
    w += 1
    del s
    gc.collect()
    assert w.tolist() == [[2, 2, 2], [2, 2, 2]]


def test_a_scalar_view_and_a_bytes_view():
    s = graphrun.Session(graphrun.compile_string("input x: f32[3]\nloss = sum(x)\n"))
    v = s.run("loss", feed={"x": [1, 2, 3]}, copy=False)
    assert v.shape == () and v == 6
    assert bytes(memoryview(v)) == np.float32(6).tobytes()
    del v
    assert s.run("loss", feed={"x": [1, 1, 1]}) == 3
