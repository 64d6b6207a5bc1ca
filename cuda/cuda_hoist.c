/* cuda_hoist.c: the nodes of a graph that depend on constants alone,
 * computed once when a plan is made (on the CPU, with the interpreter's
 * kernels) and uploaded as constants, instead of a kernel each run.
 *
 * Batch-norm folding (patterns/conv.lua) and the layout pass leave such
 * nodes over weights kept in .npy files, which canonicalize cannot fold:
 * `mul(w, scale)`, `transpose(w)` to the channels-last filter order, or a
 * fusion of them.  Run every time, they would read and write every weight
 * of the network on each inference.  A node is hoisted when every operand
 * is a const or a hoisted result, it has a CPU kernel and no effect, and
 * its results are static; the values steps read are uploaded once.
 * `shape` of any static value is hoisted too: its result is the type's,
 * whatever the data (a symbolic graph specialised to one size keeps the
 * shape ops the exporter wrote, which canonicalize would have folded). */
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"
#include "tensor.h"

/* The tensor of value v (a const's payload, or a hoisted result),
 * materialised once into s->hv. */
static const kf_tensor *value_of(kf_cuda_session *s, kf_vid v, char *err, size_t errlen)
{
	kf_graph *g = s->g;
	kf_tensor *t = &s->hv[v];
	if (t->data || kf_type_numel(kf_vtype(g, v)) == 0)
		return t;
	kf_nid d = kf_def(g, v);
	if (kf_tensor_alloc_type(t, kf_vtype(g, v)) != 0 ||
	    kf_op(s->c, KF_OP_CONST)->cpu(g, d, NULL, 0, t, 1, err, errlen) != 0)
		return NULL;
	return t;
}

static bool hoistable(kf_cuda_session *s, kf_nid n)
{
	kf_graph *g = s->g;
	const kf_node *x = kf_N(g, n);
	const kf_opinfo *oi = kf_op(s->c, x->op);
	if (x->op == KF_OP_CONST || x->nin == 0 || !oi->cpu || (oi->flags & (KF_OPF_EFFECT | KF_OPF_TERMINATOR)))
		return false;
	if (x->op == KF_OP_SHAPE)
		return kf_type_is_static(kf_vtype(g, kf_in(g, n, 0)));
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_nid d = kf_def(g, v);
		if (d == KF_NONE || !(s->hoisted[d] || kf_N(g, d)->op == KF_OP_CONST))
			return false;
	}
	for (uint32_t r = 0; r < x->nres; r++)
		if (!kf_type_is_static(kf_vtype(g, kf_res(g, n, r))))
			return false;
	return true;
}

int kf_cb_hoist(kf_cuda_session *s)
{
	kf_graph *g = s->g;
	s->hoisted = calloc(g->nnode + 1, 1);
	s->hv = calloc(g->nval + 1, sizeof *s->hv);
	int count = 0;
	int64_t bytes = 0;
	kf_foreach_node(g, 0, n) {
		if (!hoistable(s, n))
			continue;
		const kf_node *x = kf_N(g, n);
		kf_tensor in[16];
		char err[256] = "";
		if (x->nin > 16 || x->nres > 16)
			continue;
		bool ok = true;
		if (x->op == KF_OP_SHAPE) { /* the dims, no data */
			const kf_type *t = kf_vtype(g, kf_in(g, n, 0));
			in[0] = (kf_tensor){.dtype = (kf_dtype)t->dtype, .rank = t->rank};
			memcpy(in[0].dim, t->dim, sizeof t->dim);
		}
		for (uint32_t i = 0; i < x->nin && ok && x->op != KF_OP_SHAPE; i++) {
			const kf_tensor *t = value_of(s, kf_in(g, n, i), err, sizeof err);
			ok = t != NULL;
			if (ok)
				in[i] = *t;
		}
		kf_tensor *out = &s->hv[kf_res(g, n, 0)];
		for (uint32_t r = 0; r < x->nres && ok; r++)
			ok = kf_tensor_alloc_type(&out[r], kf_vtype(g, kf_res(g, n, r))) == 0;
		if (!ok || kf_op(s->c, x->op)->cpu(g, n, in, (int)x->nin, out, (int)x->nres, err, sizeof err) != 0) {
			kf_error(s->c, x->loc, "cuda: cannot compute the constant-only '%s' at plan time: %s",
				 kf_op(s->c, x->op)->name, err);
			return -1;
		}
		s->hoisted[n] = 1;
		count++;
		for (uint32_t r = 0; r < x->nres; r++)
			bytes += (int64_t)out[r].nbytes;
	}
	if (s->o.report && count)
		kf_buf_printf(s->o.report, "cuda: @%s: %d constant-only node%s computed once at plan time (%.2f MiB)\n",
			      kf_str(s->c, g->name), count, count == 1 ? "" : "s", bytes / 1048576.0);
	return 0;
}

void kf_cb_hoist_free(kf_cuda_session *s)
{
	if (s->hv && s->g)
		for (uint32_t v = 0; v < s->g->nval; v++)
			kf_tensor_free(&s->hv[v]);
	free(s->hv);
	free(s->hoisted);
	s->hv = NULL;
	s->hoisted = NULL;
}

const kf_tensor *kf_cb_hoisted_value(kf_cuda_session *s, kf_vid v)
{
	kf_nid d = kf_def(s->g, v);
	return d != KF_NONE && s->hoisted && s->hoisted[d] ? &s->hv[v] : NULL;
}
