/* diag.h - source files and diagnostics, shared by every stage.
 *
 * Locations are byte offsets into a src_file; they become line:column only
 * when a diagnostic is printed.  Columns count UTF-8 code points, 1-based;
 * a tab counts as one column and is echoed into the caret line so the caret
 * lines up in a terminal. */
#ifndef GR_DIAG_H
#define GR_DIAG_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct src_span {
    uint32_t begin, end; /* [begin, end) byte offsets */
} src_span;

typedef struct src_file {
    char *name;      /* path as given by the user */
    char *text;      /* NUL-terminated copy (may contain NULs: see len) */
    size_t len;      /* bytes, BOM included */
    uint32_t *lines; /* byte offset of each line start */
    size_t n_lines;
} src_file;

/* Bytes of one .graph file: read whole before it is parsed (the parser's
 * offsets are 32-bit, and no program needs more).  docs/language.md,
 * "Limits", lists it with the compile limits of compiler/limits.h. */
#define LIM_SOURCE_BYTES (64LL << 20)

/* Reads a whole file. On failure returns NULL and writes a message to err. */
src_file *src_load(const char *path, char *err, size_t errlen);
src_file *src_from_string(const char *name, const char *text, size_t len);
void src_free(src_file *s);
/* 1-based line and column of a byte offset. */
void src_linecol(const src_file *s, uint32_t off, int *line, int *col);

typedef enum { DIAG_ERROR, DIAG_WARNING, DIAG_NOTE } diag_severity;

typedef struct diag_entry {
    diag_severity sev;
    const src_file *src; /* NULL: no location */
    src_span span;
    char *msg;
} diag_entry;

typedef struct diag_list {
    diag_entry *v;
    int n, cap;
    int n_errors;
    int max_errors; /* further errors are counted, not stored; 0 = 20 */
} diag_list;

void diag_init(diag_list *d);
void diag_free(diag_list *d);
void diag_add(diag_list *d, diag_severity sev, const src_file *src, src_span sp, const char *fmt,
              ...) __attribute__((format(printf, 5, 6)));
void diag_vadd(diag_list *d, diag_severity sev, const src_file *src, src_span sp, const char *fmt,
               va_list ap);
/* 1 when a further error would only be counted, not shown: callers can
 * skip work (such as "did you mean" hints) that only the message needs. */
int diag_full(const diag_list *d);
#define diag_error(d, src, sp, ...) diag_add((d), DIAG_ERROR, (src), (sp), __VA_ARGS__)
#define diag_note(d, src, sp, ...)  diag_add((d), DIAG_NOTE, (src), (sp), __VA_ARGS__)
/* Writes "FILE:LINE:COL: error: MSG\n<source line>\n<caret line>\n" for each
 * entry, then "N more errors not shown" when the cap was hit. */
void diag_print(const diag_list *d, FILE *out);
void diag_print_one(const diag_entry *e, FILE *out);

#endif
