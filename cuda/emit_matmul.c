/* emit_matmul.c: contraction kernels, the common part: the analysis of a
 * matmul/gemm node or a `fusion {kind = "contraction"}` (which body nodes
 * are the prologue of each operand, which the epilogue), the choice of a
 * tile config, and the SIMT kernel (FMA on CUDA cores: f32 by default,
 * f64, integers).  The configs themselves are in emit_mm_config.c, the
 * tensor-core kernel in emit_mma.c, GEMV in emit_gemv.c, split-K in
 * emit_mm_splitk.c, the kernels around cuBLAS in emit_mm_blas.c, the
 * epilogue helpers every contraction kernel calls in emit_mm_epi.c.
 *
 * requires: static shapes; keeps the graph unchanged (read only).
 * Numerics: f16/bf16/f32 accumulate in f32, f64 in f64, integers in 64
 * bits; the epilogue computes on the accumulator as the loop kernels do
 * (f16/bf16 values in f32), so the result is stored once.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_mm_int.h"
#include "fusion.h"

/* ---- analysis ----------------------------------------------------------------------- */

typedef struct mmview {
	kf_graph *g;
	const kf_nid *node;
	uint32_t nnode;
	const kf_vid *param;
	uint32_t nparam;
	bool nofold;          /* keep A's batches (fold_batch) */
} mmview;

static int vparam(const mmview *v, kf_vid x)
{
	for (uint32_t i = 0; i < v->nparam; i++)
		if (v->param[i] == x)
			return (int)i;
	return -1;
}

static bool vcomputed(const mmview *v, kf_vid x)
{
	kf_nid d = kf_def(v->g, x);
	for (uint32_t i = 0; i < v->nnode && d != KF_NONE; i++)
		if (v->node[i] == d)
			return true;
	return false;
}

static kf_type sub_type(const kf_type *t, int from, int to)
{
	kf_type r = {.dtype = t->dtype, .rank = (uint8_t)(to > from ? to - from : 0)};
	for (int d = from; d < to; d++)
		r.dim[d - from] = t->dim[d];
	return r;
}


/* A value a kernel may read as a scalar operand of a prologue op: a
 * parameter of one element, or a constant in the body. */
static bool scalar_leaf(const mmview *v, kf_vid x)
{
	if (kf_type_numel(kf_vtype(v->g, x)) != 1)
		return false;
	kf_nid d = kf_def(v->g, x);
	return vparam(v, x) >= 0 || (d != KF_NONE && kf_N(v->g, d)->op == KF_OP_CONST && vcomputed(v, x));
}

/* The operand of prologue node n that carries the matrix (the other is a
 * scalar), or KF_NONE when n is no prologue op.  *tr: n swaps the last
 * two axes. */
static kf_vid chain_input(const mmview *v, kf_nid n, bool *tr)
{
	kf_graph *g = v->g;
	const kf_node *x = kf_N(g, n);
	*tr = false;
	if (x->nres != 1)
		return KF_NONE;
	const kf_type *rt = kf_vtype(g, kf_res(g, n, 0));
	if (x->op == KF_OP_TRANSPOSE) {
		if (!kf_fuse_swaps_last_two(g, n))
			return KF_NONE;
		*tr = true;
		return kf_in(g, n, 0);
	}
	int tr_ = kf_op(g->ctx, x->op)->trait;
	if ((tr_ != KF_TRAIT_ELEMENTWISE && tr_ != KF_TRAIT_BROADCAST) || x->op == KF_OP_WHERE)
		return KF_NONE;
	if (x->nin == 1)
		return kf_type_same_shape(kf_vtype(g, kf_in(g, n, 0)), rt) ? kf_in(g, n, 0) : KF_NONE;
	if (x->nin != 2)
		return KF_NONE;
	for (int i = 0; i < 2; i++) {
		kf_vid m = kf_in(g, n, (uint32_t)i), s = kf_in(g, n, (uint32_t)!i);
		if (kf_type_same_shape(kf_vtype(g, m), rt) && scalar_leaf(v, s) && m != s)
			return m;
	}
	return KF_NONE;
}

static const char *trace(const mmview *v, kf_nid c, int which, kx_mmop *op)
{
	kf_graph *g = v->g;
	kf_vid x = kf_in(g, c, (uint32_t)which);
	kf_nid tmp[KX_MM_CHAIN];
	int n = 0, flips = 0;
	for (;;) {
		int p = vparam(v, x);
		if (p >= 0) {
			op->param = p;
			op->st = (kf_dtype)kf_vtype(g, x)->dtype;
			break;
		}
		kf_nid d = kf_def(g, x);
		if (d == KF_NONE || !vcomputed(v, x))
			return "a contraction operand is neither a kernel input nor computed in the kernel";
		if (kf_N(g, d)->op == KF_OP_CONST)
			return "a contraction operand is an embedded constant (it must be a kernel input)";
		bool tr;
		kf_vid in = chain_input(v, d, &tr);
		if (in == KF_NONE)
			return "a contraction operand comes from an op that is no prologue (element-wise with scalars, "
			       "cast, transpose of the last two axes)";
		if (n == KX_MM_CHAIN)
			return "a prologue longer than 16 ops";
		tmp[n++] = d;
		flips += tr;
		x = in;
	}
	op->nchain = n;
	for (int i = 0; i < n; i++)
		op->chain[i] = tmp[n - 1 - i];
	op->trans = (flips & 1) != 0;
	return NULL;
}

bool kx_mm_in_chain(const kx_mm *mm, kf_nid n)
{
	for (int w = 0; w < 2; w++) {
		const kx_mmop *op = w ? &mm->b : &mm->a;
		for (int i = 0; i < op->nchain; i++)
			if (op->chain[i] == n)
				return true;
	}
	return false;
}

static const char *epilogue_check(const mmview *v, const kx_mm *mm);
static void fold_batch(const mmview *v, kx_mm *mm);

/* Fills mm from a kernel's nodes and parameters; NULL, or why not. */
static const char *analyse(const mmview *v, kx_mm *mm)
{
	kf_graph *g = v->g;
	memset(mm, 0, sizeof *mm);
	mm->c = KF_NONE;
	for (uint32_t i = 0; i < v->nnode; i++) {
		int op = kf_N(g, v->node[i])->op;
		if (op != KF_OP_MATMUL && op != KF_OP_GEMM && op != KF_OP_CONV)
			continue;
		if (mm->c != KF_NONE)
			return "a contraction kernel holds one matmul or gemm, not two";
		mm->c = v->node[i];
	}
	if (mm->c == KF_NONE)
		return "a contraction kernel needs a matmul or gemm";
	kf_nid c = mm->c;
	mm->gemm = kf_N(g, c)->op == KF_OP_GEMM;
	const char *why;
	if ((why = trace(v, c, 0, &mm->a)) || (why = trace(v, c, 1, &mm->b)))
		return why;
	if (kf_N(g, c)->op == KF_OP_CONV) {
		if (mm->a.nchain || mm->b.nchain)
			return "a conv kernel reads the conv's input and weight as stored (no prologue)";
		if ((why = kx_conv_setup(g, c, mm)))
			return why;
		if (kf_N(g, c)->nin > 2 && (mm->cv.bias = vparam(v, kf_in(g, c, 2))) < 0)
			return "a conv's bias must be a kernel input";
		return epilogue_check(v, mm);
	}
	const kf_type *A = kf_vtype(g, kf_in(g, c, 0)), *B = kf_vtype(g, kf_in(g, c, 1));
	mm->O = *kf_vtype(g, kf_res(g, c, 0));
	mm->dt = (kf_dtype)A->dtype;
	mm->rt = (kf_dtype)mm->O.dtype;
	if (B->dtype != A->dtype)
		return "the contraction's operands differ in dtype";
	bool ta = mm->gemm && kf_attr_int(g, c, "trans_a", 0), tb = mm->gemm && kf_attr_int(g, c, "trans_b", 0);
	mm->a.vec = A->rank == 1;
	mm->b.vec = B->rank == 1;
	if (mm->a.vec) {
		mm->M = 1, mm->K = A->dim[0];
		mm->a.trans = false;
	} else {
		mm->M = ta ? A->dim[A->rank - 1] : A->dim[A->rank - 2];
		mm->K = ta ? A->dim[A->rank - 2] : A->dim[A->rank - 1];
		mm->a.batch = sub_type(A, 0, A->rank - 2);
		mm->a.trans ^= ta;
	}
	if (mm->b.vec) {
		mm->N = 1;
		mm->b.trans = false;
	} else {
		mm->N = tb ? B->dim[B->rank - 2] : B->dim[B->rank - 1];
		mm->b.batch = sub_type(B, 0, B->rank - 2);
		mm->b.trans ^= tb;
	}
	int drop = !mm->a.vec + !mm->b.vec;
	mm->OB = sub_type(&mm->O, 0, mm->O.rank - drop);
	mm->nb = kf_type_numel(&mm->OB);
	if (mm->nb < 1)
		mm->nb = 1;
	if ((why = epilogue_check(v, mm)))
		return why;
	fold_batch(v, mm);
	return NULL;
}

/* Whether the epilogue reads value x (a kernel input or a constant in it)
 * at the same index whether the result's rows are counted per batch or
 * across batches: x is one element, a row of N broadcast over every
 * other dim, or the result's whole shape. */
static bool fold_reads(const kx_mm *mm, const kf_type *x)
{
	int64_t lead = 1;
	for (int d = 0; d + 1 < x->rank; d++)
		lead *= x->dim[d];
	return lead == 1 || kf_type_same_shape(x, &mm->O);
}

/* A [batch.., M, K] times a B without batches (a linear layer over a
 * [B, T, K] activation) is one contraction of batch x M rows: A's batches
 * and the result's lie one after the other.  Folded, the kernels see one
 * tall matrix (the tensor-core tiles, GEMV and the tile choice want M, not
 * a grid of short batches), as long as every value the epilogue reads is
 * indexed alike either way (fold_reads). */
bool kx_mm_rows_fold(const kx_mm *mm)
{
	return mm->nb > 1 && !mm->a.vec && !mm->a.trans && kf_type_numel(&mm->b.batch) <= 1 &&
	       kf_type_numel(&mm->a.batch) == mm->nb;
}

static void fold_batch(const mmview *v, kx_mm *mm)
{
	kf_graph *g = v->g;
	if (v->nofold || mm->b.vec || !kx_mm_rows_fold(mm))
		return;
	for (uint32_t i = 0; i < v->nnode; i++) {
		kf_nid n = v->node[i];
		const kf_node *x = kf_N(g, n);
		if ((n == mm->c && !mm->gemm) || kx_mm_in_chain(mm, n) || x->op == KF_OP_CONST)
			continue;
		for (uint32_t j = n == mm->c ? 2 : 0; j < x->nin; j++) {
			kf_vid in = kf_in(g, n, j);
			kf_nid d = kf_def(g, in);
			bool leaf = vparam(v, in) >= 0 || (d != KF_NONE && kf_N(g, d)->op == KF_OP_CONST);
			if (leaf && !fold_reads(mm, kf_vtype(g, in)))
				return;
		}
	}
	mm->fold = true;
	mm->M *= mm->nb;
	mm->nb = 1;
	mm->OB.rank = mm->a.batch.rank = mm->b.batch.rank = 0;
}

/* The rest of the kernel is the epilogue: element-wise ops over the
 * result's shape that read neither prologue values nor anything else
 * computed before. */
static const char *epilogue_check(const mmview *v, const kx_mm *mm)
{
	kf_graph *g = v->g;
	kf_nid c = mm->c;
	for (uint32_t i = 0; i < v->nnode; i++) {
		kf_nid n = v->node[i];
		const kf_node *x = kf_N(g, n);
		if (n == c || kx_mm_in_chain(mm, n) || x->op == KF_OP_CONST)
			continue;
		int tr = kf_op(g->ctx, x->op)->trait;
		if ((tr != KF_TRAIT_ELEMENTWISE && tr != KF_TRAIT_BROADCAST) || x->nres != 1 ||
		    !kf_type_same_shape(kf_vtype(g, kf_res(g, n, 0)), &mm->O))
			return "an epilogue op is not element-wise over the contraction's result shape";
		for (uint32_t j = 0; j < x->nin; j++) {
			kf_nid d = kf_def(g, kf_in(g, n, j));
			if (d != KF_NONE && vcomputed(v, kf_in(g, n, j)) && kx_mm_in_chain(mm, d))
				return "a prologue value is also read by the epilogue";
		}
	}
	return NULL;
}

/* The symbolic forms of mm's extents (a sized plan: kf_emit_dyn), from
 * the contraction's operand and result types in the symbolic graph, as
 * analyse reads the static ones; a conv's stay numbers. */
static void analyse_sym(kx *k, kx_mm *mm)
{
	mm->sM = mm->M, mm->sN = mm->N, mm->sK = mm->K, mm->snb = mm->nb;
	mm->sO = mm->O, mm->sOB = mm->OB;
	mm->a.sbatch = mm->a.batch, mm->b.sbatch = mm->b.batch;
	if (mm->conv || !k->dyn)
		return;
	kf_graph *g = k->g;
	kf_nid c = mm->c;
	const kf_type *A = kx_stype(k, kf_in(g, c, 0)), *B = kx_stype(k, kf_in(g, c, 1));
	bool ta = mm->gemm && kf_attr_int(g, c, "trans_a", 0), tb = mm->gemm && kf_attr_int(g, c, "trans_b", 0);
	mm->sO = *kx_stype(k, kf_res(g, c, 0));
	if (mm->a.vec) {
		mm->sM = 1, mm->sK = A->dim[0];
	} else {
		mm->sM = ta ? A->dim[A->rank - 1] : A->dim[A->rank - 2];
		mm->sK = ta ? A->dim[A->rank - 2] : A->dim[A->rank - 1];
		mm->a.sbatch = sub_type(A, 0, A->rank - 2);
	}
	if (mm->b.vec) {
		mm->sN = 1;
	} else {
		mm->sN = tb ? B->dim[B->rank - 2] : B->dim[B->rank - 1];
		mm->b.sbatch = sub_type(B, 0, B->rank - 2);
	}
	int drop = !mm->a.vec + !mm->b.vec;
	mm->sOB = sub_type(&mm->sO, 0, mm->sO.rank - drop);
	int64_t nb = 1;
	for (int d = 0; d < mm->sOB.rank; d++)
		nb = kx_smul(k, nb, mm->sOB.dim[d]);
	mm->snb = mm->nb == 1 && nb == 1 ? 1 : nb;
	if (mm->fold) { /* as fold_batch did to the numbers */
		mm->sM = kx_smul(k, mm->sM, mm->snb);
		mm->snb = 1;
		mm->sOB.rank = mm->a.sbatch.rank = mm->b.sbatch.rank = 0;
	}
}

void kx_mm_dim(kx *k, kf_buf *o, const kx_mm *mm, char which)
{
	if (which == 'M')
		kx_dim(k, o, mm->M, mm->sM);
	else if (which == 'N')
		kx_dim(k, o, mm->N, mm->sN);
	else
		kx_dim(k, o, mm->K, mm->sK);
}

static int analyse_kx(kx *k, kx_mm *mm, bool nofold)
{
	mmview v = {k->g, k->node, k->nnode, k->param, k->nparam, nofold};
	const char *why = analyse(&v, mm);
	if (why)
		return kx_fail(k, "%s", why);
	const kf_node *x = kf_N(k->g, k->at);
	mm->tf32 = x->op == KF_OP_FUSION && kf_attr_bool(k->g, k->at, "tf32", false);
	analyse_sym(k, mm);
	return 0;
}

bool kx_mm_chain_raw(kf_graph *g, const kx_mmop *op)
{
	for (int i = 0; i < op->nchain; i++)
		if (kf_N(g, op->chain[i])->op != KF_OP_TRANSPOSE)
			return false;
	return true;
}

static void shape_of(kf_graph *g, const kx_mm *mm, bool tf32, kf_mm_shape *sh)
{
	*sh = (kf_mm_shape){.in = mm->dt, .out = mm->rt, .batch = mm->nb, .M = mm->M, .N = mm->N, .K = mm->K,
			    .ta = mm->a.trans, .tb = mm->b.trans, .tf32 = tf32 && mm->dt == KF_F32,
			    .raw = kx_mm_chain_raw(g, &mm->a) && kx_mm_chain_raw(g, &mm->b) && !mm->a.vec && !mm->b.vec};
}

/* kx_mm_analyse_node of a node whose op is one of ops[0..nop) alone, or a
 * fusion of kind `kind`. */
static const char *analyse_top(kf_graph *g, kf_nid n, const int *ops, int nop, const char *kind, kx_mm *mm)
{
	const kf_node *x = kf_N(g, n);
	const char *why;
	bool alone = false;
	for (int i = 0; i < nop; i++)
		alone |= x->op == ops[i];
	if (alone) {
		kf_vid in[3];
		uint32_t nin = 0;
		for (uint32_t i = 0; i < x->nin; i++)
			in[nin++] = kf_in(g, n, i);
		mmview v = {g, &n, 1, in, nin};
		why = analyse(&v, mm);
	} else if (x->op == KF_OP_FUSION && x->body != KF_NONE && !strcmp(kf_attr_str(g, n, "kind", ""), kind)) {
		const kf_block *b = &g->blk[x->body];
		uint32_t cnt = 0;
		kf_foreach_node(g, x->body, m)
			cnt++;
		kf_nid *nodes = malloc((cnt + 1) * sizeof *nodes);
		cnt = 0;
		kf_foreach_node(g, x->body, m)
			if (kf_N(g, m)->op != KF_OP_YIELD)
				nodes[cnt++] = m;
		mmview v = {g, nodes, cnt, b->arg, b->narg};
		why = analyse(&v, mm);
		free(nodes);
	} else {
		return "not a contraction";
	}
	if (!why)
		mm->tf32 = x->op == KF_OP_FUSION && kf_attr_bool(g, n, "tf32", false);
	return why;
}

const char *kx_mm_analyse_node(kf_graph *g, kf_nid n, kx_mm *mm)
{
	static const int ops[] = {KF_OP_MATMUL, KF_OP_GEMM};
	return analyse_top(g, n, ops, 2, "contraction", mm);
}

const char *kx_mm_analyse_conv(kf_graph *g, kf_nid n, kx_mm *mm)
{
	static const int ops[] = {KF_OP_CONV};
	const char *why = analyse_top(g, n, ops, 1, "conv", mm);
	return why ? why : mm->conv ? NULL : "not a conv";
}

/* sh->tag of fusion n (see emit_matmul.h): the ops before the contraction
 * (transposes and constants aside: the shape has them), '.', the ops
 * after; a tag too long for the key is a hash of it. */
static void shape_tag(kf_graph *g, kf_nid n, const kx_mm *mm, kf_mm_shape *sh)
{
	kf_buf t = {0};
	bool any = false;
	const kf_node *x = kf_N(g, n);
	if (mm->gemm && kf_N(g, mm->c)->nin > 2)
		any = true;
	if (x->op == KF_OP_FUSION)
		kf_foreach_node(g, x->body, m) {
			int op = kf_N(g, m)->op;
			if (m == mm->c) {
				kf_buf_puts(&t, mm->gemm && kf_N(g, mm->c)->nin > 2 ? ".c" : ".");
				continue;
			}
			if (op == KF_OP_CONST || op == KF_OP_YIELD || op == KF_OP_TRANSPOSE)
				continue;
			const char *name = kf_op(g->ctx, op)->name;
			bool tanh = op == KF_OP_GELU && !strcmp(kf_attr_str(g, m, "approximate", "none"), "tanh");
			kf_buf_printf(&t, "%s%s%s", t.n && t.p[t.n - 1] != '.' ? "+" : "", name, tanh ? "_tanh" : "");
			any = true;
		}
	kf_buf_putc(&t, '\0');
	sh->tag[0] = 0;
	if (any && t.n - 1 < sizeof sh->tag)
		snprintf(sh->tag, sizeof sh->tag, "%s", t.p);
	else if (any) {
		uint32_t h = 2166136261u;
		for (size_t i = 0; t.p[i]; i++)
			h = (h ^ (unsigned char)t.p[i]) * 16777619u;
		snprintf(sh->tag, sizeof sh->tag, "h%08x", h);
	}
	kf_buf_free(&t);
}

bool kf_mm_node_shape(kf_graph *g, kf_nid n, kf_mm_shape *sh)
{
	kx_mm mm;
	if (kx_mm_analyse_node(g, n, &mm))
		return false;
	if (sh) {
		shape_of(g, &mm, mm.tf32, sh);
		shape_tag(g, n, &mm, sh);
	}
	return true;
}

bool kf_conv_node_shape(kf_graph *g, kf_nid n, kf_mm_shape *sh)
{
	kx_mm mm;
	if (kx_mm_analyse_conv(g, n, &mm) || mm.cv.G != 1 || !mm.cv.cl)
		return false;
	if (sh) {
		shape_of(g, &mm, mm.tf32, sh);
		kx_conv_shape(&mm, sh);
		shape_tag(g, n, &mm, sh);
	}
	return true;
}

/* A conv's config (the implicit GEMM: the wgmma conv of emit_conv_wg.c,
 * mma.sync or the SIMT kernel, whose A loads gather; the matmul's TMA
 * wgmma kernel for a pointwise conv, whose A is x as stored; never GEMV or
 * a library): the fusion's `tile`, $KFUSE_CONV_TILE, or
 * kf_conv_own_default. */
static void conv_config(kx *k, kx_mm *mm, kf_mm_shape *sh)
{
	kx_conv_shape(mm, sh);
	const char *want[2] = {NULL, getenv("KFUSE_CONV_TILE")};
	if (kf_N(k->g, k->at)->op == KF_OP_FUSION)
		want[0] = kf_attr_str(k->g, k->at, "tile", NULL);
	for (int i = 0; i < 2; i++)
		if (want[i] && kf_mm_config_parse(want[i], &mm->cfg) == 0 &&
		    (mm->cfg.algo == KF_MM_MMA || mm->cfg.algo == KF_MM_FMA || mm->cfg.algo == KF_MM_WGC ||
		     mm->cfg.algo == KF_MM_WG) &&
		    kx_mm_config_fits(&mm->cfg, sh))
			return;
	kf_conv_own_default(sh, &mm->cfg);
}

/* The extents of sh that come from symbols at their bucket's size (a
 * sized plan, kf_emit_dyn): what the choices of a config are made for, so
 * that a bucket shares them; sh unchanged otherwise.  The bucket into
 * kernel k's report text. */
static void sized_shape(const kx *k, const kx_mm *mm, kf_mm_shape *sh)
{
	sh->M = kx_rep(k, mm->M, mm->sM);
	sh->N = kx_rep(k, mm->N, mm->sN);
	sh->K = kx_rep(k, mm->K, mm->sK);
	sh->batch = kx_rep(k, mm->nb, mm->snb);
	kf_buf b = {0};
	static const char *const nm[4] = {"M", "N", "K", "batch"};
	const int64_t v[4] = {mm->sM, mm->sN, mm->sK, mm->snb}, r[4] = {sh->M, sh->N, sh->K, sh->batch};
	for (int i = 0; i < 4; i++)
		if (kx_varies(k, v[i]))
			kf_buf_printf(&b, "%s%s<=%lld", b.n ? "," : "", nm[i], (long long)r[i]);
	if (b.n)
		snprintf(k->k->bucket, sizeof k->k->bucket, "%.*s", (int)b.n, b.p);
	kf_buf_free(&b);
}

bool kf_mm_node_shape_sized(kf_graph *g, kf_nid n, const kf_emit_target *t, kf_mm_shape *sh)
{
	if (!kf_mm_node_shape(g, n, sh))
		return false;
	kx_mm mm;
	kf_kernel kk = {0};
	kx k = {.g = g, .c = g->ctx, .at = n, .dyn = t && t->dyn && t->dyn->n ? t->dyn : NULL, .k = &kk};
	if (!k.dyn || kx_mm_analyse_node(g, n, &mm))
		return true;
	analyse_sym(&k, &mm);
	sized_shape(&k, &mm, sh);
	sh->sized = true;
	return true;
}

/* The node's config: its `tile` attribute, $KFUSE_MATMUL_TILE, or the
 * heuristic; one that does not fit the shape is passed over.  A sized
 * plan chooses for its bucket (sized_shape), then checks the choice fits
 * the sizes it runs at (else the heuristic at those). */
static void choose_config(kx *k, kx_mm *mm)
{
	kf_mm_shape sh, real;
	shape_of(k->g, mm, mm->tf32, &sh);
	sh.wgmma = k->wg;
	if (mm->conv) {
		conv_config(k, mm, &sh);
		return;
	}
	real = sh;
	sized_shape(k, mm, &sh);
	const char *want[2] = {NULL, getenv("KFUSE_MATMUL_TILE")};
	if (kf_N(k->g, k->at)->op == KF_OP_FUSION)
		want[0] = kf_attr_str(k->g, k->at, "tile", NULL);
	for (int i = 0; i < 2; i++)
		if (want[i] && kf_mm_config_parse(want[i], &mm->cfg) == 0 && kx_mm_config_fits(&mm->cfg, &sh) &&
		    kx_mm_config_fits(&mm->cfg, &real))
			return;
	kf_mm_own_default(&sh, &mm->cfg);
	if (!kx_mm_config_fits(&mm->cfg, &real))
		kf_mm_own_default(&real, &mm->cfg);
}

/* ---- operands, epilogue ------------------------------------------------------------ */

bool kx_mm_raw(const kx *k, const kx_mmop *op)
{
	return kx_mm_chain_raw(k->g, op);
}

const char *kx_mm_acc_type(const kx_mm *mm)
{
	if (mm->dt == KF_F64)
		return "double";
	return kf_dtype_is_float(mm->dt) ? "float" : "long long";
}

static void scalar_text(kx *k, kf_vid s, kf_buf *o)
{
	int p = kx_param(k, s);
	if (p >= 0)
		kx_load(o, kx_dt(k, s), "p%d[0]", p);
	else
		kx_const_elem(k, kf_def(k->g, s), "0", o);
}

void kx_mm_operand(kx *k, const kx_mm *mm, int which, const char *ix, kf_buf *out)
{
	const kx_mmop *op = which ? &mm->b : &mm->a;
	kf_buf cur = {0};
	kx_load(&cur, op->st, "p%d[%s]", op->param, ix);
	kf_buf_putc(&cur, '\0');
	kf_vid v = k->param[op->param];
	for (int i = 0; i < op->nchain; i++) {
		kf_nid n = op->chain[i];
		if (kf_N(k->g, n)->op == KF_OP_TRANSPOSE) {
			v = kf_res(k->g, n, 0);
			continue;
		}
		kf_buf txt[2] = {{0}, {0}}, nx = {0};
		const char *a[2];
		for (uint32_t j = 0; j < kf_N(k->g, n)->nin; j++) {
			kf_vid u = kf_in(k->g, n, j);
			if (u == v)
				kf_buf_puts(&txt[j], cur.p);
			else
				scalar_text(k, u, &txt[j]);
			kf_buf_putc(&txt[j], '\0');
			a[j] = txt[j].p;
		}
		kx_op_expr(k, n, a, &nx);
		kf_buf_putc(&nx, '\0');
		kf_buf_free(&cur);
		cur = nx;
		kf_buf_free(&txt[0]);
		kf_buf_free(&txt[1]);
		v = kf_res(k->g, n, 0);
	}
	kf_buf_printf(out, "(%s)(%s)", kx_mm_acc_type(mm), cur.p);
	kf_buf_free(&cur);
}

void kx_mm_batch_off(kx *k, const kx_mm *mm, int which, kf_buf *out)
{
	const kx_mmop *op = which ? &mm->b : &mm->a;
	int64_t mat = which ? mm->K * mm->N : mm->M * mm->K, arg, sarg;
	int64_t smat = which ? kx_smul(k, mm->sK, mm->sN) : kx_smul(k, mm->sM, mm->sK);
	kf_buf t = {0};
	kf_type OB = mm->OB;
	if (mm->nb == 1 || kx_bcast_expr(k, &OB, &mm->sOB, &op->batch, &op->sbatch, "z", &t, &arg, &sarg) == -2) {
		kf_buf_puts(out, "0");
	} else {
		kf_buf_putc(&t, '\0');
		kf_buf_printf(out, "(%s) * ", t.p);
		kx_dimll(k, out, mat, smat);
	}
	kf_buf_free(&t);
}

/* ---- the SIMT kernel ------------------------------------------------------------------ */

/* Loads of one operand's tile into shared memory, element by element, in
 * the order that makes the global reads coalesced. */
static void fma_load(kx *k, const kx_mm *mm, int which, int threads)
{
	const kf_mm_config *c = &mm->cfg;
	const kx_mmop *op = which ? &mm->b : &mm->a;
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	int rows = which ? c->bn : c->bm; /* the non-K extent of the tile */
	int64_t R = which ? mm->N : mm->M, K = mm->K, sR = which ? mm->sN : mm->sM, sK = mm->sK;
	const char *base = which ? "bn" : "bm", *sm = which ? "kf_bs" : "kf_as", *off = which ? "boff" : "aoff";
	/* stored [R][K] (K contiguous): A plain, B transposed */
	bool kfast = which ? op->trans : !op->trans;
	kf_buf_printf(b, "#pragma unroll\n    for (int e = threadIdx.x; e < %d; e += %d) {\n", rows * c->bk, threads);
	if (kfast)
		kf_buf_printf(b, "      const int kk = e %% %d, rr = e / %d;\n", c->bk, c->bk);
	else
		kf_buf_printf(b, "      const int rr = e %% %d, kk = e / %d;\n", rows, rows);
	kf_buf_printf(b, "      const %s gr = %s + rr, gk = k0 + kk;\n", it, base);
	if (!which && mm->conv) { /* the im2col element, 0 in the padding */
		kf_buf_printf(b, "      long long cix = 0;\n      %s[kk][rr] = (gr < %lld && gk < %lld && ", sm, (long long)R,
			      (long long)K);
		kx_conv_gather_call(mm, "gr", "gk", b);
		kf_buf_puts(b, ") ? ");
		kf_buf_printf(b, "(%s)", kx_mm_acc_type(mm));
		kx_load(b, op->st, "p%d[cix]", op->param);
		kf_buf_printf(b, " : (%s)0;\n    }\n", kx_mm_acc_type(mm));
		return;
	}
	kf_buf ix = {0}, v = {0};
	kf_buf_printf(&ix, "%s + %s * ", off, kfast ? "gr" : "gk");
	kx_dim(k, &ix, kfast ? K : R, kfast ? sK : sR);
	kf_buf_printf(&ix, " + %s", kfast ? "gk" : "gr");
	kf_buf_putc(&ix, '\0');
	kx_mm_operand(k, mm, which, ix.p, &v);
	kf_buf_printf(b, "      %s[kk][rr] = (gr < ", sm);
	kx_dim(k, b, R, sR);
	kf_buf_puts(b, " && gk < ");
	kx_dim(k, b, K, sK);
	kf_buf_printf(b, ") ? %.*s : (%s)0;\n    }\n", (int)v.n, v.p, kx_mm_acc_type(mm));
	kf_buf_free(&ix);
	kf_buf_free(&v);
}

static int emit_fma(kx *k, kx_mm *mm)
{
	const kf_mm_config *c = &mm->cfg;
	int tx = c->bn / c->wn, ty = c->bm / c->wm, threads = tx * ty;
	const char *acc = kx_mm_acc_type(mm), *it = kx_it(k);
	kf_buf *b = &k->b;
	k->k->block = threads;
	k->k->units = (mm->N + c->bn - 1) / c->bn;
	k->k->grid_y = (unsigned)((mm->M + c->bm - 1) / c->bm);
	bool split = c->sk > 1;
	k->k->grid_z = (unsigned)(mm->nb * (split ? c->sk : 1));
	kf_buf ao = {0}, bo = {0};
	kx_mm_batch_off(k, mm, 0, &ao);
	kx_mm_batch_off(k, mm, 1, &bo);
	kf_buf_printf(b, "  __shared__ %s kf_as[%d][%d], kf_bs[%d][%d];\n", acc, c->bk, c->bm + 1, c->bk, c->bn + 1);
	if (split) {
		kx_mm_splitk_head(k, mm);
		kf_buf_printf(b, "  const int tx = threadIdx.x %% %d, ty = threadIdx.x / %d;\n", tx, tx);
	} else {
		kf_buf_printf(b, "  const int tx = threadIdx.x %% %d, ty = threadIdx.x / %d, z = blockIdx.z;\n", tx, tx);
	}
	kf_buf_printf(b, "  const %s bm = (%s)blockIdx.y * %d, bn = (%s)blockIdx.x * %d;\n", it, it, c->bm, it, c->bn);
	kf_buf_printf(b, "  const %s aoff = %.*s, boff = %.*s;\n", it, (int)ao.n, ao.p, (int)bo.n, bo.p);
	if (mm->conv) /* A is gathered (emit_conv.c) */
		kf_buf_puts(b, "  (void)aoff;\n");
	kf_buf_free(&ao);
	kf_buf_free(&bo);
	kf_buf_printf(b, "  %s acc[%d][%d];\n#pragma unroll\n  for (int i = 0; i < %d; i++)\n#pragma unroll\n"
		      "    for (int j = 0; j < %d; j++) acc[i][j] = 0;\n", acc, c->wm, c->wn, c->wm, c->wn);
	if (split)
		kf_buf_printf(b, "  for (%s k0 = kbeg; k0 < kend; k0 += %d) {\n", it, c->bk);
	else {
		kf_buf_printf(b, "  for (%s k0 = 0; k0 < ", it);
		kx_mm_dim(k, b, mm, 'K');
		kf_buf_printf(b, "; k0 += %d) {\n", c->bk);
	}
	fma_load(k, mm, 0, threads);
	fma_load(k, mm, 1, threads);
	kf_buf_printf(b, "    __syncthreads();\n#pragma unroll\n    for (int kk = 0; kk < %d; kk++) {\n", c->bk);
	kf_buf_printf(b, "      %s av[%d], bv[%d];\n", acc, c->wm, c->wn);
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++) av[i] = kf_as[kk][ty + i * %d];\n", c->wm, ty);
	kf_buf_printf(b, "#pragma unroll\n      for (int j = 0; j < %d; j++) bv[j] = kf_bs[kk][tx + j * %d];\n", c->wn, tx);
	kf_buf_printf(b, "#pragma unroll\n      for (int i = 0; i < %d; i++)\n#pragma unroll\n"
		      "        for (int j = 0; j < %d; j++) acc[i][j] += av[i] * bv[j];\n    }\n"
		      "    __syncthreads();\n  }\n", c->wm, c->wn);
	if (split) {
		int ext[2] = {c->wm, c->wn};
		kx_mm_splitk_reduce(k, mm, threads, 2, ext);
	}
	kf_buf_printf(b, "#pragma unroll\n  for (int i = 0; i < %d; i++)\n#pragma unroll\n  for (int j = 0; j < %d; j++) {\n",
		      c->wm, c->wn);
	kf_buf_printf(b, "    const %s row = bm + ty + i * %d, col = bn + tx + j * %d;\n", it, ty, tx);
	kf_buf_puts(b, "    if (row < ");
	kx_mm_dim(k, b, mm, 'M');
	kf_buf_puts(b, " && col < ");
	kx_mm_dim(k, b, mm, 'N');
	kf_buf_puts(b, ") ");
	kx_mm_epi_call(k, b);
	kf_buf_puts(b, "z, row, col, acc[i][j]);\n  }\n");
	return 0;
}

/* ---- entry ------------------------------------------------------------------------------ */

int kx_emit_matmul(kx *k)
{
	kx_mm mm;
	if (analyse_kx(k, &mm, false) != 0)
		return -1;
	if (mm.nb > 65535)
		return kx_fail(k, "matmul with more than 65535 batches");
	if (mm.conv && (mm.cv.G != 1 || !mm.cv.cl)) { /* grouped, depthwise, channels-first: the direct kernel */
		if (kx_mm_epilogue(k, &mm) != 0)
			return -1;
		return kx_conv_emit_direct(k, &mm);
	}
	if (k->part)
		return kx_mm_emit_part(k, &mm);
	choose_config(k, &mm);
	/* folded batches whose rows pass the grid's 65535 row tiles (at the
	 * bucket's size, so that a bucket shares its kernel) run unfolded,
	 * the batches in gridDim.z */
	if (mm.fold && mm.cfg.algo != KF_MM_GEMV && (kx_rep(k, mm.M, mm.sM) + mm.cfg.bm - 1) / mm.cfg.bm > 65535) {
		if (analyse_kx(k, &mm, true) != 0)
			return -1;
		choose_config(k, &mm);
	}
	if (mm.cfg.algo != KF_MM_GEMV && (mm.M + mm.cfg.bm - 1) / mm.cfg.bm > 65535)
		return kx_fail(k, "matmul with more than 65535 row tiles");
	if (mm.conv)
		kx_conv_helpers(k);
	bool staged = (mm.cfg.algo == KF_MM_WG || mm.cfg.algo == KF_MM_WGC) && mm.cfg.ss && kx_mm_epis_fits(k);
	if (!staged && kx_mm_epilogue(k, &mm) != 0)
		return -1;
	switch (mm.cfg.algo) {
	case KF_MM_MMA: return kx_mm_emit_mma(k, &mm);
	case KF_MM_GEMV: return kx_mm_emit_gemv(k, &mm);
	case KF_MM_WG: return kx_mm_emit_wgmma(k, &mm);
	case KF_MM_WGC: return kx_conv_emit_wgc(k, &mm);
	default: return emit_fma(k, &mm);
	}
}
