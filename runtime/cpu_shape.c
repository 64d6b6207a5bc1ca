/* cpu_shape.c: constants and the data-movement ops: transpose, reshape,
 * broadcast_to, concat, slice and split.
 *
 * All but const and concat are one strided copy: the output is contiguous
 * and the input is read at a base offset with per-dim strides (0 where it
 * broadcasts, negative for a negative slice step).  Result shapes come from
 * cpu_infer.c and are already in out[] when these run.
 */
#include <stdlib.h>
#include <string.h>
#include "cpu_ops.h"
#include "npy.h"

static void row_strides(const kf_tensor *x, int64_t *st)
{
	int64_t s = 1;
	for (int d = x->rank - 1; d >= 0; d--) {
		st[d] = s;
		s *= x->dim[d];
	}
}

/* A file("x.npy") constant: read relative to the graph's directory and
 * checked against the declared type. */
static int const_file(kf_graph *g, kf_nid n, kf_tensor *y, char *err, size_t errlen)
{
	const kf_const *k = kf_N(g, n)->cst;
	const char *path = kf_str(g->ctx, k->path), *dir = g->dir ? kf_str(g->ctx, g->dir) : "";
	kf_buf full = {0};
	if (path[0] != '/' && dir[0]) {
		kf_buf_puts(&full, dir);
		if (full.p[full.n - 1] != '/')
			kf_buf_putc(&full, '/');
	}
	kf_buf_puts(&full, path);
	kf_tensor t = {0};
	int rc = 0;
	if (kf_npy_read(g->ctx, full.p, &t) != 0) {
		rc = kf_rt_fail(err, errlen, "cannot load constant file(\"%s\")", path);
	} else if (t.dtype != y->dtype || t.rank != y->rank ||
		   memcmp(t.dim, y->dim, sizeof(int64_t) * t.rank) != 0) {
		char a[96], b[96];
		rc = kf_rt_fail(err, errlen, "%s holds %s%s, but the constant is declared %s%s", full.p,
				kf_dtype_name(t.dtype), kf_rt_shape_str(a, sizeof a, t.rank, t.dim),
				kf_dtype_name(y->dtype), kf_rt_shape_str(b, sizeof b, y->rank, y->dim));
	} else {
		memcpy(y->data, t.data, y->nbytes);
	}
	kf_tensor_free(&t);
	kf_buf_free(&full);
	return rc;
}

int kf_cpu_const(KF_RT_CPU_ARGS)
{
	const kf_const *k = kf_N(g, n)->cst;
	kf_tensor *y = &out[0];
	if (!k)
		return kf_rt_fail(err, errlen, "const node has no value");
	if (k->kind == KF_CONST_FILE)
		return const_file(g, n, y, err, errlen);
	int64_t numel = kf_tensor_numel(y);
	bool isf = kf_dtype_is_float(y->dtype);
	const void *src = isf ? (const void *)k->f : (const void *)k->i;
	if (!src && k->n)
		src = k->f ? (const void *)k->f : (const void *)k->i;
	if (!src || k->n == 0 || (k->n != 1 && (int64_t)k->n != numel))
		return kf_rt_fail(err, errlen, "constant has %llu values for %lld elements",
				  (unsigned long long)k->n, (long long)numel);
	/* a payload in the other array (ints for a float type) still converts */
	rt_kind kind = src == (const void *)k->f ? RT_F64 : RT_I64;
	if (numel == 0)
		return 0;
	if ((int64_t)k->n == numel) {
		kf_rt_store(y->dtype, y->data, kind, src, numel);
		return 0;
	}
	size_t esz = kf_dtype_size(y->dtype);
	kf_rt_store(y->dtype, y->data, kind, src, 1); /* splat by doubling copies */
	for (int64_t have = 1; have < numel; have *= 2) {
		int64_t m = numel - have < have ? numel - have : have;
		memcpy((char *)y->data + have * esz, y->data, m * esz);
	}
	return 0;
}

int kf_cpu_transpose(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	int64_t perm[KF_MAX_RANK], xs[KF_MAX_RANK], st[KF_MAX_RANK];
	int np = kf_attr_ints(g, n, "perm", perm, KF_MAX_RANK);
	if (np < 0) { /* default: reverse the dims, as ONNX */
		np = x->rank;
		for (int d = 0; d < np; d++)
			perm[d] = np - 1 - d;
	}
	if (np != x->rank)
		return kf_rt_fail(err, errlen, "perm has %d entries for rank %d", np, x->rank);
	row_strides(x, xs);
	for (int d = 0; d < np; d++) {
		int p = kf_rt_axis(perm[d], x->rank);
		if (p < 0)
			return kf_rt_fail(err, errlen, "perm entry %lld out of range", (long long)perm[d]);
		st[d] = xs[p];
	}
	kf_rt_strided_copy(out[0].data, x->data, kf_dtype_size(x->dtype), 0, out[0].rank, out[0].dim, st);
	return 0;
}

int kf_cpu_reshape(KF_RT_CPU_ARGS)
{
	if (out[0].nbytes != in[0].nbytes)
		return kf_rt_fail(err, errlen, "reshape changes the element count");
	if (out[0].nbytes)
		memcpy(out[0].data, in[0].data, out[0].nbytes);
	return 0;
}

int kf_cpu_broadcast_to(KF_RT_CPU_ARGS)
{
	int64_t st[KF_MAX_RANK];
	kf_rt_bcast_strides(&in[0], out[0].rank, st);
	kf_rt_strided_copy(out[0].data, in[0].data, kf_dtype_size(in[0].dtype), 0, out[0].rank,
			   out[0].dim, st);
	return 0;
}

int kf_cpu_concat(KF_RT_CPU_ARGS)
{
	kf_tensor *y = &out[0];
	int axis = kf_rt_axis(kf_attr_int(g, n, "axis", 0), y->rank);
	if (axis < 0)
		return kf_rt_fail(err, errlen, "axis out of range for rank %d", y->rank);
	size_t esz = kf_dtype_size(y->dtype);
	int64_t outer = kf_rt_numel(axis, y->dim), inner = kf_rt_numel(y->rank - axis - 1, y->dim + axis + 1);
	int64_t at = 0; /* position along the axis */
	for (int i = 0; i < nin; i++) {
		int64_t chunk = in[i].dim[axis] * inner * esz;
		for (int64_t o = 0; o < outer && chunk; o++)
			memcpy((char *)y->data + (o * y->dim[axis] + at) * inner * esz,
			       (const char *)in[i].data + o * chunk, chunk);
		at += in[i].dim[axis];
	}
	return 0;
}

int kf_cpu_slice(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	int64_t start[KF_MAX_RANK], step[KF_MAX_RANK], len[KF_MAX_RANK], xs[KF_MAX_RANK], st[KF_MAX_RANK];
	kf_type res = kf_tensor_type(&out[0]);
	if (kf_rt_slice_geom(g, n, x, &res, start, step, len, err, errlen) != 0)
		return -1;
	row_strides(x, xs);
	int64_t base = 0;
	for (int d = 0; d < x->rank; d++) {
		st[d] = len[d] > 1 ? step[d] * xs[d] : 0;
		/* an empty dim may start out of range: nothing is read then */
		base += len[d] ? start[d] * xs[d] : 0;
	}
	kf_rt_strided_copy(out[0].data, x->data, kf_dtype_size(x->dtype), base, x->rank, len, st);
	return 0;
}

int kf_cpu_split(KF_RT_CPU_ARGS)
{
	const kf_tensor *x = &in[0];
	int64_t sizes[256], xs[KF_MAX_RANK], dim[KF_MAX_RANK];
	if (nout > 256)
		return kf_rt_fail(err, errlen, "split into more than 256 parts");
	int axis = kf_rt_split_sizes(g, n, x, nout, sizes, err, errlen);
	if (axis < 0)
		return -1;
	row_strides(x, xs);
	memcpy(dim, x->dim, sizeof dim);
	int64_t at = 0;
	for (int i = 0; i < nout; i++) {
		dim[axis] = sizes[i];
		kf_rt_strided_copy(out[i].data, x->data, kf_dtype_size(x->dtype), at * xs[axis], x->rank,
				   dim, xs);
		at += sizes[i];
	}
	return 0;
}
