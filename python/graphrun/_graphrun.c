/* _graphrun.c - the CPython extension under `import graphrun`.
 *
 * A thin layer over include/graphrun.h: programs, sessions, and two small
 * buffer-exporting types that numpy wraps without copying:
 *  - Tensor owns a gr_tensor (a variable read, a program's zeroed input):
 *    its memory lives as long as any numpy array made from it;
 *  - View is a fetch made with gr_fetch.data == NULL: memory of the
 *    session's executor, valid until this thread's next gr_run or gr_eval
 *    on the session.  The session counts each thread's live views and
 *    refuses that thread's next run or eval while any is alive (ViewError),
 *    so a view never dangles silently; a view holds its session, so the
 *    session is not freed under it, and close() refuses while views live.
 * numpy itself is only used from graphrun/__init__.py, which converts feeds
 * and allocates fetch buffers; this file needs no numpy headers.
 *
 * The GIL is released around every call that can take time (run, eval,
 * save, restore, variable reads and writes, compile), so Python threads
 * looping sess.run("train") train as Hogwild! does in C. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <pythread.h>
#include <string.h>

#include "graphrun.h"

/* ---- errors ---- */

static PyObject *Error, *ParseError, *CompileError, *FileError, *DataError, *ArgumentError,
    *NumericError, *OutOfMemoryError, *InternalError, *CancelledError, *ViewError;

static PyObject *error_class(gr_code c)
{
    switch (c) {
    case GR_ERR_SYNTAX:
        return ParseError;
    case GR_ERR_COMPILE:
        return CompileError;
    case GR_ERR_IO:
        return FileError;
    case GR_ERR_DATA:
        return DataError;
    case GR_ERR_ARG:
        return ArgumentError;
    case GR_ERR_NUMERIC:
        return NumericError;
    case GR_ERR_NOMEM:
        return OutOfMemoryError;
    case GR_ERR_CANCELLED:
        return CancelledError;
    default:
        return InternalError;
    }
}

/* Raises the status's error: the message (the full diagnostic, without its
 * last newline) as str(e), and e.message, e.code, e.file, e.line, e.col. */
static PyObject *raise_status(const gr_status *st)
{
    const char *msg = gr_status_message(st);
    size_t n = strlen(msg);
    while (n > 0 && msg[n - 1] == '\n') n--;
    PyObject *text = PyUnicode_DecodeUTF8(msg, (Py_ssize_t)n, "replace");
    if (!text) return NULL;
    PyObject *cls = error_class(gr_status_code(st));
    PyObject *exc = PyObject_CallOneArg(cls, text);
    if (!exc) {
        Py_DECREF(text);
        return NULL;
    }
    const char *file = NULL;
    int line = 0, col = 0;
    int has = gr_status_location(st, &file, &line, &col);
    PyObject *f = has ? PyUnicode_DecodeFSDefault(file) : Py_NewRef(Py_None);
    PyObject *l = has ? PyLong_FromLong(line) : Py_NewRef(Py_None);
    PyObject *c = has ? PyLong_FromLong(col) : Py_NewRef(Py_None);
    PyObject *code = PyUnicode_FromString(gr_code_name(gr_status_code(st)));
    if (f && l && c && code && PyObject_SetAttrString(exc, "message", text) == 0 &&
        PyObject_SetAttrString(exc, "file", f) == 0 &&
        PyObject_SetAttrString(exc, "line", l) == 0 && PyObject_SetAttrString(exc, "col", c) == 0 &&
        PyObject_SetAttrString(exc, "code", code) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(f);
    Py_XDECREF(l);
    Py_XDECREF(c);
    Py_XDECREF(code);
    Py_DECREF(text);
    Py_DECREF(exc);
    return NULL;
}

static PyObject *raise_msg(PyObject *cls, const char *msg)
{
    PyObject *text = PyUnicode_FromString(msg);
    if (!text) return NULL;
    PyObject *exc = PyObject_CallOneArg(cls, text);
    if (exc && PyObject_SetAttrString(exc, "message", text) == 0 &&
        PyObject_SetAttrString(exc, "file", Py_None) == 0 &&
        PyObject_SetAttrString(exc, "line", Py_None) == 0 &&
        PyObject_SetAttrString(exc, "col", Py_None) == 0 &&
        PyObject_SetAttrString(exc, "code", Py_None) == 0)
        PyErr_SetObject(cls, exc);
    Py_XDECREF(exc);
    Py_DECREF(text);
    return NULL;
}

static const char *dtype_format(gr_dtype d)
{
    return d == GR_I32 ? "i" : "f";
}

static const char *dtype_name(gr_dtype d)
{
    return d == GR_I32 ? "int32" : "float32";
}

/* ---- Tensor: owns a gr_tensor, exports it as a buffer ---- */

typedef struct {
    PyObject_HEAD gr_tensor *t;
    Py_ssize_t shape[GR_MAX_RANK];
    Py_ssize_t strides[GR_MAX_RANK];
} TensorObject;

static void strides_of(int rank, const Py_ssize_t *shape, Py_ssize_t item, Py_ssize_t *strides)
{
    Py_ssize_t s = item;
    for (int i = rank - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i];
    }
}

static int fill_buffer(PyObject *self, Py_buffer *view, void *data, gr_dtype dt, int rank,
                       Py_ssize_t *shape, Py_ssize_t *strides, int readonly, int flags)
{
    if ((flags & PyBUF_WRITABLE) && readonly) {
        PyErr_SetString(PyExc_BufferError, "graphrun: a fetched view is read-only");
        return -1;
    }
    Py_ssize_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    view->obj = Py_NewRef(self);
    view->buf = data;
    view->len = n * 4;
    view->itemsize = 4;
    view->readonly = readonly;
    view->ndim = (flags & PyBUF_ND) ? rank : 1; /* a simple request sees bytes */
    view->format = (flags & PyBUF_FORMAT) ? (char *)dtype_format(dt) : NULL;
    view->shape = (flags & PyBUF_ND) ? shape : NULL;
    view->strides = (flags & PyBUF_STRIDES) == PyBUF_STRIDES ? strides : NULL;
    view->suboffsets = NULL;
    view->internal = NULL;
    return 0;
}

static int tensor_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    TensorObject *o = (TensorObject *)self;
    return fill_buffer(self, view, gr_tensor_data(o->t), gr_tensor_dtype(o->t),
                       gr_tensor_rank(o->t), o->shape, o->strides, 0, flags);
}

static void tensor_dealloc(PyObject *self)
{
    gr_tensor_free(((TensorObject *)self)->t);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs tensor_as_buffer = {tensor_getbuffer, NULL};

static PyTypeObject TensorType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "graphrun._graphrun.Tensor",
    .tp_basicsize = sizeof(TensorObject),
    .tp_dealloc = tensor_dealloc,
    .tp_as_buffer = &tensor_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A tensor the library handed out, exported as a buffer (numpy wraps it).",
};

/* Takes ownership of t. */
static PyObject *tensor_wrap(gr_tensor *t)
{
    TensorObject *o = PyObject_New(TensorObject, &TensorType);
    if (!o) {
        gr_tensor_free(t);
        return NULL;
    }
    o->t = t;
    int rank = gr_tensor_rank(t);
    for (int i = 0; i < rank; i++) o->shape[i] = (Py_ssize_t)gr_tensor_dim(t, i);
    strides_of(rank, o->shape, 4, o->strides);
    return (PyObject *)o;
}

/* ---- Program ---- */

typedef struct {
    PyObject_HEAD gr_program *p;
} ProgramObject;

static void program_dealloc(PyObject *self)
{
    gr_program_free(((ProgramObject *)self)->p);
    Py_TYPE(self)->tp_free(self);
}

/* tensor_info(name) -> (dtype name, shape tuple) of an input, variable or named tensor. */
static PyObject *program_tensor_info(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    gr_status *st = gr_status_new();
    gr_tensor *t = NULL;
    if (!st) return PyErr_NoMemory();
    if (gr_program_tensor(((ProgramObject *)self)->p, name, &t, st) != GR_OK) {
        raise_status(st);
        gr_status_free(st);
        return NULL;
    }
    gr_status_free(st);
    int rank = gr_tensor_rank(t);
    PyObject *shape = PyTuple_New(rank);
    for (int i = 0; shape && i < rank; i++)
        PyTuple_SET_ITEM(shape, i, PyLong_FromLongLong(gr_tensor_dim(t, i)));
    PyObject *r = shape ? Py_BuildValue("(sN)", dtype_name(gr_tensor_dtype(t)), shape) : NULL;
    gr_tensor_free(t);
    return r;
}

/* zeros(name) -> Tensor shaped like the program's input/variable/tensor name. */
static PyObject *program_zeros(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    gr_status *st = gr_status_new();
    gr_tensor *t = NULL;
    if (!st) return PyErr_NoMemory();
    gr_code c = gr_program_tensor(((ProgramObject *)self)->p, name, &t, st);
    PyObject *r = c == GR_OK ? tensor_wrap(t) : raise_status(st);
    gr_status_free(st);
    return r;
}

/* target_info(name) -> dict, or raises ArgumentError for an unknown name. */
static PyObject *program_target_info(PyObject *self, PyObject *arg)
{
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name) return NULL;
    gr_status *st = gr_status_new();
    if (!st) return PyErr_NoMemory();
    gr_target_info ti;
    gr_code c = gr_target_info_get(((ProgramObject *)self)->p, name, &ti, st);
    PyObject *r = c != GR_OK ? raise_status(st)
                             : Py_BuildValue("{s:z,s:z,s:L,s:O,s:O}", "loss", ti.loss, "lr", ti.lr,
                                             "batch", (long long)ti.batch, "is_train",
                                             ti.is_train ? Py_True : Py_False, "is_scalar",
                                             ti.is_scalar ? Py_True : Py_False);
    gr_status_free(st);
    return r;
}

static PyObject *program_variable_names(PyObject *self, PyObject *unused)
{
    (void)unused;
    const gr_program *p = ((ProgramObject *)self)->p;
    int n = gr_program_variable_count(p);
    PyObject *l = PyList_New(n);
    for (int k = 0; l && k < n; k++) {
        PyObject *s = PyUnicode_FromString(gr_program_variable_name(p, k));
        if (!s) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, k, s);
    }
    return l;
}

static PyObject *program_files(PyObject *self, PyObject *unused)
{
    (void)unused;
    const gr_program *p = ((ProgramObject *)self)->p;
    int n = gr_program_file_count(p);
    PyObject *l = PyList_New(n);
    for (int k = 0; l && k < n; k++) {
        PyObject *s = PyUnicode_DecodeFSDefault(gr_program_file(p, k));
        if (!s) {
            Py_CLEAR(l);
            break;
        }
        PyList_SET_ITEM(l, k, s);
    }
    return l;
}

static PyObject *program_default_target(PyObject *self, void *unused)
{
    (void)unused;
    const char *t = gr_program_default_target(((ProgramObject *)self)->p);
    return t ? PyUnicode_FromString(t) : Py_NewRef(Py_None);
}

static PyObject *program_warnings(PyObject *self, void *unused)
{
    (void)unused;
    const char *w = gr_program_warnings(((ProgramObject *)self)->p);
    return PyUnicode_FromString(w ? w : "");
}

static PyMethodDef program_methods[] = {
    {"tensor_info", program_tensor_info, METH_O, "(dtype, shape) of a named tensor"},
    {"zeros", program_zeros, METH_O, "a zeroed Tensor shaped like a named tensor"},
    {"target_info", program_target_info, METH_O, "what the library knows of a target"},
    {"variable_names", program_variable_names, METH_NOARGS, "the variables' full names"},
    {"files", program_files, METH_NOARGS, "the files the program reads"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef program_getset[] = {
    {"default_target", program_default_target, NULL, "the last minimize() target, or None", NULL},
    {"warnings", program_warnings, NULL, "compilation warnings as diagnostics text", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject ProgramType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "graphrun._graphrun.Program",
    .tp_basicsize = sizeof(ProgramObject),
    .tp_dealloc = program_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = program_methods,
    .tp_getset = program_getset,
    .tp_doc = "A compiled .graph program (made by compile_file or compile_string).",
};

/* compile(path or None, text or None, name, params: list of (name, value),
 *         devices, soft_placement, cpu_as_gpu) -> Program */
static PyObject *mod_compile(PyObject *mod, PyObject *args, PyObject *kw)
{
    (void)mod;
    static char *kwlist[] = {"path",    "text",           "name",       "params",
                             "devices", "soft_placement", "cpu_as_gpu", NULL};
    PyObject *path_obj = Py_None, *params = NULL;
    const char *text = NULL, *name = "<string>", *devices = NULL;
    Py_ssize_t text_len = 0;
    int soft = 0, cpu_as_gpu = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O|z#sOzpp", kwlist, &path_obj, &text, &text_len,
                                     &name, &params, &devices, &soft, &cpu_as_gpu))
        return NULL;
    PyObject *path_bytes = NULL;
    if (path_obj != Py_None && !PyUnicode_FSConverter(path_obj, &path_bytes)) return NULL;
    PyObject *seq = params ? PySequence_Fast(params, "params must be a sequence of pairs") : NULL;
    if (params && !seq) {
        Py_XDECREF(path_bytes);
        return NULL;
    }
    Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : 0;
    gr_param *pv = PyMem_Calloc((size_t)(n ? n : 1), sizeof *pv);
    PyObject *result = NULL;
    if (!pv) {
        PyErr_NoMemory();
        goto out;
    }
    for (Py_ssize_t i = 0; i < n; i++)
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "ss", &pv[i].name, &pv[i].value))
            goto out;
    if (n > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many params");
        goto out;
    }
    gr_compile_options co = {.params = pv,
                             .n_params = (int)n,
                             .soft_placement = soft,
                             .devices = devices,
                             .cpu_as_gpu = cpu_as_gpu};
    gr_status *st = gr_status_new();
    if (!st) {
        PyErr_NoMemory();
        goto out;
    }
    gr_program *p = NULL;
    gr_code c;
    Py_BEGIN_ALLOW_THREADS;
    if (path_bytes)
        c = gr_compile_file(PyBytes_AS_STRING(path_bytes), &co, &p, st);
    else
        c = gr_compile_string(name, text ? text : "", (size_t)text_len, &co, &p, st);
    Py_END_ALLOW_THREADS;
    if (c != GR_OK) {
        raise_status(st);
    } else {
        ProgramObject *o = PyObject_New(ProgramObject, &ProgramType);
        if (o)
            o->p = p;
        else
            gr_program_free(p);
        result = (PyObject *)o;
    }
    gr_status_free(st);
out:
    PyMem_Free(pv);
    Py_XDECREF(seq);
    Py_XDECREF(path_bytes);
    return result;
}

/* ---- Session ---- */

typedef struct {
    unsigned long tid;
    Py_ssize_t n;
} thread_views;

typedef struct {
    PyObject_HEAD gr_session *s;
    PyObject *program;   /* a session keeps its program */
    Py_ssize_t busy;     /* calls in flight with the GIL released */
    thread_views *views; /* live View objects per thread (under the GIL) */
    Py_ssize_t n_views_threads;
    Py_ssize_t views_total;
} SessionObject;

static thread_views *views_of(SessionObject *s, unsigned long tid, int add)
{
    for (Py_ssize_t i = 0; i < s->n_views_threads; i++)
        if (s->views[i].tid == tid) return &s->views[i];
    if (!add) return NULL;
    for (Py_ssize_t i = 0; i < s->n_views_threads; i++)
        if (s->views[i].n == 0) {
            s->views[i].tid = tid;
            return &s->views[i];
        }
    thread_views *v = PyMem_Realloc(s->views, (size_t)(s->n_views_threads + 1) * sizeof *v);
    if (!v) return NULL;
    s->views = v;
    v[s->n_views_threads] = (thread_views){tid, 0};
    return &v[s->n_views_threads++];
}

static void session_dealloc(PyObject *self)
{
    SessionObject *s = (SessionObject *)self;
    if (s->s) {
        Py_BEGIN_ALLOW_THREADS;
        gr_session_free(s->s);
        Py_END_ALLOW_THREADS;
    }
    PyMem_Free(s->views);
    Py_XDECREF(s->program);
    Py_TYPE(self)->tp_free(self);
}

static int session_init(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"program",        "threads",         "seed",    "executors", "locking",
                             "check_numerics", "tensorboard_dir", "profile", NULL};
    SessionObject *s = (SessionObject *)self;
    PyObject *prog;
    gr_session_options so = {0};
    unsigned long long seed = 0;
    PyObject *tb = Py_None, *tb_bytes = NULL;
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O!|iKippOp", kwlist, &ProgramType, &prog,
                                     &so.threads, &seed, &so.executors, &so.locking,
                                     &so.check_numerics, &tb, &so.profile))
        return -1;
    if (s->s) {
        PyErr_SetString(PyExc_RuntimeError, "Session.__init__ called twice");
        return -1;
    }
    if (tb != Py_None) {
        if (!PyUnicode_FSConverter(tb, &tb_bytes)) return -1;
        so.tensorboard_dir = PyBytes_AS_STRING(tb_bytes);
    }
    so.seed = seed;
    gr_status *st = gr_status_new();
    if (!st) {
        Py_XDECREF(tb_bytes);
        PyErr_NoMemory();
        return -1;
    }
    gr_code c;
    gr_session *out = NULL;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_session_new(((ProgramObject *)prog)->p, &so, &out, st);
    Py_END_ALLOW_THREADS;
    Py_XDECREF(tb_bytes);
    if (c != GR_OK) {
        raise_status(st);
        gr_status_free(st);
        return -1;
    }
    gr_status_free(st);
    s->s = out;
    s->program = Py_NewRef(prog);
    return 0;
}

/* Refuses a call on a closed session, or (when views) on a thread that
 * still holds views of this session's last run. */
static int session_usable(SessionObject *s, const char *what, int views)
{
    if (!s->s) {
        raise_msg(ArgumentError, "graphrun: the session is closed");
        return 0;
    }
    if (views) {
        thread_views *tv = views_of(s, PyThread_get_thread_ident(), 0);
        if (tv && tv->n > 0) {
            char msg[400];
            snprintf(msg, sizeof msg,
                     "%s: %zd zero-copy view%s (copy=False) from this thread's last run of the "
                     "session %s still alive, and this %s would overwrite %s: drop %s (del) "
                     "first, or fetch with copy=True",
                     what, tv->n, tv->n == 1 ? "" : "s", tv->n == 1 ? "is" : "are", what,
                     tv->n == 1 ? "it" : "them", tv->n == 1 ? "it" : "them");
            raise_msg(ViewError, msg);
            return 0;
        }
    }
    return 1;
}

/* ---- View: a fetch in the executor's memory ---- */

typedef struct {
    PyObject_HEAD SessionObject *session;
    unsigned long tid;
    const void *data;
    gr_dtype dtype;
    int rank;
    Py_ssize_t shape[GR_MAX_RANK];
    Py_ssize_t strides[GR_MAX_RANK];
} ViewObject;

static int view_getbuffer(PyObject *self, Py_buffer *view, int flags)
{
    ViewObject *v = (ViewObject *)self;
    return fill_buffer(self, view, (void *)v->data, v->dtype, v->rank, v->shape, v->strides, 1,
                       flags);
}

static void view_dealloc(PyObject *self)
{
    ViewObject *v = (ViewObject *)self;
    thread_views *tv = views_of(v->session, v->tid, 0);
    if (tv) tv->n--;
    v->session->views_total--;
    Py_DECREF(v->session);
    Py_TYPE(self)->tp_free(self);
}

static PyBufferProcs view_as_buffer = {view_getbuffer, NULL};

static PyTypeObject ViewType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "graphrun._graphrun.View",
    .tp_basicsize = sizeof(ViewObject),
    .tp_dealloc = view_dealloc,
    .tp_as_buffer = &view_as_buffer,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A read-only fetch in place (copy=False); valid until this thread's next run.",
};

/* Parses one (name, dtype, shape) fetch spec for a view. */
static int view_spec(PyObject *spec, ViewObject *v)
{
    const char *dt;
    PyObject *shape;
    if (!PyArg_ParseTuple(spec, "sO!", &dt, &PyTuple_Type, &shape)) return -1;
    v->dtype = strcmp(dt, "int32") == 0 ? GR_I32 : GR_F32;
    Py_ssize_t r = PyTuple_GET_SIZE(shape);
    if (r > GR_MAX_RANK) {
        PyErr_SetString(PyExc_ValueError, "rank above GR_MAX_RANK");
        return -1;
    }
    v->rank = (int)r;
    for (Py_ssize_t i = 0; i < r; i++) {
        v->shape[i] = PyLong_AsSsize_t(PyTuple_GET_ITEM(shape, i));
        if (v->shape[i] < 0 && PyErr_Occurred()) return -1;
    }
    strides_of(v->rank, v->shape, 4, v->strides);
    return 0;
}

/* run(target, feeds, fetches) -> tuple: feeds is a sequence of (name,
 * buffer), fetches of (name, buffer) (copied into that writable buffer,
 * None in the result) or (name, (dtype, shape)) (a View in the result). */
static PyObject *session_run(PyObject *self, PyObject *args)
{
    SessionObject *s = (SessionObject *)self;
    const char *target;
    PyObject *feeds_in, *fetches_in;
    if (!PyArg_ParseTuple(args, "sOO", &target, &feeds_in, &fetches_in)) return NULL;
    if (!session_usable(s, "run", 1)) return NULL;
    PyObject *feeds = PySequence_Fast(feeds_in, "feeds must be a sequence");
    PyObject *fetches = feeds ? PySequence_Fast(fetches_in, "fetches must be a sequence") : NULL;
    if (!fetches) {
        Py_XDECREF(feeds);
        return NULL;
    }
    Py_ssize_t nf = PySequence_Fast_GET_SIZE(feeds), nx = PySequence_Fast_GET_SIZE(fetches);
    gr_feed *fv = PyMem_Calloc((size_t)nf + 1, sizeof *fv);
    gr_fetch *xv = PyMem_Calloc((size_t)nx + 1, sizeof *xv);
    Py_buffer *fb = PyMem_Calloc((size_t)nf + 1, sizeof *fb);
    Py_buffer *xb = PyMem_Calloc((size_t)nx + 1, sizeof *xb);
    ViewObject **views = PyMem_Calloc((size_t)nx + 1, sizeof *views);
    Py_ssize_t got_f = 0, got_x = 0;
    PyObject *result = NULL;
    gr_status *st = NULL;
    if (!fv || !xv || !fb || !xb || !views || !(st = gr_status_new())) {
        PyErr_NoMemory();
        goto out;
    }
    for (; got_f < nf; got_f++) {
        PyObject *buf;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(feeds, got_f), "sO", &fv[got_f].name,
                              &buf) ||
            PyObject_GetBuffer(buf, &fb[got_f], PyBUF_C_CONTIGUOUS) < 0)
            goto out;
        fv[got_f].data = fb[got_f].buf;
        fv[got_f].bytes = (size_t)fb[got_f].len;
    }
    for (; got_x < nx; got_x++) {
        PyObject *buf;
        if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(fetches, got_x), "sO", &xv[got_x].name,
                              &buf))
            goto out;
        if (PyTuple_Check(buf)) {
            views[got_x] = PyObject_New(ViewObject, &ViewType);
            if (!views[got_x]) goto out;
            views[got_x]->session = NULL;
            if (view_spec(buf, views[got_x]) < 0) goto out;
            xb[got_x].obj = NULL;
            continue;
        }
        if (PyObject_GetBuffer(buf, &xb[got_x], PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) < 0) goto out;
        xv[got_x].data = xb[got_x].buf;
        xv[got_x].bytes = (size_t)xb[got_x].len;
    }
    if (nf > INT32_MAX || nx > INT32_MAX) {
        PyErr_SetString(PyExc_ValueError, "too many feeds or fetches");
        goto out;
    }
    gr_code c;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_run(s->s, target, fv, (int)nf, xv, (int)nx, st);
    Py_END_ALLOW_THREADS;
    s->busy--;
    if (c != GR_OK) {
        raise_status(st);
        goto out;
    }
    result = PyTuple_New(nx);
    if (!result) goto out;
    unsigned long tid = PyThread_get_thread_ident();
    for (Py_ssize_t i = 0; i < nx; i++) {
        if (!views[i]) {
            PyTuple_SET_ITEM(result, i, Py_NewRef(Py_None));
            continue;
        }
        thread_views *tv = views_of(s, tid, 1);
        if (!tv) {
            Py_CLEAR(result);
            PyErr_NoMemory();
            goto out;
        }
        views[i]->session = (SessionObject *)Py_NewRef(self);
        views[i]->tid = tid;
        views[i]->data = xv[i].view;
        tv->n++;
        s->views_total++;
        PyTuple_SET_ITEM(result, i, (PyObject *)views[i]);
        views[i] = NULL;
    }
out:
    for (Py_ssize_t i = 0; i < got_f; i++) PyBuffer_Release(&fb[i]);
    for (Py_ssize_t i = 0; i < got_x; i++)
        if (xb[i].obj) PyBuffer_Release(&xb[i]);
    for (Py_ssize_t i = 0; views && i < nx; i++)
        if (views[i]) PyObject_Free(views[i]); /* never counted: no dealloc */
    gr_status_free(st);
    PyMem_Free(fv);
    PyMem_Free(xv);
    PyMem_Free(fb);
    PyMem_Free(xb);
    PyMem_Free(views);
    Py_DECREF(feeds);
    Py_DECREF(fetches);
    return result;
}

static PyObject *session_eval(PyObject *self, PyObject *arg)
{
    SessionObject *s = (SessionObject *)self;
    const char *target = PyUnicode_AsUTF8(arg);
    if (!target || !session_usable(s, "eval", 1)) return NULL;
    gr_status *st = gr_status_new();
    if (!st) return PyErr_NoMemory();
    double v = 0;
    gr_code c;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_eval(s->s, target, &v, st);
    Py_END_ALLOW_THREADS;
    s->busy--;
    PyObject *r = c == GR_OK ? PyFloat_FromDouble(v) : raise_status(st);
    gr_status_free(st);
    return r;
}

static PyObject *session_save(PyObject *self, PyObject *arg)
{
    SessionObject *s = (SessionObject *)self;
    PyObject *path = NULL;
    if (!session_usable(s, "save", 0) || !PyUnicode_FSConverter(arg, &path)) return NULL;
    gr_status *st = gr_status_new();
    if (!st) {
        Py_DECREF(path);
        return PyErr_NoMemory();
    }
    gr_code c;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_session_save(s->s, PyBytes_AS_STRING(path), st);
    Py_END_ALLOW_THREADS;
    s->busy--;
    PyObject *r = c == GR_OK ? Py_NewRef(Py_None) : raise_status(st);
    gr_status_free(st);
    Py_DECREF(path);
    return r;
}

static PyObject *session_restore(PyObject *self, PyObject *args, PyObject *kw)
{
    static char *kwlist[] = {"path", "weights_only", "allow_missing", NULL};
    SessionObject *s = (SessionObject *)self;
    PyObject *path = NULL;
    gr_restore_options ro = {0};
    if (!PyArg_ParseTupleAndKeywords(args, kw, "O&|pp", kwlist, PyUnicode_FSConverter, &path,
                                     &ro.weights_only, &ro.allow_missing))
        return NULL;
    gr_status *st = session_usable(s, "restore", 0) ? gr_status_new() : NULL;
    if (!st) {
        Py_DECREF(path);
        return PyErr_Occurred() ? NULL : PyErr_NoMemory();
    }
    gr_code c;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_session_restore(s->s, PyBytes_AS_STRING(path), &ro, st);
    Py_END_ALLOW_THREADS;
    s->busy--;
    PyObject *r = c == GR_OK ? Py_NewRef(Py_None) : raise_status(st);
    gr_status_free(st);
    Py_DECREF(path);
    return r;
}

/* variable_get(name) -> Tensor (a copy, owned: numpy wraps it without another). */
static PyObject *session_variable_get(PyObject *self, PyObject *arg)
{
    SessionObject *s = (SessionObject *)self;
    const char *name = PyUnicode_AsUTF8(arg);
    if (!name || !session_usable(s, "variable", 0)) return NULL;
    gr_status *st = gr_status_new();
    if (!st) return PyErr_NoMemory();
    gr_tensor *t = NULL;
    gr_code c;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_variable_get(s->s, name, &t, st);
    Py_END_ALLOW_THREADS;
    s->busy--;
    PyObject *r = c == GR_OK ? tensor_wrap(t) : raise_status(st);
    gr_status_free(st);
    return r;
}

static PyObject *session_variable_write(PyObject *self, PyObject *args)
{
    SessionObject *s = (SessionObject *)self;
    const char *name;
    Py_buffer b;
    if (!PyArg_ParseTuple(args, "sy*", &name, &b)) return NULL;
    if (!session_usable(s, "assign", 0)) {
        PyBuffer_Release(&b);
        return NULL;
    }
    gr_status *st = gr_status_new();
    if (!st) {
        PyBuffer_Release(&b);
        return PyErr_NoMemory();
    }
    gr_code c;
    s->busy++;
    Py_BEGIN_ALLOW_THREADS;
    c = gr_variable_write(s->s, name, b.buf, (size_t)b.len, st);
    Py_END_ALLOW_THREADS;
    s->busy--;
    PyBuffer_Release(&b);
    PyObject *r = c == GR_OK ? Py_NewRef(Py_None) : raise_status(st);
    gr_status_free(st);
    return r;
}

static PyObject *session_close(PyObject *self, PyObject *unused)
{
    (void)unused;
    SessionObject *s = (SessionObject *)self;
    if (!s->s) Py_RETURN_NONE;
    if (s->busy > 0)
        return raise_msg(ArgumentError,
                         "close: another thread is running on the session; join it first");
    if (s->views_total > 0)
        return raise_msg(ViewError, "close: zero-copy views (copy=False) of the session are "
                                    "still alive; drop them (del) first");
    gr_session *g = s->s;
    s->s = NULL;
    Py_BEGIN_ALLOW_THREADS;
    gr_session_free(g);
    Py_END_ALLOW_THREADS;
    Py_RETURN_NONE;
}

static PyObject *session_step(PyObject *self, void *unused)
{
    (void)unused;
    SessionObject *s = (SessionObject *)self;
    return PyLong_FromUnsignedLongLong(s->s ? gr_session_step(s->s) : 0);
}

static PyObject *session_closed(PyObject *self, void *unused)
{
    (void)unused;
    return PyBool_FromLong(((SessionObject *)self)->s == NULL);
}

static PyObject *session_live_views(PyObject *self, void *unused)
{
    (void)unused;
    return PyLong_FromSsize_t(((SessionObject *)self)->views_total);
}

static PyMethodDef session_methods[] = {
    {"run", session_run, METH_VARARGS, "run(target, feeds, fetches)"},
    {"eval", session_eval, METH_O, "eval(target) -> float"},
    {"save", session_save, METH_O, "save(path)"},
    {"restore", (PyCFunction)(void (*)(void))session_restore, METH_VARARGS | METH_KEYWORDS,
     "restore(path, weights_only=False, allow_missing=False)"},
    {"variable_get", session_variable_get, METH_O, "variable_get(name) -> Tensor"},
    {"variable_write", session_variable_write, METH_VARARGS, "variable_write(name, buffer)"},
    {"close", session_close, METH_NOARGS, "close()"},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef session_getset[] = {
    {"step", session_step, NULL, "training steps done (restored ones included)", NULL},
    {"closed", session_closed, NULL, "whether close() was called", NULL},
    {"live_views", session_live_views, NULL, "zero-copy views alive, all threads", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject SessionType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "graphrun._graphrun.Session",
    .tp_basicsize = sizeof(SessionObject),
    .tp_dealloc = session_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_methods = session_methods,
    .tp_getset = session_getset,
    .tp_init = session_init,
    .tp_new = PyType_GenericNew,
    .tp_doc = "Session(program, threads=0, seed=0, executors=0, locking=False, "
              "check_numerics=False, tensorboard_dir=None, profile=False)",
};

/* ---- module ---- */

static PyObject *mod_version(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    return PyUnicode_FromString(gr_version());
}

/* blas_kernels() -> (OpenBLAS's kernels, the OPENBLAS_CORETYPE that would pick
 * better ones or None) */
static PyObject *mod_blas_kernels(PyObject *mod, PyObject *unused)
{
    (void)mod;
    (void)unused;
    const char *better = NULL;
    const char *k = gr_blas_kernels(&better);
    return Py_BuildValue("(zz)", k, better);
}

static PyMethodDef mod_methods[] = {
    {"compile", (PyCFunction)(void (*)(void))mod_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(path, text=None, name='<string>', params=(), devices=None, soft_placement=False, "
     "cpu_as_gpu=False) -> Program"},
    {"version", mod_version, METH_NOARGS, "the library's version string"},
    {"blas_kernels", mod_blas_kernels, METH_NOARGS, "(kernels, better OPENBLAS_CORETYPE or None)"},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef moddef = {
    PyModuleDef_HEAD_INIT,
    "_graphrun",
    "graphrun's C extension (use `import graphrun`).",
    -1,
    mod_methods,
    NULL,
    NULL,
    NULL,
    NULL,
};

static int add_error(PyObject *m, PyObject **slot, const char *name, PyObject *bases,
                     const char *doc)
{
    char full[80];
    snprintf(full, sizeof full, "graphrun.%s", name);
    *slot = PyErr_NewExceptionWithDoc(full, doc, bases, NULL);
    Py_XDECREF(bases);
    if (!*slot) return -1;
    return PyModule_AddObjectRef(m, name, *slot);
}

static PyObject *pair(PyObject *a, PyObject *b)
{
    return PyTuple_Pack(2, a, b);
}

PyMODINIT_FUNC PyInit__graphrun(void);
PyMODINIT_FUNC PyInit__graphrun(void)
{
    if (PyType_Ready(&TensorType) < 0 || PyType_Ready(&ProgramType) < 0 ||
        PyType_Ready(&SessionType) < 0 || PyType_Ready(&ViewType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&moddef);
    if (!m) return NULL;
    if (add_error(m, &Error, "Error", NULL,
                  "A graphrun error: str(e) is the message; e.code, e.file, e.line and e.col "
                  "(None when the error is not in a .graph file)") < 0 ||
        add_error(m, &ParseError, "ParseError", Py_NewRef(Error),
                  "the .graph file does not parse") < 0 ||
        add_error(m, &CompileError, "CompileError", Py_NewRef(Error),
                  "names, shapes, dtypes, reuse, devices, params") < 0 ||
        add_error(m, &FileError, "FileError", pair(Error, PyExc_OSError),
                  "a file could not be read or written") < 0 ||
        add_error(m, &DataError, "DataError", Py_NewRef(Error),
                  "a data file is malformed, or a label or id is out of range") < 0 ||
        add_error(m, &ArgumentError, "ArgumentError", pair(Error, PyExc_ValueError),
                  "bad argument: unknown target, wrong feed, dtype or shape") < 0 ||
        add_error(m, &NumericError, "NumericError", pair(Error, PyExc_ArithmeticError),
                  "NaN or Inf found with check_numerics") < 0 ||
        add_error(m, &OutOfMemoryError, "OutOfMemoryError", pair(Error, PyExc_MemoryError),
                  "the library ran out of memory") < 0 ||
        add_error(m, &InternalError, "InternalError", Py_NewRef(Error), "an internal error") < 0 ||
        add_error(m, &CancelledError, "CancelledError", Py_NewRef(Error), "an eval was cancelled") <
            0 ||
        add_error(m, &ViewError, "ViewError", Py_NewRef(Error),
                  "a zero-copy view would be overwritten while still alive") < 0 ||
        PyModule_AddObjectRef(m, "Program", (PyObject *)&ProgramType) < 0 ||
        PyModule_AddObjectRef(m, "Session", (PyObject *)&SessionType) < 0 ||
        PyModule_AddObjectRef(m, "Tensor", (PyObject *)&TensorType) < 0 ||
        PyModule_AddObjectRef(m, "View", (PyObject *)&ViewType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
