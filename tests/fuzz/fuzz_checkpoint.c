/* fuzz_checkpoint.c - libFuzzer target: any bytes through the checkpoint
 * parser (runtime/ckpt/safetensors.c, linked with cJSON and base/fatal.c only).
 * An accepted file must describe tensors that lie inside the input, do not
 * overlap and have the byte count of their shape; its header, rebuilt by
 * the writer, must parse again to the same tensors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/ckpt/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_tensor(const safet_tensor *t, const uint8_t *data, size_t size)
{
    size_t numel = 1;
    for (int i = 0; i < t->rank; i++) numel *= (size_t)t->dim[i];
    if (t->data < data || t->data + t->bytes > data + size || t->bytes != numel * 4) {
        fprintf(stderr, "tensor '%s' accepted with bad bounds\n", t->name);
        abort();
    }
}

/* Writer then parser: the same names, dtypes and shapes come back. */
static void check_rewrite(const safet_file *f)
{
    size_t hlen = 0, dlen = 0;
    for (int i = 0; i < f->n_t; i++) dlen += f->t[i].bytes;
    uint8_t *h = safet_header(f->t, f->n_t, f->meta, f->n_meta, &hlen);
    if (!h) return;
    uint8_t *buf = calloc(1, hlen + dlen + 1);
    memcpy(buf, h, hlen);
    safet_file g;
    char err[512];
    if (safet_parse(buf, hlen + dlen, "rewritten", &g, err, sizeof err) < 0) {
        fprintf(stderr, "rewritten header refused: %s\n", err);
        abort();
    }
    for (int i = 0; i < f->n_t; i++) {
        const safet_tensor *a = &f->t[i], *b = safet_find(&g, a->name);
        if (!b || b->dtype != a->dtype || b->rank != a->rank || b->bytes != a->bytes ||
            memcmp(a->dim, b->dim, sizeof(int64_t) * (size_t)a->rank) != 0) {
            fprintf(stderr, "tensor '%s' changed in the rewrite\n", a->name);
            abort();
        }
    }
    if (g.n_t != f->n_t || g.n_meta != f->n_meta) abort();
    safet_file_free(&g);
    free(buf);
    free(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    safet_file f;
    char err[512];
    if (safet_parse(data, size, "fuzz.safetensors", &f, err, sizeof err) < 0) {
        if (strncmp(err, "fuzz.safetensors: ", 18) != 0) abort(); /* messages name the file */
        return 0;
    }
    for (int i = 0; i < f.n_t; i++) check_tensor(&f.t[i], data, size);
    check_rewrite(&f);
    safet_file_free(&f);
    return 0;
}
