"""save and restore, and a checkpoint read back with json + numpy (safetensors)."""
import json
import struct

import numpy as np
import pytest

import graphrun
from conftest import needs_fashion


def read_safetensors(path):
    """A safetensors file as ({name: ndarray}, metadata), with json and numpy only."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    meta = header.pop("__metadata__", {})
    data = raw[8 + n:]
    dtypes = {"F32": "<f4", "I32": "<i4"}
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        out[name] = np.frombuffer(data[b:e], dtypes[t["dtype"]]).reshape(t["shape"])
    return out, meta


def feed():
    rng = np.random.default_rng(0)
    return {"x": rng.normal(size=(4, 3)).astype(np.float32), "y": np.array([0, 1, 1, 0], np.int32)}


def test_save_then_read_with_numpy(linear_sess, tmp_path):
    f = feed()
    for _ in range(3):
        linear_sess.run("train", feed=f)
    path = tmp_path / "ck.safetensors"
    linear_sess.save(path)
    tensors, meta = read_safetensors(path)
    assert meta["format"] == "graphrun" and meta["step"] == "3"
    for name in ("w", "b"):
        np.testing.assert_array_equal(tensors[name], linear_sess.variable(name))
    assert tensors["w"].shape == (3, 2) and tensors["w"].dtype == np.float32
    assert set(linear_sess.program.variables) <= set(tensors)


def test_restore_brings_back_variables_and_step(linear, tmp_path):
    f = feed()
    a = graphrun.Session(linear, seed=1)
    for _ in range(5):
        a.run("train", feed=f)
    path = tmp_path / "ck.safetensors"
    a.save(str(path))
    b = graphrun.Session(linear, seed=2)
    b.restore(path)
    assert b.step == 5
    for n, v in a.variables().items():
        np.testing.assert_array_equal(b.variable(n), v)
    # both go on identically from there
    a.run("train", feed=f)
    b.run("train", feed=f)
    np.testing.assert_array_equal(a.variable("w"), b.variable("w"))


def test_weights_only_restore_keeps_the_step(linear, tmp_path):
    a = graphrun.Session(linear)
    a.run("train", feed=feed())
    a.save(tmp_path / "ck.safetensors")
    b = graphrun.Session(linear)
    b.restore(tmp_path / "ck.safetensors", weights_only=True)
    assert b.step == 0
    np.testing.assert_array_equal(b.variable("w"), a.variable("w"))


def test_a_checkpoint_of_another_model_is_refused(linear, tmp_path):
    other = graphrun.compile_string("var w = ones([2, 2])\ny = sum(w)\n", name="other.graph")
    graphrun.Session(other).save(tmp_path / "other.safetensors")
    s = graphrun.Session(linear)
    with pytest.raises(graphrun.Error, match="other.safetensors"):
        s.restore(tmp_path / "other.safetensors")
    assert s.step == 0


@needs_fashion
def test_a_checkpoint_written_by_the_cli_restores_in_python(mlp_path, tmp_path):
    import os
    import subprocess
    cli = os.environ.get("GR_CLI")
    if not cli:
        pytest.skip("GR_CLI (the graphrun binary) is not set")
    ck = tmp_path / "cli.safetensors"
    subprocess.run([cli, mlp_path, "--steps", "20", "--checkpoint", str(ck), "--quiet",
                    "--threads", "1"], check=True)
    s = graphrun.Session(graphrun.compile(mlp_path), threads=1)
    s.restore(ck)
    assert s.step == 20
    tensors, _ = read_safetensors(ck)
    np.testing.assert_array_equal(s.variable("model/fc1/w"), tensors["model/fc1/w"])
