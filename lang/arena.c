/* arena.c - the bump allocator that owns every AST node and string. */
#include "ps_internal.h"

#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#define ARENA_CHUNK (64 * 1024)

typedef struct arena_chunk {
    struct arena_chunk *next;
    size_t used, cap;
    max_align_t data[];
} arena_chunk;

struct ps_arena {
    arena_chunk *head;
};

ps_arena *ps_arena_new(void)
{
    return calloc(1, sizeof(ps_arena));
}

void ps_arena_free(ps_arena *a)
{
    if (!a) return;
    for (arena_chunk *c = a->head, *next; c; c = next) {
        next = c->next;
        free(c);
    }
    free(a);
}

static arena_chunk *chunk_new(size_t cap)
{
    arena_chunk *c = malloc(sizeof *c + cap);
    if (!c) return NULL;
    c->used = 0;
    c->cap = cap;
    c->next = NULL;
    return c;
}

void *ps_alloc(ps_arena *a, size_t n)
{
    size_t al = alignof(max_align_t);
    n = (n + al - 1) / al * al;
    arena_chunk *c = a->head;
    if (!c || c->cap - c->used < n) {
        c = chunk_new(n > ARENA_CHUNK ? n : ARENA_CHUNK);
        if (!c) return NULL;
        c->next = a->head;
        a->head = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += n;
    memset(p, 0, n);
    return p;
}

char *ps_strndup(ps_arena *a, const char *s, size_t n)
{
    char *p = ps_alloc(a, n + 1);
    if (p) memcpy(p, s, n);
    return p;
}
