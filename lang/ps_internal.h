/* ps_internal.h - what the lexer (lexer.l), the parser (parser.y) and
 * their helpers (parse.c: ps_parse and the node helpers; arena.c) share
 * inside lang/.  Not for other folders: they read ast.h only (a test of
 * the scanner alone, tests/test_lexer.c, includes it too). */
#ifndef GR_PS_INTERNAL_H
#define GR_PS_INTERNAL_H

#include "ast.h"

/* Brackets ( [ { open at once; beyond this the parse stops with an error. */
#define PS_MAX_NEST 200
/* Depth of an expression tree (a+a+...+a nests without brackets). */
#define PS_MAX_TREE_DEPTH 1000

typedef struct ps_arena ps_arena;
ps_arena *ps_arena_new(void);
void ps_arena_free(ps_arena *a);
/* Zeroed memory that lives until ps_arena_free; NULL on out of memory. */
void *ps_alloc(ps_arena *a, size_t n);
char *ps_strndup(ps_arena *a, const char *s, size_t n);

/* The state one parse shares between flex (as yyextra) and bison. */
typedef struct ps_ctx {
    const src_file *src;
    diag_list *d;
    ps_arena *arena;
    ast_node *root;
    uint32_t pos;     /* byte offset of the next unread character */
    uint32_t eof_pos; /* where "end of file" errors point */
    char open[PS_MAX_NEST];
    uint32_t open_at[PS_MAX_NEST];
    int depth;       /* brackets open now */
    int fatal;       /* stop: further messages would only be noise */
    int sent_eof_nl; /* the lexer emits one newline before end of file */
    int tree_too_deep;
    int last_tok; /* the token just returned, for hints */
    src_span last_span;
    int prev_tok; /* the one before it */
    src_span prev_span;
    int stmt_tok; /* the first token of the statement being read */
    src_span stmt_span;
    src_span *comments; /* every comment, in source order (arena memory) */
    int n_comments;
} ps_ctx;

ast_node *ps_node(ps_ctx *c, ast_kind k, uint32_t begin, uint32_t end);
/* Appends item to n->items (arena memory, grows by doubling). */
void ps_push(ps_ctx *c, ast_node *n, ast_node *item);
/* Appends a comment's span to c->comments. */
void ps_add_comment(ps_ctx *c, uint32_t begin, uint32_t end);
/* Records n's tree depth and reports a too-deep tree once; returns n. */
ast_node *ps_finish(ps_ctx *c, ast_node *n);
/* Error recovery skips to the next newline, so every open ( and [ is
 * forgotten: the next newline must end the statement.  Open blocks stay
 * for their '}'. */
void ps_forget_brackets(ps_ctx *c);
void ps_error(ps_ctx *c, uint32_t begin, uint32_t end, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
