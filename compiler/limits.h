/* limits.h - every limit a compile enforces, in one place.
 *
 * A compile must finish in bounded time and memory whatever the .graph file
 * says, and no size computed from a shape may overflow.  Each limit below
 * is reported as a located error (`file:line:col: error: ...`) at the
 * statement or expression that crossed it, and is listed in
 * docs/language.md ("Limits"); change both together.  The parser's own
 * limits (nesting, literal sizes) are in lang/ps_internal.h, the size of a
 * source file (LIM_SOURCE_BYTES) in lang/diag.h. */
#ifndef GR_LIMITS_H
#define GR_LIMITS_H

/* ---- shapes ---- */

/* One dimension: the CPU kernels hand dimensions to BLAS, whose sizes are
 * ints. */
#define LIM_DIM 2147483647LL
/* One tensor's bytes (2^40 = 1 TiB, so 2^38 elements of 4 bytes): far above
 * any machine's memory, and low enough that sums of many tensor sizes (an
 * arena, a checkpoint) cannot overflow 64 bits. */
#define LIM_TENSOR_BYTES (1LL << 40)
/* Integers computed at compile time (shapes, indices, loop bounds) stay
 * exact doubles, like integer literals (lang/lexer.l). */
#define LIM_INT (1LL << 53)

/* ---- what one compile may build ---- */

/* Nodes in the IR, backward passes and fused nodes included. */
#define LIM_NODES 200000
/* Compiler memory: the IR's arena (tensor literals, folded constants,
 * names, lists) plus its node, variable and name arrays. */
#define LIM_COMPILE_BYTES (256LL << 20)
/* Elements of one tensor literal such as [[1, 2], [3, 4]] (lists bound to
 * names can be nested into literals far larger than the source). */
#define LIM_LITERAL_ELEMS (1 << 20)
/* Data sources: each opens a reader with its own thread when it runs. */
#define LIM_DATA 64
/* Words of a text(vocab="words") vocabulary, <unk> included (vocab_size=). */
#define LIM_TEXT_WORDS (1LL << 24)
/* .minimize() calls: each builds a backward pass over the graph so far. */
#define LIM_MINIMIZE 1024
/* minimize(accumulate=k): runs per update. */
#define LIM_ACCUMULATE 65536
/* Full names of variables and scopes, in bytes. */
#define LIM_NAME 511

/* ---- devices ---- */

/* Devices of one kind: cpu:0 to cpu:15, gpu:0 to gpu:15.  The language
 * (`@gpu:N`), --devices (gr_compile_options.devices) and the machine probe
 * (which shows at most this many CUDA GPUs, and GR_SIM_GPU at most this
 * many simulated ones) all hold to it. */
#define LIM_DEVICES 16

/* ---- evaluation (sema runs the program once, at compile time) ---- */

/* Iterations of one `for` loop. */
#define LIM_LOOP 100000
/* Iterations of all loops together, nested loops counting every inner
 * iteration. */
#define LIM_LOOP_TOTAL 1000000
/* Function calls in progress at once (recursion). */
#define LIM_CALL_DEPTH 64
/* Expressions being evaluated at once, through every call in progress:
 * evaluation recurses natively, so this bounds its stack (about 2 MB in
 * the largest frames GCC -O3 makes), where recursion of 64 calls through
 * expressions 1000 deep (the parser's limit) would overflow it. */
#define LIM_EVAL_DEPTH 1200
/* Evaluation steps, one per statement and expression evaluated: bounds
 * the time of programs whose loops and calls multiply. */
#define LIM_EVAL_STEPS 2000000
/* Highest index of `l[i] = ...`. */
#define LIM_LIST_INDEX 4096

/* ---- constant folding (not errors: a node past these is left unfolded) */

/* A node folds only when its output and every input have at most this
 * many elements: folding computes them all at compile time. */
#define LIM_FOLD_ELEMS 65536
/* Bytes of folded values one compile may hold. */
#define LIM_FOLD_BYTES (64LL << 20)

#endif
