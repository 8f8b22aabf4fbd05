/* modes.c - training and evaluation from one model (docs/language.md,
 * "Training and evaluation").
 *
 * Sema builds every expression in evaluation mode.  A node that trains
 * differently (dropout draws its mask, batchnorm uses the batch's
 * statistics) names its training version in ir_node.alt.  minimize() trains
 * a copy of its loss: mode_copy rebuilds every node that reaches an alt on
 * the training versions, and leaves the rest shared, so an evaluation
 * target computes the same loss in evaluation mode without a flag.  State
 * that training changes on the side (batchnorm's running statistics, ema())
 * is an ir_side entry; mode_attach_sides adds each to the training targets
 * whose copy reached its anchor. */
#include <stdlib.h>
#include <string.h>

#include "base/fatal.h"
#include "compiler.h"

/* The memo: node -> its training version, for the nodes the copy reached
 * (open addressing, keys -1 when empty), so a program of many small
 * minimize() calls keeps memory in proportion to what each reaches. */
static unsigned slot_of(const mode_copy *c, int node)
{
    unsigned m = (unsigned)c->cap - 1, h = ((unsigned)node * 2654435761u) & m;
    while (c->key[h] >= 0 && c->key[h] != node) h = (h + 1) & m;
    return h;
}

static void memo_put(mode_copy *c, int node, int copy);

static void memo_grow(mode_copy *c)
{
    if (2 * (c->n + 1) <= c->cap) return;
    mode_copy old = *c;
    c->cap = old.cap ? 2 * old.cap : 64;
    c->key = base_xmalloc(sizeof(int) * (size_t)c->cap);
    c->val = base_xmalloc(sizeof(int) * (size_t)c->cap);
    c->n = 0;
    for (int i = 0; i < c->cap; i++) c->key[i] = -1;
    for (int i = 0; i < old.cap; i++)
        if (old.key[i] >= 0) memo_put(c, old.key[i], old.val[i]);
    free(old.key);
    free(old.val);
}

static void memo_put(mode_copy *c, int node, int copy)
{
    memo_grow(c);
    unsigned h = slot_of(c, node);
    c->n += c->key[h] < 0;
    c->key[h] = node;
    c->val[h] = copy;
}

/* node's copy, or -1 before the copy reaches it. */
static int memo_get(const mode_copy *c, int node)
{
    if (!c->cap) return -1;
    unsigned h = slot_of(c, node);
    return c->key[h] == node ? c->val[h] : -1;
}

int mode_reached(const mode_copy *c, int node)
{
    return memo_get(c, node) >= 0;
}

/* What node's copy needs first: its training version, else its inputs. */
static int first_missing(const ir_graph *g, const mode_copy *c, int node)
{
    const ir_node *n = &g->nodes[node];
    if (n->alt >= 0) return mode_reached(c, n->alt) ? -1 : n->alt;
    for (int k = 0; k < n->n_in; k++)
        if (!mode_reached(c, n->in[k])) return n->in[k];
    return -1;
}

/* node, rebuilt on its inputs' copies when one of them differs. */
static int rebuild(ir_graph *g, const mode_copy *c, int node)
{
    const ir_node *n = &g->nodes[node];
    if (n->alt >= 0) return memo_get(c, n->alt);
    int same = 1;
    for (int k = 0; k < n->n_in; k++) same &= memo_get(c, n->in[k]) == n->in[k];
    if (same) return node;
    int *in = base_xmalloc(sizeof(int) * (size_t)n->n_in), req = g->place_cur;
    for (int k = 0; k < n->n_in; k++) in[k] = memo_get(c, n->in[k]);
    ir_attrs a = n->attr;
    g->place_cur = n->place_req;
    int id = ir_add(g, n->op, in, n->n_in, &a, n->src, n->span);
    g->place_cur = req;
    free(in);
    if (id < 0) return -1;
    ir_node *m = &g->nodes[id];
    n = &g->nodes[node]; /* ir_add may have moved the nodes */
    m->coloc = n->coloc;
    m->var = n->var;
    m->name = n->name;
    for (int k = 0; k < n->n_ctrl; k++) ir_append_ctrl(g, id, n->ctrl[k]);
    return id;
}

int mode_train_copy(ir_graph *g, mode_copy *c, int node)
{
    int cap = 64, n = 0, *stack = base_xmalloc(sizeof(int) * (size_t)cap), rc = 0;
    stack[n++] = node;
    while (n > 0 && rc == 0) {
        int top = stack[n - 1];
        IR_WORK(1);
        if (mode_reached(c, top)) {
            n--;
            continue;
        }
        int need = first_missing(g, c, top);
        if (need >= 0) {
            if (n == cap) stack = base_xreallocarray(stack, (size_t)(cap *= 2), sizeof(int));
            stack[n++] = need;
            continue;
        }
        int id = rebuild(g, c, top);
        if (id < 0) {
            rc = -1;
            break;
        }
        memo_put(c, top, id);
        if (id != top) memo_put(c, id, id);
        n--;
    }
    free(stack);
    return rc < 0 ? -1 : memo_get(c, node);
}

/* The update of variable `var` in a training target's group, or -1. */
static int update_of(const ir_graph *g, int group, int var)
{
    const ir_node *grp = &g->nodes[group];
    for (int k = 0; k < grp->n_in; k++) {
        const ir_node *u = &g->nodes[grp->in[k]];
        if (ops_has(u->op, OPF_UPDATE) && g->nodes[u->in[0]].var == var) return grp->in[k];
    }
    return -1;
}

int mode_attach_sides(ir_graph *g, mode_copy *c, int group)
{
    int locking = (int)g->nodes[g->nodes[group].in[0]].attr.i[ATTR_LOCKING];
    for (int i = 0; i < g->n_sides; i++) {
        ir_side *s = &g->sides[i];
        if (s->anchor < 0 || !mode_reached(c, s->anchor)) continue;
        int u = mode_train_copy(g, c, s->update);
        if (u < 0) return -1;
        g->nodes[u].attr.i[ATTR_LOCKING] = locking;
        int after = s->after_var >= 0 ? update_of(g, group, s->after_var) : -1;
        if (after >= 0) ir_add_ctrl(g, u, after);
        ir_group_append(g, group, u);
        s = &g->sides[i];
        s->n_used++;
    }
    return 0;
}

void mode_copy_free(mode_copy *c)
{
    free(c->key);
    free(c->val);
    *c = (mode_copy){0};
}
