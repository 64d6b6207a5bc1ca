/* emit_persistent_cell.c: the persistent kernel's cell (emit_persistent.c
 * says what the kernel is): the recurrence found in the body
 * (kx_pm_analyze: H, K, G, the gate offsets, the states, the per-step
 * inputs), the cell's element-wise ops for one unit as text into p->ew
 * (kx_pm_cell: states, h published, outputs; the loads that do not depend
 * on h issued before the step's wait for it), and the recurrent weight's
 * expression W(row, kk) (kx_pm_wexpr).
 */
#include <stdlib.h>
#include <string.h>
#include "emit_int.h"
#include "emit_persistent.h"

int kx_pm_bad(pm *p, const char *msg)
{
	snprintf(p->why, sizeof p->why, "%s", msg);
	return -1;
}

int kx_pm_slot(pm *p, int64_t *set, int *n, int64_t off, const char *msg)
{
	int s = 0;
	while (s < *n && set[s] != off)
		s++;
	if (s == *n) {
		if (*n == 64)
			return kx_pm_bad(p, msg);
		set[(*n)++] = off;
	}
	return s;
}

static int width(const kf_graph *g, kf_vid v)
{
	const kf_type *t = kf_vtype(g, v);
	return t->rank == 0 ? 1 : (int)t->dim[t->rank - 1];
}

/* The rows of a cell value: dim 0 of a rank-2 value, else 1. */
static int64_t rows(const kf_graph *g, kf_vid v)
{
	const kf_type *t = kf_vtype(g, v);
	return t->rank == 2 ? t->dim[0] : 1;
}

/* A value of the cell is [R,N] or [N] or a scalar, R being 1 or the batch:
 * f32, f16 or bf16 (computed in f32), or i1 (a sequence-length mask, kept in
 * a float temporary). */
static bool row_shape(const pm *p, kf_vid v)
{
	const kf_type *t = kf_vtype(p->k->g, v);
	return (t->dtype == KF_F32 || t->dtype == KF_F16 || t->dtype == KF_BF16 || t->dtype == KF_I1) && t->rank <= 2 &&
	       (t->rank < 2 || t->dim[0] == 1 || t->dim[0] == p->B) && kf_type_is_static(t);
}

/* The index of element (row b, column j + off) of a cell value of width w:
 * zc, column off alone (a value one wide, broadcast); zr, row 0 (one row,
 * broadcast over the batch).  Batch 1 writes no row. */
static void cell_ix(const pm *p, int64_t w, bool zc, bool zr, int64_t off, char *ix, size_t cap)
{
	char col[48];
	if (zc)
		snprintf(col, sizeof col, "%lld", (long long)off);
	else
		snprintf(col, sizeof col, "j + %lld", (long long)off);
	if (zr || p->B == 1)
		snprintf(ix, cap, "%s", col);
	else
		snprintf(ix, cap, "b * %lld + %s", (long long)w, col);
}

static int slot_of(const pm *p, kf_vid v)
{
	for (uint32_t s = 0; s < p->r.nslot; s++)
		if (p->r.init[s] == v)
			return (int)s;
	return -1;
}

int kx_pm_param(const pm *p, kf_vid v)
{
	const kf_graph *g = p->k->g;
	if (p->lyr < 0)
		return kx_param(p->k, v);
	/* a layer of a stack: its body argument is the layer node's operand,
	 * an argument of the stack's body (or computed there: -1) */
	const kf_block *b = &g->blk[kf_N(g, p->fn)->body];
	for (uint32_t i = 0; i < b->narg; i++)
		if (b->arg[i] == v)
			return kx_param(p->k, kf_in(g, p->fn, i));
	return -1;
}

/* The name of state s's scratch (groups past a block's first). */
static void st_name(const pm *p, uint32_t s, kf_buf *o)
{
	if (p->lyr >= 0)
		kf_buf_printf(o, "KFP_st[%d][%u]", p->lyr, s);
	else
		kf_buf_printf(o, "KFP_st[%u]", s);
}

/* Reads body argument or constant v at index text ix (an i1 as a bool). */
static int load_ext(pm *p, kf_vid v, const char *ix, kf_buf *o)
{
	kx *k = p->k;
	kf_nid d = kf_def(k->g, v);
	if (d != KF_NONE && kf_N(k->g, d)->op == KF_OP_CONST) {
		kx_const_elem(k, d, ix, o);
		return 0;
	}
	int a = kx_pm_param(p, v);
	if (a < 0 || d != KF_NONE)
		return kx_pm_bad(p, "the cell reads a value computed outside its steps");
	/* f16/bf16 widened to f32, i1 a bool */
	kx_load(o, kx_dt(k, v), "__ldg(p%d + (%s))", a, ix);
	return 0;
}

static int ex(pm *p, kf_vid v, int64_t off, bool zc, bool zr, kf_buf *o);
static int ex_in(pm *p, kf_nid n, uint32_t j, int64_t off, bool zc, bool zr, kf_buf *o);
static int ex_s(pm *p, kf_vid v, int hs, int64_t off, bool zc, bool zr, kf_buf *o);

/* A load e of the cell that does not depend on h (a per-step input row,
 * a bias, an initial state) is issued for the block's first group into a
 * register before the step's wait for h (or once before the steps when it
 * does not depend on t either), so that its latency (an L2 round trip)
 * overlaps the wait instead of following it; other groups of the block
 * (a grid smaller than the groups) load it where it is used. */
static void prefetch(pm *p, kf_buf *e, bool step)
{
	/* a load, as it is or widened from f16/bf16 (kx_load) */
	if (!p->pf || !e->p || (strncmp(e->p, "__ldg", 5) != 0 && strncmp(e->p, "kf_h2f(__ldg", 12) != 0 &&
				strncmp(e->p, "kf_b2f(__ldg", 12) != 0))
		return;
	int r = p->npf++;
	kf_buf_printf(step ? &p->pfs : &p->pf0, "      kf_pf%d = %.*s;\n", r, (int)e->n, e->p);
	kf_buf n = {0};
	kf_buf_printf(&n, "(grp == (int)blockIdx.x ? kf_pf%d : %.*s)", r, (int)e->n, e->p);
	kf_buf_free(e);
	*e = n;
}

/* The expression of node n's result at row b (zr: 0) and column j + off
 * (zc: off). */
static int ex_node(pm *p, kf_nid n, int64_t off, bool zc, bool zr, kf_buf *o)
{
	kx *k = p->k;
	kf_graph *g = k->g;
	const kf_node *x = kf_N(g, n);
	if (n == p->r.node[0]) { /* the recurrent matmul: a gate row */
		if (zc || (zr && p->B > 1))
			return kx_pm_bad(p, "the matmul's result is broadcast");
		int s = kx_pm_slot(p, p->S, &p->ns, off, "too many gate offsets");
		if (s < 0)
			return -1;
		if (p->B == 1)
			kf_buf_printf(o, "kf_sg[%d * %d + u]", s, p->upb);
		else
			kf_buf_printf(o, "kf_sg[(%d * %d + u) * %lld + b]", s, p->upb, (long long)p->B);
		return 0;
	}
	if (x->op == KF_OP_SLICE || x->op == KF_OP_RESHAPE) {
		kf_vid a = kf_in(g, n, 0);
		if (!row_shape(p, a))
			return kx_pm_bad(p, "a slice or reshape of a value that is not one row per sequence");
		int64_t st = 0;
		if (x->op == KF_OP_SLICE) {
			int64_t ax[2], s0[2], e0[2], sp[2] = {1, 1};
			int na = kf_attr_ints(g, n, "axes", ax, 2), ns = kf_attr_ints(g, n, "starts", s0, 2);
			int nsp = kf_attr_ints(g, n, "steps", sp, 2);
			int r = kf_vtype(g, a)->rank;
			if (na != 1 || ns != 1 || (ax[0] != r - 1 && ax[0] != -1) || (nsp >= 0 && sp[0] != 1) ||
			    kf_attr_ints(g, n, "ends", e0, 2) != 1)
				return kx_pm_bad(p, "a slice of the cell is not along its last axis with step 1");
			st = s0[0] < 0 ? s0[0] + width(g, a) : s0[0];
		} else if (width(g, a) != width(g, kf_res(g, n, 0)) || rows(g, a) != rows(g, kf_res(g, n, 0))) {
			return kx_pm_bad(p, "a reshape changes the row");
		}
		return ex_in(p, n, 0, off + st, zc, zr, o);
	}
	const char *args[KF_REC_MAXIN];
	kf_buf ab[KF_REC_MAXIN] = {{0}};
	int rc = 0;
	for (uint32_t i = 0; i < x->nin && rc == 0; i++) {
		kf_vid a = kf_in(g, n, i);
		bool one = width(g, a) == 1;
		rc = ex_in(p, n, i, one ? 0 : off, zc || one, zr || rows(g, a) == 1, &ab[i]);
		kf_buf_putc(&ab[i], 0);
		args[i] = ab[i].p;
	}
	if (rc == 0) {
		kf_buf e = {0};
		k->at = n;
		rc = kx_op_expr(k, n, args, &e);
		if (rc == 0) {
			int t = p->ntmp++;
			kf_buf_printf(&p->ew, "      const float t%d = %.*s;\n", t, (int)e.n, e.p);
			kf_buf_printf(o, "t%d", t);
		}
		kf_buf_free(&e);
	}
	for (uint32_t i = 0; i < x->nin; i++)
		kf_buf_free(&ab[i]);
	return rc;
}

/* The direction a per-step row slice moves (+1 or -1, from the analysis). */
static int dir_of(const pm *p, kf_nid d)
{
	for (int i = 0; i < p->ndir; i++)
		if (p->dir[i].n == d)
			return p->dir[i].sg;
	return 1;
}

/* Step t's rows of per-step input v (a slice of rows of argument a, from
 * row st0, moving by its length each step) at column text col. */
static int per_step(pm *p, kf_vid v, kf_nid d, bool zr, const char *col, kf_buf *o)
{
	kf_graph *g = p->k->g;
	kf_vid a = kf_in(g, d, 0);
	int64_t st[1], ax[1];
	if (kf_attr_ints(g, d, "starts", st, 1) != 1 || kf_attr_ints(g, d, "axes", ax, 1) != 1 || ax[0] != 0)
		return kx_pm_bad(p, "a per-step input is not a row slice");
	int sg = dir_of(p, d);
	int64_t n = rows(g, v);
	char rix[160];
	if (p->B == 1 && n == 1 && sg > 0)
		snprintf(rix, sizeof rix, "(%lld + t) * %d + %s", (long long)st[0], width(g, a), col);
	else if (n == 1)
		snprintf(rix, sizeof rix, "(%lld %c t) * %d + %s", (long long)st[0], sg > 0 ? '+' : '-', width(g, a), col);
	else
		snprintf(rix, sizeof rix, "(%lld %c t * %lld%s) * %d + %s", (long long)st[0], sg > 0 ? '+' : '-',
			 (long long)n, zr ? "" : " + b", width(g, a), col);
	return load_ext(p, a, rix, o);
}

/* ex of operand j of step-0 node n: a state operand names its slot (two
 * states may start from one value: CSE made the zero h0 and c0 of an LSTM
 * one constant, and the value alone read c as h on the H200) */
static int ex_in(pm *p, kf_nid n, uint32_t j, int64_t off, bool zc, bool zr, kf_buf *o)
{
	const kf_rec *r = &p->r;
	kf_vid v = kf_in(p->k->g, n, j);
	int hs = -1;
	if (n < r->nnode && r->stepof[n] == 1 && j < KF_REC_MAXIN && r->cls[r->idx[n] * KF_REC_MAXIN + j] == KF_REC_SLOT)
		hs = r->slot[r->idx[n] * KF_REC_MAXIN + j];
	return ex_s(p, v, hs, off, zc, zr, o);
}

static int ex(pm *p, kf_vid v, int64_t off, bool zc, bool zr, kf_buf *o)
{
	return ex_s(p, v, -1, off, zc, zr, o);
}

/* The expression of step-0 value v at row b (zr: 0) and column j + off
 * (zc: off), read as state slot hs when hs >= 0 (else the slot v starts,
 * if any). */
static int ex_s(pm *p, kf_vid v, int hs, int64_t off, bool zc, bool zr, kf_buf *o)
{
	kf_graph *g = p->k->g;
	if (!row_shape(p, v))
		return kx_pm_bad(p, "the cell has a value that is not one f32, f16 or bf16 row per sequence");
	zr = zr || rows(g, v) == 1;
	int s = hs >= 0 ? hs : slot_of(p, v);
	for (int i = 0; i < p->nmemo; i++)
		if (p->memo[i].v == v && p->memo[i].s == s && p->memo[i].off == off && p->memo[i].zc == zc &&
		    p->memo[i].zr == zr) {
			kf_buf_printf(o, "t%d", p->memo[i].t);
			return 0;
		}
	char ix[96];
	cell_ix(p, width(g, v), zc, zr, off, ix, sizeof ix);
	kf_nid d = kf_def(g, v);
	kf_buf e = {0};
	int rc = 0;
	int64_t ax, st, len;
	if (d != KF_NONE && d < p->r.nnode && p->r.stepof[d] == 1) {
		rc = ex_node(p, d, off, zc, zr, &e);
	} else if (s >= 0) {
		/* a state: unit j reads its own, kept in the scratch */
		if (zc || off != 0 || (zr && p->B > 1))
			return kx_pm_bad(p, "a state is read at another unit's index");
		char sj[48];
		if (p->B == 1)
			snprintf(sj, sizeof sj, "j");
		else
			snprintf(sj, sizeof sj, "b * %lld + j", (long long)p->H);
		kf_buf ld = {0};
		rc = load_ext(p, v, sj, &ld);
		prefetch(p, &ld, false);
		/* the block's first group keeps its states in registers (no
		 * round trip through memory on each step's critical path) */
		kf_buf sn = {0};
		st_name(p, (uint32_t)s, &sn);
		kf_buf_printf(&e, "(t == 0 ? %.*s : (grp == (int)blockIdx.x ? kf_rs[%d] : %.*s[%s]))",
			      (int)ld.n, ld.p, s, (int)sn.n, sn.p, sj);
		kf_buf_free(&sn);
		kf_buf_free(&ld);
	} else if (d != KF_NONE && kf_N(g, d)->op == KF_OP_SLICE && kf_def(g, kf_in(g, d, 0)) == KF_NONE) {
		/* a per-step input: rows of an argument */
		if (kf_in(g, d, 0) == p->xarg) {
			int64_t s0[1], a0[1];
			rc = zc || kf_attr_ints(g, d, "starts", s0, 1) != 1 || s0[0] != 0 ||
					     kf_attr_ints(g, d, "axes", a0, 1) != 1 || a0[0] != 0
				     ? kx_pm_bad(p, "the layer below's projection is read oddly")
				     : kx_stack_xrow(p, off, &e);
			goto done;
		}
		char col[96];
		cell_ix(p, width(g, v), zc, true, off, col, sizeof col);
		rc = per_step(p, v, d, zr, col, &e);
		prefetch(p, &e, true);
	} else if (d != KF_NONE && kf_rec_axis_slice(g, d, &ax, &st, &len) && ax != 0) {
		/* a column slice of a per-step input (its gate) */
		rc = ex_node(p, d, off, zc, zr, &e);
	} else {
		rc = load_ext(p, v, ix, &e);
		prefetch(p, &e, false);
	}
done:
	if (rc == 0) {
		int t;
		if (e.n > 1 && e.p[0] == 't' && e.p[1] >= '0' && e.p[1] <= '9') {
			t = atoi(e.p + 1);
		} else {
			t = p->ntmp++;
			kf_buf_printf(&p->ew, "      const float t%d = %.*s;\n", t, (int)e.n, e.p);
		}
		kf_buf_printf(o, "t%d", t);
		if (p->nmemo < 512)
			p->memo[p->nmemo++] = (typeof(p->memo[0])){v, off, zc, zr, s, t};
	}
	kf_buf_free(&e);
	return rc;
}

/* Finds the recurrence in the node's body and checks what the kernel
 * supports. */
int kx_pm_analyze(pm *p)
{
	kx *k = p->k;
	kf_graph *g = k->g;
	kf_bid b = kf_N(g, p->fn)->body;
	kf_vid cand[4];
	if (kf_rec_candidates(g, b, cand, 4) != 1)
		return kx_pm_bad(p, "the body has no single recurrent weight");
	if (kf_rec_analyze(g, b, cand[0], &p->r) != 0)
		return kx_pm_bad(p, p->r.why);
	kf_rec *r = &p->r;
	const kf_type *A = kf_vtype(g, kf_in(g, r->node[0], 0)), *R = kf_vtype(g, r->R);
	p->B = A->dim[0];
	if (p->B < 1 || p->B > KF_PM_BMAX)
		return kx_pm_bad(p, "batch sizes above 16 are not supported");
	/* f16/bf16 (an amp graph): loaded widened, computed in f32, stored
	 * rounded; the weights in registers as f32 */
	if (!kf_rec_dtype_ok(A->dtype) || R->dtype != A->dtype)
		return kx_pm_bad(p, "only f32, f16 and bf16 are supported");
	p->K = A->dim[1];
	p->G = R->dim[1];
	p->H = p->K;
	p->hslot = r->slot[0];
	for (uint32_t s = 0; s < r->nslot; s++)
		if (!row_shape(p, r->init[s]) || width(g, r->init[s]) != p->H || rows(g, r->init[s]) != p->B ||
		    kf_vtype(g, r->init[s])->rank != 2)
			return kx_pm_bad(p, "a state is not one row of the hidden size per sequence");
	/* which way each per-step input's rows move: under its column slices,
	 * the row slice of an argument */
	for (uint32_t i = 0; i < r->nper; i++)
		for (uint32_t j = 0; j < kf_N(g, r->node[i])->nin; j++) {
			if (r->cls[i * KF_REC_MAXIN + j] != KF_REC_EXT)
				continue;
			kf_vid a = kf_rec_in(r, r->node[i], j);
			int64_t ax, st, len;
			while (kf_def(g, a) != KF_NONE && kf_rec_axis_slice(g, kf_def(g, a), &ax, &st, &len) && ax != 0)
				a = kf_in(g, kf_def(g, a), 0);
			if (kf_def(g, a) != KF_NONE && p->ndir < 64)
				p->dir[p->ndir++] = (typeof(p->dir[0])){kf_def(g, a), r->esign[i * KF_REC_MAXIN + j]};
		}
	kf_nid d = kf_def(g, r->R);
	if (d != KF_NONE && (kf_N(g, d)->op != KF_OP_TRANSPOSE || kf_def(g, kf_in(g, d, 0)) != KF_NONE))
		return kx_pm_bad(p, "the recurrent weight is neither an argument nor an argument's transpose");
	/* the step hand-off: tagged values (the fast default), or grid.sync()
	 * of cooperative groups, which is simpler to trust: one device run
	 * with both tells a protocol bug from a math bug */
	const char *sync = getenv("KFUSE_PERSISTENT_SYNC");
	if (sync && *sync && strcmp(sync, "tags") != 0 && strcmp(sync, "grid") != 0)
		return kx_pm_bad(p, "KFUSE_PERSISTENT_SYNC must be 'tags' or 'grid'");
	p->gsync = sync && !strcmp(sync, "grid");
	if (p->gsync && p->lyr >= 0)
		return kx_pm_bad(p, "KFUSE_PERSISTENT_SYNC=grid is for single layers (stacks hand h over by tags)");
	/* tuning switches for the device (bench/gpu/lstm_debug.sh rows) */
	const char *pf = getenv("KFUSE_PERSISTENT_PF"), *hv = getenv("KFUSE_PERSISTENT_HV");
	p->pf = !(pf && !strcmp(pf, "0"));
	p->hv = hv && !strcmp(hv, "1") ? 1 : 2;
	if ((p->B * p->K) % 2 != 0)
		p->hv = 1;
	const char *env = getenv("KFUSE_PERSISTENT_UPB");
	int upb = env && atoi(env) > 0 ? atoi(env) : 0;
	/* about 128 groups: one block per SM on a large GPU; a stack of L
	 * layers about 512 (four blocks per SM, every layer resident at once:
	 * 68.5 us for 8 layers x 8 steps on the H200 against 75.5 us with 256
	 * groups, bench/results/2026-11-29-s2-gpu-lstm.txt, spills and all) */
	p->upb = upb ? upb : p->lyr < 0 ? (int)((p->H + 127) / 128) : (int)((p->nl * p->H + 511) / 512);
	if (p->upb > 32)
		p->upb = 32;
	/* a thread a (unit, sequence) in the cell */
	if (p->upb * p->B > NT)
		p->upb = (int)(NT / p->B);
	p->ng = (int)((p->H + p->upb - 1) / p->upb);
	return 0;
}

/* W(row, kk): element (kk, row) of the weight the matmul reads. */
void kx_pm_wexpr(pm *p, const char *row, const char *kk, kf_buf *o)
{
	kf_graph *g = p->k->g;
	kf_nid d = kf_def(g, p->r.R);
	kf_dtype dt = kx_dt(p->k, p->r.R); /* f16/bf16 widened: the registers hold f32 */
	if (d == KF_NONE) {
		kx_load(o, dt, "__ldg(p%d + (%s) * %lld + (%s))", kx_pm_param(p, p->r.R), kk, (long long)p->G, row);
		return;
	}
	int64_t perm[2] = {1, 0};
	kf_attr_ints(g, d, "perm", perm, 2);
	int a = kx_pm_param(p, kf_in(g, d, 0));
	if (perm[0] == 1) /* R = W^T: W[row][kk], read along kk: coalesced */
		kx_load(o, dt, "__ldg(p%d + (%s) * %lld + (%s))", a, row, (long long)p->K, kk);
	else
		kx_load(o, dt, "__ldg(p%d + (%s) * %lld + (%s))", a, kk, (long long)p->G, row);
}

/* e as output y stores it: rounded to f16/bf16, else as it is */
static void out_val(const kx *k, kf_vid y, const kf_buf *e, kf_buf *o)
{
	kf_dtype dt = kx_dt(k, y);
	if (dt == KF_F16 || dt == KF_BF16)
		kx_store(o, dt, "%.*s", (int)e->n, e->p);
	else
		kf_buf_put(o, e->p, e->n);
}

/* The cell of one unit: states kept, h published, outputs written. */
int kx_pm_cell(pm *p, unsigned T)
{
	kx *k = p->k;
	kf_graph *g = k->g;
	kf_rec *r = &p->r;
	kf_buf st = {0};
	int rc = 0;
	/* a state's element: j, or b * H + j for a batch */
	char sj[48], hj[48];
	snprintf(sj, sizeof sj, p->B == 1 ? "j" : "b * %lld + j", (long long)p->H);
	snprintf(hj, sizeof hj, p->B == 1 ? "j" : "b * %lld + j", (long long)p->K);
	for (uint32_t s = 0; s < r->nslot && rc == 0; s++) {
		kf_buf e = {0};
		rc = ex(p, r->sval[s], 0, false, false, &e);
		kf_buf sn = {0};
		st_name(p, s, &sn);
		kf_buf_printf(&st, "      if (grp == (int)blockIdx.x) kf_rs[%u] = %.*s; else %.*s[%s] = %.*s;\n",
			      s, (int)e.n, e.p, (int)sn.n, sn.p, sj, (int)e.n, e.p);
		kf_buf_free(&sn);
		if ((int)s == p->hslot && p->lyr >= 0)
			kf_buf_printf(&st, "      KFP_put(&KFP_hb[%d][t][%s], tag, %.*s);\n", p->lyr, hj, (int)e.n, e.p);
		else if ((int)s == p->hslot && p->gsync)
			kf_buf_printf(&st, "      ((volatile float *)KFP_hf[t & 1])[%s] = %.*s;\n", hj, (int)e.n, e.p);
		else if ((int)s == p->hslot)
			kf_buf_printf(&st, "      KFP_put(&KFP_hb[t & 1][%s], base + t + 1, %.*s);\n", hj, (int)e.n, e.p);
		kf_buf_free(&e);
	}
	for (uint32_t i = 0; i < p->ny && rc == 0; i++) {
		kf_vid y = p->yv[i];
		int q = p->yo[i];
		if (q < 0)
			continue; /* a sequence only the layer above reads */
		kf_nid d = kf_def(g, y);
		kf_buf e = {0};
		if (d != KF_NONE && kf_N(g, d)->op == KF_OP_CONCAT && kf_N(g, d)->nin == T) {
			/* every step's value in step order, or last step first (a
			 * reverse direction's output in time order) */
			kf_vid v0 = kf_in(g, d, 0), vl = kf_in(g, d, T - 1);
			kf_nid n0 = kf_def(g, v0), nl = kf_def(g, vl);
			bool fw = n0 != KF_NONE && n0 < r->nnode && r->stepof[n0] == 1;
			bool bw = nl != KF_NONE && nl < r->nnode && r->stepof[nl] == 1;
			kf_nid s0 = fw ? n0 : nl;
			for (uint32_t t = 0; t < T && (fw || bw); t++) {
				kf_nid at = kf_rec_at(r, t, s0);
				bool is = at != KF_NONE && kf_in(g, d, fw ? t : T - 1 - t) == kf_res(g, at, 0);
				fw = fw && is;
				bw = bw && !fw && is;
			}
			if ((!fw && !bw) || width(g, kf_res(g, s0, 0)) != p->H ||
			    rows(g, kf_res(g, s0, 0)) != p->B || (rc = ex(p, kf_res(g, s0, 0), 0, false, false, &e)) != 0) {
				kf_buf_free(&e);
				rc = rc ? rc : kx_pm_bad(p, "an output is a concat that is not one value of every step");
				break;
			}
			char tt[32];
			snprintf(tt, sizeof tt, fw ? "t" : "(%u - t)", T - 1);
			kf_buf sv = {0};
			out_val(k, y, &e, &sv);
			if (p->B == 1)
				kf_buf_printf(&st, "      o%d[%s * %lld + j] = %.*s;\n", q, tt, (long long)p->H, (int)sv.n, sv.p);
			else
				kf_buf_printf(&st, "      o%d[(%s * %lld + b) * %lld + j] = %.*s;\n", q, tt, (long long)p->B,
					      (long long)p->H, (int)sv.n, sv.p);
			kf_buf_free(&sv);
		} else if (d != KF_NONE && d < r->nnode && r->stepof[d] == T) {
			kf_nid n0 = r->node[r->idx[d]];
			if (width(g, y) != p->H || rows(g, y) != p->B ||
			    (rc = ex(p, kf_res(g, n0, 0), 0, false, false, &e)) != 0) {
				kf_buf_free(&e);
				rc = rc ? rc : kx_pm_bad(p, "an output is not as wide as the state");
				break;
			}
			kf_buf sv = {0};
			out_val(k, y, &e, &sv);
			kf_buf_printf(&st, "      if (t == %u) o%d[%s] = %.*s;\n", T - 1, q, sj, (int)sv.n, sv.p);
			kf_buf_free(&sv);
		} else {
			rc = kx_pm_bad(p, "an output is neither a step's value nor the sequence of one");
		}
		kf_buf_free(&e);
	}
	if (rc == 0)
		kf_buf_put(&p->ew, st.p, st.n);
	kf_buf_free(&st);
	return rc;
}
