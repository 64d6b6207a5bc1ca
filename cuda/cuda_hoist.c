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
 * shape ops the exporter wrote, which canonicalize would have folded).
 *
 * A value is computed when the plan needs it (kf_cb_hoisted_value), and
 * shared between the plans of one backend like a constant (cuda_consts.c)
 * under a key naming the expression: op, attributes, type, and its
 * operands' keys down to the constants.  A symbolic graph gets a plan per
 * shape, each of a copy holding the same constant-only nodes (BERT's
 * merged QKV weights: 24 nodes, 40.6 MiB; an amp'd f32 model's casts of
 * every weight), which each shape computed and uploaded again. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"
#include "tensor.h"

/* The tensor of value v (a const's payload, or a hoisted result), computed
 * once into s->hv; NULL with the reason in err. */
static const kf_tensor *value_of(kf_cuda_session *s, kf_vid v, char *err, size_t errlen);

/* Computes hoisted node n's results into s->hv. */
static int compute(kf_cuda_session *s, kf_nid n, char *err, size_t errlen)
{
	kf_graph *g = s->g;
	const kf_node *x = kf_N(g, n);
	kf_tensor in[16];
	if (x->nin > 16) {
		snprintf(err, errlen, "more than 16 operands");
		return -1;
	}
	if (x->op == KF_OP_SHAPE) { /* the dims, no data */
		const kf_type *t = kf_vtype(g, kf_in(g, n, 0));
		in[0] = (kf_tensor){.dtype = (kf_dtype)t->dtype, .rank = t->rank};
		memcpy(in[0].dim, t->dim, sizeof t->dim);
	}
	for (uint32_t i = 0; i < x->nin && x->op != KF_OP_SHAPE; i++) {
		const kf_tensor *t = value_of(s, kf_in(g, n, i), err, errlen);
		if (!t)
			return -1;
		in[i] = *t;
	}
	kf_tensor *out = &s->hv[kf_res(g, n, 0)];
	for (uint32_t r = 0; r < x->nres; r++)
		if (kf_tensor_alloc_type(&out[r], kf_vtype(g, kf_res(g, n, r))) != 0) {
			snprintf(err, errlen, "out of memory");
			return -1;
		}
	return kf_op(s->c, x->op)->cpu(g, n, in, (int)x->nin, out, (int)x->nres, err, errlen);
}

static const kf_tensor *value_of(kf_cuda_session *s, kf_vid v, char *err, size_t errlen)
{
	kf_graph *g = s->g;
	kf_tensor *t = &s->hv[v];
	if (t->data || kf_type_numel(kf_vtype(g, v)) == 0)
		return t;
	kf_nid d = kf_def(g, v);
	if (kf_N(g, d)->op == KF_OP_CONST) {
		if (kf_tensor_alloc_type(t, kf_vtype(g, v)) != 0 ||
		    kf_op(s->c, KF_OP_CONST)->cpu(g, d, NULL, 0, t, 1, err, errlen) != 0)
			return NULL;
		return t;
	}
	return compute(s, d, err, errlen) == 0 ? t : NULL;
}

static bool hoistable(kf_cuda_session *s, kf_nid n)
{
	kf_graph *g = s->g;
	const kf_node *x = kf_N(g, n);
	const kf_opinfo *oi = kf_op(s->c, x->op);
	if (x->op == KF_OP_CONST || x->nin == 0 || x->nin > 16 || x->nres > 16 || !oi->cpu ||
	    (oi->flags & (KF_OPF_EFFECT | KF_OPF_TERMINATOR)))
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
	if (!s->hoisted || !s->hv) {
		kf_error(s->c, KF_NOLOC, "cuda: out of memory");
		return -1;
	}
	int count = 0;
	int64_t bytes = 0;
	kf_foreach_node(g, 0, n) {
		if (!hoistable(s, n))
			continue;
		s->hoisted[n] = 1;
		count++;
		for (uint32_t r = 0; r < kf_N(g, n)->nres; r++)
			bytes += kf_type_numel(kf_vtype(g, kf_res(g, n, r))) *
				 (int64_t)kf_dtype_size(kf_vtype(g, kf_res(g, n, r))->dtype);
	}
	if (s->o.report && count)
		kf_buf_printf(s->o.report, "cuda: @%s: %d constant-only node%s computed at plan time, or shared with another plan (%.2f MiB)\n",
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

bool kf_cb_is_hoisted(const kf_cuda_session *s, kf_vid v)
{
	kf_nid d = kf_def(s->g, v);
	return d != KF_NONE && s->hoisted && s->hoisted[d];
}

const kf_tensor *kf_cb_hoisted_value(kf_cuda_session *s, kf_vid v)
{
	if (!kf_cb_is_hoisted(s, v))
		return NULL;
	char err[256] = "";
	const kf_tensor *t = value_of(s, v, err, sizeof err);
	if (!t) {
		kf_nid d = kf_def(s->g, v);
		kf_error(s->c, kf_N(s->g, d)->loc, "cuda: cannot compute the constant-only '%s' at plan time: %s",
			 kf_op(s->c, kf_N(s->g, d)->op)->name, err);
	}
	return t;
}

/* ---- keys ---------------------------------------------------------------------- */

/* Longer keys are not shared: the value is computed per plan. */
#define KEY_MAX 8192

static void attr_key(kf_buf *b, kf_ctx *c, const kf_attrval *a)
{
	switch (a->kind) {
	case KF_ATTR_INT: kf_buf_printf(b, "%lld", (long long)a->i); break;
	case KF_ATTR_FLOAT: kf_buf_printf(b, "%a", a->f); break;
	case KF_ATTR_STR: kf_buf_printf(b, "\"%s\"", kf_str(c, a->s)); break;
	case KF_ATTR_BOOL: kf_buf_puts(b, a->b ? "true" : "false"); break;
	default:
		kf_buf_putc(b, '[');
		for (uint32_t i = 0; i < a->n; i++) {
			attr_key(b, c, &a->list[i]);
			kf_buf_putc(b, ',');
		}
		kf_buf_putc(b, ']');
	}
}

/* v's key appended to b: a constant's (its table key; a smaller inline
 * payload by address, which every shape's copy of the graph shares; a
 * scalar by its bits), or a hoisted node's expression; -1: none. */
static int value_key(kf_cuda_session *s, kf_vid v, kf_buf *b)
{
	kf_graph *g = s->g;
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE || b->n > KEY_MAX) /* a graph input (under `shape`) */
		return -1;
	const kf_node *x = kf_N(g, d);
	const kf_type *t = kf_vtype(g, v);
	if (x->op == KF_OP_CONST) {
		const kf_const *cst = x->cst;
		kf_buf k = {0};
		int rc = kf_cb_consts_key(g, d, &k);
		if (rc == 0) /* the table's own key: a file, a large inline payload */
			kf_buf_puts(b, k.p);
		kf_buf_free(&k);
		if (rc == 0)
			return 0;
		if (!cst || !kf_type_is_static(t) || (cst->kind != KF_CONST_DENSE && cst->kind != KF_CONST_SCALAR))
			return -1;
		kf_cb_type_key(b, t);
		if (cst->kind == KF_CONST_DENSE)
			kf_buf_printf(b, " inline %p %p %llu", (const void *)cst->f, (const void *)cst->i,
				      (unsigned long long)cst->n);
		else
			kf_buf_printf(b, " splat %llx", (unsigned long long)kf_const_elem_bits(cst, 0));
		return 0;
	}
	if (!s->hoisted[d] || x->body != KF_NONE)
		return -1; /* a fusion's body is not in the key */
	kf_buf_printf(b, "(%s", kf_op(s->c, x->op)->name);
	for (uint32_t i = 0; i < x->nattr; i++) {
		kf_buf_printf(b, " %s=", kf_str(s->c, x->attr[i].key));
		attr_key(b, s->c, &x->attr[i].v);
	}
	uint32_t r = 0;
	while (kf_res(g, d, r) != v)
		r++;
	kf_buf_printf(b, " #%u ", r);
	kf_cb_type_key(b, t);
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_buf_putc(b, ' ');
		if (value_key(s, kf_in(g, d, i), b) != 0)
			return -1;
	}
	kf_buf_putc(b, ')');
	return 0;
}

int kf_cb_hoist_key(kf_cuda_session *s, kf_vid v, kf_buf *key)
{
	kf_buf b = {0};
	kf_buf_puts(&b, "hoisted ");
	if (value_key(s, v, &b) != 0 || b.n > KEY_MAX) {
		kf_buf_free(&b);
		return -1;
	}
	kf_buf_putc(&b, '\0');
	*key = b;
	return 0;
}
