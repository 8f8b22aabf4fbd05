/* modules.c - opening the CUDA and MPI modules (modules.h). */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "modules.h"
#include "runtime.h"

static const core_calls core = {.abi = CORE_CALLS_ABI,
                                .xmalloc = base_xmalloc,
                                .xcalloc = base_xcalloc,
                                .xreallocarray = base_xreallocarray,
                                .fatal = fatal,
                                .ir_numel = ir_numel,
                                .ir_nbytes = ir_nbytes,
                                .ir_row_strides = ir_row_strides,
                                .ops_name = ops_name,
                                .src_linecol = src_linecol,
                                .fail = rt_fail,
                                .ok = rt_ok};

typedef const void *(*module_entry)(const core_calls *core, int abi, const char *version);

typedef struct module {
    const char *file;  /* libgraphrun-cuda.so */
    const char *entry; /* its one exported function */
    const char *what;  /* CUDA */
    const char *hint;  /* how to build it */
    int built;         /* configured with it */
    int global;        /* RTLD_GLOBAL: what it loads serves libraries opened later */
    module_entry linked;
    const void *vt;
    char why[1024];
} module;

#if defined(GR_LINK_CUDA) || defined(GR_LINK_MPI)
/* The modules' objects are linked in and call the core by name. */
void core_calls_bind(const core_calls *c)
{
    (void)c;
}
#endif

/* The folder of the file holding this code, into dir; 0 when found. */
static int core_dir(char *dir, size_t n)
{
    Dl_info info;
    struct link_map *lm = NULL;
    if (!dladdr1((void *)core_dir, &info, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return -1;
    char path[4096];
    if (lm->l_name && lm->l_name[0]) {
        snprintf(path, sizeof path, "%s", lm->l_name);
    } else { /* the program itself: a static library linked into it */
        ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
        if (k <= 0) return -1;
        path[k] = 0;
    }
    char *slash = strrchr(path, '/');
    if (!slash) return -1;
    *slash = 0;
    snprintf(dir, n, "%s", path[0] ? path : "/");
    return 0;
}

/* dlopen of dir/file when that exists: 1 opened, 0 not there, -1 there but
 * not loadable (why says why). */
static int open_in(module *m, const char *dir, void **lib)
{
    char path[4200];
    snprintf(path, sizeof path, "%.4000s/%.100s", dir, m->file);
    if (access(path, F_OK) != 0) return 0;
    *lib = dlopen(path, RTLD_NOW | (m->global ? RTLD_GLOBAL : RTLD_LOCAL));
    if (*lib) return 1;
    snprintf(m->why, sizeof m->why, "%.500s cannot be loaded: %.400s", path, dlerror());
    return -1;
}

static void *find_module(module *m)
{
    void *lib = NULL;
    char dir[4096] = "", up[4200];
    const char *env = getenv("GR_MODULE_DIR");
    int r = env && *env ? open_in(m, env, &lib) : 0;
    int have_dir = core_dir(dir, sizeof dir) == 0;
    if (r == 0 && have_dir) r = open_in(m, dir, &lib);
#ifdef GR_INSTALL_LIBDIR
    snprintf(up, sizeof up, "%.4000s/../%.100s", dir, GR_INSTALL_LIBDIR);
    if (r == 0 && have_dir) r = open_in(m, up, &lib);
#else
    (void)up;
#endif
    if (r != 0) return lib;
    if ((lib = dlopen(m->file, RTLD_NOW | (m->global ? RTLD_GLOBAL : RTLD_LOCAL)))) return lib;
    snprintf(m->why, sizeof m->why,
             "%s was not found beside libgraphrun (%.400s)%s%.400s nor on the loader's path; "
             "GR_MODULE_DIR may name its folder",
             m->file, have_dir ? dir : "?", env && *env ? " or in GR_MODULE_DIR=" : "",
             env && *env ? env : "");
    return NULL;
}

static void module_open(module *m)
{
    if (m->linked) {
        m->vt = m->linked(&core, CORE_CALLS_ABI, GR_VERSION_STRING);
        return;
    }
    if (!m->built) {
        snprintf(m->why, sizeof m->why, "this graphrun was built without %s (%s)", m->what,
                 m->hint);
        return;
    }
    void *lib = find_module(m);
    if (!lib) return;
    module_entry entry = (module_entry)(uintptr_t)dlsym(lib, m->entry);
    if (!entry) {
        snprintf(m->why, sizeof m->why, "%s has no %s", m->file, m->entry);
        return; /* the library stays open: unloading buys nothing */
    }
    if (!(m->vt = entry(&core, CORE_CALLS_ABI, GR_VERSION_STRING)))
        snprintf(m->why, sizeof m->why, "%s is not from this build of graphrun (%s)", m->file,
                 GR_VERSION_STRING);
}

#ifdef GR_LINK_CUDA
static const void *cuda_linked(const core_calls *c, int abi, const char *version)
{
    return grmod_cuda_entry(c, abi, version);
}
#endif

#ifdef GR_CUDA_MODULE
enum { CUDA_BUILT = 1 };
#else
enum { CUDA_BUILT = 0 };
#endif
#ifdef GR_MPI_MODULE
enum { MPI_BUILT = 1 };
#else
enum { MPI_BUILT = 0 };
#endif

static module cuda = {.file = "libgraphrun-cuda.so",
                      .entry = CUDA_MODULE_ENTRY,
                      .what = "CUDA",
                      .hint = "install the CUDA toolkit and configure with -DGR_CUDA=ON",
                      .built = CUDA_BUILT,
#ifdef GR_LINK_CUDA
                      .linked = cuda_linked
#endif
};
static module mpi = {
    .file = "libgraphrun-mpi.so",
    .entry = "grmod_mpi_entry",
    .what = "MPI",
    .hint = "install libopenmpi-dev and configure with -DGR_MPI=ON",
    .built = MPI_BUILT,
    .global = 1 /* Open MPI's own plugins link against libmpi */
};
static pthread_once_t cuda_once = PTHREAD_ONCE_INIT, mpi_once = PTHREAD_ONCE_INIT;

static void cuda_open(void)
{
    module_open(&cuda);
}

static void mpi_open(void)
{
    module_open(&mpi);
}

const core_calls *rt_core_calls(void)
{
    return &core;
}

int rt_cuda_built(void)
{
    return cuda.built || cuda.linked;
}

const cuda_module *rt_cuda_module(const char **why)
{
    pthread_once(&cuda_once, cuda_open);
    if (why) *why = cuda.why;
    return cuda.vt;
}

const void *rt_mpi_module(const char **why)
{
    pthread_once(&mpi_once, mpi_open);
    if (why) *why = mpi.why;
    return mpi.vt;
}
