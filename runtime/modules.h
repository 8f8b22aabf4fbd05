/* modules.h - private to runtime/: the CUDA device and the MPI transport,
 * opened when a program first needs them.
 *
 * libgraphrun loads with CPU dependencies only.  The CUDA device
 * (libgraphrun-cuda.so, which needs libcudart) and the MPI transport
 * (libgraphrun-mpi.so, which needs libmpi) are modules: the first call
 * that needs one opens it with dlopen and takes its one exported entry
 * function, which returns its vtable (devices/cuda/cuda.h: cuda_module;
 * runtime/dist/dist_module.h: dist_module), and the core hands it the core
 * functions it calls (devices/core_calls.h).  A module is looked for
 *
 *   1. in $GR_MODULE_DIR, when that is set (docs/api.md);
 *   2. beside the core: the folder of the file that holds this code (the
 *      shared library, or the program a static library was linked into);
 *   3. in ../LIBDIR of that folder (a static program in bin/ of an install);
 *   4. on the loader's path (LD_LIBRARY_PATH, the caller's RUNPATH,
 *      ld.so.cache).
 *
 * A missing module is an error where it is needed (gpu:N, a distributed
 * session), never when the library loads.  The test library links both
 * modules in and opens nothing: this file compiled again with GR_LINK_CUDA
 * calls the CUDA entry, and runtime/dist/dist.c with GR_LINK_MPI the MPI
 * one (from above it: this file calls nothing of runtime/dist/). */
#ifndef GR_RUNTIME_MODULES_H
#define GR_RUNTIME_MODULES_H

#include "devices/cuda/cuda.h"

/* The module's vtable, opened once per process; NULL with *why (a
 * sentence, kept for the process's life) when it cannot be.  The MPI
 * module's is a dist_module (runtime/dist/dist_module.h), which dist.c,
 * above this file, reads: this file does not include it. */
const cuda_module *rt_cuda_module(const char **why);
/* Whether the CUDA module was built with this library (so a machine
 * without it lacks something it was meant to have). */
int rt_cuda_built(void);
const void *rt_mpi_module(const char **why);
/* What the core hands a module's entry (a linked one's too). */
const core_calls *rt_core_calls(void);

#endif
