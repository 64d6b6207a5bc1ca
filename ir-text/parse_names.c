/* parse_names.c: the parser's name bindings: value names to their values.
 *
 * A name is interned in the context where it is defined (the value keeps
 * it as its name anyway) and bound by its sid in a dense array; a use is
 * one probe of the context's string table and one array load.  Scopes are
 * stamps, and a region's shadowed bindings are kept on an undo stack until
 * it closes (see kf_pbind in parse_int.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parse_int.h"

uint32_t kf_parse_hash(const kf_parser *p, const kf_token *t)
{
	uint32_t h = kf_str_hash(p->text + t->off + 1, t->nlen);
	kf_str_prefetch(p->c, h); /* a cache miss; the rest of the line is read meanwhile */
	return h;
}

kf_sid kf_parse_name(kf_parser *p, const kf_token *t)
{
	return kf_intern(p->c, p->text + t->off + 1, t->nlen);
}

/* The binding of sid; the array grows (zeroed: unbound) to hold it. */
kf_pbind *kf_parse_bind(kf_parser *p, kf_sid sid)
{
	if (sid >= p->capbind) {
		uint32_t cap = p->capbind ? p->capbind : 1024;
		while (cap <= sid)
			cap *= 2;
		p->bind = realloc(p->bind, (size_t)cap * sizeof *p->bind);
		if (!p->bind)
			kf_oom();
		memset(p->bind + p->capbind, 0, (size_t)(cap - p->capbind) * sizeof *p->bind);
		p->capbind = cap;
	}
	return &p->bind[sid];
}

void kf_parse_loc(kf_parser *p, uint32_t off, char *buf, size_t n)
{
	int line, col;
	kf_source_linecol(p->c, p->src, off, &line, &col);
	snprintf(buf, n, "%d:%d", line, col);
}

void kf_parse_redefinition(kf_parser *p, const kf_token *t, uint32_t first)
{
	char at[32];
	kf_parse_loc(p, first, at, sizeof at);
	kf_parse_err(p, t->off, "redefinition of '%%%.*s' (first at %s)", (int)t->nlen, p->text + t->off + 1, at);
}

/* Binds %name (token t, interned as sid) to vid..vid+nres-1 in the current
 * scope; a redefinition is reported unless `quiet` (the caller already did). */
void kf_parse_define(kf_parser *p, const kf_token *t, kf_sid sid, kf_vid vid, uint32_t nres, bool quiet)
{
	kf_pbind *e = kf_parse_bind(p, sid);
	if ((e->scope & ~KF_SCOPE_MULTI) == p->scope) {
		if (!quiet)
			kf_parse_redefinition(p, t, e->off);
		return;
	}
	if (p->depth > 0) { /* keep the shadowed binding for when the region closes */
		if (p->nundo == p->capundo) {
			p->capundo = p->capundo ? p->capundo * 2 : 64;
			p->undo = realloc(p->undo, p->capundo * sizeof *p->undo);
			if (!p->undo)
				kf_oom();
		}
		p->undo[p->nundo++] = (kf_pundo){sid, *e};
	}
	e->scope = p->scope | (nres > 1 ? KF_SCOPE_MULTI : 0);
	e->vid = vid;
	e->off = t->off;
}

/* Puts back the bindings shadowed since undo mark `mark`. */
void kf_parse_restore(kf_parser *p, uint32_t mark)
{
	while (p->nundo > mark) {
		const kf_pundo *u = &p->undo[--p->nundo];
		p->bind[u->sid] = u->b;
	}
}

static bool in_outer_scope(const kf_parser *p, const kf_pbind *e)
{
	for (int i = 0; i < p->depth; i++)
		if (p->outer[i] == (e->scope & ~KF_SCOPE_MULTI))
			return true;
	return false;
}

/* Resolves the value token t (whose name hashes to h); KF_POISON after a
 * reported error or for a name whose definition failed. */
kf_vid kf_parse_resolve(kf_parser *p, const kf_token *t, uint32_t h)
{
	static const kf_pbind unbound = {0};
	const char *nm = p->text + t->off + 1;
	int nl = (int)t->nlen;
	kf_sid sid = kf_lookup_hashed(p->c, nm, t->nlen, h);
	const kf_pbind *e = sid < p->capbind ? &p->bind[sid] : &unbound;
	if ((e->scope & ~KF_SCOPE_MULTI) != p->scope) {
		if (in_outer_scope(p, e))
			kf_parse_err(p, t->off, "use of undefined value '%%%.*s' (a region sees only its own '^' arguments)", nl, nm);
		else
			kf_parse_err(p, t->off, "use of undefined value '%%%.*s'", nl, nm);
		return KF_POISON;
	}
	if (e->vid == KF_POISON)
		return KF_POISON;
	/* a valid binding of several results is a built node: it knows how many */
	uint32_t nres = e->scope & KF_SCOPE_MULTI ? p->g->node[p->g->val[e->vid].def].nres : 1;
	if (t->idx >= 0) {
		if ((uint64_t)t->idx >= nres) {
			kf_parse_err(p, t->off, "'%%%.*s' has %u result%s; '%.*s' is out of range", nl, nm,
				     nres, nres == 1 ? "" : "s", (int)t->len, p->text + t->off);
			return KF_POISON;
		}
		return e->vid + (uint32_t)t->idx;
	}
	if (nres != 1) {
		kf_parse_err(p, t->off, "'%%%.*s' has %u results; use '%%%.*s#0' .. '%%%.*s#%u'", nl, nm,
			     nres, nl, nm, nl, nm, nres - 1);
		return KF_POISON;
	}
	return e->vid;
}
