/* cli.h - the graphrun command line: one function per subcommand.
 *
 * tools/main.c dispatches on argv[1]; each cmd_* gets argc/argv with
 * argv[0] set to "graphrun SUBCOMMAND" style usage name and returns the
 * process exit status: 0 ok, 1 errors in the input, 2 misuse. */
#ifndef GR_CLI_H
#define GR_CLI_H

enum { CLI_OK = 0, CLI_FAILED = 1, CLI_USAGE = 2 };

int cmd_check(int argc, char **argv);
int cmd_fmt(int argc, char **argv);
/* `graphrun FILE.graph [options]`: trains (tools/cmd_train.c). */
int cmd_train(int argc, char **argv);

/* The compiler's half of `graphrun check`, called after a parse without
 * errors.  It adds its diagnostics to d, prints what `--emit` asks for when
 * emit is not NULL and not "ast" (cmd_check prints the AST itself), and
 * returns CLI_OK, CLI_FAILED or CLI_USAGE (unknown emit value).  cmd_check.c
 * holds a weak default that checks nothing and knows no emit value; the
 * compiler replaces it by defining this function in another tools/ file. */
struct ast_tree;
struct gr_diags;
int cli_check_semantics(const struct ast_tree *t, struct gr_diags *d, const char *emit);

#endif
