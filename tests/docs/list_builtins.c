/* list_builtins.c - prints every name a .graph program can call besides
 * its own fns, one a line, from the compiler's own tables (for
 * tests/docs_builtins.sh). */
#include <stdio.h>

#include "compiler/sema_int.h"

int main(void)
{
    for (int i = 0; sema_callable_name(i); i++) puts(sema_callable_name(i));
    return 0;
}
