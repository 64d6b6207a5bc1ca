/* shape_infer.c: recompute every result type with kf_infer.
 *
 * By default a declared type that differs from the inferred one is an error
 * at the node ("declared ..., inferred ..."), because silently changing what
 * the user wrote hides bugs.  With shape-infer{update=true} the inferred
 * type replaces the declared one, fusion body arguments follow their
 * operands, and the graph's declared results follow `return`: this is how a
 * change of input shape (say a batch dim made symbolic) is propagated.
 * Ops without an infer function (plugins may omit it) keep their types.
 * requires exact use lists; keeps the graph valid (with update=true it is
 * what makes the graph valid again). */
#include <string.h>

#include "passes.h"

typedef struct si_state {
	kf_graph *g;
	bool update;
	uint32_t changed, errors;
} si_state;

static void set_type(si_state *s, kf_vid v, kf_tid t)
{
	if (kf_V(s->g, v)->type != t) {
		kf_V(s->g, v)->type = t;
		s->changed++;
	}
}

static void si_block(si_state *s, kf_bid b);

static void si_node(si_state *s, kf_nid n)
{
	kf_graph *g = s->g;
	kf_node *nd = kf_N(g, n);
	if (nd->body != KF_NONE) {
		kf_block *bb = &g->blk[nd->body];
		for (uint32_t i = 0; s->update && i < bb->narg && i < nd->nin; i++)
			set_type(s, bb->arg[i], kf_V(g, kf_in(g, n, i))->type);
		si_block(s, nd->body);
		nd = kf_N(g, n);
	}
	if (!kf_op(g->ctx, nd->op)->infer || nd->nres == 0)
		return;
	kf_type out[KF_MAX_RANK];
	char err[256] = "";
	int k = kf_infer(g, n, out, KF_MAX_RANK, err, sizeof err);
	const char *op = kf_op(g->ctx, nd->op)->name;
	if (k < 0) {
		kf_error(g->ctx, nd->loc, "shape-infer: '%s': %s", op, err);
		s->errors++;
		return;
	}
	if ((uint32_t)k != nd->nres) {
		kf_error(g->ctx, nd->loc, "shape-infer: '%s' has %u results but infers %d", op, nd->nres, k);
		s->errors++;
		return;
	}
	for (uint32_t i = 0; i < nd->nres; i++) {
		kf_tid t = kf_type_intern(g->ctx, &out[i]);
		kf_vid v = kf_res(g, n, i);
		if (t == kf_V(g, v)->type)
			continue;
		if (s->update) {
			set_type(s, v, t);
			continue;
		}
		kf_buf a = {0}, b = {0};
		kf_print_type(&a, g->ctx, kf_V(g, v)->type);
		kf_print_type(&b, g->ctx, t);
		kf_buf_putc(&a, 0);
		kf_buf_putc(&b, 0);
		kf_error(g->ctx, nd->loc, "shape-infer: '%s' result %u is declared %s but infers %s "
			 "(shape-infer{update=true} overwrites)", op, i, a.p, b.p);
		kf_buf_free(&a);
		kf_buf_free(&b);
		s->errors++;
	}
}

static void si_block(si_state *s, kf_bid b)
{
	kf_foreach_node(s->g, b, n)
		si_node(s, n);
}

static int si_run(kf_graph *g, const kf_passopts *o, bool *changed)
{
	si_state s = {.g = g};
	s.update = kf_passopt_bool(g->ctx, o, "update", false);
	si_block(&s, 0);
	kf_nid ret = kf_block_terminator(g, 0);
	if (s.update && ret != KF_NONE && kf_N(g, ret)->nin == g->nres) {
		for (uint32_t i = 0; i < g->nres; i++) {
			kf_tid t = kf_V(g, kf_in(g, ret, i))->type;
			if (g->res[i] != t) {
				g->res[i] = t;
				s.changed++;
			}
		}
	}
	*changed = s.changed > 0;
	return s.errors ? -1 : 0;
}

static const char *const si_opts[] = {"update", NULL};

const kf_pass kf_pass_shape_infer = {
	.name = "shape-infer",
	.doc = "recompute result types with each op's inference; a mismatch is an error unless update=true",
	.opts = si_opts,
	.run = si_run,
};
