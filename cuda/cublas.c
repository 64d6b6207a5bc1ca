/* cublas.c: cuBLAS and cuBLASLt through dlopen (see cublas.h): the
 * libraries' side only; which contraction maps to which call is
 * cuda/emit_mm_blas.c's.  Row-major C = A B is column-major C^T = B^T A^T:
 * cuBLAS gets (m, n, k) = (N, M, K) and the operands swapped, each
 * transposed when it is stored transposed. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "cublas.h"

/* the few values of cublas_api.h and library_types.h we use */
enum { OP_N = 0, OP_T = 1 };
enum { R_32F = 0, R_64F = 1, R_16F = 2, R_16BF = 14 };
enum { COMPUTE_32F = 68, COMPUTE_64F = 70, COMPUTE_32F_FAST_TF32 = 77 };
#define GEMM_DEFAULT (-1)
#define WORKSPACE (32u << 20)

typedef int (*create_fn)(void **);
typedef int (*destroy_fn)(void *);
typedef int (*stream_fn)(void *, void *);
typedef int (*ws_fn)(void *, void *, size_t);
typedef int (*math_fn)(void *, int);
/* cublasMath_t's CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION */
#define MATH_NO_REDUCED_REDUCTION 16
typedef int (*gemm_fn)(void *, int, int, int, int, int, const void *, const void *, int, int, long long,
		       const void *, int, int, long long, const void *, void *, int, int, long long, int, int, int);
typedef int (*gemm_ptrs_fn)(void *, int, int, int, int, int, const void *, const void *const *, int, int,
			    const void *const *, int, int, const void *, void *const *, int, int, int, int, int);

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
	gemm_ptrs_fn gemm_ptrs;
};

/* Split-K partials are reduced in f32 unless $KFUSE_CUBLAS_MATH=fast:
 * cuBLAS's default math mode (and cuBLASLt's default reduction scheme mask)
 * let them be reduced in the 16-bit output type, which put 15 of 217600
 * outputs of 128 x 1700 x 4096 f16 out of the interpreter's tolerance
 * (rel L2 3.2e-4 against 1.4e-5; bench/results/2026-12-03-gpu-s16a-*).
 * PyTorch's allow_fp16_reduced_precision_reduction is the same switch. */
bool kf_cublas_fast_math(void)
{
	const char *e = getenv("KFUSE_CUBLAS_MATH");
	return e && !strcmp(e, "fast");
}

/* 0, or cuBLAS's status */
static int strict_math(kf_cublas *b)
{
	if (kf_cublas_fast_math())
		return 0;
	math_fn set = (math_fn)dlsym(b->l.lib, "cublasSetMathMode");
	return set ? set(b->l.h, MATH_NO_REDUCED_REDUCTION) : -1;
}

kf_cublas *kf_cublas_open(kf_ctx *c, kf_cuda *cu, char *why, size_t nwhy)
{
	char loaded[512];
	kf_cublas *b = calloc(1, sizeof *b);
	if (blas_load(&b->l, c, cu, "KFUSE_CUBLAS_LIB", "libcublas", "cublasDestroy_v2", loaded, sizeof loaded, why,
		      nwhy) != 0) {
		free(b);
		return NULL;
	}
	void *lib = b->l.lib;
	create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
	ws_fn set_ws = (ws_fn)dlsym(lib, "cublasSetWorkspace_v2");
	b->set_stream = (stream_fn)dlsym(lib, "cublasSetStream_v2");
	b->gemm = (gemm_fn)dlsym(lib, "cublasGemmStridedBatchedEx");
	b->gemm_ptrs = (gemm_ptrs_fn)dlsym(lib, "cublasGemmBatchedEx");
	int st = -1;
	if (!create || !set_ws || !b->l.destroy || !b->set_stream || !b->gemm || !b->gemm_ptrs)
		snprintf(why, nwhy, "%s lacks the cuBLAS functions kfuse needs", loaded);
	else if ((st = create(&b->l.h)) != 0)
		snprintf(why, nwhy, "cublasCreate failed (status %d)", st);
	else if ((st = kf_cuda_malloc(cu, WORKSPACE, &b->l.ws)) != 0)
		snprintf(why, nwhy, "no device memory for the cuBLAS workspace");
	else if ((st = set_ws(b->l.h, (void *)(uintptr_t)b->l.ws, WORKSPACE)) != 0)
		snprintf(why, nwhy, "cublasSetWorkspace failed (status %d)", st);
	else if ((st = strict_math(b)) != 0)
		snprintf(why, nwhy, "cublasSetMathMode failed (status %d)", st);
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

/* The compute type: f32 accumulation (f64 for f64); tf32 tensor cores
 * only when asked (COMPUTE_32F alone never rounds f32 inputs to tf32: the
 * handle keeps CUBLAS_DEFAULT_MATH). */
static int compute_code(int dt, bool tf32)
{
	return dt == KF_F64 ? COMPUTE_64F : dt == KF_F32 && tf32 ? COMPUTE_32F_FAST_TF32 : COMPUTE_32F;
}

int64_t kf_blas_batch(const kf_blas_gemm *g)
{
	int64_t n = kf_type_numel(&g->ob);
	return n < 1 ? 1 : n;
}

int64_t kf_blas_off(const kf_blas_gemm *g, int which, int64_t z)
{
	const kf_type *P = which ? &g->bbt : &g->abt, *O = &g->ob;
	int64_t mat = which ? g->K * g->N : g->M * g->K, ix = 0, stride = 1;
	/* out's batch index z, digit by digit from the last dim; P's dims
	 * right-aligned to out's, a dim of 1 broadcast */
	for (int d = O->rank - 1, j = P->rank - 1; d >= 0; d--, j--) {
		int64_t zd = z % O->dim[d];
		z /= O->dim[d];
		if (j < 0)
			continue;
		ix += (P->dim[j] == 1 ? 0 : zd) * stride;
		stride *= P->dim[j];
	}
	return ix * mat;
}

int64_t kf_blas_stride(const kf_blas_gemm *g, int which)
{
	int64_t nb = kf_blas_batch(g), st = nb > 1 ? kf_blas_off(g, which, 1) : 0;
	for (int64_t z = 2; z < nb; z++)
		if (kf_blas_off(g, which, z) != z * st)
			return -1;
	return st;
}

/* P's dims broadcast to O's (numpy: right-aligned, each equal or 1) */
static bool bcasts(const kf_type *P, const kf_type *O)
{
	if (P->rank > O->rank)
		return false;
	for (int j = P->rank - 1, d = O->rank - 1; j >= 0; j--, d--)
		if (P->dim[j] != 1 && P->dim[j] != O->dim[d])
			return false;
	return true;
}

bool kf_blas_fits(const kf_blas_gemm *g)
{
	const int64_t lim = 1LL << 31;
	return bcasts(&g->abt, &g->ob) && bcasts(&g->bbt, &g->ob) && dtype_code(g->dt) >= 0 && g->M > 0 && g->N > 0 && g->K > 0 && g->M < lim && g->N < lim && g->K < lim &&
	       kf_blas_batch(g) < lim && (!g->tf32 || g->dt == KF_F32);
}

struct kf_blas_op {
	kf_blas_gemm g;
	kf_cuptr a, b, out;
	int64_t sa, sb;   /* batch strides, when strided */
	kf_cuptr ptrs;    /* else: the A, B and out pointer arrays, one after the other */
};

kf_blas_op *kf_cublas_prepare(kf_cublas *b, const kf_blas_gemm *g, kf_cuptr a, kf_cuptr bm, kf_cuptr out)
{
	if (!kf_blas_fits(g)) {
		kf_error(b->l.c, KF_NOLOC, "cublas: a GEMM cuBLAS does not take (dtype or extents)");
		return NULL;
	}
	kf_blas_op *o = calloc(1, sizeof *o);
	*o = (kf_blas_op){.g = *g, .a = a, .b = bm, .out = out, .sa = kf_blas_stride(g, 0), .sb = kf_blas_stride(g, 1)};
	if (o->sa >= 0 && o->sb >= 0)
		return o;
	/* a batch dim broadcast in part: arrays of pointers, made once (the
	 * buffers stay put for the plan's life) */
	int64_t nb = kf_blas_batch(g), es = (int64_t)kf_dtype_size((kf_dtype)g->dt);
	uint64_t *h = malloc((size_t)(3 * nb) * sizeof *h);
	for (int64_t z = 0; z < nb; z++) {
		h[z] = a + (uint64_t)(kf_blas_off(g, 0, z) * es);
		h[nb + z] = bm + (uint64_t)(kf_blas_off(g, 1, z) * es);
		h[2 * nb + z] = out + (uint64_t)(z * g->M * g->N * es);
	}
	int rc = kf_cuda_malloc(b->l.cu, (size_t)(3 * nb) * sizeof *h, &o->ptrs);
	if (rc == 0)
		rc = kf_cuda_h2d(b->l.cu, o->ptrs, h, (size_t)(3 * nb) * sizeof *h);
	free(h);
	if (rc != 0) {
		kf_cublas_op_free(b, o);
		return NULL;
	}
	return o;
}

void kf_cublas_op_free(kf_cublas *b, kf_blas_op *o)
{
	if (!o)
		return;
	if (o->ptrs)
		kf_cuda_free(b->l.cu, o->ptrs);
	free(o);
}

int kf_cublas_run(kf_cublas *b, const kf_blas_op *o, kf_custream st)
{
	const kf_blas_gemm *g = &o->g;
	int code = dtype_code(g->dt), comp = compute_code(g->dt, g->tf32);
	double alpha = g->alpha, db = 0.0;
	float fa = (float)alpha, fb = 0.0f;
	const void *pa = g->dt == KF_F64 ? (const void *)&alpha : (const void *)&fa;
	const void *pb = g->dt == KF_F64 ? (const void *)&db : (const void *)&fb;
	int m = (int)g->N, n = (int)g->M, k = (int)g->K, nb = (int)kf_blas_batch(g);
	int lda = (int)(g->tb ? g->K : g->N), ldb = (int)(g->ta ? g->M : g->K), ldc = (int)g->N;
	int rc = b->set_stream(b->l.h, st);
	/* column-major: C^T[N, M] = op(B^T)[N, K] op(A^T)[K, M] */
	if (rc == 0 && !o->ptrs)
		rc = b->gemm(b->l.h, g->tb ? OP_T : OP_N, g->ta ? OP_T : OP_N, m, n, k, pa, (const void *)(uintptr_t)o->b,
			     code, lda, o->sb, (const void *)(uintptr_t)o->a, code, ldb, o->sa, pb,
			     (void *)(uintptr_t)o->out, code, ldc, g->M * g->N, nb, comp, GEMM_DEFAULT);
	else if (rc == 0) {
		const void *const *pp = (const void *const *)(uintptr_t)o->ptrs;
		rc = b->gemm_ptrs(b->l.h, g->tb ? OP_T : OP_N, g->ta ? OP_T : OP_N, m, n, k, pa, pp + nb, code, lda, pp, code,
				  ldb, pb, (void *const *)(pp + 2 * nb), code, ldc, nb, comp, GEMM_DEFAULT);
	}
	if (rc != 0) {
		kf_error(b->l.c, KF_NOLOC, "cublas: %s failed (status %d)",
			 o->ptrs ? "cublasGemmBatchedEx" : "cublasGemmStridedBatchedEx", rc);
		return -1;
	}
	return 0;
}

/* ---- cuBLASLt: one GEMM with its bias (+ relu / gelu-tanh) epilogue ------------------ */

/* the few values of cublasLt.h we use */
enum { LT_DESC_TRANSA = 3, LT_DESC_TRANSB = 4, LT_DESC_EPILOGUE = 7, LT_DESC_BIAS_POINTER = 8,
       LT_DESC_BIAS_DATA_TYPE = 26 };
enum { LT_EPI_BIAS = 4, LT_EPI_RELU_BIAS = 6, LT_EPI_GELU_BIAS = 36 };
enum { LT_PREF_MAX_WORKSPACE = 1, LT_PREF_REDUCTION_MASK = 3 };
/* cublasLtReductionScheme_t: in place, or in a workspace of the compute
 * type; not LT_RED_OUTPUT_TYPE (4) unless kf_cublas_fast_math() */
enum { LT_RED_INPLACE = 1, LT_RED_COMPUTE_TYPE = 2, LT_RED_OUTPUT_TYPE = 4 };
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
	d->compute = compute_code(p->dt, p->tf32);
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
	if (!kf_cublas_fast_math())
		d->pref[d->npref++] = (kf_lt_attr){.attr = LT_PREF_REDUCTION_MASK, .size = 4,
						   .v.u32 = LT_RED_INPLACE | LT_RED_COMPUTE_TYPE};
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

int kf_cublaslt_run(kf_cublaslt *b, const kf_lt_op *o, kf_cuptr a, kf_cuptr bm, kf_cuptr bias, kf_cuptr res,
		    kf_cuptr out, kf_custream s)
{
	/* beta 1 with a residual in C, laid out as D (the plan never gives D
	 * a buffer its step reads: plan_memory keeps a step's inputs live) */
	bool rc = o->p.res != KF_NONE;
	float alpha = (float)o->p.alpha, beta = rc ? 1.0f : 0.0f;
	const void *bp = (const void *)(uintptr_t)bias;
	kf_cuptr c = rc ? res : out;
	if ((a | bm | bias | c | out) % KF_LT_ALIGN) {
		/* the algorithm was chosen for KF_LT_ALIGN-aligned buffers */
		kf_error(b->l.c, KF_NOLOC, "cublasLt: a buffer is not %d-byte aligned", KF_LT_ALIGN);
		return -1;
	}
	int st = b->desc_set(o->desc, LT_DESC_BIAS_POINTER, &bp, sizeof bp);
	if (st == 0)
		st = b->matmul(b->l.h, o->desc, &alpha, (const void *)(uintptr_t)bm, o->la, (const void *)(uintptr_t)a, o->lb,
			       &beta, (void *)(uintptr_t)c, o->ld, (void *)(uintptr_t)out, o->ld, &o->algo,
			       (void *)(uintptr_t)b->l.ws, o->ws, s);
	if (st != 0) {
		kf_error(b->l.c, KF_NOLOC, "cublasLt: cublasLtMatmul failed (status %d)", st);
		return -1;
	}
	return 0;
}
