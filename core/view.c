/* view.c: strided views through chains of layout ops (view.h). */
#include <string.h>
#include "view.h"

/* Drops factors of extent 1 and merges a factor into the one before it
 * when together they step through memory as one (s_outer = s_inner *
 * e_inner: a contiguous pair, or two repeats). */
static void canon_dim(kf_view_dim *d)
{
	int n = 0;
	for (int k = 0; k < d->nf; k++) {
		if (d->ext[k] == 1)
			continue;
		if (n > 0 && d->stride[n - 1] == d->stride[k] * d->ext[k]) {
			d->ext[n - 1] *= d->ext[k];
			d->stride[n - 1] = d->stride[k];
			continue;
		}
		d->ext[n] = d->ext[k];
		d->stride[n] = d->stride[k];
		n++;
	}
	d->nf = n;
}

bool kf_view_init(kf_view *v, const kf_type *t)
{
	memset(v, 0, sizeof *v);
	if (!kf_type_is_static(t))
		return false;
	v->rank = t->rank;
	int64_t s = 1;
	for (int d = t->rank - 1; d >= 0; d--) {
		if (t->dim[d] == 0)
			return false;
		v->d[d].size = t->dim[d];
		v->d[d].nf = 1;
		v->d[d].ext[0] = t->dim[d];
		v->d[d].stride[0] = s;
		canon_dim(&v->d[d]);
		s *= t->dim[d];
	}
	return true;
}

bool kf_view_transpose(kf_view *v, const int64_t *perm, int rank)
{
	if (rank != v->rank)
		return false;
	kf_view_dim old[KF_MAX_RANK];
	bool seen[KF_MAX_RANK] = {false};
	memcpy(old, v->d, sizeof old);
	for (int i = 0; i < rank; i++) {
		int64_t p = perm[i] < 0 ? perm[i] + rank : perm[i];
		if (p < 0 || p >= rank || seen[p])
			return false;
		seen[p] = true;
		v->d[i] = old[p];
	}
	return true;
}

bool kf_view_reshape(kf_view *v, const int64_t *dims, int rank)
{
	/* the factors of every dim, outermost first: the elements in order */
	int64_t ext[KF_MAX_RANK * KF_VIEW_MAXF], st[KF_MAX_RANK * KF_VIEW_MAXF];
	int na = 0, at = 0;
	int64_t n0 = 1, n1 = 1;
	for (int d = 0; d < v->rank; d++) {
		n0 *= v->d[d].size;
		for (int k = 0; k < v->d[d].nf; k++) {
			ext[na] = v->d[d].ext[k];
			st[na++] = v->d[d].stride[k];
		}
	}
	if (rank < 0 || rank > KF_MAX_RANK)
		return false;
	for (int i = 0; i < rank; i++) {
		if (dims[i] <= 0)
			return false;
		n1 *= dims[i];
	}
	if (n0 != n1)
		return false;
	kf_view nv = {.rank = rank, .off = v->off};
	for (int i = 0; i < rank; i++) {
		kf_view_dim *d = &nv.d[i];
		int64_t e[KF_MAX_RANK * KF_VIEW_MAXF], s[KF_MAX_RANK * KF_VIEW_MAXF];
		int n = 0;
		int64_t need = dims[i];
		d->size = dims[i];
		while (need > 1) {
			if (at == na)
				return false;
			if (ext[at] <= need) {
				if (need % ext[at] != 0)
					return false;
				need /= ext[at];
				e[n] = ext[at];
				s[n++] = st[at++];
			} else {
				/* the factor is split: its outer part goes here */
				if (ext[at] % need != 0)
					return false;
				int64_t inner = ext[at] / need;
				e[n] = need;
				s[n++] = st[at] * inner;
				ext[at] = inner;
				need = 1;
			}
		}
		kf_view_dim t = {.size = dims[i], .nf = n};
		if (n > KF_VIEW_MAXF) {
			/* merge first, then check the count */
			int m = 0;
			for (int k = 0; k < n; k++) {
				if (m > 0 && s[m - 1] == s[k] * e[k]) {
					e[m - 1] *= e[k];
					s[m - 1] = s[k];
				} else {
					e[m] = e[k];
					s[m++] = s[k];
				}
			}
			if (m > KF_VIEW_MAXF)
				return false;
			n = m;
			t.nf = m;
		}
		memcpy(t.ext, e, (size_t)n * sizeof *e);
		memcpy(t.stride, s, (size_t)n * sizeof *s);
		canon_dim(&t);
		*d = t;
	}
	if (at != na)
		return false;
	*v = nv;
	return true;
}

bool kf_view_broadcast(kf_view *v, const int64_t *dims, int rank)
{
	if (rank < v->rank || rank > KF_MAX_RANK)
		return false;
	kf_view nv = {.rank = rank, .off = v->off};
	int lead = rank - v->rank;
	for (int i = 0; i < rank; i++) {
		if (dims[i] <= 0)
			return false;
		kf_view_dim *d = &nv.d[i];
		if (i >= lead && v->d[i - lead].size == dims[i]) {
			*d = v->d[i - lead];
			continue;
		}
		if (i >= lead && v->d[i - lead].size != 1)
			return false;
		d->size = dims[i];
		d->nf = dims[i] > 1;
		d->ext[0] = dims[i];
		d->stride[0] = 0;
	}
	*v = nv;
	return true;
}

bool kf_view_slice(kf_view *v, int axis, int64_t start, int64_t step, int64_t len)
{
	if (axis < 0 || axis >= v->rank || len <= 0 || step == 0)
		return false;
	kf_view_dim *d = &v->d[axis];
	if (start < 0 || start >= d->size || start + (len - 1) * step < 0 || start + (len - 1) * step >= d->size)
		return false;
	int64_t s = d->nf ? d->stride[0] : 0;
	if (d->nf > 1)
		return false;
	v->off += start * s;
	d->size = len;
	d->nf = len > 1;
	d->ext[0] = len;
	d->stride[0] = s * step;
	return true;
}

bool kf_slice_geom(const kf_graph *g, kf_nid n, int64_t *start, int64_t *step)
{
	const kf_type *in = kf_vtype(g, kf_in(g, n, 0));
	int64_t st[KF_MAX_RANK], ax[KF_MAX_RANK], sp[KF_MAX_RANK];
	int ns = kf_attr_ints(g, n, "starts", st, KF_MAX_RANK);
	int na = kf_attr_ints(g, n, "axes", ax, KF_MAX_RANK);
	int nsp = kf_attr_ints(g, n, "steps", sp, KF_MAX_RANK);
	for (int d = 0; d < in->rank; d++) {
		start[d] = 0;
		step[d] = 1;
	}
	if (ns < 0 || ns > KF_MAX_RANK)
		return false;
	for (int i = 0; i < ns; i++) {
		int64_t a = na > i ? ax[i] : i;
		if (a < 0)
			a += in->rank;
		if (a < 0 || a >= in->rank || KF_IS_SYM(in->dim[a]))
			return false;
		/* ONNX: a negative start counts from the end, then clamps to
		 * [0, d] going forward and [0, d - 1] going backward */
		int64_t D = in->dim[a], s = st[i], p = nsp > i ? sp[i] : 1;
		if (s < 0)
			s += D;
		if (p > 0)
			s = s < 0 ? 0 : s > D ? D : s;
		else
			s = s < 0 ? 0 : s > D - 1 ? D - 1 : s;
		start[a] = s;
		step[a] = p;
	}
	return true;
}

static int perm_of(const kf_graph *g, kf_nid n, int rank, int64_t *perm)
{
	if (kf_attr_ints(g, n, "perm", perm, KF_MAX_RANK) != rank)
		for (int d = 0; d < rank; d++)
			perm[d] = rank - 1 - d;
	return rank;
}

bool kf_view_through(const kf_graph *g, kf_nid n, uint32_t res, kf_view *v)
{
	const kf_node *x = kf_N(g, n);
	if (x->nin < 1 || res >= x->nres)
		return false;
	const kf_type *in = kf_vtype(g, kf_in(g, n, 0)), *out = kf_vtype(g, kf_res(g, n, res));
	if (!kf_type_is_static(in) || !kf_type_is_static(out) || in->rank != v->rank)
		return false;
	switch (x->op) {
	case KF_OP_TRANSPOSE: {
		int64_t perm[KF_MAX_RANK];
		return kf_view_transpose(v, perm, perm_of(g, n, in->rank, perm));
	}
	case KF_OP_RESHAPE:
		return kf_view_reshape(v, out->dim, out->rank);
	case KF_OP_BROADCAST_TO:
		return kf_view_broadcast(v, out->dim, out->rank);
	case KF_OP_SLICE: {
		int64_t start[KF_MAX_RANK], step[KF_MAX_RANK];
		if (!kf_slice_geom(g, n, start, step))
			return false;
		for (int d = 0; d < in->rank; d++)
			if ((start[d] != 0 || step[d] != 1 || out->dim[d] != in->dim[d]) &&
			    !kf_view_slice(v, d, start[d], step[d], out->dim[d]))
				return false;
		return true;
	}
	case KF_OP_SPLIT: {
		int a = (int)kf_attr_int(g, n, "axis", 0);
		if (a < 0)
			a += in->rank;
		if (a < 0 || a >= in->rank)
			return false;
		int64_t start = 0;
		for (uint32_t r = 0; r < res; r++)
			start += kf_vtype(g, kf_res(g, n, r))->dim[a];
		return kf_view_slice(v, a, start, 1, out->dim[a]);
	}
	default:
		return false;
	}
}

bool kf_view_back_through(const kf_graph *g, kf_nid n, kf_view *v)
{
	const kf_node *x = kf_N(g, n);
	if (x->nin != 1 || x->nres != 1)
		return false;
	const kf_type *in = kf_vtype(g, kf_in(g, n, 0)), *out = kf_vtype(g, kf_res(g, n, 0));
	if (!kf_type_is_static(in) || !kf_type_is_static(out) || out->rank != v->rank)
		return false;
	switch (x->op) {
	case KF_OP_TRANSPOSE: {
		int64_t perm[KF_MAX_RANK], inv[KF_MAX_RANK];
		perm_of(g, n, in->rank, perm);
		for (int d = 0; d < in->rank; d++) {
			int64_t p = perm[d] < 0 ? perm[d] + in->rank : perm[d];
			if (p < 0 || p >= in->rank)
				return false;
			inv[p] = d;
		}
		return kf_view_transpose(v, inv, in->rank);
	}
	case KF_OP_RESHAPE:
		return kf_view_reshape(v, in->dim, in->rank);
	default:
		return false;
	}
}

int64_t kf_view_offset(const kf_view *v, const int64_t *idx)
{
	int64_t o = v->off;
	for (int d = 0; d < v->rank; d++) {
		const kf_view_dim *x = &v->d[d];
		int64_t inner = x->size;
		for (int k = 0; k < x->nf; k++) {
			inner /= x->ext[k];
			o += (idx[d] / inner) % x->ext[k] * x->stride[k];
		}
	}
	return o;
}

int64_t kf_view_stride(const kf_view *v, int d)
{
	const kf_view_dim *x = &v->d[d];
	return x->nf == 0 ? 0 : x->nf == 1 ? x->stride[0] : -1;
}
