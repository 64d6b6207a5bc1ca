/* fuse_group.c: the fuse pass's groups (fuse_int.h): each root keeps its
 * members sorted by position and its boundary, the distinct values it reads
 * from outside (gin) and those it defines that an outside node reads (gout),
 * so that a merge is checked and made at the cost of the two boundaries,
 * not of the two groups; and merges two groups.
 *
 * The inputs of A u B are A's and B's, less what the other defines (every
 * such value is one of the other's outputs); the outputs of A u B are A's
 * and B's less those only the other reads (which, being read by the other,
 * are among its inputs).  So both lists of the merge come from walking the
 * two input lists and the uses of what they name.  Output lists are
 * appended shorter to longer, so each value moves O(log n) times. */
#include <stdlib.h>
#include <string.h>
#include "fuse_int.h"

/* Makes v's storage the pass's own (cap > 0), with room for n entries. */
static void vec_reserve(fz_vec *v, uint32_t n)
{
	if (v->cap >= n && v->cap)
		return;
	uint32_t cap = v->cap ? v->cap : 4;
	while (cap < n)
		cap *= 2;
	kf_vid *p = malloc(cap * sizeof *p);
	if (!p)
		abort();
	memcpy(p, v->p, v->n * sizeof *p);
	if (v->cap)
		free(v->p);
	v->p = p;
	v->cap = cap;
}

static void vec_set(fz_vec *v, const kf_vid *src, uint32_t n)
{
	vec_reserve(v, n);
	memcpy(v->p, src, n * sizeof *src);
	v->n = n;
}

void kf_fuse_vec_free(fz_vec *v)
{
	if (v->cap)
		free(v->p);
	memset(v, 0, sizeof *v);
}

/* ---- the smaller group's boundary, as a set -------------------------------- */

/* The merge checks compare the larger group's input list with the smaller
 * group's boundary; a small open-addressing set of the latter (in L1)
 * spares a lookup at random in the graph for every entry of the former,
 * which for a producer read from far away was most of the pass's time. */
enum { HS_IN = 1, HS_OUT = 2, HS_SEEN = 4 }; /* input of, output of the small group; also counted in the large */

static uint64_t *hs_slot(fz *z, kf_vid v)
{
	uint32_t j = (uint32_t)(v * 2654435761u) & z->hmask;
	while (z->hs[j] && (uint32_t)(z->hs[j] >> 32) != v + 1)
		j = (j + 1) & z->hmask;
	return &z->hs[j];
}

static uint32_t hs_get(fz *z, kf_vid v) { return (uint32_t)*hs_slot(z, v); }

static void hs_or(fz *z, kf_vid v, uint32_t f)
{
	uint64_t *e = hs_slot(z, v);
	*e = (uint64_t)(v + 1) << 32 | (uint32_t)*e | f;
}

/* Sets up the merge check of ga and gb: which group is smaller (by its
 * boundary), and that group's boundary in the set. */
static void hs_build(fz *z, uint32_t ga, uint32_t gb)
{
	bool a_small = z->gin[ga].n + z->gout[ga].n < z->gin[gb].n + z->gout[gb].n;
	z->hsmall = a_small ? ga : gb;
	z->hbig = a_small ? gb : ga;
	const fz_vec *in = &z->gin[z->hsmall], *out = &z->gout[z->hsmall];
	uint32_t cap = 16;
	while (cap < 2 * (in->n + out->n) + 2)
		cap *= 2;
	if (cap > z->caphs) {
		free(z->hs);
		z->hs = malloc(cap * sizeof *z->hs);
		if (!z->hs)
			abort();
		z->caphs = cap;
	}
	memset(z->hs, 0, cap * sizeof *z->hs);
	z->hmask = cap - 1;
	for (uint32_t i = 0; i < in->n; i++)
		hs_or(z, in->p[i], HS_IN);
	for (uint32_t i = 0; i < out->n; i++)
		hs_or(z, out->p[i], HS_OUT);
}

/* The distinct outside inputs of the union of groups ga and gb into z->tin
 * (small constants are embedded, not inputs): the larger group's inputs
 * the smaller does not define, then the smaller's the larger neither
 * defines nor reads.  Stops counting past max-inputs. */
int kf_fuse_count_inputs(fz *z, uint32_t ga, uint32_t gb)
{
	hs_build(z, ga, gb);
	z->ntin = 0;
	uint32_t max = (uint32_t)z->o->max_inputs;
	const fz_vec *big = &z->gin[z->hbig], *small = &z->gin[z->hsmall];
	for (uint32_t i = 0; i < big->n; i++) {
		kf_vid v = big->p[i];
		uint32_t f = hs_get(z, v);
		if (f & HS_OUT)
			continue;
		if (f & HS_IN)
			hs_or(z, v, HS_SEEN);
		z->tin[z->ntin++] = v;
		if (z->ntin > max)
			return (int)z->ntin;
	}
	for (uint32_t i = 0; i < small->n; i++) {
		kf_vid v = small->p[i];
		uint32_t q = fz_pos_of(z, v);
		if ((hs_get(z, v) & HS_SEEN) || (q != KF_NONE && kf_fuse_find(z, q) == z->hbig))
			continue;
		z->tin[z->ntin++] = v;
		if (z->ntin > max)
			return (int)z->ntin;
	}
	return (int)z->ntin;
}

/* True when a node outside groups ga and gb reads v. */
static bool read_outside(fz *z, kf_vid v, uint32_t ga, uint32_t gb)
{
	kf_foreach_use(z->g, v, u)
		if (!fz_in(z, kf_fuse_pos(z, z->g->use[u].user), ga, gb))
			return true;
	return false;
}

/* The outputs each group loses by the merge into z->trem: values of one
 * that the other reads and nobody else does.  Only those can stop being
 * outputs, so this costs the two input lists, not the output lists (the
 * set kf_fuse_count_inputs built for the same pair tells the smaller
 * group's outputs). */
void kf_fuse_lost_outputs(fz *z, uint32_t ga, uint32_t gb, uint32_t lost[2])
{
	const fz_vec *big = &z->gin[z->hbig], *small = &z->gin[z->hsmall];
	uint32_t need = big->n + small->n;
	if (need > z->captrem) {
		z->captrem = 2 * need;
		z->trem = realloc(z->trem, z->captrem * sizeof *z->trem);
	}
	z->ntrem = 0;
	lost[0] = lost[1] = 0;
	/* the smaller group's outputs that the larger reads */
	for (uint32_t i = 0; i < big->n; i++) {
		kf_vid v = big->p[i];
		if ((hs_get(z, v) & HS_OUT) && !read_outside(z, v, ga, gb)) {
			z->trem[z->ntrem++] = v;
			lost[z->hsmall == ga ? 0 : 1]++;
		}
	}
	/* the larger group's outputs that the smaller reads */
	for (uint32_t i = 0; i < small->n; i++) {
		kf_vid v = small->p[i];
		uint32_t q = fz_pos_of(z, v);
		if (q != KF_NONE && kf_fuse_find(z, q) == z->hbig && !read_outside(z, v, ga, gb)) {
			z->trem[z->ntrem++] = v;
			lost[z->hbig == ga ? 0 : 1]++;
		}
	}
}

/* The element count of the merged loop group's outputs (the outputs each
 * keeps after lost_outputs): -1 when none, -2 when they differ.  A group's
 * outputs share one count (onum) once it has two ops; a single node's may
 * not (split), and then they are looked at one by one. */
int64_t kf_fuse_merged_numel(fz *z, uint32_t ga, uint32_t gb, const uint32_t lost[2])
{
	int64_t N = -1;
	z->epoch++;
	for (uint32_t i = 0; i < z->ntrem; i++)
		z->vi[z->trem[i]].mark = z->epoch;
	for (int gi = 0; gi < 2; gi++) {
		uint32_t x = gi ? gb : ga;
		const fz_vec *out = &z->gout[x];
		if (out->n == lost[gi])
			continue;
		if (z->onum[x] != -2) {
			N = N == -1 || N == z->onum[x] ? z->onum[x] : -2;
			continue;
		}
		for (uint32_t i = 0; i < out->n; i++)
			if (z->vi[out->p[i]].mark != z->epoch) {
				int64_t m = fz_numel(z->g, out->p[i]);
				N = N == -1 || N == m ? m : -2;
			}
	}
	return N;
}

/* The merged group's outputs: ga's and gb's less the lost ones; the
 * shorter list is appended to the longer (so that every value moves
 * O(log n) times), whose storage ga takes. */
static void merge_outputs(fz *z, uint32_t ga, uint32_t gb)
{
	for (uint32_t i = 0; i < z->ntrem; i++) {
		kf_vid v = z->trem[i];
		fz_vec *o = &z->gout[kf_fuse_find(z, fz_pos_of(z, v))];
		vec_reserve(o, o->n);
		uint32_t k = z->oidx[v];
		o->p[k] = o->p[--o->n];
		z->oidx[o->p[k]] = k;
	}
	fz_vec *a = &z->gout[ga], *b = &z->gout[gb];
	if (b->n > a->n) {
		fz_vec t = *a;
		*a = *b;
		*b = t;
	}
	vec_reserve(a, a->n + b->n);
	for (uint32_t i = 0; i < b->n; i++) {
		z->oidx[b->p[i]] = a->n;
		a->p[a->n++] = b->p[i];
	}
	kf_fuse_vec_free(b);
}

/* The boundary of the single node at position p (before any merge). */
void kf_fuse_boundary_init(fz *z, uint32_t p, kf_vid **pool)
{
	kf_graph *g = z->g;
	kf_nid n = z->order[p];
	const kf_node *x = kf_N(g, n);
	fz_vec *in = &z->gin[p], *out = &z->gout[p];
	in->p = *pool;
	z->epoch++;
	for (uint32_t i = 0; i < x->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_nid d = kf_def(g, v);
		if (z->vi[v].mark == z->epoch || (d != KF_NONE && kf_fuse_const_embeddable(g, d)))
			continue;
		z->vi[v].mark = z->epoch;
		in->p[in->n++] = v;
	}
	out->p = in->p + in->n;
	z->onum[p] = -1;
	for (uint32_t r = 0; r < x->nres; r++)
		if (kf_has_uses(g, x->res0 + r)) {
			int64_t m = fz_numel(g, x->res0 + r);
			z->onum[p] = z->onum[p] == -1 || z->onum[p] == m ? m : -2;
			z->oidx[x->res0 + r] = out->n;
			out->p[out->n++] = x->res0 + r;
		}
	*pool = out->p + out->n;
	z->emin[p] = kf_fuse_op_expensive(x->op) && x->nres ? fz_numel(g, x->res0) : INT64_MAX;
}

/* Joins the member lists of ga and gb, sorted by position (concatenated
 * when their spans do not overlap, the common case of a chain). */
static void merge_members(fz *z, uint32_t ga, uint32_t gb)
{
	if (z->maxpos[ga] < z->minpos[gb]) {
		z->next[z->tail[ga]] = z->head[gb];
		z->tail[ga] = z->tail[gb];
		return;
	}
	if (z->maxpos[gb] < z->minpos[ga]) {
		z->next[z->tail[gb]] = z->head[ga];
		z->head[ga] = z->head[gb];
		return;
	}
	uint32_t x = z->head[ga], y = z->head[gb], h = KF_NONE, t = KF_NONE;
	while (x != KF_NONE || y != KF_NONE) {
		uint32_t m;
		if (y == KF_NONE || (x != KF_NONE && x < y)) {
			m = x;
			x = z->next[x];
		} else {
			m = y;
			y = z->next[y];
		}
		if (t == KF_NONE)
			h = m;
		else
			z->next[t] = m;
		t = m;
	}
	z->next[t] = KF_NONE;
	z->head[ga] = h;
	z->tail[ga] = t;
}

uint32_t kf_fuse_members(fz *z, uint32_t ga, uint32_t gb)
{
	uint32_t x = z->head[ga], y = ga == gb ? KF_NONE : z->head[gb], k = 0;
	while (x != KF_NONE || y != KF_NONE) {
		if (y == KF_NONE || (x != KF_NONE && x < y)) {
			z->mem[k++] = x;
			x = z->next[x];
		} else {
			z->mem[k++] = y;
			y = z->next[y];
		}
	}
	return k;
}

/* Merges groups ga and gb.  The larger one's root stays root (so that
 * finds stay short); the merged group keeps ga's identity, which orders
 * the fusion nodes. */
void kf_fuse_merge(fz *z, uint32_t ga, uint32_t gb, int kind, kf_tid F, int a, unsigned S, int64_t N)
{
	uint32_t r = z->gr[gb].size > z->gr[ga].size ? gb : ga, o = r == ga ? gb : ga;
	z->gr[r].ident = z->gr[ga].ident;
	merge_outputs(z, r, o); /* first: it finds each lost output's group */
	merge_members(z, r, o);
	z->gr[o].parent = r;
	z->gr[r].size += z->gr[o].size;
	if (z->minpos[o] < z->minpos[r])
		z->minpos[r] = z->minpos[o];
	if (z->maxpos[o] > z->maxpos[r])
		z->maxpos[r] = z->maxpos[o];
	z->gr[r].gkind = (uint8_t)kind;
	z->rowT[r] = F;
	z->rowA[r] = a;
	z->colS[r] = S;
	/* the boundary the checks computed (count_inputs, lost_outputs) */
	vec_set(&z->gin[r], z->tin, z->ntin);
	kf_fuse_vec_free(&z->gin[o]);
	z->onum[r] = N;
	if (z->emin[o] < z->emin[r])
		z->emin[r] = z->emin[o];
	kf_fuse_dag_merged(z, r, o);
}

