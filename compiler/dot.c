/* dot.c - Graphviz output of the IR: one cluster per device, transfers
 * between devices in red, each node labelled with its name (when the
 * program gave it one) and its op, and a legend for the kinds of edges
 * drawn.  Constants nothing reads any more (folded into a fused op, or
 * only giving a shape) are left out. */
#include <stdlib.h>

#include "compiler.h"

/* A label's text, with the characters dot's strings give a meaning escaped. */
static void dot_text(const char *s, FILE *out)
{
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fputc('\\', out);
        fputc(*s, out);
    }
}

static void dot_node(const ir_graph *g, int id, FILE *out)
{
    const ir_node *n = &g->nodes[id];
    char t[96];
    fprintf(out, "    n%d [label=\"", id);
    if (n->op == OP_VARIABLE)
        dot_text(g->vars[n->var].name, out);
    else if (n->name) { /* loss and accuracy are both a mean f32[]: their names tell them apart */
        dot_text(n->name, out);
        fprintf(out, "\\n%s", ops_name(n->op));
    } else
        fputs(ops_name(n->op), out);
    fprintf(out, "%s%s\"%s];\n", n->op == OP_VARIABLE || !n->name ? "\\n" : " ",
            ir_type_str(&n->type, t, sizeof t), n->op == OP_VARIABLE ? " shape=box" : "");
}

/* An edge; one that crosses devices is a transfer (a send and a receive
 * each step): red and bold, with the bytes it carries per step. */
static void dot_edge(const ir_graph *g, int src, int dst, int ctrl, FILE *out)
{
    int cross = g->nodes[src].device != g->nodes[dst].device;
    size_t bytes = ir_nbytes(&g->nodes[src].type);
    fprintf(out, "  n%d -> n%d", src, dst);
    if (cross && (ctrl || bytes == 0)) /* only the completion crosses */
        fputs(" [style=\"dashed,bold\" color=red fontcolor=red label=\"control\"]", out);
    else if (cross)
        fprintf(out,
                " [style=bold color=red penwidth=2 fontcolor=red fontsize=9 "
                "label=\"%zu bytes/step\"]",
                bytes);
    else if (ctrl)
        fputs(" [style=dashed]", out);
    fputs(";\n", out);
}

/* Which nodes are drawn: the live ones but constants no live node reads
 * (kept by the graph after a pass folded their value into a fused op). */
static char *dot_shown(const ir_graph *g)
{
    char *read = calloc((size_t)g->n_nodes + 1, 1);
    if (!read) return NULL;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        for (int j = 0; !n->dead && j < n->n_in; j++) read[n->in[j]] = 1;
        for (int j = 0; !n->dead && j < n->n_ctrl; j++) read[n->ctrl[j]] = 1;
    }
    for (int i = 0; i < g->n_nodes; i++)
        read[i] = !g->nodes[i].dead && (read[i] || g->nodes[i].op != OP_CONST);
    return read;
}

/* What the edges drawn mean: only the kinds this graph has. */
static void dot_legend(int ctrl, int xfer, int xctrl, FILE *out)
{
    if (!ctrl && !xfer && !xctrl) return;
    fputs("  subgraph cluster_legend {\n    label=\"legend\"; style=dashed; fontsize=9;\n"
          "    node [shape=point width=0.05 label=\"\"];\n    edge [fontsize=9];\n",
          out);
    fputs("    lg0 -> lg1 [label=\"data\"];\n", out);
    if (ctrl) fputs("    lg2 -> lg3 [style=dashed label=\"control: runs after\"];\n", out);
    if (xfer)
        fputs("    lg4 -> lg5 [style=bold color=red penwidth=2 fontcolor=red "
              "label=\"transfer between devices, bytes/step\"];\n",
              out);
    if (xctrl)
        fputs("    lg6 -> lg7 [style=\"dashed,bold\" color=red fontcolor=red "
              "label=\"control between devices\"];\n",
              out);
    fputs("  }\n", out);
}

void ir_dot(const ir_graph *g, FILE *out)
{
    fprintf(out, "digraph graphrun {\n  node [fontname=\"monospace\" fontsize=10];\n");
    char *shown = dot_shown(g);
    int devs[64], n_devs = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        int d = g->nodes[i].device, seen = 0;
        for (int k = 0; k < n_devs; k++) seen |= devs[k] == d;
        if (!g->nodes[i].dead && !seen && n_devs < 64) devs[n_devs++] = d;
    }
    for (int k = 0; k < n_devs; k++) {
        fprintf(out, "  subgraph cluster_%d {\n    label=\"%s:%d\";\n", k,
                IR_DEV_KIND(devs[k]) == DEV_GPU ? "gpu" : "cpu", IR_DEV_INDEX(devs[k]));
        for (int i = 0; i < g->n_nodes; i++)
            if ((shown ? shown[i] : !g->nodes[i].dead) && g->nodes[i].device == devs[k])
                dot_node(g, i, out);
        fprintf(out, "  }\n");
    }
    int ctrl = 0, xfer = 0, xctrl = 0;
    for (int i = 0; i < g->n_nodes; i++) {
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in + n->n_ctrl; j++) {
            int src = j < n->n_in ? n->in[j] : n->ctrl[j - n->n_in], is_ctrl = j >= n->n_in;
            int cross = g->nodes[src].device != n->device;
            if (cross && (is_ctrl || ir_nbytes(&g->nodes[src].type) == 0))
                xctrl = 1;
            else if (cross)
                xfer = 1;
            else if (is_ctrl)
                ctrl = 1;
            dot_edge(g, src, i, is_ctrl, out);
        }
    }
    dot_legend(ctrl, xfer, xctrl, out);
    free(shown);
    fprintf(out, "}\n");
}
