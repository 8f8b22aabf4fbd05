/* parser.y - grammar of the .graph language (docs/language.md has the EBNF).
 *
 * Pure and reentrant; every semantic value is an arena-owned ast_node, so no
 * %destructor is needed.  Errors recover at statement level: a bad statement
 * is skipped up to the next newline, ';' or the '}' that closes its block.
 * Its names carry the prefix lang_yy (lang_yyparse, LANG_YYLTYPE, ...), as
 * the scanner's do. */
%define api.pure full
%define api.prefix {lang_yy}
%define api.value.type {ast_node *}
%define parse.error detailed
%define parse.lac full
%locations
%param {yyscan_t scanner}
%expect 0

%code requires {
#include <stdint.h>
#include "ast.h"
typedef void *yyscan_t;
typedef struct LANG_YYLTYPE {
    uint32_t begin, end;
} LANG_YYLTYPE;
#define LANG_YYLTYPE_IS_DECLARED 1
#define YYLLOC_DEFAULT(Cur, Rhs, N)                                                                \
    do {                                                                                           \
        if (N) {                                                                                   \
            (Cur).begin = YYRHSLOC(Rhs, 1).begin;                                                  \
            (Cur).end = YYRHSLOC(Rhs, N).end;                                                      \
        } else {                                                                                   \
            (Cur).begin = (Cur).end = YYRHSLOC(Rhs, 0).end;                                        \
        }                                                                                          \
    } while (0)
}

%code provides {
/* flex's bison-bridge code names the value and location types unprefixed. */
#define YYSTYPE LANG_YYSTYPE
#define YYLTYPE LANG_YYLTYPE
int lang_yylex(YYSTYPE *yylval, YYLTYPE *yylloc, yyscan_t scanner);
}

%code {
#include <string.h>
#include "ps_internal.h"
#include "lexer.h"

#define CTX ((ps_ctx *)lang_yyget_extra(scanner))
#define N(kind, loc) ps_node(CTX, (kind), (loc).begin, (loc).end)

static void yyerror(const YYLTYPE *loc, yyscan_t scanner, const char *msg);
static ast_node *mk_binary(ps_ctx *c, ast_op op, ast_node *l, ast_node *r);
static ast_node *mk_call(ps_ctx *c, ast_node *callee, ast_node *args, const YYLTYPE *loc);
static ast_node *mk_as(ps_ctx *c, ast_node *call, ast_node *name, ast_node *index, uint32_t end);
static ast_node *mk_assign(ps_ctx *c, ast_node *lhs, ast_node *rhs, const YYLTYPE *loc);
static ast_node *mk_type(ps_ctx *c, ast_node *dtype, ast_node *dims, const YYLTYPE *loc);
static ast_node *mk_named(ps_ctx *c, ast_kind k, ast_node *name, ast_node *a, const YYLTYPE *loc);
}

%token YYEOF 0 "end of file"
%token NL "newline"
%token NAME "name" INT "integer" FLOAT "number" STRING "string"
%token DEVICE "device (@cpu: or @gpu:)"
%token EQ "'=='" NE "'!='" LE "'<='" GE "'>='" DOTDOT "'..'"
%token PARAM "'param'" DATA "'data'" INPUT "'input'" VAR "'var'" FN "'fn'" RETURN "'return'"
%token SCOPE "'scope'" REUSE "'reuse'" FOR "'for'" IN "'in'" AS "'as'" TRUE "'true'" FALSE "'false'"
/* `as NAME` then '[': the index of the name, not of the call's value */
%precedence AS_PLAIN
%precedence '['

%%

/* program -> stmts */
program: stmts { CTX->root = $1; $1->kind = AST_PROGRAM; $1->span.begin = 0;
                 $1->span.end = (uint32_t)CTX->src->len; }
;

/* stmts -> { sep | stmt sep }; one bad statement is skipped to its end */
stmts: %empty              { $$ = N(AST_BLOCK, @$); }
     | stmts sep
     | stmts stmt sep      { ps_push(CTX, $1, $2); }
     | stmts error sep     { $$ = $1; yyerrok; }
;
sep: NL | ';' ;

/* block -> '{' stmts [stmt] '}' */
block: '{' stmts '}'           { $$ = $2; $$->span = (src_span){@$.begin, @$.end}; }
     | '{' stmts stmt '}'      { $$ = $2; ps_push(CTX, $$, $3); $$->span = (src_span){@$.begin, @$.end}; }
     | '{' stmts error '}'     { yyerrok; $$ = $2; $$->span = (src_span){@$.begin, @$.end}; }
;

stmt: PARAM NAME '=' expr      { $$ = mk_named(CTX, AST_PARAM, $2, $4, &@$); }
    | DATA NAME '=' expr       { $$ = mk_named(CTX, AST_DATA, $2, $4, &@$); }
    | INPUT NAME ':' type      { $$ = mk_named(CTX, AST_INPUT, $2, $4, &@$); }
    | VAR NAME '=' expr        { $$ = mk_named(CTX, AST_VAR, $2, $4, &@$); }
    | RETURN expr              { $$ = N(AST_RETURN, @$); $$->a = $2; }
    | fn_def
    | scope_stmt
    | for_stmt
    | expr '=' expr            { $$ = mk_assign(CTX, $1, $3, &@$); }
    | expr                     { $$ = N(AST_EXPR_STMT, @$); $$->a = $1; }
;

/* type -> NAME '[' [exprs] ']'   e.g. f32[batch, 784] */
type: NAME '[' opt_exprs ']'   { $$ = mk_type(CTX, $1, $3, &@$); }
;

/* fn_def -> 'fn' NAME '(' [paramdef {',' paramdef}] ')' block */
fn_def: FN NAME '(' opt_paramdefs ')' block
        { $$ = $4; $$->kind = AST_FN; $$->name = $2->name; $$->b = $6;
          $$->span = (src_span){@$.begin, @$.end}; }
;
opt_paramdefs: %empty          { $$ = N(AST_FN, @$); }
             | paramdefs
             | paramdefs ','
;
paramdefs: paramdef            { $$ = N(AST_FN, @$); ps_push(CTX, $$, $1); }
         | paramdefs ',' paramdef { ps_push(CTX, $1, $3); }
;
paramdef: NAME                 { $$ = mk_named(CTX, AST_PARAMDEF, $1, NULL, &@$); }
        | NAME '=' expr        { $$ = mk_named(CTX, AST_PARAMDEF, $1, $3, &@$); }
;

/* scope_stmt -> 'scope' NAME ['reuse' ['(' expr ')']] [DEVICE devidx] block */
scope_stmt: SCOPE NAME opt_reuse opt_device block
        { $$ = $3; $$->kind = AST_SCOPE; $$->name = $2->name; $$->b = $4; $$->c = $5;
          $$->span = (src_span){@$.begin, @$.end}; }
;
opt_reuse: %empty              { $$ = N(AST_SCOPE, @$); }
         | REUSE               { $$ = N(AST_SCOPE, @$); $$->flag = 1; }
         | REUSE '(' expr ')'  { $$ = N(AST_SCOPE, @$); $$->flag = 2; $$->a = $3; }
         | REUSE '(' expr '=' expr ')'
           { $$ = N(AST_SCOPE, @$); $$->flag = 2; $$->a = mk_binary(CTX, AOP_EQ, $3, $5);
             ps_error(CTX, @4.begin, @4.end, "'=' is assignment; use '==' to compare"); }
;
opt_device: %empty             { $$ = NULL; }
          | device
;
device: DEVICE devidx          { $$ = $1; $$->a = $2; $$->span.end = @2.end; ps_finish(CTX, $$); }
;
devidx: INT | NAME | '(' expr ')' { $$ = $2; }
;

/* for_stmt -> 'for' NAME 'in' expr '..' expr block */
for_stmt: FOR NAME IN expr DOTDOT expr block
          { $$ = mk_named(CTX, AST_FOR, $2, $4, &@$); $$->b = $6; $$->c = $7; }
        | FOR NAME IN expr block
          { $$ = mk_named(CTX, AST_FOR, $2, $4, &@$); $$->b = $4; $$->c = $5;
            ps_error(CTX, @4.begin, @4.end, "a for loop needs a range, as in for %s in 0..n",
                     $2->name); }
;

/* expr -> cmp | expr DEVICE devidx    (device annotation binds loosest) */
expr: cmp
    | expr device              { $$ = N(AST_DEVICE, @$); $$->a = $1; $$->b = $2; ps_finish(CTX, $$); }
;
/* cmp -> sum [('==' | '!=' | '<' | '>' | '<=' | '>=') sum] */
cmp: sum
   | sum cmpop sum             { $$ = mk_binary(CTX, $2->op, $1, $3); }
   | sum cmpop sum cmpop sum
     { $$ = mk_binary(CTX, $2->op, $1, $3);
       ps_error(CTX, @4.begin, @4.end,
                "comparisons do not chain; add parentheses, as in (a < b) == c"); }
;
cmpop: EQ                      { $$ = N(AST_BINARY, @$); $$->op = AOP_EQ; }
     | NE                      { $$ = N(AST_BINARY, @$); $$->op = AOP_NE; }
     | '<'                     { $$ = N(AST_BINARY, @$); $$->op = AOP_LT; }
     | '>'                     { $$ = N(AST_BINARY, @$); $$->op = AOP_GT; }
     | LE                      { $$ = N(AST_BINARY, @$); $$->op = AOP_LE; }
     | GE                      { $$ = N(AST_BINARY, @$); $$->op = AOP_GE; }
;
sum: prod
   | sum '+' prod              { $$ = mk_binary(CTX, AOP_ADD, $1, $3); }
   | sum '-' prod              { $$ = mk_binary(CTX, AOP_SUB, $1, $3); }
;
prod: unary
    | prod '*' unary           { $$ = mk_binary(CTX, AOP_MUL, $1, $3); }
    | prod '/' unary           { $$ = mk_binary(CTX, AOP_DIV, $1, $3); }
    | prod '@' unary           { $$ = mk_binary(CTX, AOP_MATMUL, $1, $3); }
;
unary: postfix
     | '-' unary               { $$ = N(AST_UNARY, @$); $$->op = AOP_NEG; $$->a = $2; ps_finish(CTX, $$); }
;
/* postfix -> primary { '(' args ')' | '.' NAME | '[' expr ']' | 'as' NAME [ '[' expr ']' ] }
   (`f(x) as a[i]` names the call's scope a_<i>; `(f(x) as a)[i]` indexes the result) */
postfix: primary
       | postfix '(' opt_args ')'  { $$ = mk_call(CTX, $1, $3, &@$); }
       | postfix '.' NAME      { $$ = N(AST_FIELD, @$); $$->a = $1; $$->name = $3->name; ps_finish(CTX, $$); }
       | postfix '[' expr ']'  { $$ = N(AST_INDEX, @$); $$->a = $1; $$->b = $3; ps_finish(CTX, $$); }
       | postfix AS NAME %prec AS_PLAIN { $$ = mk_as(CTX, $1, $3, NULL, @3.end); }
       | postfix AS NAME '[' expr ']' { $$ = mk_as(CTX, $1, $3, $5, @6.end); }
;
primary: INT | FLOAT | STRING | NAME
       | TRUE                  { $$ = N(AST_BOOL, @$); $$->flag = 1; }
       | FALSE                 { $$ = N(AST_BOOL, @$); $$->flag = 0; }
       | '[' opt_exprs ']'     { $$ = $2; $$->span = (src_span){@$.begin, @$.end}; ps_finish(CTX, $$); }
       | '(' expr ')'          { $$ = $2; }
;

/* exprs -> expr {',' expr} [','] */
opt_exprs: %empty              { $$ = N(AST_LIST, @$); }
         | exprs
         | exprs ','
;
exprs: expr                    { $$ = N(AST_LIST, @$); ps_push(CTX, $$, $1); }
     | exprs ',' expr          { ps_push(CTX, $1, $3); }
;
/* args -> arg {',' arg} [',']     arg -> expr | NAME '=' expr */
opt_args: %empty               { $$ = N(AST_CALL, @$); }
        | args
        | args ','
;
args: arg                      { $$ = N(AST_CALL, @$); ps_push(CTX, $$, $1); }
    | args ',' arg             { ps_push(CTX, $1, $3); }
;
arg: expr
   | NAME '=' expr             { $$ = mk_named(CTX, AST_KWARG, $1, $3, &@$); ps_finish(CTX, $$); }
;

%%

static int is_keyword_token(int tok)
{
    return tok == PARAM || tok == DATA || tok == INPUT || tok == VAR || tok == FN ||
           tok == RETURN || tok == SCOPE || tok == REUSE || tok == FOR || tok == IN ||
           tok == AS || tok == TRUE || tok == FALSE;
}

/* Keywords of Python and TensorFlow programs, and what a .graph file
 * writes instead. */
static const struct {
    const char *word, *say;
} foreign_words[] = {
    {"if", "the language has no 'if': a .graph file builds one graph, once. To build a part only "
           "when a param says so, loop over 0..flag (for i in 0..use_dropout { h = dropout(h, "
           "0.5) }); to share variables on a condition, scope s reuse(t > 0) { ... }"},
    {"elif", "the language has no 'if' or 'elif': loop over 0..flag for a part built only when "
             "a param says so"},
    {"else", "the language has no 'if' or 'else': loop over 0..flag for a part built only when "
             "a param says so"},
    {"while", "the language has no 'while': loops run while the graph is built, over a range "
              "(for i in 0..n { ... }), and how long training runs is --steps"},
    {"def", "functions are written fn NAME(x, units=10) { ... return ... }"},
    {"class", "there are no classes: a layer is a function, fn dense(x, units) { var w = ...; "
              "return ... }, and its variables live in its call's scope (dense(x, 10) as fc1)"},
    {"lambda", "there is no lambda: write fn NAME(x) { return ... }"},
    {"import", "there is nothing to import: every op, initializer and optimizer is built in "
               "(docs/language.md lists them)"},
    {"from", "there is nothing to import: every op, initializer and optimizer is built in "
             "(docs/language.md lists them)"},
    {"with", "there is no 'with': tf.variable_scope(\"s\") is written scope s { ... }, and "
             "tf.device(\"/gpu:0\") is an annotation: scope s @gpu:0 { ... }, or x @gpu:0"},
    {"print", "there is no print: name the value (l = ...) and fetch it, graphrun FILE --eval l "
              "prints it"},
};

/* The statement being read began with a Python or TensorFlow keyword:
 * the error says so, at that word, instead of the token that broke. */
static int foreign_statement(ps_ctx *c)
{
    if (c->stmt_tok != NAME) return 0;
    const char *w = c->src->text + c->stmt_span.begin;
    size_t n = c->stmt_span.end - c->stmt_span.begin;
    for (size_t i = 0; i < sizeof foreign_words / sizeof *foreign_words; i++)
        if (strlen(foreign_words[i].word) == n && memcmp(foreign_words[i].word, w, n) == 0) {
            ps_error(c, c->stmt_span.begin, c->stmt_span.end, "%s", foreign_words[i].say);
            return 1;
        }
    return 0;
}

static int is_operator_token(int tok)
{
    return tok == '+' || tok == '-' || tok == '*' || tok == '/' || tok == '@' || tok == '=' ||
           tok == ',' || tok == '<' || tok == '>' || tok == EQ || tok == NE || tok == LE ||
           tok == GE || tok == DOTDOT;
}

#define NO_BOOL                                                                                    \
    "there are no boolean operators: a comparison of tensors is f32 0/1, so (a > 0) * (b > 0) "   \
    "is 'and' and 1 - (a > 0) is 'not'"
#define NO_IF_EXPR "there is no conditional expression: where(cond, a, b) picks a where cond is " \
                   "nonzero, else b"

/* Python words that turn up inside an expression, and what to write. */
static const struct {
    const char *word, *say;
} expr_words[] = {
    {"and", NO_BOOL},
    {"or", NO_BOOL},
    {"not", NO_BOOL},
    {"is", "'is' is Python: compare with == and !="},
    {"lambda", "there is no lambda: write fn NAME(x) { return ... }"},
    {"if", NO_IF_EXPR},
    {"else", NO_IF_EXPR},
};

static const char *expr_word_hint(const ps_ctx *c, int tok, src_span at)
{
    size_t n = at.end - at.begin;
    for (size_t i = 0; tok == NAME && i < sizeof expr_words / sizeof *expr_words; i++)
        if (strlen(expr_words[i].word) == n &&
            memcmp(expr_words[i].word, c->src->text + at.begin, n) == 0)
            return expr_words[i].say;
    return NULL;
}

/* A Python word at the token that broke, or just before it. */
static void python_word_hint(ps_ctx *c)
{
    const char *say = expr_word_hint(c, c->last_tok, c->last_span);
    if (say) {
        diag_note(c->d, c->src, c->last_span, "%s", say);
    } else if ((say = expr_word_hint(c, c->prev_tok, c->prev_span)))
        diag_note(c->d, c->src, c->prev_span, "%s", say);
}

/* Operators of Python and C made of two tokens here: **, //, +=. */
static void python_operator_hint(ps_ctx *c)
{
    src_span both = {c->prev_span.begin, c->last_span.end};
    int a = c->prev_tok, b = c->last_tok;
    if (c->prev_span.end != c->last_span.begin) return;
    if (a == '*' && b == '*')
        diag_note(c->d, c->src, both, "there is no '**': a power is pow(x, 2.0)");
    else if (a == '/' && b == '/')
        diag_note(c->d, c->src, both, "comments start with '#', and there is no '//': '/' divides");
    else if (b == '=' && (a == '+' || a == '-' || a == '*' || a == '/'))
        diag_note(c->d, c->src, both, "there is no '%c=': write x = x %c ...", a, a);
}

/* Python's blocks (fn f(x):) and type annotations (var w: f32[2] = ...). */
static void python_colon_hint(ps_ctx *c, const char *msg)
{
    if (c->last_tok != ':') return;
    if (strstr(msg, "'{'"))
        diag_note(c->d, c->src, c->last_span,
                  "a block is written in braces, { ... }, not after a ':'");
    else if (c->stmt_tok == VAR || c->stmt_tok == PARAM)
        diag_note(c->d, c->src, c->last_span,
                  "a var or a param takes its type from its value (var w = glorot([784, 10])); "
                  "only an input is declared with one (input x: f32[batch, 784])");
}

/* Python's slices, x[:, 0] (an index takes one expression), and tuples,
 * ones((3, 3)) (a ',' in parentheses that are not a call's): 1 when the
 * note says what the bracket is for. */
static int python_bracket_hint(ps_ctx *c)
{
    int top = c->depth > 0 ? c->open[c->depth - 1] : 0;
    if (c->last_tok == ':' && top == '[')
        diag_note(c->d, c->src, c->last_span,
                  "there is no slicing syntax: slice(x, axis=1, begin=0, end=1) takes a range of "
                  "one axis, and gather(table, ids) picks rows");
    else if (c->last_tok == ',' && top == '(' && c->prev_tok != ',' && c->prev_tok != '(')
        diag_note(c->d, c->src, c->last_span,
                  "there are no tuples: a shape or a list is written in brackets, [3, 3]");
    else
        return 0;
    return 1;
}

/* Adds what the user most likely meant, when that is cheap to tell. */
static void add_hints(ps_ctx *c, const char *msg)
{
    python_word_hint(c);
    python_operator_hint(c);
    python_colon_hint(c, msg);
    if (python_bracket_hint(c)) {
        ps_forget_brackets(c);
        return;
    }
    if (c->stmt_tok == FOR && strncmp(msg, "unexpected ':'", 14) == 0)
        diag_note(c->d, c->src, c->stmt_span, "a loop is written for i in 0..n { ... }");
    if (c->last_tok == NL && is_operator_token(c->prev_tok))
        diag_note(c->d, c->src, c->last_span,
                  "a statement ends with its line: to go on on the next line, put the "
                  "expression in parentheses (newlines inside ( ) and [ ] are ignored)");
    int in_expr = is_operator_token(c->prev_tok) || c->prev_tok == '(' || c->prev_tok == '[';
    if (is_keyword_token(c->last_tok) && (strstr(msg, "expecting name") || in_expr))
        diag_note(c->d, c->src, c->last_span, "'%.*s' is a keyword and cannot be used as a name",
                  (int)(c->last_span.end - c->last_span.begin), c->src->text + c->last_span.begin);
    int top = c->depth - 1;
    int at_eof = strncmp(msg, "unexpected end of file", 22) == 0;
    if (top >= 0 && (c->open[top] != '{' || at_eof)) {
        src_span at = {c->open_at[top], c->open_at[top] + 1};
        diag_note(c->d, c->src, at, "unclosed '%c' opened here", c->open[top]);
    }
    ps_forget_brackets(c);
}

static void yyerror(const YYLTYPE *loc, yyscan_t scanner, const char *msg)
{
    ps_ctx *c = CTX;
    if (c->fatal) return;
    if (strcmp(msg, "memory exhausted") == 0) {
        ps_error(c, loc->begin, loc->end, "program too deeply nested");
        c->fatal = 1;
        return;
    }
    const char *rest = strncmp(msg, "syntax error, ", 14) == 0 ? msg + 14 : msg;
    if (foreign_statement(c)) {
        ps_forget_brackets(c);
        return;
    }
    ps_error(c, loc->begin, loc->end, "%s", rest);
    add_hints(c, rest);
}

static ast_node *mk_binary(ps_ctx *c, ast_op op, ast_node *l, ast_node *r)
{
    ast_node *n = ps_node(c, AST_BINARY, l->span.begin, r->span.end);
    n->op = op;
    n->a = l;
    n->b = r;
    return ps_finish(c, n);
}

/* A call on a field, x.f(args), is a method call. */
static ast_node *mk_call(ps_ctx *c, ast_node *callee, ast_node *args, const YYLTYPE *loc)
{
    args->span = (src_span){loc->begin, loc->end};
    if (callee->kind == AST_FIELD) {
        args->kind = AST_METHOD;
        args->a = callee->a;
        args->name = callee->name;
    } else {
        args->a = callee;
    }
    return ps_finish(c, args);
}

static ast_node *mk_as(ps_ctx *c, ast_node *call, ast_node *name, ast_node *index, uint32_t end)
{
    if (call->kind != AST_CALL && call->kind != AST_METHOD) {
        ps_error(c, name->span.begin, name->span.end,
                 "'as %s' must follow a call, as in f(x) as %s", name->name, name->name);
    } else if (call->as_name) {
        ps_error(c, name->span.begin, name->span.end, "this call is already named '%s'",
                 call->as_name);
    } else {
        call->as_name = name->name;
        call->as_span = name->span;
        call->as_index = index;
        call->span.end = end;
    }
    return call;
}

static ast_node *mk_assign(ps_ctx *c, ast_node *lhs, ast_node *rhs, const YYLTYPE *loc)
{
    ast_node *n = ps_node(c, AST_ASSIGN, loc->begin, loc->end);
    int ok = lhs->kind == AST_NAME || (lhs->kind == AST_INDEX && lhs->a->kind == AST_NAME);
    if (!ok)
        ps_error(c, lhs->span.begin, lhs->span.end,
                 "cannot assign to this expression (expected NAME or NAME[index])");
    n->a = lhs;
    n->b = rhs;
    return n;
}

static ast_node *mk_type(ps_ctx *c, ast_node *dtype, ast_node *dims, const YYLTYPE *loc)
{
    if (strcmp(dtype->name, "f32") != 0 && strcmp(dtype->name, "i32") != 0)
        ps_error(c, dtype->span.begin, dtype->span.end, "unknown type '%s' (expected f32 or i32)",
                 dtype->name);
    dims->kind = AST_TYPE;
    dims->name = dtype->name;
    dims->span = (src_span){loc->begin, loc->end};
    return dims;
}

static ast_node *mk_named(ps_ctx *c, ast_kind k, ast_node *name, ast_node *a, const YYLTYPE *loc)
{
    ast_node *n = ps_node(c, k, loc->begin, loc->end);
    n->name = name->name;
    n->a = a;
    return n;
}
