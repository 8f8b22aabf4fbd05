/* sim_mem.h - private to devices/sim: the simulated GPU's memory region
 * (sim_mem.c), one memfd mapped twice (sim.c says why) with a first-fit
 * allocator whose bookkeeping lives outside the region.  Included by the
 * device object (sim_dev.h) and by sim_mem.c. */
#ifndef GR_SIM_MEM_H
#define GR_SIM_MEM_H

#include <pthread.h>
#include <stddef.h>

/* 64 bytes, as the CPU device: kernels may assume aligned buffers. */
#define SIM_ALIGN 64
/* Bytes a fresh allocation is filled with, so that a read of memory nobody
 * wrote gives NaN (f32) or -1 (i32) instead of a plausible zero. */
#define SIM_POISON 0xff

/* [off, off + len) of the region; a used block also keeps the bytes asked
 * for, so that a copy into the alignment padding is caught too. */
typedef struct sim_block {
    size_t off, len, asked;
} sim_block;

/* Blocks sorted by offset. */
typedef struct sim_blocks {
    sim_block *v;
    size_t n, cap;
} sim_blocks;

typedef struct sim_region {
    int fd;       /* the memfd both mappings show */
    size_t size;  /* bytes; a multiple of SIM_ALIGN */
    char *handle; /* PROT_NONE view: the addresses alloc returns */
    char *alias;  /* read-write view: what the device's own calls touch */
    /* Lookups take it shared, so that under TSan two host threads that
     * both name device memory are not ordered by it (readers of a rwlock
     * do not synchronise with each other there); alloc and free take it
     * exclusively. */
    pthread_rwlock_t lock;
    sim_blocks free; /* coalesced: no two touch */
    sim_blocks used; /* live allocations */
} sim_region;

int sim_region_init(sim_region *r, size_t bytes);
void sim_region_fini(sim_region *r);
void *sim_region_alloc(sim_region *r, size_t bytes);
void sim_region_free(sim_region *r, void *p);
/* The alias address of device pointer p when [p, p + n) lies in one live
 * allocation, else NULL. */
void *sim_region_find(sim_region *r, const void *p, size_t n);
/* The alias address of device pointer p, after checking that [p, p + n)
 * lies in one live allocation (else fatal, naming `what`).  NULL: NULL. */
void *sim_region_at(sim_region *r, const void *p, size_t n, const char *what);

#endif
