/* ast.h - the syntax tree produced by lang/ and read by compiler/sema.
 *
 * Every node carries a byte span into its src_file.  Nodes, names and arrays
 * live in one arena owned by the ast_tree; freeing the tree frees them all. */
#ifndef GR_AST_H
#define GR_AST_H

#include "diag.h"

typedef enum ast_kind {
    /* statements */
    AST_PROGRAM,  /* items: statements */
    AST_BLOCK,    /* items: statements */
    AST_PARAM,    /* name = a */
    AST_DATA,     /* name = a (a call, e.g. idx(...)) */
    AST_INPUT,    /* name : a (an AST_TYPE) */
    AST_VAR,      /* var name = a */
    AST_FN,       /* fn name(items: AST_PARAMDEF...) b: body block */
    AST_PARAMDEF, /* name [= a default, or NULL] */
    AST_RETURN,   /* return a */
    AST_SCOPE,  /* scope name [reuse | reuse(a)] [@ b: AST_DEVSPEC] c: block; flag: 0 none, 1 reuse,
                   2 reuse(a) */
    AST_FOR,    /* for name in a .. b  c: block */
    AST_ASSIGN, /* a (AST_NAME or AST_INDEX) = b */
    AST_EXPR_STMT, /* a */
    /* expressions */
    AST_NUM,     /* num; flag: 1 if written as an integer */
    AST_STR,     /* name: the decoded string value */
    AST_BOOL,    /* flag: 0 or 1 */
    AST_NAME,    /* name */
    AST_LIST,    /* [items] */
    AST_CALL,    /* a(items) [as as_name]; items are exprs or AST_KWARG */
    AST_METHOD,  /* a.name(items) [as as_name] */
    AST_FIELD,   /* a.name */
    AST_INDEX,   /* a[b] */
    AST_BINARY,  /* a op b */
    AST_UNARY,   /* op a (only '-') */
    AST_DEVICE,  /* a @ b (b: AST_DEVSPEC); lowest precedence */
    AST_DEVSPEC, /* name: "cpu" or "gpu", a: index expression */
    AST_KWARG,   /* name = a, only inside call argument lists */
    AST_TYPE,    /* name: dtype ("f32", "i32"), items: dimension exprs */
    AST_KIND_COUNT
} ast_kind;

typedef enum ast_op {
    AOP_MATMUL,
    AOP_ADD,
    AOP_SUB,
    AOP_MUL,
    AOP_DIV,
    AOP_EQ,
    AOP_NE,
    AOP_LT,
    AOP_GT,
    AOP_LE,
    AOP_GE,
    AOP_NEG,
    AOP_COUNT
} ast_op;

typedef struct ast_node ast_node;
struct ast_node {
    ast_kind kind;
    src_span span;
    const char *name;    /* see the kind list above; NULL when unused */
    const char *as_name; /* AST_CALL / AST_METHOD: `as NAME`, else NULL */
    src_span as_span;    /* span of the `as` name */
    ast_node *as_index;  /* `as NAME[expr]`: the index (scope NAME_<index>), else NULL */
    double num;          /* AST_NUM */
    int flag;            /* see the kind list above */
    ast_op op;           /* AST_BINARY / AST_UNARY */
    ast_node *a, *b, *c;
    ast_node **items;
    int n_items;
};

typedef struct ast_tree {
    ast_node *root; /* AST_PROGRAM, or NULL when parsing failed badly */
    const src_file *src;
    /* Comments are not in the tree: their spans ('#' to the end of the
     * line, without the line terminator), in source order, for fmt. */
    const src_span *comments;
    int n_comments;
    void *arena; /* private */
} ast_tree;

/* Parses src. Errors go to d (several per run, with recovery). Returns a tree
 * (possibly partial) that the caller frees with ast_free; check d->n_errors. */
ast_tree *ps_parse(const src_file *src, diag_list *d);
void ast_free(ast_tree *t);

/* Canonical source text of a tree without errors, comments included (what
 * `graphrun fmt` prints; docs/language.md, "Canonical form"). */
#define AST_LINE_WIDTH 100
void ast_format(const ast_tree *t, FILE *out);
/* Structural dump (what `graphrun check --emit ast` prints), spans as line:col. */
void ast_dump(const ast_tree *t, FILE *out);
/* Structural equality, ignoring spans. Used by the round-trip tests. */
int ast_equal(const ast_node *x, const ast_node *y);
/* Comment i's text without trailing blanks (fmt drops those); *len bytes. */
const char *ast_comment_text(const ast_tree *t, int i, size_t *len);
/* Whether both trees have the same comment texts in the same order. */
int ast_comments_equal(const ast_tree *x, const ast_tree *y);

const char *ast_kind_name(ast_kind k);
const char *ast_op_text(ast_op op);

#endif
