/* pass_data.c - hands a constant scale of a data source's examples to its
 * reader.  `train.x / 255` (sema writes it mul(x, 1/255)) is a pass over
 * the whole batch every step; the reader converts every example to f32
 * anyway, on its own thread, so it multiplies there instead and the step
 * reads the scaled batch directly (ir_data.x_scale).  The reader computes
 * (float)v * c, the same rounding as the mul it replaces: the values are
 * the same bits.
 *
 * Only when nothing could tell: every use of the source's x node is a mul
 * by the same scalar f32 constant, and no name shows the x node itself. */
#include <math.h>
#include <stdlib.h>

#include "compiler.h"

/* c of mul(x, c) or mul(c, x) when c is a scalar f32 constant and the
 * other operand is node x; else NaN. */
static double scale_of(const ir_graph *g, const ir_node *n, int x)
{
    if (n->op != OP_MUL || n->n_in != 2 || (n->in[0] == x) == (n->in[1] == x)) return NAN;
    return ir_const_scalar(g, n->in[n->in[0] == x]);
}

/* Per node: the scale every use of it multiplies it by (data x nodes
 * only), NaN when there is none, or -inf after two uses disagree. */
static double *use_scales(const ir_graph *g)
{
    double *s = base_xmalloc(sizeof(double) * (size_t)(g->n_nodes + 1));
    for (int i = 0; i < g->n_nodes; i++) s[i] = NAN;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++) {
            int x = n->in[j];
            if (g->nodes[x].op != OP_DATA || g->nodes[x].attr.i[ATTR_DATA_WHICH] != 0) continue;
            double c = scale_of(g, n, x);
            s[x] = c != c || (s[x] == s[x] && s[x] != c) ? -INFINITY : c;
        }
    }
    for (int i = 0; i < g->n_names; i++) s[g->names[i].node] = -INFINITY; /* shown as it is */
    return s;
}

/* Every use of a folded mul reads its data node instead (to[] maps them). */
static void redirect(ir_graph *g, const int *to)
{
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_in; j++)
            if (to[g->nodes[i].in[j]] >= 0) g->nodes[i].in[j] = to[g->nodes[i].in[j]];
    for (int i = 0; i < g->n_nodes; i++)
        for (int j = 0; j < g->nodes[i].n_ctrl; j++)
            if (to[g->nodes[i].ctrl[j]] >= 0) g->nodes[i].ctrl[j] = to[g->nodes[i].ctrl[j]];
    for (int i = 0; i < g->n_names; i++)
        if (to[g->names[i].node] >= 0) g->names[i].node = to[g->names[i].node];
}

void pass_data_scale(ir_graph *g)
{
    int n = g->n_nodes, found = 0;
    double *scale = use_scales(g);
    int *to = base_xmalloc(sizeof(int) * (size_t)(n + 1));
    for (int i = 0; i < n; i++) {
        const ir_node *m = &g->nodes[i];
        int x = m->op == OP_MUL && !m->dead ? m->in[g->nodes[m->in[0]].op != OP_DATA] : 0;
        double s = scale[x];
        to[i] = -1;
        if (m->op != OP_MUL || m->dead || s != s || s == -INFINITY || scale_of(g, m, x) != s ||
            g->data[g->nodes[x].data].x_scale)
            continue;
        to[i] = x;
        g->nodes[i].dead = 1;
        found = 1;
    }
    for (int i = 0; i < n; i++) /* after the muls: each source's scale once */
        if (to[i] >= 0) g->data[g->nodes[to[i]].data].x_scale = (float)scale[to[i]];
    if (found) redirect(g, to);
    free(to);
    free(scale);
}
