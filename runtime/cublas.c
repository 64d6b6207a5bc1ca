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

struct kf_cublas {
	kf_ctx *c;
	kf_cuda *cu;
	void *lib, *h;
	kf_cuptr ws;
	destroy_fn destroy;
	stream_fn set_stream;
	gemm_fn gemm;
};

kf_cublas *kf_cublas_open(kf_ctx *c, kf_cuda *cu)
{
	char loaded[512], why[1024], p1[512], p2[512];
	const char *env = getenv("KFUSE_CUBLAS_LIB"), *home = getenv("CUDA_HOME");
	snprintf(p1, sizeof p1, "%s/lib64/libcublas.so", home ? home : "/usr/local/cuda");
	snprintf(p2, sizeof p2, "/usr/local/cuda/lib64/libcublas.so");
	const char *names[] = {"libcublas.so", "libcublas.so.13", "libcublas.so.12", p1, p2};
	const char *only[] = {env};
	void *lib = env && *env ? kf_cuda_dlopen_first(only, 1, loaded, sizeof loaded, why, sizeof why)
				: kf_cuda_dlopen_first(names, 5, loaded, sizeof loaded, why, sizeof why);
	if (!lib) {
		kf_error(c, KF_NOLOC, "cublas: cannot load cuBLAS: %s", why);
		return NULL;
	}
	kf_cublas *b = calloc(1, sizeof *b);
	b->c = c;
	b->cu = cu;
	b->lib = lib;
	create_fn create = (create_fn)dlsym(lib, "cublasCreate_v2");
	ws_fn set_ws = (ws_fn)dlsym(lib, "cublasSetWorkspace_v2");
	b->destroy = (destroy_fn)dlsym(lib, "cublasDestroy_v2");
	b->set_stream = (stream_fn)dlsym(lib, "cublasSetStream_v2");
	b->gemm = (gemm_fn)dlsym(lib, "cublasGemmStridedBatchedEx");
	int st = -1;
	if (!create || !set_ws || !b->destroy || !b->set_stream || !b->gemm) {
		kf_error(c, KF_NOLOC, "cublas: %s lacks the functions kfuse needs", loaded);
	} else if ((st = create(&b->h)) != 0) {
		kf_error(c, KF_NOLOC, "cublas: cublasCreate failed (status %d)", st);
	} else if (kf_cuda_malloc(cu, WORKSPACE, &b->ws) != 0) {
		st = -1;
	} else if ((st = set_ws(b->h, (void *)(uintptr_t)b->ws, WORKSPACE)) != 0) {
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
	if (b->h)
		b->destroy(b->h);
	if (b->ws)
		kf_cuda_free(b->cu, b->ws);
	dlclose(b->lib);
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
		kf_error(b->c, kf_N(g, n)->loc, "cublas: this node does not map to a cuBLAS GEMM");
		return -1;
	}
	int dt = kf_vtype(g, kf_res(g, n, 0))->dtype, code = dtype_code(dt);
	double alpha = kf_attr_float(g, n, "alpha", 1.0);
	float fa = (float)alpha, fb = 0.0f;
	double db = 0.0;
	const void *pa = dt == KF_F64 ? (const void *)&alpha : (const void *)&fa;
	const void *pb = dt == KF_F64 ? (const void *)&db : (const void *)&fb;
	int rc = b->set_stream(b->h, st);
	/* column-major: C^T[N, M] = op(B^T)[N, K] op(A^T)[K, M] */
	if (rc == 0)
		rc = b->gemm(b->h, s.tb ? OP_T : OP_N, s.ta ? OP_T : OP_N, (int)s.N, (int)s.M, (int)s.K, pa,
			     (const void *)(uintptr_t)bm, code, (int)(s.tb ? s.K : s.N), s.sb,
			     (const void *)(uintptr_t)a, code, (int)(s.ta ? s.M : s.K), s.sa, pb, (void *)(uintptr_t)out,
			     code, (int)s.N, s.M * s.N, (int)s.batch, dt == KF_F64 ? COMPUTE_64F : COMPUTE_32F,
			     GEMM_DEFAULT);
	if (rc != 0) {
		kf_error(b->c, kf_N(g, n)->loc, "cublas: cublasGemmStridedBatchedEx failed (status %d)", rc);
		return -1;
	}
	return 0;
}
