/* dot.c - Graphviz output of the IR: one cluster per device, transfers
 * between devices in red. */
#include "compiler.h"

static void dot_node(const ir_graph *g, int id, FILE *out)
{
    const ir_node *n = &g->nodes[id];
    char t[96];
    const char *label = n->op == OP_VARIABLE ? g->vars[n->var].name : ops_name(n->op);
    fprintf(out, "    n%d [label=\"%s\\n%s\"%s];\n", id, label, ir_type_str(&n->type, t, sizeof t),
            n->op == OP_VARIABLE ? " shape=box" : "");
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

void ir_dot(const ir_graph *g, FILE *out)
{
    fprintf(out, "digraph graphrun {\n  node [fontname=\"monospace\" fontsize=10];\n");
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
            if (!g->nodes[i].dead && g->nodes[i].device == devs[k]) dot_node(g, i, out);
        fprintf(out, "  }\n");
    }
    for (int i = 0; i < g->n_nodes; i++) {
        if (g->nodes[i].dead) continue;
        for (int j = 0; j < g->nodes[i].n_in; j++) dot_edge(g, g->nodes[i].in[j], i, 0, out);
        for (int j = 0; j < g->nodes[i].n_ctrl; j++) dot_edge(g, g->nodes[i].ctrl[j], i, 1, out);
    }
    fprintf(out, "}\n");
}
