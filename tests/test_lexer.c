/* test_lexer.c - tokens, spans and the lexical edge cases of .graph text. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "lang/ps_internal.h"
#include "parser.h"
#include "lexer.h"

#define MAX_TOKS 64

typedef struct lexed {
    int tok[MAX_TOKS];
    src_span span[MAX_TOKS];
    const char *text[MAX_TOKS]; /* name / decoded string of the token */
    double num[MAX_TOKS];
    int n;
    diag_list d;
    src_file *src;
    ps_ctx c;
} lexed;

/* Runs the scanner alone, the way ps_parse sets it up. */
static lexed *lex(const char *text, size_t len)
{
    lexed *L = calloc(1, sizeof *L);
    L->src = src_from_string("t.graph", text, len);
    diag_init(&L->d);
    L->c = (ps_ctx){.src = L->src, .d = &L->d, .arena = ps_arena_new(), .eof_pos = (uint32_t)len};
    yyscan_t sc;
    assert_int_equal(lang_yylex_init_extra(&L->c, &sc), 0);
    L->c.pos = L->src->lines[0];
    YY_BUFFER_STATE b = lang_yy_scan_bytes(text + L->c.pos, (int)(len - L->c.pos), sc);
    YYSTYPE v;
    YYLTYPE loc;
    for (int t; L->n < MAX_TOKS && (t = lang_yylex(&v, &loc, sc)) != LANG_YYEOF; L->n++) {
        L->tok[L->n] = t;
        L->span[L->n] = (src_span){loc.begin, loc.end};
        L->text[L->n] = (t == NAME || t == STRING || t == DEVICE) ? v->name : NULL;
        L->num[L->n] = (t == INT || t == FLOAT) ? v->num : 0;
    }
    lang_yy_delete_buffer(b, sc);
    lang_yylex_destroy(sc);
    return L;
}

static lexed *lexs(const char *text)
{
    return lex(text, strlen(text));
}

static void lexed_free(lexed *L)
{
    ps_arena_free(L->c.arena);
    diag_free(&L->d);
    src_free(L->src);
    free(L);
}

static void expect_tokens(const lexed *L, const int *want, int n)
{
    assert_int_equal(L->n, n);
    for (int i = 0; i < n; i++) assert_int_equal(L->tok[i], want[i]);
}

static void test_range_lexes_as_int_dotdot_int(void **state)
{
    (void)state;
    lexed *L = lexs("for t in 0..2 {}");
    const int want[] = {FOR, NAME, IN, INT, DOTDOT, INT, '{', '}', NL};
    expect_tokens(L, want, 9);
    assert_true(L->num[3] == 0 && L->num[5] == 2);
    assert_int_equal(L->d.n_errors, 0);
    lexed_free(L);
}

static void test_numbers_int_float_exponent(void **state)
{
    (void)state;
    lexed *L = lexs("42 0.05 1e-3 2.5E+2 7");
    const int want[] = {INT, FLOAT, FLOAT, FLOAT, INT, NL};
    expect_tokens(L, want, 6);
    assert_true(L->num[0] == 42 && L->num[1] == 0.05 && L->num[2] == 1e-3 && L->num[3] == 250);
    lexed_free(L);
}

static void test_device_token_only_when_glued_to_at(void **state)
{
    (void)state;
    lexed *L = lexs("a @cpu:0 @ b @gpu:t @ cpu");
    const int want[] = {NAME, DEVICE, INT, '@', NAME, DEVICE, NAME, '@', NAME, NL};
    expect_tokens(L, want, 10);
    assert_string_equal(L->text[1], "cpu");
    assert_string_equal(L->text[5], "gpu");
    lexed_free(L);
}

static void test_keywords_are_not_names(void **state)
{
    (void)state;
    lexed *L = lexs("param data input var fn return scope reuse for in as true false params");
    const int want[] = {PARAM, DATA, INPUT, VAR,  FN,    RETURN, SCOPE, REUSE,
                        FOR,   IN,   AS,    TRUE, FALSE, NAME,   NL};
    expect_tokens(L, want, 15);
    lexed_free(L);
}

static void test_newlines_dropped_inside_parens_not_braces(void **state)
{
    (void)state;
    lexed *L = lexs("f(a,\n b)\n{\nx\n}");
    const int want[] = {NAME, '(', NAME, ',', NAME, ')', NL, '{', NL, NAME, NL, '}', NL};
    expect_tokens(L, want, 13);
    lexed_free(L);
}

static void test_operators_and_comparisons(void **state)
{
    (void)state;
    lexed *L = lexs("a == b != c <= d >= e < f > g = h + i - j * k / l ; m : n . o , p");
    const int want[] = {NAME, EQ,   NAME, NE,   NAME, LE,   NAME, GE,   NAME, '<',  NAME,
                        '>',  NAME, '=',  NAME, '+',  NAME, '-',  NAME, '*',  NAME, '/',
                        NAME, ';',  NAME, ':',  NAME, '.',  NAME, ',',  NAME, NL};
    expect_tokens(L, want, 32);
    lexed_free(L);
}

static void test_spans_are_byte_offsets(void **state)
{
    (void)state;
    lexed *L = lexs("ab = 12 # note\n  \"x\"");
    assert_int_equal(L->span[0].begin, 0);
    assert_int_equal(L->span[0].end, 2);
    assert_int_equal(L->span[2].begin, 5);
    assert_int_equal(L->span[2].end, 7);
    assert_int_equal(L->tok[3], NL);
    assert_int_equal(L->span[3].begin, 14);
    assert_int_equal(L->span[4].begin, 17);
    assert_int_equal(L->span[4].end, 20);
    lexed_free(L);
}

static void test_string_escapes_are_decoded(void **state)
{
    (void)state;
    lexed *L = lexs("\"a\\\"b\\\\c\\nd\\te\"");
    assert_int_equal(L->tok[0], STRING);
    assert_string_equal(L->text[0], "a\"b\\c\nd\te");
    assert_int_equal(L->d.n_errors, 0);
    lexed_free(L);
}

static void test_utf8_in_strings_and_comments_is_fine(void **state)
{
    (void)state;
    lexed *L = lexs("\"caf\xC3\xA9 \xE2\x82\xAC\" # \xF0\x9F\x98\x80\n");
    assert_int_equal(L->tok[0], STRING);
    assert_string_equal(L->text[0], "caf\xC3\xA9 \xE2\x82\xAC");
    assert_int_equal(L->d.n_errors, 0);
    lexed_free(L);
}

static void test_crlf_is_a_newline(void **state)
{
    (void)state;
    lexed *L = lexs("a\r\nb\r\n");
    const int want[] = {NAME, NL, NAME, NL, NL};
    expect_tokens(L, want, 5);
    /* the newline token starts at the CR, so errors point after the text */
    assert_int_equal(L->span[1].begin, 1);
    assert_int_equal(L->span[1].end, 3);
    assert_int_equal(L->d.n_errors, 0);
    lexed_free(L);
}

static void test_bom_is_skipped_but_offsets_stay_in_file(void **state)
{
    (void)state;
    lexed *L = lexs("\xEF\xBB\xBFx");
    assert_int_equal(L->tok[0], NAME);
    assert_int_equal(L->span[0].begin, 3);
    int line, col;
    src_linecol(L->src, 3, &line, &col);
    assert_int_equal(line, 1);
    assert_int_equal(col, 1);
    lexed_free(L);
}

static void test_nul_and_invalid_utf8_are_errors(void **state)
{
    (void)state;
    static const char text[] = "a \0 \xFF \"\xC3\x28\" # \xED\xA0\x80\n";
    lexed *L = lex(text, sizeof text - 1);
    assert_int_equal(L->d.n_errors, 4);
    assert_non_null(strstr(L->d.v[0].msg, "NUL"));
    assert_non_null(strstr(L->d.v[1].msg, "0xFF"));
    assert_non_null(strstr(L->d.v[2].msg, "in string"));
    assert_non_null(strstr(L->d.v[3].msg, "in comment"));
    assert_int_equal(L->d.v[1].span.begin, 4);
    lexed_free(L);
}

static void test_literal_overflow_is_an_error(void **state)
{
    (void)state;
    lexed *L = lexs("9007199254740992 9007199254740993 1e400 1e-400");
    assert_int_equal(L->d.n_errors, 2);
    assert_non_null(strstr(L->d.v[0].msg, "integer literal is too large"));
    assert_non_null(strstr(L->d.v[1].msg, "too large"));
    assert_true(L->num[0] == 9007199254740992.0);
    lexed_free(L);
}

static void test_unterminated_string_is_an_error(void **state)
{
    (void)state;
    lexed *L = lexs("x = \"abc\ny");
    assert_int_equal(L->d.n_errors, 1);
    assert_string_equal(L->d.v[0].msg, "unterminated string");
    assert_int_equal(L->d.v[0].span.begin, 4);
    assert_int_equal(L->d.v[0].span.end, 8);
    lexed_free(L);
}

static void test_tab_counts_as_one_column(void **state)
{
    (void)state;
    src_file *s = src_from_string("t", "\t\tx \xC3\xA9y", 7);
    int line, col;
    src_linecol(s, 2, &line, &col);
    assert_int_equal(col, 3);
    src_linecol(s, 6, &line, &col); /* after a 2-byte char */
    assert_int_equal(col, 6);
    src_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_range_lexes_as_int_dotdot_int),
        cmocka_unit_test(test_numbers_int_float_exponent),
        cmocka_unit_test(test_device_token_only_when_glued_to_at),
        cmocka_unit_test(test_keywords_are_not_names),
        cmocka_unit_test(test_newlines_dropped_inside_parens_not_braces),
        cmocka_unit_test(test_operators_and_comparisons),
        cmocka_unit_test(test_spans_are_byte_offsets),
        cmocka_unit_test(test_string_escapes_are_decoded),
        cmocka_unit_test(test_utf8_in_strings_and_comments_is_fine),
        cmocka_unit_test(test_crlf_is_a_newline),
        cmocka_unit_test(test_bom_is_skipped_but_offsets_stay_in_file),
        cmocka_unit_test(test_nul_and_invalid_utf8_are_errors),
        cmocka_unit_test(test_literal_overflow_is_an_error),
        cmocka_unit_test(test_unterminated_string_is_an_error),
        cmocka_unit_test(test_tab_counts_as_one_column),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
