/* parse_names.c: the parser's name table: value names to their bindings.
 *
 * Open addressing keyed by the name's bytes, compared against the defining
 * token in the text (see kf_pslot in parse_int.h); scopes are stamps, and a
 * region's shadowed bindings are kept on an undo stack until it closes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "parse_int.h"

static uint32_t name_hash(const char *s, uint32_t n)
{
	uint64_t h = 1469598103934665603ULL;
	for (uint32_t i = 0; i < n; i++)
		h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
	return (uint32_t)(h ^ (h >> 32));
}

static bool is_namech(char ch)
{
	return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
	       ch == '_' || ch == '.' || ch == '$';
}

/* Whether slot e binds name s: the defining token spells it and ends there. */
static bool slot_is(const kf_parser *p, const kf_pslot *e, const char *s, uint32_t n, uint32_t h)
{
	if (e->hash != h)
		return false;
	const char *d = p->text + e->off + 1;
	return (size_t)(e->off + 1) + n <= p->len && memcmp(d, s, n) == 0 &&
	       ((size_t)(e->off + 1) + n == p->len || !is_namech(d[n]));
}

/* The slot holding name s (of any scope), or the empty slot where it goes. */
static kf_pslot *slot_find(kf_parser *p, const char *s, uint32_t n, uint32_t h)
{
	uint32_t mask = p->captab - 1;
	for (uint32_t i = h & mask;; i = (i + 1) & mask) {
		kf_pslot *e = &p->tab[i];
		if (e->scope == KF_SCOPE_EMPTY || slot_is(p, e, s, n, h))
			return e;
	}
}

static void tab_grow(kf_parser *p)
{
	kf_pslot *old = p->tab;
	uint32_t oldcap = p->captab;
	p->captab = oldcap ? oldcap * 2 : 1024;
	p->tab = calloc(p->captab, sizeof *p->tab);
	if (!p->tab)
		abort();
	for (uint32_t i = 0; i < oldcap; i++)
		if (old[i].scope != KF_SCOPE_EMPTY) {
			uint32_t j = old[i].hash & (p->captab - 1);
			while (p->tab[j].scope != KF_SCOPE_EMPTY)
				j = (j + 1) & (p->captab - 1);
			p->tab[j] = old[i];
		}
	free(old);
}

/* The binding of value token t, in whatever scope (check e->scope). */
kf_pslot *kf_parse_lookup(kf_parser *p, const kf_token *t)
{
	const char *s = p->text + t->off + 1;
	if (!p->captab)
		tab_grow(p);
	return slot_find(p, s, t->nlen, name_hash(s, t->nlen));
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

/* Binds %name (token t) to vid..vid+nres-1 in the current scope; a
 * redefinition is reported unless `quiet` (the caller already did). */
void kf_parse_define(kf_parser *p, const kf_token *t, kf_vid vid, uint32_t nres, bool quiet)
{
	if ((p->ntab + 1) * 4 > p->captab * 3)
		tab_grow(p);
	kf_pslot *e = kf_parse_lookup(p, t);
	if ((e->scope & ~KF_SCOPE_MULTI) == p->scope) {
		if (!quiet)
			kf_parse_redefinition(p, t, e->off);
		return;
	}
	if (e->scope == KF_SCOPE_EMPTY) {
		p->ntab++;
		*e = (kf_pslot){.hash = name_hash(p->text + t->off + 1, t->nlen), .scope = KF_SCOPE_DEAD};
	}
	if (p->depth > 0) { /* keep the shadowed binding for when the region closes */
		if (p->nundo == p->capundo) {
			p->capundo = p->capundo ? p->capundo * 2 : 64;
			p->undo = realloc(p->undo, p->capundo * sizeof *p->undo);
			if (!p->undo)
				abort();
		}
		p->undo[p->nundo++] = *e;
	}
	e->scope = p->scope | (nres > 1 ? KF_SCOPE_MULTI : 0);
	e->vid = vid;
	e->off = t->off;
}

/* Puts back the bindings shadowed since undo mark `mark`. */
void kf_parse_restore(kf_parser *p, uint32_t mark)
{
	while (p->nundo > mark) {
		kf_pslot *u = &p->undo[--p->nundo];
		const char *s = p->text + u->off + 1;
		uint32_t n = 0;
		while (u->off + 1 + n < p->len && is_namech(s[n]))
			n++;
		*slot_find(p, s, n, u->hash) = *u;
	}
}

static bool in_outer_scope(const kf_parser *p, const kf_pslot *e)
{
	for (int i = 0; i < p->depth; i++)
		if (p->outer[i] == (e->scope & ~KF_SCOPE_MULTI))
			return true;
	return false;
}

/* Resolves the value token t; KF_POISON after a reported error or for a
 * name whose definition failed. */
kf_vid kf_parse_resolve(kf_parser *p, const kf_token *t)
{
	const char *nm = p->text + t->off + 1;
	int nl = (int)t->nlen;
	kf_pslot *e = kf_parse_lookup(p, t);
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

/* Starts loading the table slot of a value name: the slot is a cache miss
 * (the table is megabytes), and the rest of the line is read meanwhile. */
void kf_parse_prefetch(const kf_parser *p, const kf_token *t)
{
	if (p->captab)
		__builtin_prefetch(&p->tab[name_hash(p->text + t->off + 1, t->nlen) & (p->captab - 1)]);
}
