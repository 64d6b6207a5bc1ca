/* emit_reduce.c: row kernels (kind = "reduce": reductions over trailing
 * axes with their element-wise prologue and epilogue); the generic
 * reduction kernel (any axes) is emit_reduce_generic.c's.
 *
 * A row kernel splits its input F into R rows of C elements.  TPR threads
 * (a power of two, 32..1024) share a row; each holds K = NJ * V elements
 * of every per-element value in registers (NJ vectors of V elements, 16
 * bytes each when C allows), so a row is read once and written once however
 * many reductions it goes through (softmax, layer norm).  Reductions are a
 * per-thread loop, warp shuffles, then shared memory across warps
 * (kf_rowred in the prelude).  A block holds block / TPR rows; one block
 * per group of rows, or a grid-stride loop over them (KFUSE_ROW_*:
 * kx_tune).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "fusion.h"

typedef struct row {
	kf_type F;
	int a;
	int64_t R, C;
	int64_t sR, sC;    /* R's and C's symbolic forms (kx_dim): rows B*T of a [B,T,768] row
			    * kernel; C is symbolic in a softmax over T keys */
	int V, TPR, NJ, K, RPB, block;
	bool need_mask;
	unsigned smem;     /* bit per compute kind that needs shared memory: f, d, l */
} row;

/* memo: ix = 1 for per-element arrays, 0 for per-row scalars */
static int memo_find(kx *k, kf_vid v, int *arr)
{
	for (uint32_t i = 0; i < k->nmemo; i++)
		if (k->memo[i].v == v) {
			*arr = k->memo[i].ix;
			return k->memo[i].t;
		}
	return -1;
}

static int memo_add(kx *k, kf_vid v, int arr)
{
	if (k->nmemo == k->capmemo) {
		k->capmemo = k->capmemo ? k->capmemo * 2 : 32;
		k->memo = realloc(k->memo, k->capmemo * sizeof *k->memo);
	}
	int t = k->ntmp++;
	k->memo[k->nmemo++] = (kx_memo){v, arr, t};
	return t;
}

static const char *sm_name(const char *ct, row *w)
{
	if (strcmp(ct, "double") == 0) {
		w->smem |= 2;
		return "kf_smd";
	}
	if (strcmp(ct, "long long") == 0) {
		w->smem |= 4;
		return "kf_sml";
	}
	w->smem |= 1;
	return "kf_smf";
}

/* Writes C (kx_dim). */
static void put_c(kx *k, kf_buf *b, const row *w)
{
	kx_dim(k, b, w->C, w->sC);
}

static void valid(kx *k, kf_buf *b, row *w, const char *e)
{
	if (w->V > 1)
		kf_buf_printf(b, "(lane + (%s / %d) * %d) * %d < ", e, w->V, w->TPR, w->V);
	else
		kf_buf_printf(b, "lane + %s * %d < ", e, w->TPR);
	put_c(k, b, w);
}

/* The condition for touching vector j of a row: rv when the last block has
 * rows past the end (with_row), c0 < C when the row's vectors do not fill
 * every thread's NJ; false when it always holds. */
/* Whether the last block can have rows past R (a sized plan: for some
 * size, unless R is a multiple of RPB for every one). */
static bool rows_past(const kx *k, const row *w)
{
	return !kx_multiple(k, w->R, w->sR, w->RPB);
}

static bool guard_cond(kx *k, const row *w, bool with_row, kf_buf *out)
{
	bool col = w->need_mask, rw = with_row && rows_past(k, w);
	kf_buf_printf(out, "%s%s", rw ? "rv" : "", rw && col ? " && " : "");
	if (col) {
		kf_buf_puts(out, "c0 < ");
		put_c(k, out, w);
	}
	kf_buf_putc(out, '\0');
	return col || rw;
}

/* Loads param p (value v) with row class rc; returns the temporary. */
static int load(kx *k, row *w, kf_vid v, int p, kf_rowclass rc, int *arr)
{
	kf_dtype dt = kx_dt(k, v);
	const char *st = kx_st(dt), *ct = kx_ct(dt);
	kf_buf *b = &k->cur;
	if (rc == KF_RC_ROW || rc == KF_RC_SCALAR) {
		int t = memo_add(k, v, 0);
		*arr = 0;
		kf_buf_printf(b, "    const %s t%d = ", ct, t);
		if (rc == KF_RC_ROW) {
			kf_buf_puts(b, "rv ? ");
			kx_load(b, dt, "p%d[row]", p);
			kf_buf_printf(b, " : (%s)0;\n", ct);
		} else {
			kx_load(b, dt, "p%d[0]", p);
			kf_buf_puts(b, ";\n");
		}
		return t;
	}
	int t = memo_add(k, v, 1);
	*arr = 1;
	kf_buf at = {0}, cond = {0};
	if (rc == KF_RC_FULL) {
		kf_buf_puts(&at, "row * ");
		put_c(k, &at, w);
		kf_buf_puts(&at, " + c0");
	} else {
		kf_buf_puts(&at, "c0");
	}
	kf_buf_putc(&at, '\0');
	/* a FULL input is streamed (read once: cache hints); a COL one (a
	 * gamma) is read by every row */
	const char *ld = rc == KF_RC_FULL ? kx_vld_stream(k) : "kf_vld";
	kf_buf_printf(b, "    __align__(16) %s t%ds[%d];\n#pragma unroll\n    for (int j = 0; j < %d; j++) {\n"
		      "      const int c0 = (lane + j * %d) * %d;\n",
		      st, t, w->K, w->NJ, w->TPR, w->V);
	if (guard_cond(k, w, rc == KF_RC_FULL, &cond))
		kf_buf_printf(b, "      if (%s) %s<%s, %d>(t%ds + j * %d, p%d + %s);\n"
			      "      else for (int l = 0; l < %d; l++) t%ds[j * %d + l] = (%s)0;\n    }\n",
			      cond.p, ld, st, w->V, t, w->V, p, at.p, w->V, t, w->V, st);
	else
		kf_buf_printf(b, "      %s<%s, %d>(t%ds + j * %d, p%d + %s);\n    }\n", ld, st, w->V, t, w->V, p, at.p);
	kf_buf_free(&at);
	kf_buf_free(&cond);
	kf_buf_printf(b, "    %s t%d[%d];\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = ", ct, t, w->K,
		      w->K, t);
	kx_load(b, dt, "t%ds[e]", t);
	kf_buf_puts(b, ";\n");
	return t;
}

/* A reference to value v in a per-element (elem) or per-row context. */
static int ref(kx *k, row *w, kf_vid v, bool elem, char *out, size_t n)
{
	int arr = 0, t = memo_find(k, v, &arr);
	if (t < 0) {
		int p = kx_param(k, v);
		kf_rowclass rc = kf_fuse_rowclass(&w->F, w->a, kf_vtype(k->g, v), elem);
		if (p < 0)
			return kx_fail(k, "value used before it is computed in a row kernel");
		if (rc == KF_RC_BAD || (!elem && (rc == KF_RC_FULL || rc == KF_RC_COL)))
			return kx_fail(k, "an input's shape does not fit the rows of this kernel");
		t = load(k, w, v, p, rc, &arr);
	}
	if (arr && !elem)
		return kx_fail(k, "a per-element value is read per row");
	snprintf(out, n, arr ? "t%d[e]" : "t%d", t);
	return 0;
}

static void rowred(kx *k, row *w, int t, const char *ct, const char *op)
{
	kf_buf_printf(&k->cur, "    t%d = kf_rowred<%d>(t%d, %s, kf_op%s());\n", t, w->TPR, t, sm_name(ct, w), op);
}

/* acc (declared) op= src[e] over the valid elements. */
static void accumulate(kx *k, row *w, const char *acc, const char *fmt_src, const char *op)
{
	kf_buf_puts(&k->cur, "#pragma unroll\n    for (int e = 0; e < ");
	kf_buf_printf(&k->cur, "%d; e++) ", w->K);
	if (w->need_mask) {
		kf_buf_puts(&k->cur, "if (");
		valid(k, &k->cur, w, "e");
		kf_buf_puts(&k->cur, ") ");
	}
	if (strcmp(op, "sum") == 0)
		kf_buf_printf(&k->cur, "%s += %s;\n", acc, fmt_src);
	else
		kf_buf_printf(&k->cur, "%s = kf_%s(%s, %s);\n", acc, op, acc, fmt_src);
}

const char *kx_red_ident(const char *op, const char *ct)
{
	bool fl = strcmp(ct, "float") == 0, db = strcmp(ct, "double") == 0;
	if (strcmp(op, "sum") == 0)
		return "0";
	if (strcmp(ct, "bool") == 0) /* i1: max is any, min is all */
		return strcmp(op, "max") == 0 ? "false" : "true";
	if (strcmp(op, "max") == 0)
		return fl ? "-KF_INF" : db ? "-KF_DINF" : "(-9223372036854775807LL - 1)";
	return fl ? "KF_INF" : db ? "KF_DINF" : "9223372036854775807LL";
}

/* layer_norm(x, scale, bias) of row op n, x read as xs: the mean, the
 * variance of the deviations, then each element normalised. */
static int layer_norm_op(kx *k, row *w, kf_nid n, const char *xs)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	kf_vid res = kf_res(g, n, 0);
	kf_dtype dt = kx_dt(k, res);
	const char *ct = kx_ct(dt);
	char buf[64];
	kf_buf *b = &k->cur;
	char sc[32] = "", bi[32] = "";
	if (x->nin > 1 && ref(k, w, kf_in(g, n, 1), true, sc, sizeof sc) != 0)
		return -1;
	if (x->nin > 2 && ref(k, w, kf_in(g, n, 2), true, bi, sizeof bi) != 0)
		return -1;
	double eps = kf_attr_float(g, n, "epsilon", 1e-5);
	int mu = k->ntmp++, d = k->ntmp++, var = k->ntmp++;
	kf_buf_printf(b, "    %s t%d = 0;\n", ct, mu);
	snprintf(buf, sizeof buf, "t%d", mu);
	accumulate(k, w, buf, xs, "sum");
	rowred(k, w, mu, ct, "sum");
	kf_buf_printf(b, "    t%d = t%d / (%s)", mu, mu, ct);
	put_c(k, b, w);
	kf_buf_puts(b, ";\n");
	kf_buf_printf(b, "    %s t%d[%d], t%d = 0;\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = %s - t%d;\n",
		      ct, d, w->K, var, w->K, d, xs, mu);
	char ds[40];
	snprintf(ds, sizeof ds, "t%d[e] * t%d[e]", d, d);
	snprintf(buf, sizeof buf, "t%d", var);
	accumulate(k, w, buf, ds, "sum");
	rowred(k, w, var, ct, "sum");
	kf_buf_printf(b, "    const %s t%dr = kf_rsqrt(t%d / (%s)", ct, var, var, ct);
	put_c(k, b, w);
	kf_buf_puts(b, " + ");
	kx_literal(b, dt == KF_F64 ? KF_F64 : KF_F32, eps, 0);
	kf_buf_puts(b, ");\n");
	int y = memo_add(k, res, 1);
	kf_buf_printf(b, "    %s t%d[%d];\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = t%d[e] * t%dr",
		      ct, y, w->K, w->K, y, d, var);
	if (*sc)
		kf_buf_printf(b, " * %s", sc);
	if (*bi)
		kf_buf_printf(b, " + %s", bi);
	kf_buf_puts(b, ";\n");
	return 0;
}

static int row_op(kx *k, row *w, kf_nid n)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	kf_vid res = kf_res(g, n, 0);
	kf_dtype dt = kx_dt(k, res);
	const char *ct = kx_ct(dt);
	char xs[32], buf[64];
	if (ref(k, w, kf_in(g, n, 0), true, xs, sizeof xs) != 0)
		return -1;
	kf_buf *b = &k->cur;
	int op = x->op;
	if (op == KF_OP_REDUCE_SUM || op == KF_OP_REDUCE_MEAN || op == KF_OP_REDUCE_MAX ||
	    op == KF_OP_REDUCE_MIN) {
		const char *o = op == KF_OP_REDUCE_MAX ? "max" : op == KF_OP_REDUCE_MIN ? "min" : "sum";
		int t = memo_add(k, res, 0);
		kf_buf_printf(b, "    %s t%d = %s;\n", ct, t, kx_red_ident(o, ct));
		snprintf(buf, sizeof buf, "t%d", t);
		accumulate(k, w, buf, xs, o);
		rowred(k, w, t, ct, o);
		if (op == KF_OP_REDUCE_MEAN) {
			kf_buf_printf(b, "    t%d = t%d / (%s)", t, t, ct);
			put_c(k, b, w);
			kf_buf_puts(b, ";\n");
		}
		return 0;
	}
	if (op == KF_OP_SOFTMAX || op == KF_OP_LOG_SOFTMAX) {
		int m = k->ntmp++, ex = k->ntmp++, s = k->ntmp++;
		kf_buf_printf(b, "    %s t%d = %s;\n", ct, m, kx_red_ident("max", ct));
		snprintf(buf, sizeof buf, "t%d", m);
		accumulate(k, w, buf, xs, "max");
		rowred(k, w, m, ct, "max");
		kf_buf_printf(b, "    %s t%d[%d], t%d = 0;\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = kf_exp(%s - t%d);\n",
			      ct, ex, w->K, s, w->K, ex, xs, m);
		char es[32];
		snprintf(es, sizeof es, "t%d[e]", ex);
		snprintf(buf, sizeof buf, "t%d", s);
		accumulate(k, w, buf, es, "sum");
		rowred(k, w, s, ct, "sum");
		int y = memo_add(k, res, 1);
		if (op == KF_OP_SOFTMAX)
			kf_buf_printf(b, "    %s t%d[%d];\n    const %s t%dr = (%s)1 / t%d;\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = t%d[e] * t%dr;\n",
				      ct, y, w->K, ct, s, ct, s, w->K, y, ex, s);
		else
			kf_buf_printf(b, "    %s t%d[%d];\n    const %s t%dl = t%d + kf_log(t%d);\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = %s - t%dl;\n",
				      ct, y, w->K, ct, s, m, s, w->K, y, xs, s);
		return 0;
	}
	if (op == KF_OP_LAYER_NORM)
		return layer_norm_op(k, w, n, xs);
	return kx_fail(k, "op '%s' cannot run in a row kernel", kf_op(k->c, op)->name);
}

/* A constant's class by how the kernel reads it: a [2] constant in rows
 * of F = [2, 2] is a value per row to a per-row op and a column to a
 * layer norm's scale or an element-wise op over the row (numpy's
 * alignment from the right).  rc: its class as a per-row value. */
static kf_rowclass const_class(kx *k, const row *w, kf_vid v, kf_rowclass rc)
{
	kf_graph *g = k->g;
	bool along = false;
	kf_foreach_use(g, v, u) {
		kf_nid un = g->use[u].user;
		const kf_node *y = kf_N(g, un);
		if (y->op == KF_OP_YIELD)
			continue;
		bool ln_operand = false;
		for (uint32_t i = 1; y->op == KF_OP_LAYER_NORM && i < y->nin; i++)
			ln_operand = ln_operand || kf_in(g, un, i) == v;
		kf_rowclass yc = y->nres ? kf_fuse_rowclass(&w->F, w->a, kf_vtype(g, kf_res(g, un, 0)), false) : rc;
		along = along || ln_operand || yc == KF_RC_FULL || yc == KF_RC_COL;
	}
	return along ? kf_fuse_rowclass(&w->F, w->a, kf_vtype(g, v), true) : rc;
}

static int elem_op(kx *k, row *w, kf_nid n)
{
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	kf_vid res = kf_res(g, n, 0);
	kf_dtype dt = kx_dt(k, res);
	kf_rowclass rc = kf_fuse_rowclass(&w->F, w->a, kf_vtype(g, res), false);
	if (x->op == KF_OP_CONST)
		rc = const_class(k, w, res, rc);
	if (rc == KF_RC_BAD)
		return kx_fail(k, "'%s' does not fit the rows of this kernel", kf_op(k->c, x->op)->name);
	bool elem = rc == KF_RC_FULL || rc == KF_RC_COL;
	kf_buf e = {0};
	if (x->op == KF_OP_CONST) {
		/* small dense constants index by their class; splats are literals */
		const char *ix = rc == KF_RC_FULL ? "row * 0" : "0";
		char ib[96];
		kf_buf fb = {0};
		if (rc == KF_RC_FULL) {
			kf_buf_puts(&fb, "row * ");
			put_c(k, &fb, w);
			kf_buf_printf(&fb, " + (lane + (e / %d) * %d) * %d + e %% %d", w->V, w->TPR, w->V, w->V);
			kf_buf_putc(&fb, '\0');
			ix = fb.p;
		} else if (rc == KF_RC_COL) {
			snprintf(ib, sizeof ib, "(lane + (e / %d) * %d) * %d + e %% %d", w->V, w->TPR, w->V, w->V);
			ix = ib;
		} else if (rc == KF_RC_ROW) {
			ix = "row";
		}
		kx_const_elem(k, n, ix, &e);
		kf_buf_free(&fb);
	} else {
		char names[3][32];
		const char *a[3] = {names[0], names[1], names[2]};
		if (x->nin > 3 || x->nres != 1)
			return kx_fail(k, "op '%s' cannot run in a row kernel", kf_op(k->c, x->op)->name);
		for (uint32_t i = 0; i < x->nin; i++)
			if (ref(k, w, kf_in(g, n, i), elem, names[i], sizeof names[i]) != 0)
				return -1;
		if (elem && x->op == KF_OP_DIV && kf_dtype_is_float(dt) && !strchr(names[1], '[')) {
			/* a row divided by a per-row value (softmax's sum): one
			 * reciprocal per row, a multiplication per element (within
			 * 1.5 ulp of the division) */
			int r = k->ntmp++;
			kf_buf_printf(&k->cur, "    const %s t%d = (%s)1 / %s;\n", kx_ct(dt), r, kx_ct(dt), names[1]);
			snprintf(names[1], sizeof names[1], "t%d", r);
			kf_buf_printf(&e, "(%s * %s)", names[0], names[1]);
		} else if (kx_op_expr(k, n, a, &e) != 0) {
			kf_buf_free(&e);
			return -1;
		}
	}
	kf_buf_putc(&e, '\0');
	int t = memo_add(k, res, elem);
	if (elem)
		kf_buf_printf(&k->cur, "    %s t%d[%d];\n#pragma unroll\n    for (int e = 0; e < %d; e++) t%d[e] = %s;\n",
			      kx_ct(dt), t, w->K, w->K, t, e.p);
	else
		kf_buf_printf(&k->cur, "    const %s t%d = %s;\n", kx_ct(dt), t, e.p);
	kf_buf_free(&e);
	return 0;
}

static int store(kx *k, row *w, uint32_t j)
{
	kf_vid v = k->out[j];
	kf_dtype dt = kx_dt(k, v);
	char r[32];
	int arr = 0, t = memo_find(k, v, &arr);
	if (t < 0) { /* an input yielded as is */
		bool elem = kf_fuse_rowclass(&w->F, w->a, kf_vtype(k->g, v), false) <= KF_RC_COL;
		if (ref(k, w, v, elem, r, sizeof r) != 0)
			return -1;
		t = memo_find(k, v, &arr);
	}
	kf_buf *b = &k->cur;
	if (!arr) {
		/* one value a row; a rank-0 output (a value no row changes, as
		 * gelu(0) beside a layer norm) is written once, by row 0: each
		 * row wrote o[row] past its one element (test_random_emu, seed
		 * 263) */
		bool one = kx_numel(k, v) == 1;
		kf_buf_printf(b, one ? "    if (rv && lane == 0 && row == 0) o%u[0] = " : "    if (rv && lane == 0) o%u[row] = ",
			      j);
		kx_store(b, dt, "t%d", t);
		kf_buf_puts(b, ";\n");
		return 0;
	}
	if (kx_numel(k, v) != w->R * w->C)
		return kx_fail(k, "a row kernel writes a per-element output that is not a full row");
	kf_buf cond = {0};
	bool g = guard_cond(k, w, true, &cond);
	kf_buf_printf(b, "#pragma unroll\n    for (int j = 0; j < %d; j++) {\n      const int c0 = (lane + j * %d) * %d;\n"
		      "      %s%s%s{\n        __align__(16) %s r[%d];\n#pragma unroll\n"
		      "        for (int l = 0; l < %d; l++) r[l] = ",
		      w->NJ, w->TPR, w->V, g ? "if (" : "", g ? cond.p : "", g ? ") " : "", kx_st(dt), w->V, w->V);
	kf_buf_free(&cond);
	char src[32];
	snprintf(src, sizeof src, "t%d[j * %d + l]", t, w->V);
	kx_store(b, dt, "%s", src);
	kf_buf_printf(b, ";\n        %s<%s, %d>(o%u + row * ", kx_vst_stream(k), kx_st(dt), w->V, j);
	put_c(k, b, w);
	kf_buf_puts(b, " + c0, r);\n      }\n    }\n");
	return 0;
}

/* The row kernel's shape: V lanes per vector, TPR threads per row, NJ
 * vectors per thread, RPB rows per block; and the launch (units, per_sm). */
static void geometry(kx *k, row *w)
{
	kf_graph *g = k->g;
	size_t maxsz = 1;
	for (uint32_t i = 0; i < k->nparam; i++)
		if (kf_dtype_size(kx_dt(k, k->param[i])) > maxsz)
			maxsz = kf_dtype_size(kx_dt(k, k->param[i]));
	for (uint32_t i = 0; i < k->nout; i++)
		if (kf_dtype_size(kx_dt(k, k->out[i])) > maxsz)
			maxsz = kf_dtype_size(kx_dt(k, k->out[i]));
	w->V = (int)(16 / maxsz);
	if (w->V > 8)
		w->V = 8;
	while (w->V > 1 && !kx_multiple(k, w->C, w->sC, w->V))
		w->V /= 2;
	/* a row length that varies (a sized plan): the geometry of its bucket's
	 * length, every vector masked */
	int64_t C = kx_rep(k, w->C, w->sC), nvec = (C + w->V - 1) / w->V;
	/* up to 8 vectors of a row per thread (a warp holds a row of 1024
	 * floats); a long body gets 2, so that its unrolled code (and the
	 * compile time) stays small: more threads share the row instead */
	int nelem = 0;
	for (uint32_t i = 0; i < k->nnode; i++)
		nelem += kf_fuse_rowclass(&w->F, w->a, kf_vtype(g, kf_res(g, k->node[i], 0)), false) <= KF_RC_COL;
	int maxnj = nelem > 16 ? 2 : 8;
	int warps = k->tune.row_warps;
	if (warps == 0) /* by the element size: kx_tuning says why */
		warps = maxsz < 4 ? 1 : 4;
	w->TPR = 32 * warps;
	while (w->TPR < 1024 && (nvec + w->TPR - 1) / w->TPR > maxnj)
		w->TPR *= 2;
	w->NJ = (int)((nvec + w->TPR - 1) / w->TPR);
	if (w->NJ < 1)
		w->NJ = 1;
	w->K = w->NJ * w->V;
	w->need_mask = nvec % w->TPR != 0 || nvec < w->TPR || kx_varies(k, w->sC);
	w->block = w->TPR < k->tune.row_block ? k->tune.row_block : w->TPR;
	w->RPB = w->block / w->TPR;
	k->k->block = w->block;
	/* 16 or more of a row's values a thread: a block per SM to fit, else
	 * ptxas 13 (no minimum given) caps the registers at 64 for occupancy
	 * and spills, and the backend splits the spilling kernel into a
	 * kernel per op (an f16 layer norm over rows of 1024, 32 values a
	 * thread: 8 bytes spilled, 9 kernels, 5x the time; 79 registers
	 * with the bound) */
	if (w->K >= 16)
		k->k->min_blocks = 1;
	int64_t units = (w->R + w->RPB - 1) / w->RPB, runits = (kx_rep(k, w->R, w->sR) + w->RPB - 1) / w->RPB;
	/* a grid of one block per RPB rows must fit gridDim.x; else it loops
	 * (a sized plan decides at its bucket's size: the text says which) */
	kx_grid(k, k->tune.row_grid == 0 && (units > 0x7fffffff || runits > 0x7fffffff) ? -1 : k->tune.row_grid, units);
}

int kx_emit_row(kx *k)
{
	kf_graph *g = k->g;
	row w = {0};
	kf_nid rn = KF_NONE;
	for (uint32_t i = 0; i < k->nnode && rn == KF_NONE; i++)
		if (kf_op(k->c, kf_N(g, k->node[i])->op)->trait == KF_TRAIT_REDUCE)
			rn = k->node[i];
	if (rn == KF_NONE || !kf_fuse_row_split(g, rn, &w.a, &w.R, &w.C))
		return kx_fail(k, "a reduce kernel without a reduction over trailing axes");
	w.F = *kf_vtype(g, kf_in(g, rn, 0));
	/* the rows' symbolic form: the dims before the reduced ones */
	const kf_type *sF = kx_stype(k, kf_in(g, rn, 0));
	w.sR = w.sC = 1;
	for (int d = 0; d < sF->rank; d++)
		if (d < w.a)
			w.sR = kx_smul(k, w.sR, sF->dim[d]);
		else
			w.sC = kx_smul(k, w.sC, sF->dim[d]);
	geometry(k, &w);
	k->cur.n = 0;
	for (uint32_t i = 0; i < k->nnode; i++) {
		kf_nid n = k->node[i];
		int rc = kf_op(k->c, kf_N(g, n)->op)->trait == KF_TRAIT_REDUCE ? row_op(k, &w, n)
										: elem_op(k, &w, n);
		if (rc != 0)
			return -1;
	}
	for (uint32_t j = 0; j < k->nout; j++)
		if (store(k, &w, j) != 0)
			return -1;
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	kf_buf_printf(b, "  const int lane = threadIdx.x %% %d, sub = threadIdx.x / %d;\n", w.TPR, w.TPR);
	if (w.TPR > 32) {
		if (w.smem & 1)
			kf_buf_printf(b, "  __shared__ float kf_smf[%d];\n", w.block / 32);
		if (w.smem & 2)
			kf_buf_printf(b, "  __shared__ double kf_smd[%d];\n", w.block / 32);
		if (w.smem & 4)
			kf_buf_printf(b, "  __shared__ long long kf_sml[%d];\n", w.block / 32);
	} else {
		/* kf_rowred needs a pointer even when it does not use it */
		kf_buf_puts(b, "  float *kf_smf = 0; double *kf_smd = 0; long long *kf_sml = 0;\n"
			       "  (void)kf_smf; (void)kf_smd; (void)kf_sml;\n");
	}
	if (k->k->per_sm < 0)
		kf_buf_printf(b, "  {\n    const %s r0 = (%s)blockIdx.x * %d;\n", it, it, w.RPB);
	else {
		kf_buf_printf(b, "  for (%s r0 = (%s)blockIdx.x * %d; r0 < ", it, it, w.RPB);
		kx_dim(k, b, w.R, w.sR);
		kf_buf_printf(b, "; r0 += (%s)gridDim.x * %d) {\n", it, w.RPB);
	}
	/* rv: the row exists (only the last block can have rows past R) */
	kf_buf_printf(b, "    const %s row = r0 + sub;\n", it);
	if (rows_past(k, &w)) {
		kf_buf_puts(b, "    const bool rv = row < ");
		kx_dim(k, b, w.R, w.sR);
		kf_buf_puts(b, ";\n");
	} else {
		kf_buf_puts(b, "    const bool rv = true;\n");
	}
	kf_buf_put(b, k->cur.p ? k->cur.p : "", k->cur.n);
	kf_buf_puts(b, "  }\n");
	return 0;
}
