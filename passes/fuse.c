/* fuse.c: the fuse pass: groups top-level nodes into fusion nodes, one
 * kernel each.
 *
 * requires: a verified graph; symbolic dims (f32[B,T,768]) are grouped at
 *   generic sizes, on a copy (kf_graph_probe), so that they fuse as the same
 *   graph would at any one size: two dims are equal at those sizes only when
 *   they are equal symbolically, so a group's shapes agree for every size;
 * keeps: values, names and locations of every op (moved into bodies);
 * breaks: node order (the block is re-sorted topologically at the end).
 *
 * Greedy, in program order: for every producer -> consumer edge the two
 * groups merge when the result can run as one kernel (see kf_fuse_kind and
 * fuse.h): same iteration space, reductions over one row shape or one column
 * split with their element-wise prologue and epilogue, no cycle, and within
 * the limits.  Then groups that read a common input merge (sibling,
 * multi-output fusion).  Reshapes at the edge of a reduction group stay
 * outside it, as aliases.  Each group of two or more ops becomes a fusion
 * node (fuse_build.c); small constants are copied into the bodies that read
 * them.  Every edge that stayed unfused keeps the reason of its last failed
 * attempt for --explain-fusion (fuse_explain.c).
 *
 * Why no merge makes a cycle.  Every top-level node is in exactly one group
 * (union-find over positions, union by size); the group graph has an edge
 * X -> Y when a member of X defines a value a member of Y reads.  The
 * invariant: the group graph is acyclic, and each group root carries a label
 * that increases along every edge (a topological order of the groups, in an
 * order-maintenance list).  Two groups A and B (lab[A] < lab[B]) may merge
 * if and only if no path of two or more edges leads from A to B (B cannot
 * reach A); the direct edge is the one being fused, and siblings need no
 * edge at all, so producer-consumer and sibling merges ask the same
 * question, whatever merges came before.  fuse_dag.c answers it with a
 * two-sided search bounded by the labels and, when the merge goes ahead,
 * keeps the labels a topological order by moving the smaller side's visited
 * groups past the merged one (as Pearce and Kelly's dynamic topological
 * order does); so every merge keeps the invariant, and the final sort
 * (kf_fuse_toposort) always finds an order.
 *
 * Cost.  n top-level nodes, e edges; S = max-nodes (256), I = max-inputs
 * (24), K = max-search (65536).  A merge attempt costs: O(1) for the size
 * and the policy; O(the two input lists + the uses of the values they
 * name) for the inputs, the lost outputs and a loop group's iteration space
 * (each group keeps its boundary, fuse_group.c); O(S) more for a row or
 * column group's shape check (its members); at most about 2K for the cycle
 * check, twice the edges of the cheaper side, which for neighbours is a
 * handful however big the groups or far apart their labels.  A merge then
 * moves the smaller output list (O(log n) moves per value over the pass)
 * and relabels O(log n) amortised per group moved.  Attempts are at most e
 * plus the sibling pairs (each value's users), so the pass is
 * O((n + e)(I + S + K)) at worst and near-linear where it matters:
 * bench/fuse_scale.sh and bench/results/2026-12-01-fuse-scale.md have the
 * numbers for 20k, 200k and 1M ops.  A cycle check that looks at more than
 * K edges gives up and the merge is refused (SEARCH_LIMIT): nothing is
 * ever merged unproven.
 */
#include <stdlib.h>
#include <string.h>
#include "fuse.h"
#include "fuse_int.h"
#include "pass.h"
#include "passes.h"

static const char *const reason_code[] = {
#define X(id, text) #id,
	KF_FUSE_REASONS(X)
#undef X
};
static const char *const reason_text[] = {
#define X(id, text) text,
	KF_FUSE_REASONS(X)
#undef X
};

const char *kf_fuse_reason_code(kf_fuse_reason r) { return r < KF_FR_COUNT ? reason_code[r] : "?"; }
const char *kf_fuse_reason_text(kf_fuse_reason r) { return r < KF_FR_COUNT ? reason_text[r] : "?"; }

void kf_fuse_opts_default(kf_fuse_opts *o)
{
	memset(o, 0, sizeof *o);
	o->siblings = true;
	o->max_inputs = 24;
	o->max_nodes = 256;
	o->max_regs = 160;
	o->max_row = 32768;
	o->max_search = 1 << 16;
}

/* ---- the grouping -------------------------------------------------------------- */

/* The row shape of the merged group: the F of its ROW groups, which must
 * agree (*F = KF_NONE when they do not).  False for two loop groups. */
static bool merged_rowshape(fz *z, uint32_t ga, uint32_t gb, kf_tid *F, int *a)
{
	bool found = false;
	for (int gi = 0; gi < 2; gi++) {
		uint32_t gr = gi ? gb : ga;
		if (z->gr[gr].gkind != G_ROW)
			continue;
		if (!found) {
			*F = z->rowT[gr];
			*a = z->rowA[gr];
			found = true;
		} else if (!fz_same_dims(z->g, z->rowT[gr], *F) || z->rowA[gr] != *a) {
			*F = KF_NONE;
		}
	}
	return found;
}

/* Checks that every op of the merged group can run in a row kernel over
 * F split at a; returns a reason or KF_FR_NONE; *regs gets the estimate. */
/* Notes that the group being checked reads v along its rows (how 1) or
 * one value a row (how 2); true when it read v the other way already.
 * When the rows' dims equal the row's ([8, 8]) an [8] value can be
 * either, and a kernel holds it one way: a layer norm's scale read along
 * the row beside an add that takes the same input per row (random graph
 * 294 of test_random_emu) made a kernel the emitter refused. */
static bool read_as(fz *z, kf_vid v, uint8_t how)
{
	if (z->ra_epoch[v] != z->vepoch) {
		z->ra_epoch[v] = z->vepoch;
		z->ra_how[v] = 0;
	}
	if (z->ra_how[v] && z->ra_how[v] != how)
		return true;
	z->ra_how[v] = how;
	return false;
}

static kf_fuse_reason check_row(fz *z, uint32_t ga, uint32_t gb, kf_tid FT, int a, int *regs)
{
	kf_graph *g = z->g;
	kf_type Fc = *kf_type_get(g->ctx, FT);
	const kf_type *F = &Fc;
	int64_t C = 1;
	for (int d = a; d < F->rank; d++)
		C *= F->dim[d];
	if (C > z->o->max_row)
		return KF_FR_REDUCE_LAYOUT;
	int live = 1, nred = 0;
	bool after_reduce = false;
	uint32_t cnt = kf_fuse_members(z, ga, gb);
	kf_fuse_mark_views(z, ga, gb, cnt);
	for (uint32_t i = 0; i < cnt; i++) {
		uint32_t p = z->mem[i];
		if (!fz_rmember(z, p, ga, gb))
			continue;
		kf_nid n = z->order[p];
		const kf_node *x = kf_N(g, n);
		if (z->gr[p].kind == KF_FK_ROW) {
			int a2;
			int64_t R2, C2;
			kf_fuse_row_split(g, n, &a2, &R2, &C2);
			if (!fz_same_dims(g, kf_V(g, kf_in(g, n, 0))->type, FT) || a2 != a)
				return KF_FR_SHAPE_MISMATCH;
			for (uint32_t i = 1; i < x->nin; i++) { /* layer_norm scale, bias */
				kf_vid v = kf_in(g, n, i);
				kf_rowclass k = kf_fuse_rowclass(F, a, kf_vtype(g, v), true);
				if (k != KF_RC_COL && k != KF_RC_SCALAR && k != KF_RC_FULL)
					return KF_FR_SHAPE_MISMATCH;
				if (k == KF_RC_COL && read_as(z, v, 1))
					return KF_FR_SHAPE_MISMATCH;
				/* read along the row (aligned from the right); one computed
				 * in the kernel per row (a [R] value when R's dims equal the
				 * row's: F = [2, 2]) would be read wrong.  A constant is
				 * indexed as its uses read it (emit_reduce.c). */
				kf_nid dn = kf_def(g, v);
				if (k == KF_RC_COL && fz_rmember(z, fz_pos_of(z, v), ga, gb) && dn != KF_NONE &&
				    kf_N(g, dn)->op != KF_OP_CONST && kf_fuse_rowclass(F, a, kf_vtype(g, v), false) >= KF_RC_ROW)
					return KF_FR_REDUCE_THEN_BROADCAST_MISMATCH;
			}
			after_reduce = true;
			/* a long chain of row ops (layer norm after layer norm) is
			 * legal in one kernel, but its unrolled code compiles slowly
			 * and gains little: a few reductions per kernel */
			if (++nred > KF_FUSE_MAX_REDUCTIONS)
				return KF_FR_TOO_MANY_NODES;
			continue;
		}
		if (x->op == KF_OP_RESHAPE || kf_op(g->ctx, x->op)->trait == KF_TRAIT_INJECTIVE ||
		    x->nres != 1)
			return KF_FR_SHAPE_MISMATCH;
		kf_rowclass rc = kf_fuse_rowclass(F, a, kf_vtype(g, x->res0), false);
		bool elem = rc == KF_RC_FULL || rc == KF_RC_COL;
		if (rc == KF_RC_BAD)
			return KF_FR_SHAPE_MISMATCH;
		for (uint32_t i = 0; i < x->nin; i++) {
			kf_vid v = kf_in(g, n, i);
			kf_rowclass k = kf_fuse_rowclass(F, a, kf_vtype(g, v), elem);
			if (k == KF_RC_BAD)
				return KF_FR_REDUCE_THEN_BROADCAST_MISMATCH;
			if ((k == KF_RC_COL || k == KF_RC_ROW) && read_as(z, v, k == KF_RC_COL ? 1 : 2))
				return KF_FR_SHAPE_MISMATCH;
			/* a value computed per row read per element must be indexed by
			 * row; one computed per element must not be read per row */
			uint32_t q = fz_pos_of(z, v);
			if (fz_rmember(z, q, ga, gb)) {
				bool prow = kf_fuse_rowclass(F, a, kf_vtype(g, v), false) >= KF_RC_ROW;
				if (prow && !(k == KF_RC_ROW || k == KF_RC_SCALAR))
					return KF_FR_REDUCE_THEN_BROADCAST_MISMATCH;
				if (!prow && !elem)
					return KF_FR_SHAPE_MISMATCH;
			}
		}
		if (elem && fz_outside_user(z, x->res0, ga, gb) && rc != KF_RC_FULL)
			return KF_FR_SHAPE_MISMATCH;
		/* per-element values still needed after a reduction stay in
		 * registers: one array of C/threads elements each */
		if (elem && !after_reduce)
			live++;
	}
	int64_t tpr = 32;
	while (tpr < 1024 && (C + tpr - 1) / tpr > 32)
		tpr *= 2;
	int64_t k = (C + tpr - 1) / tpr;
	*regs = (int)(24 + k * (live < 3 ? live : 3) + 8);
	return KF_FR_NONE;
}

/* Checks a loop group: one iteration space (N from merged_outputs), no
 * expensive value recomputed per element of a broadcast. */
static kf_fuse_reason check_loop(fz *z, uint32_t ga, uint32_t gb, int64_t N, bool allow)
{
	if (N == -2)
		return KF_FR_SHAPE_MISMATCH;
	if (allow || N < 0)
		return KF_FR_NONE;
	int64_t e = z->emin[ga] < z->emin[gb] ? z->emin[ga] : z->emin[gb];
	return e < N ? KF_FR_MULTI_USE_EXPENSIVE : KF_FR_NONE;
}

/* Tries to merge the groups of positions pp (producer) and pc (consumer);
 * returns the reason it did not, or KF_FR_NONE. */
static kf_fuse_reason try_merge(fz *z, uint32_t pp, uint32_t pc)
{
	uint32_t ga = kf_fuse_find(z, pp), gb = kf_fuse_find(z, pc);
	if (ga == gb)
		return KF_FR_NONE;
	kf_nid np = z->order[pp], nc = z->order[pc];
	int verdict = KF_FUSE_DEFAULT;
	if (z->o->policy.fn) {
		verdict = z->o->policy.fn(z->o->policy.ud, z->g, np, nc);
		if (verdict == KF_FUSE_VETO)
			return KF_FR_POLICY_VETO;
	}
	bool allow = verdict == KF_FUSE_ALLOW;
	if (!allow && z->gr[ga].size + z->gr[gb].size > (uint32_t)z->o->max_nodes)
		return KF_FR_TOO_MANY_NODES;
	kf_tid F = KF_NONE;
	int a = 0, kind = G_LOOP;
	unsigned S = 0;
	/* inputs first: they are the cheapest check that fails */
	if (kf_fuse_count_inputs(z, ga, gb) > z->o->max_inputs)
		return KF_FR_TOO_MANY_INPUTS;
	z->vepoch++; /* the view marks of an earlier check are stale */
	uint32_t lost[2];
	kf_fuse_lost_outputs(z, ga, gb, lost);
	int64_t N = -2; /* a row or column group's outputs need not agree */
	if (z->gr[ga].gkind == G_COL || z->gr[gb].gkind == G_COL) {
		kf_fuse_reason r = kf_fuse_merged_colshape(z, ga, gb, &F, &S);
		if (r == KF_FR_NONE)
			r = kf_fuse_check_col(z, ga, gb, F, S);
		if (r != KF_FR_NONE)
			return r;
		kind = G_COL;
	} else if (merged_rowshape(z, ga, gb, &F, &a)) {
		if (F == KF_NONE)
			return z->gr[ga].gkind == G_ROW ? KF_FR_REDUCE_THEN_BROADCAST_MISMATCH
						     : KF_FR_SHAPE_MISMATCH;
		int regs = 0;
		kf_fuse_reason r = check_row(z, ga, gb, F, a, &regs);
		if (r != KF_FR_NONE)
			return r;
		if (!allow && regs > z->o->max_regs)
			return KF_FR_REGISTER_LIMIT;
		kind = G_ROW;
	} else {
		N = kf_fuse_merged_numel(z, ga, gb, lost);
		kf_fuse_reason r = check_loop(z, ga, gb, N, allow);
		if (r != KF_FR_NONE)
			return r;
	}
	/* last: the only check whose cost is not bounded by the two groups */
	kf_fuse_reason r = kf_fuse_dag_check(z, ga, gb);
	if (r != KF_FR_NONE)
		return r;
	kf_fuse_merge(z, ga, gb, kind, F, a, S, N);
	return KF_FR_NONE;
}

/* Reason for an edge whose ends cannot fuse at all. */
static kf_fuse_reason static_reason(fz *z, kf_nid n)
{
	const kf_node *x = kf_N(z->g, n);
	uint32_t p = kf_fuse_pos(z, n);
	if (x->op != KF_OP_FUSION && x->op != KF_OP_RETURN && !z->nstat[p])
		return KF_FR_SYMBOLIC_SHAPE;
	switch (z->ckind[p]) {
	case KF_FK_REDUCE:
		return z->gr[p].kind ? KF_FR_NONE : KF_FR_REDUCE_LAYOUT;
	case KF_FK_ROW:
		return z->gr[p].kind ? KF_FR_NONE : KF_FR_REDUCE_LAYOUT;
	case KF_FK_NONE:
		if (x->op == KF_OP_RETURN)
			return KF_FR_GRAPH_OUTPUT;
		/* a contraction fusion (fuse-matmul's) is a contraction's kernel */
		if (x->op == KF_OP_FUSION && !strcmp(kf_attr_str(z->g, n, "kind", ""), "contraction"))
			return KF_FR_CONTRACTION;
		return kf_op(z->g->ctx, x->op)->trait == KF_TRAIT_CONTRACTION ? KF_FR_CONTRACTION
									   : KF_FR_OPAQUE_OP;
	default:
		return KF_FR_NONE;
	}
}

/* Progress: the three phases (edges, siblings, fusion nodes) count a third
 * each; i of n done in this one. */
static void tick(fz *z, int phase, uint64_t i, uint64_t n)
{
	if ((i & 4095) == 0 && z->o->pass && n)
		kf_pass_progress(z->o->pass, z->g, (uint64_t)phase * 1000 + i * 1000 / n, 3000);
}

static void group_edges(fz *z)
{
	kf_graph *g = z->g;
	for (uint32_t pc = 0; pc < z->n; pc++) {
		tick(z, 0, pc, z->n);
		kf_nid nc = z->order[pc];
		const kf_node *x = kf_N(g, nc);
		for (uint32_t i = 0; i < x->nin; i++) {
			kf_uid u = x->in0 + i;
			uint32_t pp = fz_pos_of(z, g->use[u].value);
			if (pp == KF_NONE || z->gr[pp].kind == KF_FK_CONST)
				continue;
			kf_fuse_reason r = static_reason(z, z->order[pp]);
			if (r == KF_FR_NONE)
				r = static_reason(z, nc);
			if (r == KF_FR_NONE && (!z->gr[pp].kind || !z->gr[pc].kind))
				r = KF_FR_OPAQUE_OP;
			if (r == KF_FR_NONE)
				r = try_merge(z, pp, pc);
			z->why[u] = (uint8_t)r;
		}
	}
}

/* Sibling fusion: the groups that read one value merge when they can. */
static void group_siblings(fz *z)
{
	kf_graph *g = z->g;
	for (kf_vid v = 0; v < g->nval; v++) {
		tick(z, 1, v, g->nval);
		if (kf_V(g, v)->blk != 0 || kf_nuses(g, v) < 2)
			continue;
		uint32_t first = KF_NONE;
		kf_foreach_use(g, v, u) {
			kf_nid un = g->use[u].user;
			if (kf_N(g, un)->blk != 0)
				continue;
			uint32_t q = kf_fuse_pos(z, un);
			if (!z->gr[q].kind)
				continue;
			if (first == KF_NONE) {
				first = q;
				continue;
			}
			try_merge(z, first, q);
		}
	}
}

static void setup(fz *z, kf_graph *g, const kf_fuse_opts *o)
{
	memset(z, 0, sizeof *z);
	z->g = g;
	z->o = o;
	kf_foreach_node(g, 0, n)
		z->n++;
	uint32_t n = z->n ? z->n : 1;
	z->order = malloc(n * sizeof *z->order);
	z->npos = g->nnode;
	z->pos = malloc((g->nnode + 1) * sizeof *z->pos);
	for (kf_nid i = 0; i < g->nnode; i++)
		z->pos[i] = KF_NONE;
	uint32_t k = 0;
	z->nvi = g->nval;
	z->vi = malloc(((size_t)g->nval + 1) * sizeof *z->vi);
	for (kf_vid v = 0; v < g->nval; v++)
		z->vi[v] = (fz_val){KF_NONE, 0};
	z->nstat = malloc(n);
	kf_foreach_node(g, 0, m) {
		z->order[k] = m;
		z->nstat[k] = kf_fuse_node_static(g, m);
		for (uint32_t r = 0; r < kf_N(g, m)->nres; r++)
			z->vi[kf_res(g, m, r)].pos = k;
		z->pos[m] = k++;
	}
	z->gr = calloc((size_t)n + 2, sizeof *z->gr); /* + the label order's head and tail */
	z->next = malloc(n * sizeof *z->next);
	z->head = malloc(n * sizeof *z->head);
	z->tail = malloc(n * sizeof *z->tail);
	z->minpos = malloc(n * sizeof *z->minpos);
	z->maxpos = malloc(n * sizeof *z->maxpos);
	z->rowT = calloc(n, sizeof *z->rowT);
	z->ckind = calloc(n, 1);
	z->rowA = calloc(n, sizeof *z->rowA);
	z->colS = calloc(n, sizeof *z->colS);
	z->vw = calloc(n, sizeof *z->vw);
	z->ra_epoch = calloc((size_t)g->nval + 1, sizeof *z->ra_epoch);
	z->ra_how = calloc((size_t)g->nval + 1, 1);
	z->view = calloc(n, 1);
	z->mem = malloc(n * sizeof *z->mem);
	z->nvmark = g->nval + 1;
	z->vmark = calloc(z->nvmark, sizeof *z->vmark);
	z->why = calloc(g->nuse + 1, 1);
	z->gin = calloc(n, sizeof *z->gin);
	z->gout = calloc(n, sizeof *z->gout);
	z->emin = malloc(n * sizeof *z->emin);
	z->onum = malloc(n * sizeof *z->onum);
	z->oidx = malloc(((size_t)g->nval + 1) * sizeof *z->oidx);
	z->vpool = malloc(((size_t)g->nuse + g->nval + 1) * sizeof *z->vpool);
	z->tin = malloc(((size_t)o->max_inputs + 1) * sizeof *z->tin);
	kf_vid *pool = z->vpool;
	for (uint32_t p = 0; p < z->n; p++) {
		kf_nid m = z->order[p];
		int kd = kf_fuse_kind_of(g, m);
		/* unfusible kinds keep kind 0 here; static_reason reads the op */
		z->gr[p].kind = (uint8_t)(kd == KF_FK_LOOP || kd == KF_FK_ROW ? kd : 0);
		if (kd == KF_FK_CONST || kd == KF_FK_REDUCE)
			z->gr[p].kind = 0;
		unsigned S;
		int64_t M, L;
		if (kd == KF_FK_REDUCE && kf_fuse_col_split(g, m, &S, &M, &L)) {
			z->gr[p].kind = FZ_COL;
			z->gr[p].gkind = G_COL;
			z->rowT[p] = kf_V(g, kf_in(g, m, 0))->type;
			z->colS[p] = S;
		}
		z->gr[p].parent = p;
		z->gr[p].ident = p;
		z->next[p] = KF_NONE;
		z->head[p] = z->tail[p] = p;
		z->gr[p].size = 1;
		z->minpos[p] = z->maxpos[p] = p;
		if (kd == KF_FK_ROW) {
			int a;
			int64_t R, C;
			kf_fuse_row_split(g, m, &a, &R, &C);
			z->gr[p].gkind = G_ROW;
			z->rowT[p] = kf_V(g, kf_in(g, m, 0))->type;
			z->rowA[p] = a;
			if (C > o->max_row)
				z->gr[p].kind = 0;
		} else if (kd != KF_FK_REDUCE || !z->gr[p].kind) {
			z->gr[p].gkind = G_LOOP;
		}
		z->ckind[p] = (uint8_t)kd;
		/* every node's: the group graph's searches walk them */
		kf_fuse_boundary_init(z, p, &pool);
	}
	kf_fuse_dag_init(z);
}

static void teardown(fz *z)
{
	free(z->order); free(z->pos); free(z->gr); free(z->next);
	free(z->head); free(z->tail); free(z->minpos); free(z->maxpos);
	free(z->rowT); free(z->rowA);
	free(z->mem); free(z->vmark); free(z->why); free(z->vmap); free(z->vbuf);
	free(z->ubuf); free(z->ckind); free(z->colS); free(z->vw); free(z->view);
	free(z->ra_epoch); free(z->ra_how);
	for (uint32_t p = 0; p < z->n; p++) {
		kf_fuse_vec_free(&z->gin[p]);
		kf_fuse_vec_free(&z->gout[p]);
	}
	free(z->gin); free(z->gout); free(z->emin); free(z->vpool); free(z->tin); free(z->trem); free(z->hs);
	free(z->onum); free(z->oidx); free(z->vi); free(z->exp); free(z->moved); free(z->nstat);
	kf_fuse_dag_free(z);
}

int kf_fuse_run(kf_graph *g, const kf_fuse_opts *o, bool *changed)
{
	fz z;
	/* a graph with symbolic dims is grouped on a copy at generic sizes
	 * (kf_graph_probe: dims equal there are equal for every size), and the
	 * groups, positions of nodes both share, become fusion nodes of g
	 * itself, whose bodies keep the symbolic types */
	kf_graph *pg = kf_graph_probe(g, NULL, NULL, NULL);
	setup(&z, pg ? pg : g, o);
	group_edges(&z);
	if (o->siblings)
		group_siblings(&z);
	kf_fuse_detach_views(&z);
	z.g = g;
	bool explain = o->explain && o->log;
	if (explain) {
		kf_fuse_explain_collect(&z);
		z.nmoved = g->nval;
		z.moved = malloc(((size_t)g->nval + 1) * sizeof *z.moved);
		for (kf_vid v = 0; v < g->nval; v++)
			z.moved[v] = KF_NONE;
	}
	/* groups of two or more ops become fusion nodes, in program order */
	int made = 0, fused_ops = 0;
	for (uint32_t p = 0; p < z.n; p++) {
		tick(&z, 2, p, z.n);
		uint32_t r = kf_fuse_find(&z, p);
		if (z.gr[r].ident != p || z.gr[r].size < 2)
			continue;
		fused_ops += (int)z.gr[r].size;
		kf_fuse_make_node(&z, r, made++);
	}
	if (made) {
		kf_fuse_drop_group_consts(&z);
		kf_fuse_toposort(g);
		*changed = true;
	}
	if (explain)
		kf_fuse_explain_print(&z, o->log);
	if (o->log && (o->explain || made))
		kf_buf_printf(o->log, "fuse: @%s: %d fusion kernel%s from %d ops\n",
			      kf_str(g->ctx, g->name), made, made == 1 ? "" : "s", fused_ops);
	teardown(&z);
	if (pg)
		kf_graph_free(pg);
	return 0;
}

/* ---- the pass ---------------------------------------------------------------- */

static const char *const fuse_opts[] = {
	"explain", "siblings", "max-inputs", "max-nodes", "max-regs", "max-row", "max-search", "policy", NULL
};

static int fuse_begin(kf_ctx *c, kf_passopts *o)
{
	const char *path = kf_passopt_str(o, "policy", NULL);
	if (!path)
		return 0;
	if (!kf_lua_fuse_policy_open) {
		kf_error(c, o->loc, "fuse: option 'policy' needs the Lua bridge, which this build lacks");
		return -1;
	}
	kf_fuse_policy *p = calloc(1, sizeof *p);
	if (kf_lua_fuse_policy_open(c, path, p) != 0) {
		free(p);
		return -1;
	}
	o->state = p;
	return 0;
}

static void fuse_end(kf_ctx *c, kf_passopts *o)
{
	kf_fuse_policy *p = o->state;
	if (p && p->free)
		p->free(p->ud);
	free(p);
	o->state = NULL;
}

static int fuse_pass_run(kf_graph *g, const kf_passopts *po, bool *changed)
{
	kf_ctx *c = g->ctx;
	kf_fuse_opts o;
	kf_fuse_opts_default(&o);
	int nerr = kf_nerrors(c);
	o.explain = kf_passopt_bool(c, po, "explain", (po->flags & KF_PASSF_EXPLAIN) != 0);
	o.siblings = kf_passopt_bool(c, po, "siblings", true);
	o.max_inputs = (int)kf_passopt_int(c, po, "max-inputs", o.max_inputs);
	o.max_nodes = (int)kf_passopt_int(c, po, "max-nodes", o.max_nodes);
	o.max_regs = (int)kf_passopt_int(c, po, "max-regs", o.max_regs);
	o.max_row = (int)kf_passopt_int(c, po, "max-row", o.max_row);
	int64_t ms = kf_passopt_int(c, po, "max-search", o.max_search);
	if (kf_nerrors(c) != nerr)
		return -1;
	if (o.max_inputs < 1 || o.max_nodes < 1 || o.max_regs < 1 || o.max_row < 1 || ms < 1) {
		kf_error(c, po->loc, "fuse: limits must be positive");
		return -1;
	}
	o.max_search = ms;
	if (po->state)
		o.policy = *(kf_fuse_policy *)po->state;
	o.log = po->log;
	o.pass = po;
	return kf_fuse_run(g, &o, changed);
}

const kf_pass kf_pass_fuse = {
	.name = "fuse",
	.doc = "group element-wise, injective and row-reduction ops into fusion kernels",
	.opts = fuse_opts,
	.run = fuse_pass_run,
	.begin = fuse_begin,
	.end = fuse_end,
};
