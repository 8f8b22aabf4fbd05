/* fiber.h - private to tests/cuda_host: cooperatively scheduled contexts on
 * one OS thread, for the threads of a block (exec.cc).  A switch on x86-64
 * saves six registers and the FP control words (fiber.cc), no system call:
 * a block of 256 threads that meets a barrier switches 512 times, and the
 * training tests launch thousands of blocks.  Elsewhere: ucontext.  Under
 * ASan and TSan each switch tells the sanitizer. */
#ifndef CUDA_HOST_FIBER_H
#define CUDA_HOST_FIBER_H

#include <stddef.h>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace cuda_host
{
struct fiber {
#if defined(__x86_64__)
    void *sp;
#else
    ucontext_t uc;
#endif
    char *stack; /* its stack (for the thread's own: as pthread reports it) */
    size_t stack_bytes;
    bool owned;      /* the stack is fiber_new's */
    void *tsan;      /* TSan's fiber, or NULL */
    void *asan_fake; /* ASan's saved fake stack */
    void (*entry)(void *);
    void *arg;
};

/* A fiber for the calling thread's own stack, to switch from and back to. */
void fiber_main_init(fiber *f);
/* A fiber with a stack of its own (and a guard page below it). */
bool fiber_new(fiber *f, size_t stack_bytes);
void fiber_free(fiber *f);
/* (Re)starts f at entry(arg) when next switched to; entry never returns. */
void fiber_reset(fiber *f, void (*entry)(void *), void *arg);
void fiber_switch(fiber *from, fiber *to);
} // namespace cuda_host

#endif
