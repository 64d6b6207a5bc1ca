/* cuda_memory.c: the plan's device memory (see cuda_backend_int.h):
 * inputs and the constants and hoisted results a step reads in buffers of
 * their own (shared between plans of one backend), kernels' results in
 * one arena at offsets from their live ranges, and each step's arguments
 * bound to them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"
#include "tensor.h"

/* bytes: every buffer and arena offset a multiple of it */
#define ALIGN 256

typedef struct iv {
	kf_vid v;
	uint32_t def, last;
	size_t size, off;
} iv;

static size_t vbytes(kf_graph *g, kf_vid v)
{
	const kf_type *t = kf_vtype(g, v);
	size_t n = (size_t)kf_type_numel(t) * kf_dtype_size((kf_dtype)t->dtype);
	return (n + ALIGN - 1) / ALIGN * ALIGN + (n == 0 ? ALIGN : 0);
}

static int cmp_off(const void *a, const void *b)
{
	const iv *x = *(iv *const *)a, *y = *(iv *const *)b;
	return (x->off > y->off) - (x->off < y->off);
}

static int own_buffer(kf_cuda_session *s, kf_vid v, size_t n)
{
	s->own = realloc(s->own, (s->nown + 1) * sizeof *s->own);
	if (s->cu && kf_cuda_malloc(s->cu, n, &s->own[s->nown]) != 0)
		return -1;
	s->vptr[v] = s->cu ? s->own[s->nown++] : 0;
	return 0;
}

/* Records that the plan holds the shared constant of key (taking key's
 * text); the table already counts it. */
static int hold_shared(kf_cuda_session *s, kf_buf *key)
{
	char **k = realloc(s->shared, (s->nshared + 1) * sizeof *k);
	if (!k) {
		kf_error(s->c, KF_NOLOC, "cuda: out of memory");
		return -1;
	}
	s->shared = k;
	s->shared[s->nshared++] = key->p;
	*key = (kf_buf){0};
	return 0;
}

/* Whether a step or the return (ret, KF_NONE if none) reads root value v. */
static bool read_by_plan(kf_cuda_session *s, kf_nid ret, kf_vid v)
{
	for (uint32_t i = 0; i < s->nst; i++)
		for (uint32_t j = 0; j < s->st[i].k.nin; j++)
			if (kf_cb_root(s, s->st[i].k.in[j]) == v)
				return true;
	for (uint32_t j = 0; ret != KF_NONE && j < kf_N(s->g, ret)->nin; j++)
		if (kf_cb_root(s, kf_in(s->g, ret, j)) == v)
			return true;
	return false;
}

/* Value v's data on the host: a const node's payload materialised into
 * tmp (the interpreter's const kernel), or a hoisted result; NULL with an
 * error. */
static const kf_tensor *host_value(kf_cuda_session *s, kf_vid v, kf_tensor *tmp)
{
	kf_graph *g = s->g;
	kf_nid n = kf_def(g, v);
	if (kf_N(g, n)->op != KF_OP_CONST)
		return kf_cb_hoisted_value(s, v);
	char err[256] = "";
	if (kf_tensor_alloc_type(tmp, kf_vtype(g, v)) != 0 ||
	    kf_op(s->c, KF_OP_CONST)->cpu(g, n, NULL, 0, tmp, 1, err, sizeof err) != 0) {
		kf_error(s->c, kf_N(g, n)->loc, "cuda: cannot materialise the constant: %s", err);
		return NULL;
	}
	return tmp;
}

/* Uploads constant or hoisted value v; with a key (key->p), the backend's
 * table shares it: a value another plan uploaded is that plan's buffer,
 * read and computed by none (cuda_consts.c).  Takes key's text. */
static int upload_value(kf_cuda_session *s, kf_vid v, kf_buf *key)
{
	kf_graph *g = s->g;
	kf_cuptr p = 0;
	bool share = key->p && s->consts;
	if (share && kf_cb_consts_get(s->consts, key->p, &p)) {
		s->vptr[v] = p;
		s->stats.shared_bytes += (int64_t)vbytes(g, v);
		return hold_shared(s, key);
	}
	kf_tensor tmp = {0};
	const kf_tensor *t = host_value(s, v, &tmp);
	int rc = -1;
	if (!t)
		goto out;
	if (share) { /* the backend's table owns the buffer */
		s->stats.file_bytes += (int64_t)vbytes(g, v);
		if (s->cu && kf_cuda_malloc(s->cu, vbytes(g, v), &p) != 0)
			goto out;
		s->vptr[v] = p;
		if (kf_cb_consts_put(s->consts, key->p, p) != 0) {
			if (p)
				kf_cuda_free(s->cu, p);
			kf_error(s->c, KF_NOLOC, "cuda: out of memory");
			goto out;
		}
		rc = hold_shared(s, key);
	} else {
		rc = own_buffer(s, v, vbytes(g, v));
	}
	if (rc == 0 && s->cu && t->nbytes)
		rc = kf_cuda_h2d(s->cu, s->vptr[v], t->data, t->nbytes);
out:
	kf_tensor_free(&tmp);
	kf_buf_free(key);
	return rc;
}

/* Places every kernel-written buffer in one arena: a buffer may reuse the
 * space of buffers whose last reader ran before it is written. */
static int plan_memory(kf_cuda_session *s)
{
	kf_graph *g = s->g;
	uint32_t nv = g->nval;
	uint32_t *def = malloc(nv * sizeof *def), *last = malloc(nv * sizeof *last);
	for (uint32_t v = 0; v < nv; v++)
		def[v] = last[v] = KF_NONE;
	for (uint32_t i = 0; i < s->nst; i++) {
		const kf_kernel *k = &s->st[i].k;
		for (uint32_t j = 0; j < k->nin; j++)
			last[kf_cb_root(s, k->in[j])] = i;
		for (uint32_t j = 0; j < k->nout; j++) {
			kf_vid r = kf_cb_root(s, k->out[j]);
			if (def[r] == KF_NONE)
				def[r] = i;
			if (last[r] == KF_NONE || last[r] < i)
				last[r] = i;
		}
	}
	kf_nid ret = kf_block_terminator(g, 0);
	for (uint32_t j = 0; ret != KF_NONE && j < kf_N(g, ret)->nin; j++)
		last[kf_cb_root(s, kf_in(g, ret, j))] = s->nst; /* graph outputs live to the end */
	iv *a = malloc((nv + 1) * sizeof *a);
	iv **act = malloc((nv + 1) * sizeof *act);
	uint32_t na = 0;
	size_t top = 0, naive = 0;
	for (uint32_t i = 0; i < s->nst; i++) /* in def order */
		for (uint32_t j = 0; j < s->st[i].k.nout; j++) {
			kf_vid r = kf_cb_root(s, s->st[i].k.out[j]);
			if (def[r] != i || s->vptr[r])
				continue;
			bool seen = false;
			for (uint32_t q = 0; q < na && !seen; q++)
				seen = a[q].v == r;
			if (seen)
				continue;
			size_t size = vbytes(g, r);
			naive += size;
			uint32_t nact = 0;
			for (uint32_t q = 0; q < na; q++)
				if (a[q].last >= i)
					act[nact++] = &a[q];
			qsort(act, nact, sizeof *act, cmp_off);
			size_t off = 0;
			for (uint32_t q = 0; q < nact; q++) {
				if (act[q]->off >= off + size)
					break;
				if (act[q]->off + act[q]->size > off)
					off = act[q]->off + act[q]->size;
			}
			a[na++] = (iv){r, i, last[r], size, off};
			if (off + size > top)
				top = off + size;
		}
	s->stats.arena_bytes = top;
	s->stats.naive_bytes = naive;
	int rc = 0;
	if (s->cu && top && kf_cuda_malloc(s->cu, top, &s->arena) != 0)
		rc = -1;
	for (uint32_t q = 0; q < na; q++)
		s->vptr[a[q].v] = s->arena + a[q].off;
	free(a);
	free(act);
	free(def);
	free(last);
	return rc;
}

/* The parameter values of every step: buffer addresses, then the tensor
 * maps encoded from them (once per plan: the buffers stay put, and a CUDA
 * graph captures the values). */
static int bind_args(kf_cuda_session *s)
{
	for (uint32_t i = 0; i < s->nst; i++) {
		step *t = &s->st[i];
		uint32_t n = t->k.nin + t->k.nout;
		free(t->ptr);
		free(t->args);
		free(t->tm);
		t->tm = NULL;
		t->ptr = malloc((n + 1) * sizeof *t->ptr);
		t->args = malloc((n + 4 + KF_EMIT_MAXSYM) * sizeof *t->args);
		for (uint32_t j = 0; j < n; j++) {
			kf_vid v = j < t->k.nin ? t->k.in[j] : t->k.out[j - t->k.nin];
			t->ptr[j] = s->vptr[kf_cb_root(s, v)];
			t->args[j] = &t->ptr[j];
		}
		/* the sizes a sized plan's kernel reads, after its tensor maps:
		 * int or long long, as its text declares them */
		uint32_t na = n + (uint32_t)(kf_cb_lib(t) ? 0 : t->k.ntmap);
		for (uint32_t i = 0, j = 0; i < s->dyn.n && !kf_cb_lib(t); i++) {
			if (!(t->k.kd >> i & 1))
				continue;
			int32_t v32 = (int32_t)s->dyn.val[i];
			if (t->k.kd64)
				t->kdv[j] = s->dyn.val[i];
			else /* the first 4 bytes of the slot hold the int */
				memcpy(&t->kdv[j], &v32, sizeof v32);
			t->args[na++] = &t->kdv[j++];
		}
		if (t->blas && s->cu && !(t->bop = kf_cublas_prepare(s->blas, &t->bg, t->ptr[0], t->ptr[1], t->ptr[2]))) {
			kf_note(s->c, kf_N(s->g, t->k.node)->loc, "cuda: the cuBLAS GEMM of this node");
			return -1;
		}
		if (!t->k.ntmap || !s->cu || kf_cb_lib(t))
			continue;
		t->tm = aligned_alloc(64, (size_t)t->k.ntmap * sizeof *t->tm);
		if (kf_cuda_kernel_tmaps(s->cu, &t->k, t->ptr, t->tm) != 0) {
			kf_note(s->c, kf_N(s->g, t->k.node)->loc, "cuda: the tensor maps of %s", t->k.name);
			return -1;
		}
		for (int j = 0; j < t->k.ntmap; j++)
			t->args[n + (uint32_t)j] = &t->tm[j];
	}
	return 0;
}

int kf_cb_memory(kf_cuda_session *s)
{
	kf_graph *g = s->g;
	int rc = 0;
	double tp = kf_cb_now();
	/* inputs and constants own their buffers; kernels' outputs share the arena */
	for (uint32_t i = 0; rc == 0 && i < g->blk[0].narg; i++)
		rc = own_buffer(s, g->blk[0].arg[i], vbytes(g, g->blk[0].arg[i]));
	/* constants some step (or the graph's return) reads; body constants
	 * are embedded in their kernel unless the body was split */
	kf_nid ret = kf_block_terminator(g, 0);
	for (uint32_t b = 0; rc == 0 && b < g->nblk; b++)
		kf_foreach_node(g, b, n) {
			if (rc != 0 || kf_N(g, n)->op != KF_OP_CONST || (kf_N(g, n)->flags & KF_NODE_DEAD))
				continue;
			kf_vid v = kf_res(g, n, 0);
			kf_buf key = {0};
			if (read_by_plan(s, ret, v)) {
				kf_cb_consts_key(g, n, &key);
				rc = upload_value(s, v, &key);
			}
		}
	/* hoisted results some step or the return reads */
	for (uint32_t v = 0; rc == 0 && v < g->nval; v++) {
		kf_buf key = {0};
		if (!kf_cb_is_hoisted(s, v) || kf_cb_root(s, v) != v || !read_by_plan(s, ret, v))
			continue;
		kf_cb_hoist_key(s, v, &key);
		rc = upload_value(s, v, &key);
	}
	kf_cb_hoist_free(s);
	s->stats.upload_s = kf_cb_now() - tp;
	tp = kf_cb_now();
	if (rc == 0)
		rc = plan_memory(s);
	if (rc == 0)
		rc = bind_args(s);
	s->stats.memory_s = kf_cb_now() - tp;
	return rc;
}
