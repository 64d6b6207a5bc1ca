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
	int64_t arg, sarg; /* sarg: arg's symbolic form (kx_dim) */
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
	bool keep16;   /* casts and comparisons read f16/bf16 intermediates unrounded
			  (kx_op_expr; attention scores: flash attention keeps them in f32) */
	int V;         /* loop kernels: lanes per thread */
	int64_t n;     /* loop kernels: the element count of the loop being written */
	int64_t sn;    /* its symbolic form (kx_dim) */
	int U;         /* loop kernels: vectors per thread and trip */
	kx_tune tune;
	int wg;        /* kf_emit_target.wgmma */
	int part;      /* a contraction's kernel around cuBLAS (KF_MM_PART_*, emit_matmul.h); 0: the whole */
	const kf_emit_dyn *dyn; /* a sized plan's symbols (kf_emit_target.dyn); NULL: static */
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

/* A device helper of a kernel (an epilogue) that writes dims reads the
 * kernel's size arguments too: its declaration has KX_KD_PARAMS right
 * after the kernel's own parameters, its calls KX_KD_ARGS before their
 * own arguments; the kernel's text gets them when it is finished, once
 * the sizes it reads are known (nothing, in a static plan). */
#define KX_KD_PARAMS "KF_KDP"
#define KX_KD_ARGS "KF_KDA"

/* ---- dims in sized plans (kf_emit_dyn) ----
 * A dim the emitter writes is a number here (val) and a monomial in the
 * symbolic graph (sym: `768*B*T`, or a number where it is static).  These
 * write it, read its bucket and ask what it is a multiple of; in a static
 * plan they are the number. */
/* The type of value v in the symbolic graph (or v's own type). */
const kf_type *kx_stype(const kx *k, kf_vid v);
/* Writes val: the number, or (a sized plan, sym symbolic and evaluating to
 * val) an expression over the size arguments, "(768 * kd0 * kd1)". */
void kx_dim(kx *k, kf_buf *o, int64_t val, int64_t sym);
/* The same as a long long ("%lldLL"). */
void kx_dimll(kx *k, kf_buf *o, int64_t val, int64_t sym);
/* Writes val rounded down to a multiple of m: the number, the
 * expression when it is a multiple of m for every size, else
 * "(expr / m * m)". */
void kx_dimfloor(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t m);
/* Writes (val + add) / div + add2 (C's integer division, div >= 1): the
 * number, or "((expr + add) / div + add2)" (terms that are 0 or 1 left
 * out). */
void kx_dimlin(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t add, int64_t div, int64_t add2);
/* Writes ceil(val / m): the number, or "((expr + m - 1) / m)". */
void kx_dimceil(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t m);
/* kx_dimlin as an int, "(int)(...)" around an expression: for min() and
 * max() of ints (the size arguments are long long in a kernel of 64-bit
 * indices, and min(int, long long) is ambiguous). */
void kx_dimlini(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t add, int64_t div, int64_t add2);
/* Writes val + delta (a number), or "(expr - 1)" (see kx_dim). */
void kx_dimd(kx *k, kf_buf *o, int64_t val, int64_t sym, int64_t delta);
/* a + b where that is a monomial: a number, or one of them being 0; else
 * KF_DIM_BAD (a sum of symbols has no dim). */
int64_t kx_sadd(const kx *k, int64_t a, int64_t b);
/* The monomial a * b (KF_DIM_BAD when either is, or on overflow). */
int64_t kx_smul(const kx *k, int64_t a, int64_t b);
/* Whether dim (val, sym) is a multiple of m for every size (static: val is). */
bool kx_multiple(const kx *k, int64_t val, int64_t sym, int64_t m);
/* Whether sym names symbols (the dim varies between sizes). */
bool kx_varies(const kx *k, int64_t sym);
/* The size that choices are made for: val, or sym at the buckets' sizes
 * (at least val). */
int64_t kx_rep(const kx *k, int64_t val, int64_t sym);
/* The symbolic numel of v (a monomial, or KF_DIM_BAD). */
int64_t kx_snumel(const kx *k, kf_vid v);
/* The monomial whose value at the probe's sizes (kf_emit_dyn.probe) is pv:
 * the probe's primes pv is a multiple of, as their symbols; the number pv
 * when there is no probe (kx_dim then checks it against the number it
 * stands for: a sum of symbols, which is no monomial, is written as a
 * number).  kx_ptype: each dim of a type of the probe graph so. */
int64_t kx_pmono(const kx *k, int64_t pv);
kf_type kx_ptype(const kx *k, const kf_type *pt);

/* ---- the kernel kinds ---- */
int kx_emit_loop(kx *k);       /* emit_elementwise.c */
int kx_emit_row(kx *k);        /* emit_reduce.c */
int kx_emit_reduce(kx *k);     /* emit_reduce_generic.c: generic reductions */
/* The start value of reduction op ("sum", "max", "min") in compute type
 * ct's text: 0, or the type's least or greatest value (emit_reduce.c). */
const char *kx_red_ident(const char *op, const char *ct);
/* Rows of a block that splits reductions of L elements, TX outputs wide: a
 * power of two leaving each row 16 or more elements, the block 32 to 1024
 * threads (emit_reduce_generic.c; the column kernels use it too). */
int kx_split_rows(int64_t L, int TX);
/* The split kernels' combine: var of every row ty of the block's column tx
 * through the shared array arr[TY][tx] (a tree; op "max"/"min" or NULL for
 * a sum), the total back in every row's var; every thread must reach it. */
void kx_tree_combine(kf_buf *b, const char *var, const char *arr, const char *op, int TY);
/* The split kernels' launch (TX x TY threads a block, a block per TX units
 * of M) and head: tx, ty, a block-uniform loop whose unit `var` is clamped
 * to M - 1 past the end, kf_live saying whether it is real; the caller
 * closes the loop.  An emit error past 2^31 blocks. */
int kx_split_open(kx *k, const char *var, int64_t M, int TX, int TY);
int kx_emit_matmul(kx *k);     /* emit_matmul.c */
int kx_emit_persistent(kx *k); /* emit_persistent.c */
int kx_emit_colreduce(kx *k);  /* emit_colreduce.c */
int kx_emit_attention(kx *k);  /* emit_attention.c */
int kx_emit_pool(kx *k);       /* emit_conv.c: max_pool, avg_pool, conv_transpose */

/* Index arithmetic shared by the loop and matmul kernels (emit_elementwise.c):
 * the linear index into a value of type `to` that numpy broadcasting reads
 * for linear index text x into type `from` (sfrom, sto: their symbolic
 * forms, kx_stype; NULL: the same).  Writes the expression to out and
 * returns its form (IXF_*; IXF_ROOT when it is x itself, *arg = the
 * modulus or divisor, *sarg its symbolic form); returns -2 for the
 * constant 0. */
int kx_bcast_expr(kx *k, const kf_type *from, const kf_type *sfrom, const kf_type *to, const kf_type *sto,
		  const char *x, kf_buf *out, int64_t *arg, int64_t *sarg);

/* (emit_mma.c) The tensor-core helpers (cp.async, ldmatrix, mma.sync),
 * for a kernel's declarations; guarded, so a program holds them once. */
const char *kx_mm_helpers(void);

/* (emit_mm_epi.c) The linear index into a value of type P broadcast
 * (numpy) into a result of batch dims OB, then rows (hasM) and columns
 * (hasN), of the element at the names z (batch, linear), row and col;
 * sOB, sP: their symbolic forms (NULL: the same). */
void kx_bidx(kx *k, const kf_type *OB, const kf_type *sOB, bool hasM, bool hasN, const kf_type *P,
	     const kf_type *sP, kf_buf *o);
/* (emit_mm_epi.c) Batch dim d's coordinate of the linear batch index z in
 * batch dims OB (sOB: their symbolic form): ((z / after) % OB[d]). */
void kx_batch_coord(kx *k, const kf_type *OB, const kf_type *sOB, int d, kf_buf *o);

#endif
