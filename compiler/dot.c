/* dot.c - Graphviz output of the IR: one cluster per device. */
#include "compiler.h"

static void dot_node(const ir_graph *g, int id, FILE *out)
{
    const ir_node *n = &g->nodes[id];
    char t[96];
    const char *label = n->op == OP_VARIABLE ? g->vars[n->var].name : ops_name(n->op);
    fprintf(out, "    n%d [label=\"%s\\n%s\"%s];\n", id, label, ir_type_str(&n->type, t, sizeof t),
            n->op == OP_VARIABLE ? " shape=box" : "");
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
        const ir_node *n = &g->nodes[i];
        if (n->dead) continue;
        for (int j = 0; j < n->n_in; j++) fprintf(out, "  n%d -> n%d;\n", n->in[j], i);
        for (int j = 0; j < n->n_ctrl; j++)
            fprintf(out, "  n%d -> n%d [style=dashed];\n", n->ctrl[j], i);
    }
    fprintf(out, "}\n");
}
