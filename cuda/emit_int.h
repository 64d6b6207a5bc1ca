/* emit_int.h: the CUDA emitter's working state, shared by cuda/emit_*.c;
 * not for other modules. */
#ifndef KF_EMIT_INT_H
#define KF_EMIT_INT_H

#include "emit_cuda.h"

/* Index forms, relative to the loop's root index i0 (for vector loads). */
enum { IXF_ROOT, IXF_MOD, IXF_DIV, IXF_OTHER };
#define IX_ZERO (-1)

typedef struct kx_memo {
	kf_vid v;
	int ix, t;
} kx_memo;

typedef struct kx_ix {
	char *expr;
	int form;
	int64_t arg;
} kx_ix;

/* Launch shapes and code choices that the GPU benchmarks tune, read from
 * the environment for each kernel (docs/fusion.md, "Tuning").  Each choice
 * shows in the kernel text, so the kernel's name and the cache key follow. */
typedef struct kx_tune {
	int ew_vec;     /* KFUSE_EW_VEC: 16-byte vectors per thread and trip (1, 2, 4, 8) */
	int ew_block;   /* KFUSE_EW_BLOCK: threads per block (32..1024, a power of two) */
	int ew_grid;    /* KFUSE_EW_GRID: blocks per SM of a grid-stride loop; 0: one
			   block per tile, no loop; -1 ("wave"): as many as fit */
	int row_warps;  /* KFUSE_ROW_WARPS: at least this many warps share a row (1..32; 0: by element size) */
	int row_block;  /* KFUSE_ROW_BLOCK: threads per block (32..1024) */
	int row_grid;   /* KFUSE_ROW_GRID: as ew_grid, over blocks of rows */
	int hints;      /* KFUSE_CACHE_HINTS for streamed tensors: 0 none, 1 streaming
			   stores, 2 also streaming loads, 3 no-L1 loads with L2 prefetch */
	bool fast_gelu; /* KFUSE_FAST_GELU: tanh-GELU as x * sigmoid(2u) with ex2.approx */
} kx_tune;

/* One kernel being emitted.  The spec: params (values read from memory,
 * in parameter order), the nodes computed (in order) and the values
 * written.  Temporaries are t0, t1, ... in emission order. */
typedef struct kx {
	kf_graph *g;
	kf_ctx *c;
	kf_nid at;
	kf_vid *param;
	uint32_t nparam;
	kf_nid *node;
	uint32_t nnode;
	kf_vid *out;
	uint32_t nout;
	kf_buf decl;   /* before the kernel: embedded constant arrays */
	kf_buf b;      /* the kernel body */
	kf_buf pre;    /* loop kernels: loads before the lane loop */
	kf_buf cur;    /* loop kernels: the lane loop's body */
	int ntmp, nconst;
	kx_memo *memo;
	uint32_t nmemo, capmemo;
	kx_ix *ix;
	uint32_t nix, capix;
	bool wide;     /* 64-bit indices */
	int V;         /* loop kernels: lanes per thread */
	int64_t n;     /* loop kernels: the element count of the loop being written */
	int U;         /* loop kernels: vectors per thread and trip */
	kx_tune tune;
	int wg;        /* kf_emit_target.wgmma */
	int part;      /* a contraction's kernel around cuBLAS (KF_MM_PART_*, emit_matmul.h); 0: the whole */
	kf_kernel *k;
} kx;

/* ---- emit_cuda.c ---- */
const char *kx_st(kf_dtype t);  /* storage type: float, unsigned short, ... */
const char *kx_ct(kf_dtype t);  /* compute type: float, double, long long, bool */
const char *kx_it(const kx *k); /* index type: int or long long */
kf_dtype kx_dt(const kx *k, kf_vid v);
void kx_load(kf_buf *b, kf_dtype t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void kx_store(kf_buf *b, kf_dtype t, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The one writer of a constant's CUDA literal: integers (INT64_MIN as an
 * expression), i1 as true/false, floats as the shortest decimal that reads
 * back to the value as the computing type holds it (f32 for f16/bf16, f64),
 * infinities and NaN as the prelude's KF_INF/KF_NAN (KF_DINF/KF_DNAN),
 * denormals as written, never a literal out of range. */
void kx_literal(kf_buf *b, kf_dtype t, double f, int64_t i);
int kx_param(const kx *k, kf_vid v);
bool kx_computed(const kx *k, kf_vid v);
/* The CUDA expression of element-wise node n over operand texts a[]; -1
 * with an error when the op has none. */
int kx_op_expr(kx *k, kf_nid n, const char *const *a, kf_buf *out);
/* Declares constant node n's payload as an array in k->decl (dense) and
 * writes its element at index text ix (or the splat literal) to out. */
void kx_const_elem(kx *k, kf_nid n, const char *ix, kf_buf *out);
int kx_fail(kx *k, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int64_t kx_numel(const kx *k, kf_vid v);
/* Appends the kernel's parameter list, "(const float *__restrict__ p0, ...)". */
void kx_params(kx *k, kf_buf *b);
void kx_bytes(kx *k);
/* Reads the tuning variables into t; -1 with an error naming a bad one. */
int kx_tuning(kx *k, kx_tune *t);
/* The vector load/store helper for a streamed tensor under the hints. */
const char *kx_vld_stream(const kx *k);
const char *kx_vst_stream(const kx *k);
/* Fills k->k->per_sm and k->k->units for a kernel of `units` work units
 * (blocks) whose grid choice is `grid` (a kx_tune *_grid value). */
void kx_grid(kx *k, int grid, int64_t units);

/* ---- the kernel kinds ---- */
int kx_emit_loop(kx *k);       /* emit_elementwise.c */
int kx_emit_row(kx *k);        /* emit_reduce.c */
int kx_emit_reduce(kx *k);     /* emit_reduce.c: generic reductions */
int kx_emit_matmul(kx *k);     /* emit_matmul.c */
int kx_emit_persistent(kx *k); /* emit_persistent.c */
int kx_emit_colreduce(kx *k);  /* emit_colreduce.c */
int kx_emit_attention(kx *k);  /* emit_attention.c */
int kx_emit_pool(kx *k);       /* emit_conv.c: max_pool, avg_pool, conv_transpose */

/* Index arithmetic shared by the loop and matmul kernels (emit_elementwise.c):
 * the linear index into a value of type `to` that numpy broadcasting reads
 * for linear index text x into type `from`.  Writes the expression to out
 * and returns its form (IXF_*; IXF_ROOT when it is x itself, *arg = the
 * modulus or divisor); returns -2 for the constant 0. */
int kx_bcast_expr(const kf_type *from, const kf_type *to, const char *x, kf_buf *out, int64_t *arg);

/* (emit_mma.c) The tensor-core helpers (cp.async, ldmatrix, mma.sync),
 * for a kernel's declarations; guarded, so a program holds them once. */
const char *kx_mm_helpers(void);

/* (emit_mm_epi.c) The linear index into a value of type P broadcast
 * (numpy) into a result of batch dims OB, then rows (hasM) and columns
 * (hasN), of the element at the names z (batch, linear), row and col. */
void kx_bidx(const kf_type *OB, bool hasM, bool hasN, const kf_type *P, kf_buf *o);

#endif
