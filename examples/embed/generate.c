/* generate.c - sampling text from a trained character model.
 *
 *     generate GRAPH CHECKPOINT [options] [PROMPT]
 *       -n N          characters to write (default 300)
 *       -t TEMP       temperature (default 0.8; lower is safer, higher wilder)
 *       -k K          sample only among the K likeliest characters (default 0: all)
 *       -s SEED       seed of the sampling (default 1)
 *       --set NAME=VALUE  a param of GRAPH, as the training run had it
 *
 * The model (examples/char_gpt.graph) declares what sampling needs: an
 * input `prompt: i32[1, block]` and a target `next`, the probabilities of
 * each position's next character, `f32[1, block, vocab]`.  The program
 * loads the weights of a checkpoint (gr_session_restore, weights only, so
 * no data is read), learns the vocabulary from the program
 * (gr_program_vocab), and then, one character at a time: feeds the last
 * `block` characters (the rest zero; causal attention means position i
 * sees only 0..i), reads the row of the last real character, reshapes it
 * by the temperature and top-k, and draws the next character.
 *
 * Everything goes through include/graphrun.h: copy it as a start for your
 * own embedding. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graphrun.h"

#define MAX_PARAMS 16

typedef struct options {
    const char *graph, *ckpt, *prompt;
    long n, k;
    double temp;
    uint64_t seed;
    gr_param params[MAX_PARAMS];
    int n_params;
} options;

/* The vocabulary: id k is the k-th UTF-8 character of chars (or byte k). */
typedef struct vocab {
    int64_t size;
    const char **at; /* [size] where each id's character starts */
    int *len;        /* [size] its length in bytes */
} vocab;

static int usage(void)
{
    fputs("usage: generate GRAPH CHECKPOINT [-n N] [-t TEMP] [-k K] [-s SEED] "
          "[--set NAME=VALUE] [PROMPT]\n",
          stderr);
    return 2;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.n = 300, .temp = 0.8, .seed = 1, .prompt = ""};
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int flag = a[0] == '-' && a[1] != 0;
        if (flag && !v) return -1;
        if (!strcmp(a, "-n"))
            o->n = atol(v);
        else if (!strcmp(a, "-t"))
            o->temp = atof(v);
        else if (!strcmp(a, "-k"))
            o->k = atol(v);
        else if (!strcmp(a, "-s"))
            o->seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--set") && o->n_params < MAX_PARAMS && strchr(v, '=')) {
            char *eq = strchr(argv[i + 1], '=');
            *eq = 0;
            o->params[o->n_params++] = (gr_param){argv[i + 1], eq + 1};
        } else if (flag)
            return -1;
        else {
            const char **slot[] = {&o->graph, &o->ckpt, &o->prompt};
            if (pos == 3) return -1;
            *slot[pos++] = a;
            continue;
        }
        i++;
    }
    return pos >= 2 && o->n >= 0 && o->temp > 0 && o->k >= 0 ? 0 : -1;
}

/* Bytes in the UTF-8 character that starts with byte c. */
static int utf8_len(unsigned char c)
{
    return c < 0x80 ? 1 : c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
}

static int vocab_load(const gr_program *p, vocab *v, gr_status *st)
{
    const char *chars;
    if (gr_program_vocab(p, NULL, &chars, &v->size, st) != GR_OK) return -1;
    v->at = calloc((size_t)v->size, sizeof *v->at);
    v->len = calloc((size_t)v->size, sizeof *v->len);
    static char bytes[256];
    for (int64_t id = 0; id < v->size; id++) {
        if (chars) {
            v->at[id] = chars;
            chars += v->len[id] = utf8_len((unsigned char)*chars);
        } else {
            bytes[id] = (char)id;
            v->at[id] = &bytes[id];
            v->len[id] = 1;
        }
    }
    return 0;
}

/* The id of the character at s (its length into *n), or -1. */
static int64_t vocab_find(const vocab *v, const char *s, int *n)
{
    *n = utf8_len((unsigned char)*s);
    for (int64_t id = 0; id < v->size; id++)
        if (v->len[id] == *n && memcmp(v->at[id], s, (size_t)*n) == 0) return id;
    return -1;
}

/* xorshift64*: a small, seeded generator; uniform in [0, 1). */
static double uniform(uint64_t *s)
{
    *s ^= *s >> 12, *s ^= *s << 25, *s ^= *s >> 27;
    return (double)((*s * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

/* Draws an id from probabilities p[0..n): reshaped by 1/temp, cut to the
 * k likeliest (k = 0: all), renormalised. */
static int64_t sample(const float *p, int64_t n, double temp, long k, uint64_t *rng, double *w)
{
    double total = 0, cut = 0;
    for (int64_t i = 0; i < n; i++) w[i] = pow(p[i] > 0 ? p[i] : 0, 1 / temp);
    if (k > 0 && k < n) { /* the k-th largest weight: the smallest one kept */
        double *sorted = malloc(sizeof *sorted * (size_t)n);
        memcpy(sorted, w, sizeof *sorted * (size_t)n);
        for (long j = 0; j < k; j++) /* partial selection: k is small */
            for (int64_t i = n - 1; i > j; i--)
                if (sorted[i] > sorted[i - 1]) {
                    double t = sorted[i];
                    sorted[i] = sorted[i - 1], sorted[i - 1] = t;
                }
        cut = sorted[k - 1];
        free(sorted);
    }
    for (int64_t i = 0; i < n; i++) total += w[i] >= cut ? w[i] : 0;
    double r = uniform(rng) * total;
    for (int64_t i = 0; i < n; i++)
        if (w[i] >= cut && (r -= w[i]) < 0) return i;
    return n - 1;
}

typedef struct model {
    gr_program *prog;
    gr_session *sess;
    vocab voc;
    int64_t block;
    gr_tensor *prompt, *next;
} model;

static int model_open(const options *o, model *m, gr_status *st)
{
    gr_compile_options co = {.params = o->params, .n_params = o->n_params};
    gr_restore_options ro = {.weights_only = 1};
    if (gr_compile_file(o->graph, &co, &m->prog, st) != GR_OK ||
        gr_session_new(m->prog, NULL, &m->sess, st) != GR_OK ||
        gr_session_restore(m->sess, o->ckpt, &ro, st) != GR_OK ||
        gr_program_tensor(m->prog, "prompt", &m->prompt, st) != GR_OK ||
        gr_program_tensor(m->prog, "next", &m->next, st) != GR_OK ||
        vocab_load(m->prog, &m->voc, st))
        return -1;
    m->block = gr_tensor_dim(m->prompt, 1);
    if (gr_tensor_dim(m->next, 2) == m->voc.size) return 0;
    fprintf(stderr, "generate: %s: `next` is not [1, block, vocab]\n", o->graph);
    return -1;
}

/* The prompt as ids; characters outside the vocabulary are skipped. */
static int64_t encode(const vocab *v, const char *s, int32_t *ids, int64_t cap)
{
    int64_t n = 0;
    for (int len; *s; s += len) {
        int64_t id = vocab_find(v, s, &len);
        if (id < 0) {
            fprintf(stderr, "generate: '%.*s' is not in the vocabulary: left out\n", len, s);
            continue;
        }
        if (n == cap) memmove(ids, ids + 1, sizeof *ids * (size_t)--n); /* keep the last cap */
        ids[n++] = (int32_t)id;
    }
    return n;
}

static int generate(const options *o, model *m, gr_status *st)
{
    int32_t *ids = gr_tensor_data(m->prompt);
    const float *probs = gr_tensor_data(m->next);
    double *w = malloc(sizeof *w * (size_t)m->voc.size);
    uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 1;
    int64_t n = encode(&m->voc, o->prompt, ids, m->block);
    if (n == 0) ids[n++] = 0; /* an empty prompt starts from id 0 */
    fputs(o->prompt, stdout);
    for (long i = 0; i < o->n; i++) {
        gr_feed f = {"prompt", ids, gr_tensor_bytes(m->prompt)};
        gr_fetch out = {"next", gr_tensor_data(m->next), gr_tensor_bytes(m->next), NULL};
        if (gr_run(m->sess, "next", &f, 1, &out, 1, st) != GR_OK) {
            free(w);
            return -1;
        }
        int64_t id = sample(probs + (n - 1) * m->voc.size, m->voc.size, o->temp, o->k, &rng, w);
        fwrite(m->voc.at[id], 1, (size_t)m->voc.len[id], stdout);
        if (n == m->block) memmove(ids, ids + 1, sizeof *ids * (size_t)--n);
        ids[n++] = (int32_t)id;
    }
    fputc('\n', stdout);
    free(w);
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) < 0) return usage();
    gr_status *st = gr_status_new();
    model m = {0};
    int rc = model_open(&o, &m, st) < 0 || generate(&o, &m, st) < 0;
    if (rc && gr_status_code(st) != GR_OK) fprintf(stderr, "%s", gr_status_message(st));
    gr_tensor_free(m.prompt);
    gr_tensor_free(m.next);
    free(m.voc.at);
    free(m.voc.len);
    gr_session_free(m.sess);
    gr_program_free(m.prog);
    gr_status_free(st);
    return rc;
}
