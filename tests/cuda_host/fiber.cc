// fiber.cc - the context switch of fiber.h.
#include "fiber.h"

#include <stdint.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define FIBER_ASAN 1
#endif
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define FIBER_TSAN 1
#endif

namespace cuda_host
{
#if defined(__x86_64__)
// cuda_host_swap(&from->sp, to->sp): pushes the callee-saved registers and
// the SSE and x87 control words on the current stack, saves the stack
// pointer, loads the other and pops the same from it.
extern "C" void cuda_host_swap(void **save, void *load);
extern "C" void cuda_host_start(void);
asm(R"(
    .text
    .globl cuda_host_swap
    .type cuda_host_swap, @function
cuda_host_swap:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size cuda_host_swap, .-cuda_host_swap

    .globl cuda_host_start
    .type cuda_host_start, @function
cuda_host_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size cuda_host_start, .-cuda_host_start
    .section .note.GNU-stack,"",@progbits
    .text
)");
#endif

static void fiber_entry(void *arg)
{
    fiber *f = (fiber *)arg;
#if FIBER_ASAN
    __sanitizer_finish_switch_fiber(NULL, NULL, NULL);
#endif
    f->entry(f->arg);
}

#if !defined(__x86_64__)
static void fiber_entry_uc(unsigned hi, unsigned lo)
{
    fiber_entry((void *)(((uintptr_t)hi << 32) | (uintptr_t)lo));
}
#endif

void fiber_main_init(fiber *f)
{
    memset(f, 0, sizeof *f);
    // Its bounds, for ASan's switch to it; never unmapped (owned: false).
    pthread_attr_t at;
    if (pthread_getattr_np(pthread_self(), &at) == 0) {
        void *lo;
        size_t n;
        if (pthread_attr_getstack(&at, &lo, &n) == 0) {
            f->stack = (char *)lo;
            f->stack_bytes = n;
        }
        pthread_attr_destroy(&at);
    }
#if FIBER_TSAN
    f->tsan = __tsan_get_current_fiber();
#endif
}

bool fiber_new(fiber *f, size_t stack_bytes)
{
    memset(f, 0, sizeof *f);
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    stack_bytes = (stack_bytes + page - 1) / page * page;
    void *m = mmap(NULL, stack_bytes + page, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) return false;
    mprotect(m, page, PROT_NONE); // the guard: an overflow faults
    f->stack = (char *)m + page;
    f->stack_bytes = stack_bytes;
    f->owned = true;
#if FIBER_TSAN
    f->tsan = __tsan_create_fiber(0);
#endif
    return true;
}

void fiber_free(fiber *f)
{
    if (!f->owned) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#if FIBER_TSAN
    __tsan_destroy_fiber(f->tsan);
#endif
    munmap(f->stack - page, f->stack_bytes + page);
    f->stack = NULL;
}

void fiber_reset(fiber *f, void (*entry)(void *), void *arg)
{
    f->entry = entry;
    f->arg = arg;
#if FIBER_TSAN
    // A fresh record: an abandoned fiber's holds the frames it never left.
    __tsan_destroy_fiber(f->tsan);
    f->tsan = __tsan_create_fiber(0);
#endif
#if FIBER_ASAN
    // A fiber abandoned mid-kernel (after a stand-in error) leaves its
    // frames poisoned: a fresh start owns the whole stack.
    __asan_unpoison_memory_region(f->stack, f->stack_bytes);
#endif
#if defined(__x86_64__)
    uintptr_t top = ((uintptr_t)f->stack + f->stack_bytes) & ~(uintptr_t)15;
    uint64_t *s = (uint64_t *)top;
    s[-1] = (uint64_t)(uintptr_t)cuda_host_start; // ret goes here, rsp = top
    s[-2] = 0;                                    // rbp
    s[-3] = 0;                                    // rbx
    s[-4] = (uint64_t)(uintptr_t)f;               // r12: the argument
    s[-5] = (uint64_t)(uintptr_t)fiber_entry;     // r13: the function
    s[-6] = 0;                                    // r14
    s[-7] = 0;                                    // r15
    uint32_t ctl[2] = {0x1f80, 0x037f};           // MXCSR and the x87 control word at start
    memcpy(&s[-8], ctl, sizeof ctl);
    f->sp = &s[-8];
#else
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = f->stack;
    f->uc.uc_stack.ss_size = f->stack_bytes;
    f->uc.uc_link = NULL;
    uintptr_t p = (uintptr_t)f;
    makecontext(&f->uc, (void (*)(void))fiber_entry_uc, 2, (unsigned)(p >> 32), (unsigned)p);
#endif
}

void fiber_switch(fiber *from, fiber *to)
{
#if FIBER_ASAN
    __sanitizer_start_switch_fiber(&from->asan_fake, to->stack, to->stack_bytes);
#endif
#if FIBER_TSAN
    __tsan_switch_to_fiber(to->tsan, 0);
#endif
#if defined(__x86_64__)
    cuda_host_swap(&from->sp, to->sp);
#else
    swapcontext(&from->uc, &to->uc);
#endif
#if FIBER_ASAN
    __sanitizer_finish_switch_fiber(from->asan_fake, NULL, NULL);
#endif
}
} // namespace cuda_host
