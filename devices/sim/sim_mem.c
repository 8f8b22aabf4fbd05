/* sim_mem.c - the simulated GPU's memory: one memfd mapped twice (see
 * sim.c), and a first-fit allocator over it whose bookkeeping lives outside
 * the region, in two sorted arrays of blocks (free and used), so that the
 * device's memory holds nothing but what the runtime put there. */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/fatal.h"
#include "sim_mem.h"

/* ---- sorted block arrays ---- */

/* The index of the first block whose offset is above off. */
static size_t sim_blocks_upper(const sim_blocks *b, size_t off)
{
    size_t lo = 0, hi = b->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (b->v[mid].off <= off)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static void sim_blocks_insert(sim_blocks *b, size_t at, sim_block blk)
{
    if (b->n == b->cap) {
        b->cap = b->cap ? 2 * b->cap : 64;
        b->v = base_xreallocarray(b->v, b->cap, sizeof *b->v);
    }
    memmove(b->v + at + 1, b->v + at, (b->n - at) * sizeof *b->v);
    b->v[at] = blk;
    b->n++;
}

static void sim_blocks_remove(sim_blocks *b, size_t at)
{
    memmove(b->v + at, b->v + at + 1, (b->n - at - 1) * sizeof *b->v);
    b->n--;
}

/* Returns [off, off + len) to the free list, merged with the free blocks
 * it touches, so that a region emptied of allocations is one block again. */
static void sim_free_insert(sim_blocks *f, size_t off, size_t len)
{
    size_t i = sim_blocks_upper(f, off);
    int left = i > 0 && f->v[i - 1].off + f->v[i - 1].len == off;
    int right = i < f->n && off + len == f->v[i].off;
    if (left && right) {
        f->v[i - 1].len += len + f->v[i].len;
        sim_blocks_remove(f, i);
    } else if (left) {
        f->v[i - 1].len += len;
    } else if (right) {
        f->v[i].off = off;
        f->v[i].len += len;
    } else {
        sim_blocks_insert(f, i, (sim_block){off, len, 0});
    }
}

/* ---- the region ---- */

int sim_region_init(sim_region *r, size_t bytes)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    r->size = bytes / SIM_ALIGN * SIM_ALIGN;
    if (r->size == 0) return -1;
    r->fd = memfd_create("graphrun-sim", MFD_CLOEXEC);
    if (r->fd < 0 || ftruncate(r->fd, (off_t)r->size) != 0) goto fail;
    /* Both views are MAP_SHARED: they must show the same pages.  NORESERVE
     * because the region is address space, not memory: only touched pages
     * become real. */
    r->handle = mmap(NULL, r->size, PROT_NONE, MAP_SHARED | MAP_NORESERVE, r->fd, 0);
    if (r->handle == MAP_FAILED) goto fail;
    r->alias = mmap(NULL, r->size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, r->fd, 0);
    if (r->alias == MAP_FAILED) goto fail;
    pthread_rwlock_init(&r->lock, NULL);
    sim_blocks_insert(&r->free, 0, (sim_block){0, r->size, 0});
    return 0;
fail:
    if (r->handle && r->handle != MAP_FAILED) munmap(r->handle, r->size);
    if (r->fd >= 0) close(r->fd);
    memset(r, 0, sizeof *r);
    return -1;
}

void sim_region_fini(sim_region *r)
{
    munmap(r->alias, r->size);
    munmap(r->handle, r->size);
    close(r->fd);
    pthread_rwlock_destroy(&r->lock);
    free(r->free.v);
    free(r->used.v);
}

/* First fit: takes the front of the lowest free block that is big enough,
 * so that memory is reused low and the touched part of the region stays
 * near the peak in use.  Returns the block's offset, or SIZE_MAX. */
static size_t sim_first_fit(sim_region *r, size_t len, size_t asked)
{
    for (size_t i = 0; i < r->free.n; i++) {
        sim_block *f = &r->free.v[i];
        if (f->len < len) continue;
        size_t off = f->off;
        f->off += len;
        f->len -= len;
        if (f->len == 0) sim_blocks_remove(&r->free, i);
        sim_blocks_insert(&r->used, sim_blocks_upper(&r->used, off), (sim_block){off, len, asked});
        return off;
    }
    return SIZE_MAX;
}

void *sim_region_alloc(sim_region *r, size_t bytes)
{
    if (bytes > r->size) return NULL; /* also keeps the rounding below from wrapping */
    size_t len = (bytes + SIM_ALIGN - 1) / SIM_ALIGN * SIM_ALIGN;
    if (len == 0) len = SIM_ALIGN; /* a unique address even for 0 bytes */
    pthread_rwlock_wrlock(&r->lock);
    size_t off = sim_first_fit(r, len, bytes);
    pthread_rwlock_unlock(&r->lock);
    if (off == SIZE_MAX) return NULL;
    memset(r->alias + off, SIM_POISON, len);
    return r->handle + off;
}

/* Gives the whole pages of a freed block back to the system, so that a long
 * run that allocates and frees does not keep the high-water mark resident.
 * Only pages inside the block: its neighbours may share its edge pages. */
static void sim_punch(sim_region *r, size_t off, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t lo = (off + page - 1) / page * page, hi = (off + len) / page * page;
    if (hi > lo)
        (void)fallocate(r->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)lo,
                        (off_t)(hi - lo));
}

/* The offset of device pointer p, which must lie within the region. */
static size_t sim_offset(const sim_region *r, const void *p, const char *what)
{
    uintptr_t a = (uintptr_t)p, h = (uintptr_t)r->handle;
    if (a < h || a - h > r->size) fatal("sim: %s %p is not memory of this sim device", what, p);
    return a - h;
}

void sim_region_free(sim_region *r, void *p)
{
    if (!p) return;
    size_t off = sim_offset(r, p, "free of");
    pthread_rwlock_wrlock(&r->lock);
    size_t i = sim_blocks_upper(&r->used, off);
    if (i == 0 || r->used.v[i - 1].off != off)
        fatal("sim: free of %p, which is not a live allocation of this sim device", p);
    size_t len = r->used.v[i - 1].len;
    sim_blocks_remove(&r->used, i - 1);
    /* Punched before the block is free: nobody can own it meanwhile. */
    sim_punch(r, off, len);
    sim_free_insert(&r->free, off, len);
    pthread_rwlock_unlock(&r->lock);
}

/* Whether [off, off + n) lies in one live allocation.  A pointer just past
 * the end of one is good for n == 0 (an empty tensor at the end of an
 * arena). */
static int sim_is_live(sim_region *r, size_t off, size_t n)
{
    pthread_rwlock_rdlock(&r->lock);
    size_t i = sim_blocks_upper(&r->used, off);
    int ok = 0;
    if (i > 0) {
        const sim_block *b = &r->used.v[i - 1];
        size_t at = off - b->off;
        ok = at <= b->asked && n <= b->asked - at;
    }
    pthread_rwlock_unlock(&r->lock);
    return ok;
}

void *sim_region_find(sim_region *r, const void *p, size_t n)
{
    uintptr_t a = (uintptr_t)p, h = (uintptr_t)r->handle;
    if (!p || a < h || a - h > r->size || !sim_is_live(r, a - h, n)) return NULL;
    return r->alias + (a - h);
}

void *sim_region_at(sim_region *r, const void *p, size_t n, const char *what)
{
    void *at = sim_region_find(r, p, n);
    if (p && !at)
        fatal("sim: %s [%p, +%zu bytes) is not inside one live allocation of this sim device", what,
              p, n);
    return at;
}
