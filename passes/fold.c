/* fold.c: constant folding for canonicalize, and the constant queries its
 * identities use.
 *
 * A node folds when every operand is an inline constant (not file("...")),
 * its op has a CPU kernel (kf_op(c, op)->cpu, set by kf_rt_register), it is
 * not a region or effect, and every operand and result is static and at most
 * the size limit: the inputs are materialised as tensors, the kernel runs on
 * them, and each result becomes a `const` node, a splat when all its
 * elements are equal (bit for bit), dense otherwise.  Element-wise and shape
 * ops of splats fold at any size without materialising (fold_splats).  A kernel error leaves
 * the node alone: folding is an optimisation, and the error will show at run
 * time where the user can see it. */
#include <string.h>

#include "passes.h"
#include "view.h"
#include "tensor.h"

const kf_const *kf_fold_const_of(const kf_graph *g, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST)
		return NULL;
	const kf_const *k = kf_N(g, d)->cst;
	if (!k || k->kind == KF_CONST_FILE || k->n == 0)
		return NULL;
	return k;
}

bool kf_fold_uniform(const kf_graph *g, kf_vid v, double *out)
{
	const kf_const *k = kf_fold_const_of(g, v);
	if (!k)
		return false;
	bool fl = kf_dtype_is_float((kf_dtype)kf_vtype(g, v)->dtype);
	if (fl && !k->f)
		return false;
	if (!fl && !k->i)
		return false;
	for (uint64_t j = 1; j < k->n; j++)
		if (fl ? memcmp(&k->f[j], &k->f[0], sizeof(double)) : k->i[j] != k->i[0])
			return false;
	*out = fl ? k->f[0] : (double)k->i[0];
	return true;
}

bool kf_fold_is(const kf_graph *g, kf_vid v, double x)
{
	double u;
	return kf_fold_uniform(g, v, &u) && u == x;
}

/* Fills t (of v's static type) from v's constant payload; a splat repeats. */
static int load_const(const kf_graph *g, kf_vid v, kf_tensor *t)
{
	const kf_const *k = kf_fold_const_of(g, v);
	if (kf_tensor_alloc_type(t, kf_vtype(g, v)) < 0)
		return -1;
	int64_t n = kf_tensor_numel(t);
	if (k->n != 1 && (int64_t)k->n != n)
		return -1; /* the verifier would have said so; do not guess */
	for (int64_t j = 0; j < n; j++) {
		uint64_t s = k->n == 1 ? 0 : (uint64_t)j;
		if (k->f)
			kf_tensor_set(t, j, k->f[s]);
		else
			kf_tensor_set_i64(t, j, k->i[s]);
	}
	return 0;
}

/* A new const node of type tid before n, holding t (a splat when uniform). */
static kf_vid const_from(kf_graph *g, kf_nid n, kf_tid tid, const kf_tensor *t)
{
	kf_nid c = kf_node_new(g, kf_N(g, n)->blk, n, KF_OP_CONST, NULL, 0, &tid, 1);
	kf_N(g, c)->loc = kf_N(g, n)->loc;
	int64_t cnt = kf_tensor_numel(t);
	bool fl = kf_dtype_is_float((kf_dtype)t->dtype);
	size_t esz = kf_dtype_size((kf_dtype)t->dtype);
	bool uniform = true;
	for (int64_t j = 1; j < cnt && uniform; j++)
		uniform = !memcmp((char *)t->data + j * esz, t->data, esz);
	kf_const *k = kf_alloc(&g->arena, sizeof *k);
	k->kind = kf_type_get(g->ctx, tid)->rank == 0 ? KF_CONST_SCALAR : KF_CONST_DENSE;
	k->n = uniform ? 1 : (uint64_t)cnt;
	if (fl) {
		k->f = kf_alloc(&g->arena, k->n * sizeof *k->f);
		for (uint64_t j = 0; j < k->n; j++) /* an empty t: a splat of 0 */
			k->f[j] = cnt ? kf_tensor_get(t, (int64_t)j) : 0;
	} else {
		k->i = kf_alloc(&g->arena, k->n * sizeof *k->i);
		for (uint64_t j = 0; j < k->n; j++)
			k->i[j] = cnt ? kf_tensor_get_i64(t, (int64_t)j) : 0;
	}
	kf_N(g, c)->cst = k;
	return kf_res(g, c, 0);
}

kf_vid kf_fold_splat(kf_graph *g, kf_nid before, kf_tid tid, double v)
{
	kf_nid c = kf_node_new(g, kf_N(g, before)->blk, before, KF_OP_CONST, NULL, 0, &tid, 1);
	kf_N(g, c)->loc = kf_N(g, before)->loc;
	const kf_type *t = kf_type_get(g->ctx, tid);
	kf_const *k = kf_alloc(&g->arena, sizeof *k);
	k->kind = t->rank == 0 ? KF_CONST_SCALAR : KF_CONST_DENSE;
	k->n = 1;
	if (kf_dtype_is_float((kf_dtype)t->dtype)) {
		k->f = kf_alloc(&g->arena, sizeof *k->f);
		k->f[0] = v;
	} else {
		k->i = kf_alloc(&g->arena, sizeof *k->i);
		k->i[0] = (int64_t)v;
	}
	kf_N(g, c)->cst = k;
	return kf_res(g, c, 0);
}

static bool foldable(const kf_graph *g, kf_nid n, int64_t max)
{
	const kf_node *nd = kf_N(g, n);
	const kf_opinfo *oi = kf_op(g->ctx, nd->op);
	/* an operand-free op folds when it computes a value (iota), never when
	 * it has an effect or stands for an op kfuse lacks (opaque) */
	if (!oi->cpu || nd->op == KF_OP_CONST || (nd->nin == 0 && nd->op != KF_OP_IOTA) || nd->nres == 0 ||
	    nd->nres > KF_MAX_RANK || nd->nin > 16 || (oi->flags & (KF_OPF_REGION | KF_OPF_EFFECT | KF_OPF_TERMINATOR)))
		return false;
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		int64_t ne = kf_type_numel(kf_vtype(g, v));
		/* an empty operand is fine (exporters concatenate an empty
		 * ConstantOfShape onto F.pad's pads: MobileBERT) */
		if (!kf_fold_const_of(g, v) || ne < 0 || ne > max)
			return false;
	}
	for (uint32_t i = 0; i < nd->nres; i++) {
		/* An empty result has no element to make a splat of, and an empty
		 * dense payload is not worth a special case. */
		int64_t ne = kf_type_numel(kf_vtype(g, kf_res(g, n, i)));
		if (ne < 1 || ne > max)
			return false;
	}
	return true;
}

/* Splat operands: an element-wise op computes one element, whatever the
 * shapes (the kernels work from tensor shapes, so rank-0 tensors do); an
 * injective op (transpose, reshape, slice, ...) or broadcast_to of splats of
 * one value gives that value everywhere.  No size limit: nothing is
 * materialised.  Returns 1 when n folded this way. */
static int fold_splats(kf_graph *g, kf_nid n, kf_vid *out)
{
	const kf_node *nd = kf_N(g, n);
	const kf_opinfo *oi = kf_op(g->ctx, nd->op);
	if (!oi->cpu || nd->op == KF_OP_CONST || nd->nin == 0 || nd->nin > 16 || nd->nres == 0 ||
	    nd->nres > KF_MAX_RANK || (oi->flags & (KF_OPF_REGION | KF_OPF_EFFECT | KF_OPF_TERMINATOR)))
		return 0;
	/* pad is injective but for its constant, which a splat of x is not */
	bool move = (oi->trait == KF_TRAIT_INJECTIVE && nd->op != KF_OP_PAD) || nd->op == KF_OP_BROADCAST_TO;
	if (!move && oi->trait != KF_TRAIT_ELEMENTWISE && oi->trait != KF_TRAIT_BROADCAST)
		return 0;
	for (uint32_t i = 0; i < nd->nin; i++) {
		double u;
		if (!kf_fold_uniform(g, kf_in(g, n, i), &u))
			return 0;
	}
	for (uint32_t i = 0; i < nd->nres; i++)
		if (kf_type_numel(kf_vtype(g, kf_res(g, n, i))) < 1)
			return 0; /* symbolic or empty: a splat could not say its size */
	kf_tensor in[16], res[KF_MAX_RANK];
	uint32_t nin = nd->nin, nres = nd->nres;
	int ok = 0;
	memset(in, 0, sizeof in);
	memset(res, 0, sizeof res);
	for (uint32_t li = 0; li < nin; li++) {
		kf_vid v = kf_in(g, n, li);
		const kf_const *k = kf_fold_const_of(g, v);
		if (kf_tensor_alloc(&in[li], (kf_dtype)kf_vtype(g, v)->dtype, 0, NULL) < 0)
			goto done;
		if (k->f)
			kf_tensor_set(&in[li], 0, k->f[0]);
		else
			kf_tensor_set_i64(&in[li], 0, k->i[0]);
		if (move && (li > 0 && (in[li].dtype != in[0].dtype || memcmp(in[li].data, in[0].data, in[0].nbytes))))
			goto done; /* concat of different splats is not a splat */
	}
	for (uint32_t lr = 0; lr < nres; lr++) {
		kf_dtype dt = (kf_dtype)kf_vtype(g, kf_res(g, n, lr))->dtype;
		if (move ? kf_tensor_copy(&res[lr], &in[0]) < 0 || dt != in[0].dtype
			 : kf_tensor_alloc(&res[lr], dt, 0, NULL) < 0)
			goto done;
	}
	char err[256] = "";
	if (!move && oi->cpu(g, n, in, (int)nin, res, (int)nres, err, sizeof err) < 0)
		goto done;
	for (uint32_t i = 0; i < nres; i++)
		out[i] = const_from(g, n, kf_V(g, kf_res(g, n, i))->type, &res[i]);
	ok = 1;
done:
	/* zeroed slots are safe to free, so free them all */
	for (uint32_t i = 0; i < nin; i++)
		kf_tensor_free(&in[i]);
	for (uint32_t i = 0; i < nres; i++)
		kf_tensor_free(&res[i]);
	return ok;
}

/* Whether dims [lo, hi) of shape node n's operand are static (its result's
 * range, attributes start and end). */
static bool shape_static(const kf_graph *g, kf_nid n)
{
	const kf_type *x = kf_vtype(g, kf_in(g, n, 0));
	int64_t lo = kf_attr_int(g, n, "start", 0), hi = kf_attr_int(g, n, "end", x->rank);
	kf_shape_range(x->rank, &lo, &hi);
	for (int64_t d = lo; d < hi; d++)
		if (KF_IS_SYM(x->dim[d]))
			return false;
	return true;
}

/* slice(shape(x)) of the static dims of an x whose other dims are
 * symbolic (an exporter's v.size(-1) under dynamic axes): those dims. */
static int fold_shape_slice(kf_graph *g, kf_nid n, kf_nid sh, kf_vid *out)
{
	const kf_type *x = kf_vtype(g, kf_in(g, sh, 0)), *rt = kf_vtype(g, kf_res(g, n, 0));
	int64_t start[KF_MAX_RANK], step[KF_MAX_RANK], cnt = kf_type_numel(rt);
	if (rt->rank != 1 || cnt < 0 || !kf_slice_geom(g, n, start, step))
		return 0;
	kf_tensor t;
	if (kf_tensor_alloc_type(&t, rt) < 0)
		return 0;
	int64_t xlo = kf_attr_int(g, sh, "start", 0), xhi = kf_attr_int(g, sh, "end", x->rank);
	kf_shape_range(x->rank, &xlo, &xhi);
	int ok = 1;
	for (int64_t i = 0; i < cnt && ok; i++) {
		int64_t d = xlo + start[0] + i * step[0];
		ok = d >= xlo && d < xhi && !KF_IS_SYM(x->dim[d]);
		if (ok)
			kf_tensor_set_i64(&t, i, x->dim[d]);
	}
	if (ok)
		out[0] = const_from(g, n, kf_V(g, kf_res(g, n, 0))->type, &t);
	kf_tensor_free(&t);
	return ok;
}

/* shape(x) of the static dims of x: those dims, whatever x's values (x
 * need not be a constant; the kernel reads only its shape). */
static int fold_shape(kf_graph *g, kf_nid n, kf_vid *out)
{
	const kf_type *x = kf_vtype(g, kf_in(g, n, 0));
	kf_tensor in = {.dtype = x->dtype, .rank = x->rank}, t;
	memcpy(in.dim, x->dim, sizeof in.dim); /* the symbolic ones are not read */
	kf_cpu_fn cpu = kf_op(g->ctx, KF_OP_SHAPE)->cpu;
	char err[64];
	if (!cpu || kf_tensor_alloc_type(&t, kf_vtype(g, kf_res(g, n, 0))) < 0)
		return 0;
	int ok = cpu(g, n, &in, 1, &t, 1, err, sizeof err) == 0;
	if (ok)
		out[0] = const_from(g, n, kf_V(g, kf_res(g, n, 0))->type, &t);
	kf_tensor_free(&t);
	return ok;
}

int kf_fold_node(kf_graph *g, kf_nid n, int64_t max, kf_vid *out)
{
	/* The common case first and cheaply: some operand is not a constant. */
	const kf_node *nd = kf_N(g, n);
	if (nd->op == KF_OP_SHAPE && shape_static(g, n))
		return fold_shape(g, n, out);
	if (nd->op == KF_OP_SLICE && kf_def(g, kf_in(g, n, 0)) != KF_NONE &&
	    kf_N(g, kf_def(g, kf_in(g, n, 0)))->op == KF_OP_SHAPE)
		return fold_shape_slice(g, n, kf_def(g, kf_in(g, n, 0)), out);
	if (nd->nin == 0 && nd->op != KF_OP_IOTA)
		return 0;
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_nid d = kf_def(g, kf_in(g, n, i));
		if (d == KF_NONE || kf_N(g, d)->op != KF_OP_CONST)
			return 0;
	}
	if (fold_splats(g, n, out))
		return 1;
	if (!foldable(g, n, max))
		return 0;
	kf_tensor in[16], res[KF_MAX_RANK];
	uint32_t nin = kf_N(g, n)->nin, nres = kf_N(g, n)->nres, li = 0, lr = 0;
	int ok = 0;
	memset(in, 0, sizeof in);
	memset(res, 0, sizeof res);
	for (; li < nin; li++)
		if (load_const(g, kf_in(g, n, li), &in[li]) < 0)
			goto done;
	for (; lr < nres; lr++)
		if (kf_tensor_alloc_type(&res[lr], kf_vtype(g, kf_res(g, n, lr))) < 0)
			goto done;
	char err[256] = "";
	if (kf_op(g->ctx, kf_N(g, n)->op)->cpu(g, n, in, (int)nin, res, (int)nres, err, sizeof err) < 0)
		goto done;
	for (uint32_t i = 0; i < nres; i++) {
		kf_tid tid = kf_V(g, kf_res(g, n, i))->type;
		out[i] = const_from(g, n, tid, &res[i]);
	}
	ok = 1;
done:
	for (uint32_t i = 0; i < li; i++)
		kf_tensor_free(&in[i]);
	for (uint32_t i = 0; i < lr; i++)
		kf_tensor_free(&res[i]);
	return ok;
}
