/* emit_colreduce.c: column kernels (kind = "colreduce"): reductions over
 * any axes of one shape F (an axis that is not the last, or several) with
 * their element-wise prologue and epilogue, as one kernel.
 *
 * requires: a body the fuse pass grouped as a column group (fuse.h,
 * kf_fuse_col_split): every value F-aligned, every reduction reduces F over
 * the same dims S; keeps the graph unchanged.
 *
 * One thread owns one column o, a point of F's kept dims; consecutive
 * threads take consecutive columns, so when F's last dim is kept a warp
 * reads consecutive addresses.  The thread loops over the reduced dims once
 * per level of dependent reductions (softmax over axis 0: the max, then the
 * sum of exp(x - max), then a last loop that writes the per-element
 * outputs), and evaluates each value on demand at its current point of F:
 * a value that varies along S inside the loop, a value that does not (a
 * reduction's result and what is computed from it, a broadcast input) once
 * per column, before the loop that needs it.  Nothing but per-column
 * scalars lives between loops: each loop re-reads its inputs (L1/L2 hits
 * for the short columns these kernels see) instead of holding a column in
 * registers.  Float sums accumulate in double, as the interpreter does.
 */
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "fusion.h"

typedef struct col {
	kf_type F;
	unsigned S;
	int64_t M, L;
	int TX, TY;  /* split mode: a block of TX columns x TY rows; TY = 1: a thread a column */
	kf_buf *tb;  /* per-column code before the current loop */
	kf_buf *lb;  /* the current loop's body; NULL outside a loop */
} col;

/* memo: ix = 0 for per-column values, 1 for values of the current loop */
static int memo_find(kx *k, kf_vid v)
{
	for (uint32_t i = 0; i < k->nmemo; i++)
		if (k->memo[i].v == v)
			return k->memo[i].t;
	return -1;
}

static int memo_add(kx *k, kf_vid v, int scope, int t)
{
	if (k->nmemo == k->capmemo) {
		k->capmemo = k->capmemo ? k->capmemo * 2 : 32;
		k->memo = realloc(k->memo, k->capmemo * sizeof *k->memo);
	}
	k->memo[k->nmemo++] = (kx_memo){v, scope, t};
	return t;
}

/* Forgets the values of the loop that just ended (they are out of scope). */
static void memo_end_loop(kx *k)
{
	uint32_t j = 0;
	for (uint32_t i = 0; i < k->nmemo; i++)
		if (k->memo[i].ix == 0)
			k->memo[j++] = k->memo[i];
	k->nmemo = j;
}

/* dim d of t aligned to F from the right */
static int64_t adim(const col *w, const kf_type *t, int d)
{
	int r = w->F.rank;
	return d < r - t->rank ? 1 : t->dim[d - (r - t->rank)];
}

/* The linear index into an F-aligned value of type t at the thread's
 * current point: coordinate variables c<d> times t's strides. */
static void index_of(const col *w, const kf_type *t, kf_buf *o)
{
	int64_t st = 1;
	int n = 0;
	for (int d = w->F.rank - 1; d >= 0; d--) {
		int64_t td = adim(w, t, d);
		if (td > 1) {
			kf_buf_printf(o, n++ ? " + c%d" : "c%d", d);
			if (st != 1)
				kf_buf_printf(o, " * %lld", (long long)st);
		}
		st *= td;
	}
	if (!n)
		kf_buf_putc(o, '0');
}

/* Declares the coordinates c<d> of the dims in `sel` (the kept dims from
 * o, or the reduced dims from j, whose extent is n). */
static void coords(kx *k, const col *w, kf_buf *b, bool reduced, const char *x, int64_t n, const char *ind)
{
	int64_t st = 1;
	for (int d = w->F.rank - 1; d >= 0; d--) {
		int64_t fd = w->F.dim[d];
		if ((bool)(w->S >> d & 1) != reduced || fd == 1)
			continue;
		kf_buf_printf(b, "%sconst %s c%d = ", ind, kx_it(k), d);
		if (st != 1)
			kf_buf_printf(b, "(%s / %lld)", x, (long long)st);
		else
			kf_buf_puts(b, x);
		/* the outermost of these dims needs no modulus: x < n */
		if (st * fd != n)
			kf_buf_printf(b, " %% %lld", (long long)fd);
		kf_buf_puts(b, ";\n");
		st *= fd;
	}
}

static int value(kx *k, col *w, kf_vid v);

/* Emits "const ct tN = expr;" at the value's scope and memoises it. */
static int define(kx *k, col *w, kf_vid v, bool elem, kf_buf *e)
{
	int t = k->ntmp++;
	kf_buf_putc(e, '\0');
	kf_buf_printf(elem ? w->lb : w->tb, "%sconst %s t%d = %s;\n", elem ? "      " : "    ",
		      kx_ct(kx_dt(k, v)), t, e->p);
	kf_buf_free(e);
	return memo_add(k, v, elem, t);
}

/* The temporary holding value v at the thread's current point. */
static int value(kx *k, col *w, kf_vid v)
{
	int t = memo_find(k, v);
	if (t >= 0)
		return t;
	kf_graph *g = k->g;
	const kf_type *vt = kf_vtype(g, v);
	kf_colclass cc = kf_fuse_colclass(&w->F, w->S, vt);
	if (cc == KF_CC_BAD)
		return kx_fail(k, "a value's shape does not fit the columns of this kernel");
	bool elem = cc == KF_CC_ELEM;
	if (elem && !w->lb)
		return kx_fail(k, "a value that varies along the reduced dims is read once per column");
	kf_buf e = {0}, ix = {0};
	int p = kx_param(k, v);
	if (p >= 0) {
		index_of(w, vt, &ix);
		kf_buf_putc(&ix, '\0');
		kx_load(&e, kx_dt(k, v), "p%d[%s]", p, ix.p);
		kf_buf_free(&ix);
		return define(k, w, v, elem, &e);
	}
	kf_nid n = kf_def(g, v);
	if (n == KF_NONE || !kx_computed(k, v))
		return kx_fail(k, "value used before it is computed in a column kernel");
	const kf_node *x = kf_N(g, n);
	if (x->op == KF_OP_CONST) {
		index_of(w, vt, &ix);
		kf_buf_putc(&ix, '\0');
		kx_const_elem(k, n, ix.p, &e);
		kf_buf_free(&ix);
		return define(k, w, v, elem, &e);
	}
	if (x->op == KF_OP_BROADCAST_TO) {
		/* both F-aligned: the operand at the same point */
		t = value(k, w, kf_in(g, n, 0));
		return t < 0 ? -1 : memo_add(k, v, elem, t);
	}
	int trait = kf_op(k->c, x->op)->trait;
	if (trait == KF_TRAIT_REDUCE)
		return kx_fail(k, "a reduction's result is read before its loop ends");
	if ((trait != KF_TRAIT_ELEMENTWISE && trait != KF_TRAIT_BROADCAST) || x->nin > 3 || x->nres != 1)
		return kx_fail(k, "op '%s' cannot run in a column kernel", kf_op(k->c, x->op)->name);
	char names[3][16];
	const char *a[3] = {names[0], names[1], names[2]};
	for (uint32_t i = 0; i < x->nin; i++) {
		int ti = value(k, w, kf_in(g, n, i));
		if (ti < 0)
			return -1;
		snprintf(names[i], sizeof names[i], "t%d", ti);
	}
	if (kx_op_expr(k, n, a, &e) != 0) {
		kf_buf_free(&e);
		return -1;
	}
	return define(k, w, v, elem, &e);
}

/* The loop level of each reduction: one more than the deepest reduction its
 * input depends on, through the kernel's own values. */
static int levels(kx *k, int *lvl)
{
	kf_graph *g = k->g;
	int *depth = calloc(k->nnode + 1, sizeof *depth), top = -1;
	for (uint32_t i = 0; i < k->nnode; i++) {
		const kf_node *x = kf_N(g, k->node[i]);
		int d = 0;
		for (uint32_t a = 0; a < x->nin; a++) {
			kf_nid dn = kf_def(g, kf_in(g, k->node[i], a));
			for (uint32_t j = 0; j < i; j++)
				if (k->node[j] == dn && depth[j] > d)
					d = depth[j];
		}
		lvl[i] = -1;
		if (kf_op(k->c, x->op)->trait == KF_TRAIT_REDUCE) {
			lvl[i] = d;
			top = d > top ? d : top;
			d++;
		}
		depth[i] = d;
	}
	free(depth);
	return top;
}

/* Appends one loop over the reduced dims: the per-column code before it,
 * then the loop with its body. */
static void flush_loop(kx *k, col *w, kf_buf *body, kf_buf *tb, kf_buf *lb)
{
	const char *it = kx_it(k);
	kf_buf_put(body, tb->p ? tb->p : "", tb->n);
	if (w->TY == 1)
		kf_buf_printf(body, "    for (%s j = 0; j < %lld; j++) {\n", it, (long long)w->L);
	else
		kf_buf_printf(body, "    for (%s j = ty; j < %lld; j += %d) {\n", it, (long long)w->L, w->TY);
	coords(k, w, body, true, "j", w->L, "      ");
	kf_buf_put(body, lb->p ? lb->p : "", lb->n);
	kf_buf_puts(body, "    }\n");
	tb->n = lb->n = 0;
	memo_end_loop(k);
}

/* The loop of level `lv`: accumulates every reduction of that level. */
static int reduce_loop(kx *k, col *w, const int *lvl, int lv, kf_buf *body)
{
	kf_graph *g = k->g;
	kf_buf tb = {0}, lb = {0}, fin = {0}, comb = {0};
	w->tb = &tb;
	w->lb = &lb;
	int rc = 0;
	for (uint32_t i = 0; i < k->nnode && rc == 0; i++) {
		if (lvl[i] != lv)
			continue;
		kf_nid n = k->node[i];
		int op = kf_N(g, n)->op;
		kf_vid res = kf_res(g, n, 0);
		const char *ct = kx_ct(kx_dt(k, res));
		bool fl = kf_dtype_is_float(kx_dt(k, res)), db = strcmp(ct, "double") == 0;
		bool sum = op == KF_OP_REDUCE_SUM || op == KF_OP_REDUCE_MEAN;
		const char *acc = sum && fl ? "double" : ct;
		const char *id = sum ? "0" : op == KF_OP_REDUCE_MAX ? (db ? "-KF_DINF" : "-KF_INF") : (db ? "KF_DINF" : "KF_INF");
		if (op != KF_OP_REDUCE_SUM && op != KF_OP_REDUCE_MEAN && op != KF_OP_REDUCE_MAX && op != KF_OP_REDUCE_MIN) {
			rc = kx_fail(k, "op '%s' cannot run in a column kernel", kf_op(k->c, op)->name);
			break;
		}
		int a = k->ntmp++;
		kf_buf_printf(&tb, "    %s t%d = %s;\n", acc, a, id);
		int x = value(k, w, kf_in(g, n, 0));
		if (x < 0) {
			rc = -1;
			break;
		}
		if (sum)
			kf_buf_printf(&lb, "      t%d += (%s)t%d;\n", a, acc, x);
		else
			kf_buf_printf(&lb, "      t%d = kf_%s(t%d, t%d);\n", a, op == KF_OP_REDUCE_MAX ? "max" : "min", a, x);
		int t = k->ntmp++;
		kf_buf_printf(&fin, "    const %s t%d = (%s)", ct, t, ct);
		if (op == KF_OP_REDUCE_MEAN)
			kf_buf_printf(&fin, "(t%d / (%s)%lld);\n", a, acc, (long long)w->L);
		else
			kf_buf_printf(&fin, "t%d;\n", a);
		memo_add(k, res, 0, t);
		if (w->TY > 1) { /* the rows' partial accumulators, combined after the loop (floats exactly through double) */
			char var[16];
			snprintf(var, sizeof var, "t%d", a);
			kx_tree_combine(&comb, var, fl || db ? "kf_rd" : "kf_rl",
					sum ? NULL : op == KF_OP_REDUCE_MAX ? "max" : "min", w->TY);
		}
	}
	if (rc == 0) {
		/* the results join the memo above only after the loop: nothing in
		 * the loop reads them (levels) */
		flush_loop(k, w, body, &tb, &lb);
		kf_buf_put(body, comb.p ? comb.p : "", comb.n);
		kf_buf_put(body, fin.p ? fin.p : "", fin.n);
	}
	kf_buf_free(&comb);
	kf_buf_free(&tb);
	kf_buf_free(&lb);
	kf_buf_free(&fin);
	w->tb = w->lb = NULL;
	return rc;
}

/* The outputs: per-element ones in a last loop, per-column ones after it. */
static int stores(kx *k, col *w, kf_buf *body)
{
	kf_buf tb = {0}, lb = {0};
	int rc = 0;
	w->tb = &tb;
	w->lb = &lb;
	for (int pass = 0; pass < 2 && rc == 0; pass++) {
		bool any = false;
		for (uint32_t j = 0; j < k->nout && rc == 0; j++) {
			kf_vid v = k->out[j];
			const kf_type *t = kf_vtype(k->g, v);
			bool elem = kf_fuse_colclass(&w->F, w->S, t) == KF_CC_ELEM;
			if (elem != (pass == 0))
				continue;
			if (!kf_fuse_col_writable(&w->F, w->S, t)) {
				rc = kx_fail(k, "a column kernel writes an output that is not its columns' own");
				break;
			}
			int x = value(k, w, v);
			if (x < 0) {
				rc = -1;
				break;
			}
			kf_buf *b = elem ? &lb : &tb;
			kf_buf ix = {0};
			if (elem)
				index_of(w, &w->F, &ix);
			else
				kf_buf_putc(&ix, 'o');
			kf_buf_putc(&ix, '\0');
			/* a clamped column (o >= M) stores nothing; a column's own
			 * value is stored by its first row */
			const char *guard = w->TY == 1 ? "" : elem ? "if (kf_live) " : "if (kf_live && ty == 0) ";
			kf_buf_printf(b, "%s%so%u[%s] = ", elem ? "      " : "    ", guard, j, ix.p);
			kx_store(b, kx_dt(k, v), "t%d", x);
			kf_buf_puts(b, ";\n");
			kf_buf_free(&ix);
			any = true;
		}
		if (rc == 0 && pass == 0 && any) {
			flush_loop(k, w, body, &tb, &lb);
			w->lb = NULL;
		} else if (pass == 0) {
			w->lb = NULL;
		}
	}
	if (rc == 0)
		kf_buf_put(body, tb.p ? tb.p : "", tb.n);
	kf_buf_free(&tb);
	kf_buf_free(&lb);
	w->tb = w->lb = NULL;
	return rc;
}

/* A thread a column walks its L elements alone: right for many short
 * columns, slow for few long ones (an instance norm over 256x256 positions
 * of 32 channels is 32 threads).  Long columns (L >= 64) with fewer than
 * 65536 of them: a block takes TX columns, its TY rows (kx_split_rows)
 * split each loop, and combine each reduction before the next level reads
 * it.  TX = 8 adjacent columns when F's last dim is kept (a row then reads
 * 8 adjacent elements), else 1 (the rows read along the column). */
static void split_mode(col *w)
{
	w->TX = 1;
	w->TY = 1;
	if (w->L < 64 || w->M >= 65536)
		return;
	int r = w->F.rank;
	w->TX = r > 0 && !(w->S >> (r - 1) & 1) && w->F.dim[r - 1] > 1 ? 8 : 1;
	w->TY = kx_split_rows(w->L, w->TX);
}

int kx_emit_colreduce(kx *k)
{
	kf_graph *g = k->g;
	col w = {0};
	kf_nid rn = KF_NONE;
	for (uint32_t i = 0; i < k->nnode && rn == KF_NONE; i++)
		if (kf_op(k->c, kf_N(g, k->node[i])->op)->trait == KF_TRAIT_REDUCE)
			rn = k->node[i];
	if (rn == KF_NONE || !kf_fuse_col_split(g, rn, &w.S, &w.M, &w.L))
		return kx_fail(k, "a colreduce kernel without a reduction it can take");
	w.F = *kf_vtype(g, kf_in(g, rn, 0));
	split_mode(&w);
	for (uint32_t i = 0; i < k->nnode; i++) {
		kf_nid n = k->node[i];
		unsigned s2;
		int64_t M2, L2;
		if (kf_op(k->c, kf_N(g, n)->op)->trait == KF_TRAIT_REDUCE &&
		    (!kf_fuse_col_split(g, n, &s2, &M2, &L2) || s2 != w.S || M2 != w.M || L2 != w.L))
			return kx_fail(k, "the reductions of a colreduce kernel differ in shape");
	}
	int *lvl = malloc((k->nnode + 1) * sizeof *lvl);
	int top = levels(k, lvl);
	kf_buf body = {0};
	int rc = 0;
	for (int lv = 0; lv <= top && rc == 0; lv++)
		rc = reduce_loop(k, &w, lvl, lv, &body);
	if (rc == 0)
		rc = stores(k, &w, &body);
	free(lvl);
	if (rc != 0) {
		kf_buf_free(&body);
		return -1;
	}
	const char *it = kx_it(k);
	kf_buf *b = &k->b;
	if (w.TY == 1) {
		k->k->block = 256;
		k->k->units = (w.M + 255) / 256 < 1 ? 1 : (w.M + 255) / 256;
		kf_buf_printf(b, "  for (%s o = blockIdx.x * (%s)blockDim.x + threadIdx.x; o < %lld; o += (%s)gridDim.x * blockDim.x) {\n",
			      it, it, (long long)w.M, it);
	} else {
		kf_buf_printf(b, "  __shared__ double kf_rd[%d][%d];\n  __shared__ long long kf_rl[%d][%d];\n", w.TY, w.TX,
			      w.TY, w.TX);
		if (kx_split_open(k, "o", w.M, w.TX, w.TY) != 0)
			return -1;
	}
	coords(k, &w, b, false, "o", w.M, "    ");
	kf_buf_put(b, body.p ? body.p : "", body.n);
	kf_buf_puts(b, "  }\n");
	kf_buf_free(&body);
	return 0;
}
