"""graphrun from Python: compile a .graph model, run it in a session, numpy in and out.

    import graphrun
    prog = graphrun.compile("examples/fashion_mlp.graph", params={"lr": 0.1})
    sess = graphrun.Session(prog, threads=2, seed=1)
    for _ in range(1000):
        sess.run("train")
    loss, logits = sess.run(["loss", "logits"])
    print(sess.eval("accuracy"))

The GIL is released while the library runs, so several Python threads
looping ``sess.run("train")`` on one session train as Hogwild! (see
examples/python/hogwild.py).  Errors are graphrun.Error subclasses carrying
``message``, ``file``, ``line``, ``col`` and ``code``.  docs/python.md has
the whole API.
"""

import os
import threading
import warnings

import numpy as np

from . import _graphrun
from ._graphrun import (  # noqa: F401  (re-exported)
    ArgumentError,
    CancelledError,
    CompileError,
    DataError,
    Error,
    FileError,
    InternalError,
    NumericError,
    OutOfMemoryError,
    ParseError,
    ViewError,
)

__all__ = [
    "compile", "compile_string", "Program", "Session", "version", "Error", "ParseError",
    "CompileError", "FileError", "DataError", "ArgumentError", "NumericError",
    "OutOfMemoryError", "InternalError", "CancelledError", "ViewError",
]

_DTYPES = {"float32": np.dtype(np.float32), "int32": np.dtype(np.int32)}


def version():
    """The version of the libgraphrun this module runs on."""
    return _graphrun.version()


def blas_kernels():
    """(the kernels OpenBLAS runs, e.g. "Haswell"; the OPENBLAS_CORETYPE value
    that would pick faster ones on this CPU, or None)."""
    return _graphrun.blas_kernels()


# OpenBLAS picks its kernels when it loads, by CPU model, and falls back to
# generic ones (about 4x slower GEMMs) on a model it does not know.  The CLI
# re-runs itself with OPENBLAS_CORETYPE set; a Python process can only say so.
_kernels, _better = _graphrun.blas_kernels()
if _better:
    warnings.warn(f"graphrun: OpenBLAS runs its generic '{_kernels}' kernels on this CPU; "
                  f"OPENBLAS_CORETYPE={_better} in the environment picks faster ones",
                  RuntimeWarning, stacklevel=2)


def _param_text(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (np.generic,)):
        value = value.item()
    return str(value)


def _params(params):
    if params is None:
        return ()
    if isinstance(params, dict):
        params = params.items()
    return tuple((str(k), _param_text(v)) for k, v in params)


def _devices(devices):
    if devices is None or isinstance(devices, str):
        return devices
    return ",".join(devices)


def compile(path, params=None, devices=None, soft_placement=False, cpu_as_gpu=False):
    """Compiles a .graph file into a Program.

    params: {name: value} overriding the file's ``param`` values (as ``--set``);
    devices: "cpu:0-1,sim:0" or a list of such names (None: this machine's).
    Raises ParseError or CompileError with .file, .line and .col set."""
    return Program(_graphrun.compile(os.fspath(path), params=_params(params),
                                     devices=_devices(devices),
                                     soft_placement=soft_placement, cpu_as_gpu=cpu_as_gpu))


def compile_string(text, name="<string>", params=None, devices=None, soft_placement=False,
                   cpu_as_gpu=False):
    """Compiles .graph source text; name is the file name its errors show
    (data paths resolve against the current directory)."""
    data = text.encode() if isinstance(text, str) else bytes(text)
    return Program(_graphrun.compile(None, text=data, name=name, params=_params(params),
                                     devices=_devices(devices),
                                     soft_placement=soft_placement, cpu_as_gpu=cpu_as_gpu))


class Program:
    """A compiled model.  Free to share between sessions and threads."""

    def __init__(self, handle):
        self._p = handle
        self._info = {}
        self._targets = {}
        self._lock = threading.Lock()

    def tensor_info(self, name):
        """(numpy dtype, shape tuple) of an input, variable or named tensor."""
        info = self._info.get(name)
        if info is None:
            dt, shape = self._p.tensor_info(name)
            info = (_DTYPES[dt], shape)
            with self._lock:
                self._info[name] = info
        return info

    def target_info(self, name):
        """{'is_train', 'is_scalar', 'loss', 'lr', 'batch'} of a target."""
        info = self._targets.get(name)
        if info is None:
            info = self._p.target_info(name)
            with self._lock:
                self._targets[name] = info
        return dict(info)

    def _is_train(self, name):
        info = self._targets.get(name)
        if info is None:
            try:
                info = self._p.target_info(name)
            except ArgumentError:
                return False  # not a name: let run() report it
            with self._lock:
                self._targets[name] = info
        return info["is_train"]

    def zeros(self, name):
        """A zeroed array with the dtype and shape of input/variable/tensor name."""
        return np.asarray(self._p.zeros(name))

    @property
    def variables(self):
        """The variables' full scoped names ("model/fc1/w", optimizer slots, counters)."""
        return self._p.variable_names()

    @property
    def files(self):
        """The files the program reads: the .graph file, then its data files."""
        return self._p.files()

    @property
    def default_target(self):
        """The target made by the last .minimize(), or None."""
        return self._p.default_target

    @property
    def warnings(self):
        return self._p.warnings


def _as_feed(prog, name, value):
    try:
        dtype, shape = prog.tensor_info(name)
    except ArgumentError:
        raise ArgumentError(f"feed '{name}': the program has no input of that name") from None
    arr = np.asarray(value)
    if arr.dtype != dtype:
        if not np.can_cast(arr.dtype, dtype, casting="same_kind"):
            raise ArgumentError(f"feed '{name}': dtype {arr.dtype} cannot be fed to a {dtype} "
                                f"input (only the same kind of number is converted)")
        arr = arr.astype(dtype)
    if arr.shape != shape:
        raise ArgumentError(f"feed '{name}': shape {arr.shape} differs from the input's "
                            f"{shape}")
    return np.ascontiguousarray(arr)


class Session:
    """Runs a Program's targets; holds its variables and data cursors.

    threads: the total thread budget (0: the machine's cores); executors: how
    many runs go on at once (Python threads calling run together), each
    getting threads/executors intra-op threads; seed: variable initialisation,
    shuffling, dropout; locking: every update takes its variable's lock
    instead of Hogwild!; check_numerics: stop at the first NaN/Inf with its
    .graph line.  run, eval, save, restore and the variable calls may be
    called from any number of threads at once; they release the GIL."""

    def __init__(self, program, threads=0, seed=0, executors=0, locking=False,
                 check_numerics=False, tensorboard_dir=None, profile=False):
        if not isinstance(program, Program):
            raise TypeError("Session needs a graphrun.Program (from graphrun.compile)")
        self.program = program
        self._s = _graphrun.Session(program._p, threads=threads, seed=seed or 0,
                                    executors=executors, locking=locking,
                                    check_numerics=check_numerics,
                                    tensorboard_dir=None if tensorboard_dir is None
                                    else os.fspath(tensorboard_dir),
                                    profile=profile)

    # -- running --
    def run(self, fetches, feed=None, copy=True, feed_dict=None):
        """Runs once and returns the fetched values as numpy arrays.

        fetches: a name, or a list/tuple/dict of names, shaped like the result.
        A train target in it (at most one) runs one training step and gives
        None in its place; the other names are fetched, and the run's target
        is the train target or else the first name.
        feed: {input name: array-like}; the dtype is converted only within
        its kind (ints to int32, floats or ints to float32), the shape must
        match.  copy=False returns read-only zero-copy views of the run's
        memory: they are valid until this thread's next run or eval of the
        session, which raise ViewError while any of them is alive."""
        if feed_dict is not None:
            if feed is not None:
                raise TypeError("give feed or feed_dict, not both")
            feed = feed_dict
        if isinstance(fetches, str):
            names = [fetches]
        elif isinstance(fetches, dict):
            names = list(fetches.values())
        else:
            names = list(fetches)
        if not names:
            raise ArgumentError("run: nothing to fetch or run")
        prog = self.program
        target = None
        out_names = []
        for n in names:
            if not isinstance(n, str):
                raise TypeError(f"run: fetches are names (str), not {type(n).__name__}")
            if prog._is_train(n):
                if target is not None and target != n:
                    raise ArgumentError(f"run: two train targets ('{target}' and '{n}') in one "
                                        f"run; run them one after the other")
                target = n
            else:
                out_names.append(n)
        if target is None:
            target = names[0]
        feeds = () if not feed else tuple((k, _as_feed(prog, k, v)) for k, v in feed.items())
        specs = []
        arrays = {}
        for n in dict.fromkeys(out_names):
            dtype, shape = prog.tensor_info(n)
            if copy:
                arrays[n] = np.empty(shape, dtype)
                specs.append((n, arrays[n]))
            else:
                specs.append((n, (dtype.name, shape)))
        got = self._s.run(target, feeds, tuple(specs))
        if not copy:
            arrays = {n: np.asarray(v) for (n, _), v in zip(specs, got)}
        del got
        values = [arrays.get(n) if n in arrays else None for n in names]
        if isinstance(fetches, str):
            return values[0]
        if isinstance(fetches, dict):
            return dict(zip(fetches.keys(), values))
        if isinstance(fetches, tuple):
            return tuple(values)
        return values

    def eval(self, targets):
        """Mean of a scalar target over one full pass of its data (e.g. test
        accuracy), as a float; a list of names gives a list of floats."""
        if isinstance(targets, str):
            return self._s.eval(targets)
        return [self._s.eval(t) for t in targets]

    # -- variables --
    def variables(self):
        """{full name: numpy array}: a copy of every variable, read between steps."""
        return {n: self.variable(n) for n in self.program.variables}

    def variable(self, name):
        """A copy of one variable as a numpy array (writable, yours)."""
        return np.asarray(self._s.variable_get(name))

    def assign(self, name, value):
        """Writes one variable (array-like of its shape; same-kind dtype conversion)."""
        self._s.variable_write(name, _as_feed(self.program, name, value))

    # -- checkpoints --
    def save(self, path):
        """Writes a safetensors checkpoint (variables, step, data cursors) atomically."""
        self._s.save(os.fspath(path))

    def restore(self, path, weights_only=False, allow_missing=False):
        """Loads a checkpoint; checks it whole first and changes nothing on error."""
        self._s.restore(os.fspath(path), weights_only=weights_only, allow_missing=allow_missing)

    @property
    def step(self):
        """Training steps done, restored ones included."""
        return self._s.step

    def close(self):
        """Frees the session now (else when it is garbage); refused while another
        thread runs on it or zero-copy views of it are alive."""
        self._s.close()

    @property
    def closed(self):
        return self._s.closed

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
