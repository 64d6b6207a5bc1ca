/* cublas.c: cuBLAS through dlopen (see cublas.h).  Row-major C = A B is
 * column-major C^T = B^T A^T: cuBLAS gets (m, n, k) = (N, M, K) and the
 * operands swapped, each transposed when it is stored transposed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cublas.h"

/* the few values of cublas_api.h and library_types.h we use */
enum { OP_N = 0, OP_T = 1 };
enum { R_32F = 0, R_64F = 1, R_16F = 2, R_16BF = 14 };
enum { COMPUTE_32F = 68, COMPUTE_64F = 70 };
#define GEMM_DEFAULT (-1)
#define WORKSPACE (32u << 20)

typedef int (*create_fn)(void **);
typedef int (*destroy_fn)(void *);
typedef int (*stream_fn)(void *, void *);
typedef int (*ws_fn)(void *, void *, size_t);
typedef int (*gemm_fn)(void *, int, int, int, int, int, const void *, const void *, int, int, long long,
		       const void *, int, int, long long, const void *, void *, int, int, long long, int, int, int);

/* What a cuBLAS and a cuBLASLt handle both hold: the library, its handle
 * (freed by destroy) and the workspace kfuse gives it. */
typedef struct blas_lib {
	kf_ctx *c;
	kf_cuda *cu;
	void *lib, *h;
	kf_cuptr ws;
	destroy_fn destroy;
} blas_lib;

/* Loads $env when set, else BASE.so.13, BASE.so.12, BASE.so, then
 * BASE.so under $CUDA_HOME/lib64 and /usr/local/cuda/lib64; fills l (its
 * destroy from the symbol `destroy`) and returns 0, or -1 with why. */
static int blas_load(blas_lib *l, kf_ctx *c, kf_cuda *cu, const char *env, const char *base, const char *destroy,
		     char *loaded, size_t nloaded, char *why, size_t nwhy)
{
	char v13[64], v12[64], so[64], p1[512], p2[512];
	const char *e = getenv(env), *home = getenv("CUDA_HOME");
	snprintf(v13, sizeof v13, "%s.so.13", base);
	snprintf(v12, sizeof v12, "%s.so.12", base);
	snprintf(so, sizeof so, "%s.so", base);
	snprintf(p1, sizeof p1, "%s/lib64/%s.so", home ? home : "/usr/local/cuda", base);
	snprintf(p2, sizeof p2, "/usr/local/cuda/lib64/%s.so", base);
	const char *names[] = {v13, v12, so, p1, p2}, *only[] = {e};
	void *lib = e && *e ? kf_cuda_dlopen_first(only, 1, loaded, nloaded, why, nwhy)
			    : kf_cuda_dlopen_first(names, 5, loaded, nloaded, why, nwhy);
	if (!lib)
		return -1;
	*l = (blas_lib){.c = c, .cu = cu, .lib = lib, .destroy = (destroy_fn)dlsym(lib, destroy)};
	return 0;
}

static void blas_close(blas_lib *l)
{
	if (l->h)
		l->destroy(l->h);
	if (l->ws)
		kf_cuda_free(l->cu, l->ws);
	dlclose(l->lib);
}

struct kf_cublas {
	blas_lib l;
	stream_fn set_stream;
	gemm_fn gemm;
};

kf_cublas *kf_cublas_open(kf_ctx *c, kf_cuda *cu)
{
	char loaded[512], why[1024];
	kf_cublas *b = calloc(1, sizeof *b);
	if (blas_load(&b->l, c, cu, "KFUSE_CUBLAS_LIB", "libcublas", "cublasDestroy_v2", loaded, sizeof loaded, why,
		      sizeof why) != 0) {
		kf_error(c, KF_NOLOC, "cublas: cannot load cuBLAS: %s", why);
		free(b);
		return NULL;
	}
	void *lib = b->l.lib;
	create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
	ws_fn set_ws = (ws_fn)dlsym(lib, "cublasSetWorkspace_v2");
	b->set_stream = (stream_fn)dlsym(lib, "cublasSetStream_v2");
	b->gemm = (gemm_fn)dlsym(lib, "cublasGemmStridedBatchedEx");
	int st = -1;
	if (!create || !set_ws || !b->l.destroy || !b->set_stream || !b->gemm) {
		kf_error(c, KF_NOLOC, "cublas: %s lacks the functions kfuse needs", loaded);
	} else if ((st = create(&b->l.h)) != 0) {
		kf_error(c, KF_NOLOC, "cublas: cublasCreate failed (status %d)", st);
	} else if (kf_cuda_malloc(cu, WORKSPACE, &b->l.ws) != 0) {
		st = -1;
	} else if ((st = set_ws(b->l.h, (void *)(uintptr_t)b->l.ws, WORKSPACE)) != 0) {
		kf_error(c, KF_NOLOC, "cublas: cublasSetWorkspace failed (status %d)", st);
	}
	if (st != 0) {
		kf_cublas_close(b);
		return NULL;
	}
	return b;
}

void kf_cublas_close(kf_cublas *b)
{
	if (!b)
		return;
	blas_close(&b->l);
	free(b);
}

static int dtype_code(int dt)
{
	switch (dt) {
	case KF_F16: return R_16F;
	case KF_BF16: return R_16BF;
	case KF_F32: return R_32F;
	case KF_F64: return R_64F;
	default: return -1;
	}
}

typedef struct shape {
	int64_t M, N, K, batch, sa, sb; /* sa, sb: batch strides (0: broadcast) */
	bool ta, tb;
} shape;

static bool shape_of(kf_graph *g, kf_nid n, shape *s)
{
	const kf_node *x = kf_N(g, n);
	if ((x->op != KF_OP_MATMUL && x->op != KF_OP_GEMM) || (x->op == KF_OP_GEMM && x->nin > 2))
		return false;
	const kf_type *A = kf_vtype(g, kf_in(g, n, 0)), *B = kf_vtype(g, kf_in(g, n, 1)),
		      *O = kf_vtype(g, kf_res(g, n, 0));
	if (A->dtype != B->dtype || A->dtype != O->dtype || dtype_code(A->dtype) < 0 || !kf_type_is_static(O) ||
	    !kf_type_is_static(A) || !kf_type_is_static(B))
		return false;
	bool gemm = x->op == KF_OP_GEMM;
	s->ta = gemm && kf_attr_int(g, n, "trans_a", 0);
	s->tb = gemm && kf_attr_int(g, n, "trans_b", 0);
	s->M = A->rank == 1 ? 1 : A->dim[A->rank - 2 + s->ta];
	s->K = A->dim[A->rank - 1 - (A->rank > 1 && s->ta)];
	s->N = B->rank == 1 ? 1 : B->dim[B->rank - 1 - s->tb];
	int ra = A->rank > 2 ? A->rank - 2 : 0, rb = B->rank > 2 ? B->rank - 2 : 0;
	int64_t na = 1, nb = 1;
	for (int d = 0; d < ra; d++)
		na *= A->dim[d];
	for (int d = 0; d < rb; d++)
		nb *= B->dim[d];
	/* batch dims equal, or absent (or all ones) on one side */
	if (ra && rb && (ra != rb || memcmp(A->dim, B->dim, (size_t)ra * sizeof *A->dim) != 0))
		return false;
	s->batch = na > nb ? na : nb;
	s->sa = na > 1 ? s->M * s->K : 0;
	s->sb = nb > 1 ? s->K * s->N : 0;
	return s->M * s->N * s->K > 0 && s->M < (1LL << 31) && s->N < (1LL << 31) && s->K < (1LL << 31) &&
	       s->batch < (1LL << 31);
}


bool kf_cublas_supports(kf_graph *g, kf_nid n)
{
	shape s;
	return shape_of(g, n, &s);
}

int kf_cublas_matmul(kf_cublas *b, kf_graph *g, kf_nid n, kf_cuptr a, kf_cuptr bm, kf_cuptr out, kf_custream st)
{
	shape s;
	if (!shape_of(g, n, &s)) {
		kf_error(b->l.c, kf_N(g, n)->loc, "cublas: this node does not map to a cuBLAS GEMM");
		return -1;
	}
	int dt = kf_vtype(g, kf_res(g, n, 0))->dtype, code = dtype_code(dt);
	double alpha = kf_attr_float(g, n, "alpha", 1.0);
	float fa = (float)alpha, fb = 0.0f;
	double db = 0.0;
	const void *pa = dt == KF_F64 ? (const void *)&alpha : (const void *)&fa;
	const void *pb = dt == KF_F64 ? (const void *)&db : (const void *)&fb;
	int rc = b->set_stream(b->l.h, st);
	/* column-major: C^T[N, M] = op(B^T)[N, K] op(A^T)[K, M] */
	if (rc == 0)
		rc = b->gemm(b->l.h, s.tb ? OP_T : OP_N, s.ta ? OP_T : OP_N, (int)s.N, (int)s.M, (int)s.K, pa,
			     (const void *)(uintptr_t)bm, code, (int)(s.tb ? s.K : s.N), s.sb,
			     (const void *)(uintptr_t)a, code, (int)(s.ta ? s.M : s.K), s.sa, pb, (void *)(uintptr_t)out,
			     code, (int)s.N, s.M * s.N, (int)s.batch, dt == KF_F64 ? COMPUTE_64F : COMPUTE_32F,
			     GEMM_DEFAULT);
	if (rc != 0) {
		kf_error(b->l.c, kf_N(g, n)->loc, "cublas: cublasGemmStridedBatchedEx failed (status %d)", rc);
		return -1;
	}
	return 0;
}

/* ---- cuBLASLt: one GEMM with its bias (+ relu / gelu-tanh) epilogue ------------------ */

/* the few values of cublasLt.h we use */
enum { LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8,
       LT_DESC_BIAS_DATA_TYPE = 26 };
enum { LT_EPI_BIAS = 4, LT_EPI_RELU_BIAS = 6, LT_EPI_GELU_BIAS = 36 };
enum { LT_PREF_MAX_WORKSPACE = 1 };
typedef struct lt_algo {
	uint64_t data[8];
} lt_algo;
typedef struct lt_heur {
	lt_algo algo;
	size_t ws;
	int state;
	float waves;
	int reserved[4];
} lt_heur;

typedef int (*lt_create_fn)(void **);
typedef int (*lt_destroy_fn)(void *);
typedef int (*lt_desc_create_fn)(void **, int, int);
typedef int (*lt_set_fn)(void *, int, const void *, size_t);
typedef int (*lt_layout_create_fn)(void **, int, uint64_t, uint64_t, int64_t);
typedef int (*lt_pref_create_fn)(void **);
typedef int (*lt_heur_fn)(void *, void *, void *, void *, void *, void *, void *, int, lt_heur *, int *);
typedef int (*lt_matmul_fn)(void *, void *, const void *, const void *, void *, const void *, void *, const void *,
			    const void *, void *, void *, void *, const lt_algo *, void *, size_t, void *);

struct kf_cublaslt {
	blas_lib l;
	lt_create_fn create;
	lt_destroy_fn desc_destroy, layout_destroy, pref_destroy;
	lt_desc_create_fn desc_create;
	lt_set_fn desc_set, pref_set;
	lt_layout_create_fn layout_create;
	lt_pref_create_fn pref_create;
	lt_heur_fn heur;
	lt_matmul_fn matmul;
};

struct kf_lt_op {
	kf_lt_plan p;
	void *desc, *la, *lb, *ld; /* cuBLAS's A is our B (see the top of the file) */
	lt_algo algo;
	size_t ws;
};

kf_cublaslt *kf_cublaslt_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy)
{
	char loaded[512];
	kf_cublaslt *b = calloc(1, sizeof *b);
	if (blas_load(&b->l, c, cu, "KFUSE_CUBLASLT_LIB", "libcublasLt", "cublasLtDestroy", loaded, sizeof loaded, why,
		      nwhy) != 0) {
		free(b);
		return NULL;
	}
	void *lib = b->l.lib;
	b->create = (lt_create_fn)dlsym(lib, "cublasLtCreate");
	b->desc_create = (lt_desc_create_fn)dlsym(lib, "cublasLtMatmulDescCreate");
	b->desc_destroy = (lt_destroy_fn)dlsym(lib, "cublasLtMatmulDescDestroy");
	b->desc_set = (lt_set_fn)dlsym(lib, "cublasLtMatmulDescSetAttribute");
	b->layout_create = (lt_layout_create_fn)dlsym(lib, "cublasLtMatrixLayoutCreate");
	b->layout_destroy = (lt_destroy_fn)dlsym(lib, "cublasLtMatrixLayoutDestroy");
	b->pref_create = (lt_pref_create_fn)dlsym(lib, "cublasLtMatmulPreferenceCreate");
	b->pref_destroy = (lt_destroy_fn)dlsym(lib, "cublasLtMatmulPreferenceDestroy");
	b->pref_set = (lt_set_fn)dlsym(lib, "cublasLtMatmulPreferenceSetAttribute");
	b->heur = (lt_heur_fn)dlsym(lib, "cublasLtMatmulAlgoGetHeuristic");
	b->matmul = (lt_matmul_fn)dlsym(lib, "cublasLtMatmul");
	int st = -1;
	if (!b->create || !b->l.destroy || !b->desc_create || !b->desc_destroy || !b->desc_set || !b->layout_create ||
	    !b->layout_destroy || !b->pref_create || !b->pref_destroy || !b->pref_set || !b->heur || !b->matmul)
		snprintf(why, nwhy, "%s lacks the cublasLt functions kfuse needs", loaded);
	else if ((st = b->create(&b->l.h)) != 0)
		snprintf(why, nwhy, "cublasLtCreate failed (status %d)", st);
	else if ((st = kf_cuda_malloc(cu, WORKSPACE, &b->l.ws)) != 0)
		snprintf(why, nwhy, "no device memory for the cublasLt workspace");
	if (st != 0) {
		kf_cublaslt_close(b);
		return NULL;
	}
	return b;
}

void kf_cublaslt_close(kf_cublaslt *b)
{
	if (!b)
		return;
	blas_close(&b->l);
	free(b);
}

/* A body argument of fusion f: its index, or -1. */
static int body_arg(kf_graph *g, kf_nid f, kf_vid v)
{
	const kf_block *b = &g->blk[kf_N(g, f)->body];
	for (uint32_t i = 0; i < b->narg; i++)
		if (b->arg[i] == v)
			return (int)i;
	return -1;
}

/* The fusion input a contraction operand reads: an argument, or the
 * transpose (of the two axes) of one; *tr says which. */
static kf_vid operand_input(kf_graph *g, kf_nid f, kf_vid v, bool *tr)
{
	*tr = false;
	kf_nid d = kf_def(g, v);
	if (d != KF_NONE && kf_N(g, d)->op == KF_OP_TRANSPOSE && kf_vtype(g, v)->rank == 2) {
		*tr = true;
		v = kf_in(g, d, 0);
	}
	int i = body_arg(g, f, v);
	return i < 0 ? KF_NONE : kf_in(g, f, (uint32_t)i);
}

bool kf_cublaslt_plan(kf_graph *g, kf_nid n, kf_lt_plan *p)
{
	const kf_node *x = kf_N(g, n);
	if (x->op != KF_OP_FUSION || x->body == KF_NONE || x->nres != 1 ||
	    strcmp(kf_attr_str(g, n, "kind", ""), "contraction") != 0)
		return false;
	memset(p, 0, sizeof *p);
	/* the body, in order: [transposes], matmul, add(bias), [relu | gelu-tanh], yield */
	kf_nid mm = KF_NONE, add = KF_NONE, act = KF_NONE, y = KF_NONE;
	kf_foreach_node(g, x->body, m) {
		int op = kf_N(g, m)->op;
		if (op == KF_OP_TRANSPOSE && mm == KF_NONE)
			continue;
		if (op == KF_OP_MATMUL && mm == KF_NONE)
			mm = m;
		else if (op == KF_OP_ADD && mm != KF_NONE && add == KF_NONE)
			add = m;
		else if ((op == KF_OP_RELU || op == KF_OP_GELU) && add != KF_NONE && act == KF_NONE && y == KF_NONE)
			act = m;
		else if (op == KF_OP_YIELD && add != KF_NONE && y == KF_NONE)
			y = m;
		else
			return false;
	}
	if (y == KF_NONE || kf_N(g, y)->nin != 1)
		return false;
	kf_vid mv = kf_res(g, mm, 0), av = kf_res(g, add, 0), last = act != KF_NONE ? kf_res(g, act, 0) : av;
	if (kf_in(g, y, 0) != last || (act != KF_NONE && kf_in(g, act, 0) != av))
		return false;
	/* GELU in cuBLASLt is the tanh approximation */
	if (act != KF_NONE && kf_N(g, act)->op == KF_OP_GELU && strcmp(kf_attr_str(g, act, "approximate", "none"), "tanh"))
		return false;
	const kf_type *A = kf_vtype(g, kf_in(g, mm, 0)), *B = kf_vtype(g, kf_in(g, mm, 1)), *O = kf_vtype(g, mv);
	if (A->rank != 2 || B->rank != 2 || !kf_type_is_static(A) || !kf_type_is_static(B) || A->dtype != B->dtype ||
	    A->dtype != O->dtype || kf_vtype(g, last)->dtype != O->dtype ||
	    (O->dtype != KF_F16 && O->dtype != KF_BF16 && O->dtype != KF_F32))
		return false;
	p->dt = O->dtype;
	p->M = A->dim[0], p->K = A->dim[1], p->N = B->dim[1];
	p->a = operand_input(g, n, kf_in(g, mm, 0), &p->ta);
	p->b = operand_input(g, n, kf_in(g, mm, 1), &p->tb);
	/* add(m, bias) or add(bias, m); bias [N] or [1, N] of the result's dtype */
	kf_vid bv = kf_in(g, add, 0) == mv ? kf_in(g, add, 1) : kf_in(g, add, 0);
	const kf_type *BT = kf_vtype(g, bv);
	int bi = body_arg(g, n, bv);
	if ((kf_in(g, add, 0) != mv && kf_in(g, add, 1) != mv) || bi < 0 || BT->dtype != O->dtype ||
	    !kf_type_is_static(BT) || BT->rank < 1 || BT->dim[BT->rank - 1] != p->N || kf_type_numel(BT) != p->N ||
	    !kf_type_same_shape(kf_vtype(g, av), O))
		return false;
	p->bias = kf_in(g, n, (uint32_t)bi);
	p->out = kf_res(g, n, 0);
	p->epi = act == KF_NONE ? KF_LT_BIAS : kf_N(g, act)->op == KF_OP_RELU ? KF_LT_RELU_BIAS : KF_LT_GELU_BIAS;
	return p->a != KF_NONE && p->b != KF_NONE && p->M * p->N * p->K > 0 && p->M < (1LL << 31) &&
	       p->N < (1LL << 31) && p->K < (1LL << 31);
}

bool kf_cublaslt_default(const kf_lt_plan *p)
{
	/* mma.sync tiles reach about a third of cuBLAS's wgmma kernels at
	 * these sizes on an H200 (bench/results/2026-11-29-gpu-matmul.txt) */
	return (p->dt == KF_F16 || p->dt == KF_BF16) && p->M >= 128 && p->M * p->N * p->K >= (1LL << 30);
}

void kf_cublaslt_op_free(kf_cublaslt *b, kf_lt_op *o)
{
	if (!o)
		return;
	if (o->desc)
		b->desc_destroy(o->desc);
	void *ls[3] = {o->la, o->lb, o->ld};
	for (int i = 0; i < 3; i++)
		if (ls[i])
			b->layout_destroy(ls[i]);
	free(o);
}

static kf_lt_attr lt_i32(int attr, int32_t v) { return (kf_lt_attr){.attr = attr, .size = 4, .v.i32 = v}; }

void kf_cublaslt_describe(const kf_lt_plan *p, kf_lt_desc *d)
{
	memset(d, 0, sizeof *d);
	int code = dtype_code(p->dt);
	d->compute = COMPUTE_32F;
	d->scale = R_32F;
	/* column-major: D^T[N, M] = op(B^T)[N, K] op(A^T)[K, M]; the bias runs
	 * along the rows of cuBLAS's D, which are our N */
	d->desc[d->ndesc++] = lt_i32(LT_DESC_TRANSA, p->tb ? OP_T : OP_N);
	d->desc[d->ndesc++] = lt_i32(LT_DESC_TRANSB, p->ta ? OP_T : OP_N);
	d->desc[d->ndesc++] = (kf_lt_attr){.attr = LT_DESC_EPILOGUE, .size = 4,
					   .v.u32 = p->epi == KF_LT_BIAS	? LT_EPI_BIAS
						    : p->epi == KF_LT_RELU_BIAS ? LT_EPI_RELU_BIAS
										: LT_EPI_GELU_BIAS};
	/* the run sets the real pointer; the heuristic reads only its value,
	 * for the alignment (a placeholder of 1 made every algorithm unfit:
	 * status 7, CUBLAS_STATUS_INVALID_VALUE, on the H200) */
	d->desc[d->ndesc++] = (kf_lt_attr){.attr = LT_DESC_BIAS_POINTER, .size = sizeof(void *),
					   .v.ptr = (const void *)(uintptr_t)KF_LT_ALIGN};
	d->desc[d->ndesc++] = lt_i32(LT_DESC_BIAS_DATA_TYPE, code);
	d->a = p->tb ? (kf_lt_layout){code, (uint64_t)p->K, (uint64_t)p->N, p->K}
		     : (kf_lt_layout){code, (uint64_t)p->N, (uint64_t)p->K, p->N};
	d->b = p->ta ? (kf_lt_layout){code, (uint64_t)p->M, (uint64_t)p->K, p->M}
		     : (kf_lt_layout){code, (uint64_t)p->K, (uint64_t)p->M, p->K};
	d->d = (kf_lt_layout){code, (uint64_t)p->N, (uint64_t)p->M, p->N};
	d->pref[d->npref++] = (kf_lt_attr){.attr = LT_PREF_MAX_WORKSPACE, .size = 8, .v.u64 = WORKSPACE};
}

/* Applies description d to a new descriptor, layouts and preference;
 * on failure names the call that failed in why. */
static int lt_apply(kf_cublaslt *b, const kf_lt_desc *d, kf_lt_op *o, void **pref, char *why, size_t nwhy)
{
	int st;
	const char *what = "cublasLtMatmulDescCreate";
	if ((st = b->desc_create(&o->desc, d->compute, d->scale)) != 0)
		goto fail;
	for (int i = 0; i < d->ndesc; i++)
		if ((st = b->desc_set(o->desc, d->desc[i].attr, &d->desc[i].v, d->desc[i].size)) != 0) {
			snprintf(why, nwhy, "cublasLtMatmulDescSetAttribute(%d) failed (status %d)", d->desc[i].attr, st);
			return st;
		}
	what = "cublasLtMatrixLayoutCreate";
	const kf_lt_layout *l[3] = {&d->a, &d->b, &d->d};
	void **lo[3] = {&o->la, &o->lb, &o->ld};
	for (int i = 0; i < 3; i++)
		if ((st = b->layout_create(lo[i], l[i]->type, l[i]->rows, l[i]->cols, l[i]->ld)) != 0)
			goto fail;
	what = "cublasLtMatmulPreferenceCreate";
	if ((st = b->pref_create(pref)) != 0)
		goto fail;
	for (int i = 0; i < d->npref; i++)
		if ((st = b->pref_set(*pref, d->pref[i].attr, &d->pref[i].v, d->pref[i].size)) != 0) {
			snprintf(why, nwhy, "cublasLtMatmulPreferenceSetAttribute(%d) failed (status %d)", d->pref[i].attr,
				 st);
			return st;
		}
	return 0;
fail:
	snprintf(why, nwhy, "%s failed (status %d)", what, st);
	return st;
}

kf_lt_op *kf_cublaslt_prepare(kf_cublaslt *b, const kf_lt_plan *p, char *why, size_t nwhy)
{
	kf_lt_op *o = calloc(1, sizeof *o);
	o->p = *p;
	kf_lt_desc d;
	kf_cublaslt_describe(p, &d);
	void *pref = NULL;
	lt_heur h[1];
	memset(h, 0, sizeof h);
	int nh = 0, st = lt_apply(b, &d, o, &pref, why, nwhy);
	if (st == 0 && (st = b->heur(b->l.h, o->desc, o->la, o->lb, o->ld, o->ld, pref, 1, h, &nh)) != 0)
		snprintf(why, nwhy, "cublasLtMatmulAlgoGetHeuristic failed (status %d%s)", st,
			 st == 7 ? ": an invalid value" : st == 15 ? ": not supported" : "");
	else if (st == 0 && (nh < 1 || h[0].state != 0))
		snprintf(why, nwhy, "cublasLt has no algorithm for this GEMM with its epilogue (%d results, state %d)", nh,
			 h[0].state);
	if (pref)
		b->pref_destroy(pref);
	if (st != 0 || nh < 1 || h[0].state != 0) {
		kf_cublaslt_op_free(b, o);
		return NULL;
	}
	o->algo = h[0].algo;
	o->ws = h[0].ws;
	return o;
}

int kf_cublaslt_run(kf_cublaslt *b, const kf_lt_op *o, kf_cuptr a, kf_cuptr bm, kf_cuptr bias, kf_cuptr out,
		    kf_custream s)
{
	float one = 1.0f, zero = 0.0f;
	const void *bp = (const void *)(uintptr_t)bias;
	if ((a | bm | bias | out) % KF_LT_ALIGN) {
		/* the algorithm was chosen for KF_LT_ALIGN-aligned buffers */
		kf_error(b->l.c, KF_NOLOC, "cublasLt: a buffer is not %d-byte aligned", KF_LT_ALIGN);
		return -1;
	}
	int st = b->desc_set(o->desc, LT_DESC_BIAS_POINTER, &bp, sizeof bp);
	if (st == 0)
		st = b->matmul(b->l.h, o->desc, &one, (const void *)(uintptr_t)bm, o->la, (const void *)(uintptr_t)a, o->lb,
			       &zero, (void *)(uintptr_t)out, o->ld, (void *)(uintptr_t)out, o->ld, &o->algo,
			       (void *)(uintptr_t)b->l.ws, o->ws, s);
	if (st != 0) {
		kf_error(b->l.c, KF_NOLOC, "cublasLt: cublasLtMatmul failed (status %d)", st);
		return -1;
	}
	return 0;
}
