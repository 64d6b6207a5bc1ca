/* outline.c: moving a group of top-level nodes into a new fusion node
 * (passes.h, kf_pass_outline), for the passes that build fusions from
 * groups they recognise. */
#include <stdlib.h>
#include <string.h>
#include "fusion.h"
#include "passes.h"

/* Index of v in from[0..n), or n. */
static uint32_t find(const kf_vid *from, uint32_t n, kf_vid v)
{
	uint32_t k = 0;
	while (k < n && from[k] != v)
		k++;
	return k;
}

static bool member(const kf_nid *mem, uint32_t n, kf_nid x)
{
	for (uint32_t i = 0; i < n; i++)
		if (mem[i] == x)
			return true;
	return false;
}

kf_nid kf_pass_outline(kf_graph *g, const kf_nid *mem, uint32_t n, kf_vid out, const char *kind, kf_sid sym)
{
	kf_ctx *c = g->ctx;
	kf_nid last = mem[n - 1];
	uint32_t nvals = 0, nmax = 0;
	for (uint32_t i = 0; i < n; i++)
		nvals += kf_N(g, mem[i])->nres + kf_N(g, mem[i])->nin;
	/* inputs: outside values the members read, each once; small constants
	 * are copied into the body instead (a kernel embeds them) */
	kf_vid *ins = malloc((nvals + 1) * sizeof *ins);
	uint32_t nin = 0;
	for (uint32_t i = 0; i < n; i++) {
		kf_nid x = mem[i];
		for (uint32_t j = 0; j < kf_N(g, x)->nin; j++) {
			kf_vid v = kf_in(g, x, j);
			kf_nid d = kf_def(g, v);
			if ((d != KF_NONE && member(mem, n, d)) || (d != KF_NONE && kf_fuse_const_embeddable(g, d)))
				continue;
			if (find(ins, nin, v) == nin)
				ins[nin++] = v;
		}
	}
	kf_tid rt = kf_V(g, out)->type;
	kf_nid f = kf_node_new(g, 0, last, KF_OP_FUSION, ins, nin, &rt, 1);
	kf_N(g, f)->sym = sym;
	kf_N(g, f)->loc = kf_N(g, last)->loc;
	kf_node_set_attr(g, f, kf_intern_cstr(c, "kind"), (kf_attrval){.kind = KF_ATTR_STR, .s = kf_intern_cstr(c, kind)});
	kf_bid b = kf_block_new(g, f);
	kf_N(g, f)->body = b;
	/* outer value -> body value; values enter as arguments, copied
	 * constants and member results */
	nmax = nin + nvals + 1;
	kf_vid *from = malloc(nmax * sizeof *from), *to = malloc(nmax * sizeof *to);
	uint32_t nmap = 0;
	for (uint32_t i = 0; i < nin; i++) {
		from[nmap] = ins[i];
		to[nmap++] = kf_block_add_arg(g, b, kf_V(g, ins[i])->type, 0);
	}
	kf_nid *copied = malloc((nvals + 1) * sizeof *copied);
	uint32_t ncopied = 0;
	for (uint32_t i = 0; i < n; i++) {
		kf_nid x = mem[i];
		const kf_node *nx = kf_N(g, x);
		uint32_t nn = nx->nin, nr = nx->nres;
		kf_vid *opv = malloc((nn + 1) * sizeof *opv);
		for (uint32_t j = 0; j < nn; j++) {
			kf_vid v = kf_in(g, x, j);
			uint32_t k = find(from, nmap, v);
			if (k == nmap) { /* an embedded constant, copied once */
				copied[ncopied++] = kf_def(g, v);
				from[nmap] = v;
				to[nmap++] = kf_const_copy(g, b, v);
			}
			opv[j] = to[k];
		}
		kf_tid *rts = malloc((nr + 1) * sizeof *rts);
		for (uint32_t r = 0; r < nr; r++)
			rts[r] = kf_V(g, kf_res(g, x, r))->type;
		kf_nid m = kf_node_new(g, b, KF_NONE, kf_N(g, x)->op, opv, nn, rts, nr);
		nx = kf_N(g, x);
		kf_node_set_attrs(g, m, nx->attr, nx->nattr);
		kf_N(g, m)->loc = nx->loc;
		kf_N(g, m)->cst = nx->cst;
		for (uint32_t r = 0; r < nr; r++) {
			kf_V(g, kf_res(g, m, r))->name = kf_V(g, kf_res(g, x, r))->name;
			from[nmap] = kf_res(g, x, r);
			to[nmap++] = kf_res(g, m, r);
		}
		free(opv);
		free(rts);
	}
	kf_vid y = to[find(from, nmap, out)];
	kf_node_new(g, b, KF_NONE, KF_OP_YIELD, &y, 1, NULL, 0);
	kf_V(g, kf_res(g, f, 0))->name = kf_V(g, out)->name;
	kf_replace_all_uses(g, out, kf_res(g, f, 0));
	for (uint32_t i = n; i-- > 0;)
		kf_node_erase(g, mem[i]);
	/* constants whose copies moved in and that nothing else reads */
	for (uint32_t i = 0; i < ncopied; i++)
		if (!(kf_N(g, copied[i])->flags & KF_NODE_DEAD) && !kf_has_uses(g, kf_res(g, copied[i], 0)))
			kf_node_erase(g, copied[i]);
	free(ins);
	free(from);
	free(to);
	free(copied);
	return f;
}
