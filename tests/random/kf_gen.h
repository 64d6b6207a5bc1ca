/* kf_gen.h: random graphs for differential tests of the middle end
 * (tests/random/kf-random.c, tests/fuzz/fuzz_middle.c).
 *
 * The generator knows the IR, not the passes: it draws ops the way models
 * use them (mostly from recent values, sometimes from far back), with every
 * op kind the IR has that the CPU interpreter runs: element-wise unary and
 * binary ops with numpy broadcasting, comparisons, logic and where, casts
 * between every dtype, row and column reductions with and without keepdims,
 * softmax and log_softmax over any axis, layer norm with and without scale
 * and bias, matmul and gemm, transpose, reshape, broadcast_to, concat,
 * slice and split (several results), and constants: splats of inf, -inf,
 * nan, denormals, the largest finite values, integer extremes, and small
 * and larger dense tensors (not -0.0, whose sign kfuse does not keep).  A node whose types do not infer is
 * dropped, so every graph it returns verifies.
 *
 * Choices come from an entropy source: bytes (a fuzzer's input; zeros once
 * they run out) or a seeded generator, so that a seed names a graph. */
#ifndef KF_GEN_H
#define KF_GEN_H

#include <stddef.h>
#include <stdint.h>
#include "kf.h"

typedef struct kf_gen_src {
	const uint8_t *p; /* bytes to draw from first; NULL: none */
	size_t n;
	uint64_t rng;     /* then (or without bytes) splitmix64 from this seed */
	bool bytes_only;  /* after the bytes run out, draw zeros (a fuzzer's input is the whole choice) */
} kf_gen_src;

/* A draw in [0, n) (n >= 1). */
uint32_t kf_gen_pick(kf_gen_src *s, uint32_t n);

typedef struct kf_gen_opts {
	uint32_t nodes;     /* ops to make (constants included) */
	int64_t max_numel;  /* elements per tensor at most (default 512) */
	uint32_t max_out;   /* graph results at most (default 1024) */
	bool uneven_split;  /* splits into parts of different sizes too; off while
			       the CUDA emitter cannot emit them (issue 25, item 5) */
} kf_gen_opts;

/* A graph named @name of about o->nodes ops; it verifies.  NULL only when
 * the context has errors (it should not happen: a bug in the generator). */
kf_graph *kf_gen_graph(kf_ctx *c, kf_gen_src *s, const kf_gen_opts *o, const char *name);

#endif
