/* fuse_dag.c: the fuse pass's group graph: which merges make a cycle, and
 * a topological order of the groups kept up to date as they merge.
 *
 * The group graph has one vertex per group (a union-find root of top-level
 * positions, every node in exactly one group) and an edge X -> Y when a
 * member of X defines a value a member of Y reads.  It is a DAG: a fusion
 * node runs all of its group at once, so a cycle between groups is a graph
 * no schedule can run.  Merging A and B keeps it a DAG if and only if no
 * path of two or more edges joins them: A -> X -> ... -> B (or from B to
 * A) with X outside both; a direct edge alone is the producer -> consumer
 * edge being fused.  The path may run through any group, including ones
 * made by earlier merges, and sibling merges ask the same question.
 *
 * Invariant: every group root carries a label, and lab[X] < lab[Y] for
 * every edge X -> Y.  So a path from A to B only visits groups with
 * labels strictly between theirs, and with lab[A] < lab[B] there is no
 * path from B to A at all.  The check (search) runs two depth-first
 * searches in turn, forward from A over groups labelled below lab[B] and
 * backward from B over groups labelled above lab[A]; a path exists when
 * the forward one reaches B, the backward one reaches A, or one reaches a
 * group the other visited.  It stops as soon as either search has nothing
 * left: then there is no path, and that side's visited set is complete:
 * F, every group A reaches below lab[B], or K, every group reaching B above
 * lab[A].  It costs twice the smaller of the two (in edges looked at), so
 * a merge of neighbours is cheap however far apart their labels are.
 *
 * The merged group C must come after B's predecessors and before A's
 * successors.  With F complete, C takes B's place and F moves, in its
 * order, to just after C: F's members keep their order among themselves,
 * their other predecessors were all before B, and their successors outside
 * F were all after B.  With K complete, C takes A's place and K moves to
 * just before it (the mirror image).  Nothing else moves, so the update
 * costs what the search already paid, plus the labels.
 *
 * Labels come from an order-maintenance list (Bender, Cole, Demaine,
 * Farach-Colton, Zito, "Two simplified algorithms for maintaining order in a
 * list", 2002): 62-bit labels; inserting k items after x takes free labels
 * between x and its successor, and when there are none, relabels the
 * smallest aligned label range around x whose density is below T^-i (range
 * size 2^i, T = 1.35): amortised O(log n) label writes per insertion.
 *
 * A search that looks at more than max-search edges gives up, and the merge
 * is refused as SEARCH_LIMIT (never accepted unproven): this bounds the
 * pass's cost on graphs where both sides of a merge reach far (a random
 * graph whose edges span the whole program).
 */
#include <stdlib.h>
#include <string.h>
#include "fuse_int.h"

#define LMAX (1ull << 62)
#define FZ_WK 4 /* paths remembered per group (see witnessed()) */
#define HEAD(z) ((z)->n)
#define TAIL(z) ((z)->n + 1)

void kf_fuse_dag_init(fz *z)
{
	uint32_t n = z->n;
	z->lnext = malloc((n + 2) * sizeof *z->lnext);
	z->lprev = malloc((n + 2) * sizeof *z->lprev);
	z->fst = malloc((n + 2) * sizeof *z->fst);
	z->bst = malloc((n + 2) * sizeof *z->bst);
	z->fvis = malloc((n + 2) * sizeof *z->fvis);
	z->wit = malloc(((size_t)n + 2) * 2 * FZ_WK * sizeof *z->wit);
	for (size_t i = 0; i < ((size_t)n + 2) * 2 * FZ_WK; i++)
		z->wit[i] = KF_NONE;
	z->bvis = malloc((n + 2) * sizeof *z->bvis);
	z->sepoch = 0;
	z->steps = 0;
	/* program order is a topological order; labels evenly spread */
	uint64_t gap = LMAX / ((uint64_t)n + 1);
	z->gr[HEAD(z)].lab = 0;
	z->gr[TAIL(z)].lab = LMAX;
	uint32_t prev = HEAD(z);
	for (uint32_t p = 0; p < n; p++) {
		z->gr[p].lab = gap * (p + 1);
		z->lprev[p] = prev;
		z->lnext[prev] = p;
		prev = p;
	}
	z->lnext[prev] = TAIL(z);
	z->lprev[TAIL(z)] = prev;
	z->lnext[TAIL(z)] = z->lprev[HEAD(z)] = KF_NONE;
}

void kf_fuse_dag_free(fz *z)
{
	free(z->lnext); free(z->lprev);
	free(z->fst); free(z->bst); free(z->fvis); free(z->bvis); free(z->wit);
}

/* ---- the order-maintenance list ------------------------------------------- */

static void unlink_item(fz *z, uint32_t x)
{
	z->lnext[z->lprev[x]] = z->lnext[x];
	z->lprev[z->lnext[x]] = z->lprev[x];
}

static void link_after(fz *z, uint32_t at, uint32_t x)
{
	uint32_t nx = z->lnext[at];
	z->lprev[x] = at;
	z->lnext[x] = nx;
	z->lnext[at] = x;
	z->lprev[nx] = x;
}

/* Links items[0..k) after x, in that order, and labels them. */
static void insert_after(fz *z, uint32_t x, const uint32_t *items, uint32_t k)
{
	if (!k)
		return;
	uint64_t lo = z->gr[x].lab, hi = z->gr[z->lnext[x]].lab;
	uint32_t at = x;
	for (uint32_t i = 0; i < k; i++) {
		link_after(z, at, items[i]);
		at = items[i];
	}
	if (hi - lo > k) { /* room: spread them between x and its old successor */
		uint64_t step = (hi - lo) / (k + 1);
		for (uint32_t i = 0; i < k; i++)
			z->gr[items[i]].lab = lo + step * (i + 1);
		return;
	}
	/* No room: the smallest aligned range 2^i around x holding few enough
	 * items (x, the new ones and the old ones in it) gets even labels.  The
	 * new items sit after x, unlabelled; the walk skips them. */
	uint32_t first = x, last = items[k - 1];
	uint64_t cnt = 1 + k;
	double limit = 1.0;
	for (int i = 1; i <= 62; i++) {
		limit *= 2.0 / 1.35;
		uint64_t size = 1ull << i, base = lo & ~(size - 1);
		while (z->lprev[first] != HEAD(z) && z->gr[z->lprev[first]].lab >= base) {
			first = z->lprev[first];
			cnt++;
		}
		while (z->lnext[last] != TAIL(z) && z->gr[z->lnext[last]].lab < base + size) {
			last = z->lnext[last];
			cnt++;
		}
		if ((double)(cnt + 1) > limit)
			continue;
		uint64_t step = size / (cnt + 1);
		uint64_t l = base;
		for (uint32_t y = first;; y = z->lnext[y]) {
			l += step;
			z->gr[y].lab = l;
			if (y == last)
				break;
		}
		return;
	}
	abort(); /* 2^62 labels hold far more than 2^32 groups */
}

/* ---- the search ---------------------------------------------------------- */

/* Pushes group s on a side's stack unless marked; true when it shows a path
 * (the other side marked it). */
static inline bool visit(fz *z, uint32_t s, bool fwd, uint32_t *st, uint32_t *sp, uint32_t *vis, uint32_t *nvis)
{
	fz_grp *x = &z->gr[s];
	uint32_t ep = z->sepoch;
	if ((fwd ? x->fmark : x->bmark) == ep)
		return false;
	if ((fwd ? x->bmark : x->fmark) == ep)
		return true;
	if (fwd)
		x->fmark = ep;
	else
		x->bmark = ep;
	st[(*sp)++] = s;
	vis[(*nvis)++] = s;
	return false;
}

/* Orders the groups pushed on a stack since position from by label, so
 * that the one nearest the side's own end pops first (up: the highest
 * label on top).  Each side then looks at its own neighbourhood before
 * wandering off: a path from a to b far away runs through groups near a
 * and near b, where the two sides meet; a greedy dive toward the other
 * end, tried first, looked at twice as many edges on long random graphs.
 * The batches are short; insertion sort. */
static void order_pushed(const fz *z, uint32_t *st, uint32_t from, uint32_t to, bool up)
{
	for (uint32_t i = from + 1; i < to; i++) {
		uint32_t t = st[i], j = i;
		uint64_t l = z->gr[t].lab;
		while (j > from && (up ? z->gr[st[j - 1]].lab > l : z->gr[st[j - 1]].lab < l)) {
			st[j] = st[j - 1];
			j--;
		}
		st[j] = t;
	}
}

/* Looks at the successor groups of group x (through its outputs, the
 * values read outside it) and pushes those below lab[b]; 1 when one is b
 * or was seen from b, 0 otherwise.  When x is a, its edges into b are the
 * ones being fused. */
static int expand_fwd(fz *z, uint32_t x, uint32_t a, uint32_t b, uint32_t *sp)
{
	kf_graph *g = z->g;
	uint64_t lb = z->gr[b].lab;
	const fz_vec *out = &z->gout[x];
	uint32_t from = *sp;
	for (uint32_t i = 0; i < out->n; i++)
		kf_foreach_use(g, out->p[i], u) {
			z->steps++;
			uint32_t q = kf_fuse_pos(z, g->use[u].user);
			if (q == KF_NONE)
				continue;
			uint32_t s = kf_fuse_find(z, q);
			if (s == x || z->gr[s].lab > lb)
				continue;
			if (s == b) {
				if (x == a)
					continue;
				z->meet = x; /* a reaches x, x feeds b */
				return 1;
			}
			if (visit(z, s, true, z->fst, sp, z->fvis, &z->nfvis)) {
				z->meet = s;
				return 1;
			}
		}
	order_pushed(z, z->fst, from, *sp, false);
	return 0;
}

/* The mirror image: predecessor groups of y (through its inputs) above
 * lab[a]. */
static int expand_bwd(fz *z, uint32_t y, uint32_t a, uint32_t b, uint32_t *sp)
{
	uint64_t la = z->gr[a].lab;
	const fz_vec *in = &z->gin[y];
	uint32_t from = *sp;
	for (uint32_t i = 0; i < in->n; i++) {
		z->steps++;
		uint32_t q = fz_pos_of(z, in->p[i]);
		if (q == KF_NONE)
			continue;
		uint32_t s = kf_fuse_find(z, q);
		if (s == y || z->gr[s].lab < la)
			continue;
		if (s == a) {
			if (y == b)
				continue;
			z->meet = y; /* a feeds y, y reaches b */
			return 1;
		}
		if (visit(z, s, false, z->bst, sp, z->bvis, &z->nbvis)) {
			z->meet = s;
			return 1;
		}
	}
	order_pushed(z, z->bst, from, *sp, true);
	return 0;
}

static kf_fuse_reason search(fz *z, uint32_t ga, uint32_t gb);

/* ---- paths found before --------------------------------------------------------- */

/* A search that finds a path from a to b meets at a group m outside both:
 * a reaches m and m reaches b.  Paths stay paths as groups merge (an edge
 * between two nodes is an edge between the groups that hold them), so
 * while m is in neither group, the groups holding a and b are joined by a
 * path of two or more edges: the same producer, read again by a consumer
 * that joined b's group since (a residual read by a growing chain), needs
 * no second search.  Each root keeps its last FZ_WK (b, m) pairs; entries
 * are positions, found to their roots when read. */
static bool witnessed(fz *z, uint32_t a, uint32_t b)
{
	const uint32_t *w = &z->wit[(size_t)a * 2 * FZ_WK];
	for (uint32_t i = 0; i < FZ_WK; i++) {
		if (w[2 * i] == KF_NONE || kf_fuse_find(z, w[2 * i]) != b)
			continue;
		uint32_t m = kf_fuse_find(z, w[2 * i + 1]);
		if (m != a && m != b)
			return true;
	}
	return false;
}

static void witness(fz *z, uint32_t a, uint32_t b, uint32_t m)
{
	uint32_t *w = &z->wit[(size_t)a * 2 * FZ_WK];
	memmove(w + 2, w, (FZ_WK - 1) * 2 * sizeof *w);
	w[0] = b;
	w[1] = m;
}

kf_fuse_reason kf_fuse_dag_check(fz *z, uint32_t ga, uint32_t gb)
{
	uint32_t a = z->gr[ga].lab < z->gr[gb].lab ? ga : gb, b = a == ga ? gb : ga;
	if (witnessed(z, a, b))
		return KF_FR_CYCLE;
	kf_fuse_reason r = search(z, ga, gb);
	if (r == KF_FR_CYCLE)
		witness(z, a, b, z->meet);
	return r;
}

static kf_fuse_reason search(fz *z, uint32_t ga, uint32_t gb)
{
	uint32_t a = z->gr[ga].lab < z->gr[gb].lab ? ga : gb, b = a == ga ? gb : ga;
	uint64_t start = z->steps, sf = 0, sb = 0;
	z->sepoch++;
	z->nfvis = z->nbvis = 0;
	z->side = 0;
	/* a and b themselves first: a's successors, b's predecessors */
	uint32_t nf = 1, nb = 1;
	z->fst[0] = a;
	z->bst[0] = b;
	/* the side that will have cost less after its next group (a group
	 * costs its outputs' uses forward, its inputs backward) goes next, so
	 * that the whole costs about twice the cheaper side: a merge of
	 * neighbours is cheap however big the groups or far apart their labels */
	while (nf && nb) {
		if (z->steps - start > (uint64_t)z->o->max_search)
			return KF_FR_SEARCH_LIMIT;
		uint64_t t = z->steps;
		if (sf + 2 * z->gout[z->fst[nf - 1]].n <= sb + z->gin[z->bst[nb - 1]].n) {
			if (expand_fwd(z, z->fst[--nf], a, b, &nf))
				return KF_FR_CYCLE;
			sf += z->steps - t + 1;
		} else {
			if (expand_bwd(z, z->bst[--nb], a, b, &nb))
				return KF_FR_CYCLE;
			sb += z->steps - t + 1;
		}
	}
	z->side = nf ? 2 : 1;
	return KF_FR_NONE;
}

typedef struct lab_id {
	uint64_t lab;
	uint32_t id;
} lab_id;

static int by_label(const void *x, const void *y)
{
	uint64_t a = ((const lab_id *)x)->lab, b = ((const lab_id *)y)->lab;
	return (a > b) - (a < b);
}

/* Sorts the groups v[0..n) by label. */
static void sort_by_label(fz *z, uint32_t *v, uint32_t n)
{
	lab_id *t = malloc(n * sizeof *t);
	for (uint32_t i = 0; i < n; i++)
		t[i] = (lab_id){z->gr[v[i]].lab, v[i]};
	qsort(t, n, sizeof *t, by_label);
	for (uint32_t i = 0; i < n; i++)
		v[i] = t[i].id;
	free(t);
}

void kf_fuse_dag_merged(fz *z, uint32_t root, uint32_t gone)
{
	/* the merged group keeps the paths either had (the newest first) */
	uint32_t *wr = &z->wit[(size_t)root * 2 * FZ_WK], *wg = &z->wit[(size_t)gone * 2 * FZ_WK];
	for (uint32_t i = FZ_WK; i-- > 0;)
		if (wg[2 * i] != KF_NONE)
			witness(z, root, wg[2 * i], wg[2 * i + 1]);
	(void)wr;
	uint32_t lo = z->gr[root].lab < z->gr[gone].lab ? root : gone, hi = lo == root ? gone : root;
	/* the merged group takes hi's place (F moves after it) or lo's (K
	 * moves before it) */
	uint32_t place = z->side == 1 ? hi : lo;
	uint32_t *mv = z->side == 1 ? z->fvis : z->bvis, nmv = z->side == 1 ? z->nfvis : z->nbvis;
	if (place != root) {
		unlink_item(z, root);
		uint32_t at = z->lprev[place];
		unlink_item(z, place);
		link_after(z, at, root);
		z->gr[root].lab = z->gr[place].lab;
	} else {
		unlink_item(z, gone);
	}
	if (!nmv)
		return;
	sort_by_label(z, mv, nmv);
	for (uint32_t i = 0; i < nmv; i++)
		unlink_item(z, mv[i]);
	insert_after(z, z->side == 1 ? root : z->lprev[root], mv, nmv);
}

bool kf_fuse_dag_valid(fz *z)
{
	kf_graph *g = z->g;
	for (uint32_t x = z->lnext[HEAD(z)]; x != TAIL(z); x = z->lnext[x])
		if (z->gr[x].lab <= z->gr[z->lprev[x]].lab || kf_fuse_find(z, x) != x)
			return false;
	for (uint32_t p = 0; p < z->n; p++) {
		const kf_node *nd = kf_N(g, z->order[p]);
		uint32_t x = kf_fuse_find(z, p);
		for (uint32_t r = 0; r < nd->nres; r++)
			kf_foreach_use(g, nd->res0 + r, u) {
				uint32_t q = kf_fuse_pos(z, g->use[u].user);
				if (q != KF_NONE && kf_fuse_find(z, q) != x && z->gr[kf_fuse_find(z, q)].lab <= z->gr[x].lab)
					return false;
			}
	}
	return true;
}
