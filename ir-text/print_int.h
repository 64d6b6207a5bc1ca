/* print_int.h: the printer's state, shared by print.c (nodes, blocks,
 * graphs, modules), print_names.c (the printed names of values) and
 * print_lit.c (the buffer, strings, types, op names, attributes,
 * constants).  Private to ir-text.
 *
 * The writers below are static inline: they are most of the printer's
 * time, and a call per byte or per name would show (see print.c). */
#ifndef KF_PRINT_INT_H
#define KF_PRINT_INT_H

#include <stdio.h>
#include <string.h>
#include "kf.h"

#define PRINT_CHUNK (64 * 1024) /* kf_print_module_file writes this much at a time */

typedef struct pstr {
	const char *s; /* readable 16 bytes past its end (put_padded) */
	uint32_t n;
} pstr;

/* A value's printed name: 0 while unnamed, else a sid (its own name) or,
 * with PN_GEN, an index into gen; PN_MULTI: a result of a node with
 * several, used as `%name#k`. */
#define PN_GEN 0x80000000u
#define PN_MULTI 0x40000000u
#define PN_INDEX 0x3fffffffu

/* Per sid: the stamp of the scope that last marked it (2*stamp: a name of
 * that scope, 2*stamp + 1: taken), and whether it is a printable name. */
#define SM_KNOWN 0x80000000u
#define SM_VALID 0x40000000u
#define SM_MARK 0x3fffffffu

typedef struct printer {
	kf_buf *out;
	FILE *sink;   /* kf_print_module_file: where out goes */
	int werr;     /* errno of a failed write to sink, or 0 */
	kf_graph *g;
	kf_ctx *c;
	uint32_t *pn; /* per value */
	uint32_t *sm; uint32_t capsm, stamp; /* per sid */
	uint32_t *suf;                       /* per sid: the last suffix tried; NULL until a clash */
	pstr *gen; uint32_t ngen, capgen;
	uint32_t *gset; uint32_t capgset, ngset; /* generated names of this scope */
	pstr *tc; uint32_t captc;                /* type texts by tid */
	pstr *oc; uint32_t capoc;                /* op names by op */
	kf_arena arena;
} printer;

/* ---- print_lit.c ---- */

/* Grows buffer b to hold n more bytes and a NUL. */
void kf_print_grow(kf_buf *b, size_t n);
/* A copy of s in the printer's arena, readable to a multiple of 16 bytes. */
pstr kf_print_keep(printer *pr, const char *s, size_t n);
void kf_print_u64(printer *pr, uint64_t v);
/* Hands the buffer to the sink when it is big enough (or, with all, at
 * the end); without a sink it does nothing. */
void kf_print_flush(printer *pr, bool all);
/* Whether the n bytes at s are a name: not empty, [A-Za-z0-9_.$] only. */
bool kf_print_valid_name(const char *s, size_t n);
/* The cached text of type tid; NULL for a tid too large to cache. */
const pstr *kf_print_type_text(printer *pr, kf_tid tid);
void kf_print_put_type(printer *pr, kf_tid tid);
/* The cached name of op. */
const pstr *kf_print_op_text(printer *pr, int op);
/* ` {k = v, ...}` of node x. */
void kf_print_attrs(printer *pr, const kf_node *x);
/* The literal of a const node of type tid: a scalar, dense<...> or
 * file("..."); a big one streams through kf_print_flush. */
void kf_print_const(printer *pr, const kf_const *k, kf_tid tid);
/* A string literal; what the lexer would not take back is escaped. */
void kf_print_string(kf_buf *b, const char *s, size_t n);

/* ---- print_names.c ---- */

/* Gives every value defined in block b (its arguments and its nodes'
 * results) a printed name unique in that scope; see print.c. */
void kf_print_name_scope(printer *pr, kf_bid b);
/* `%name` of value v: at a definition, or (with use) `%name#k` of a
 * result of a node with several. */
void kf_print_vname(printer *pr, kf_vid v, bool use);

/* ---- the writers ---- */

/* Room for n more bytes (and a NUL after them). */
static inline char *room(printer *pr, size_t n)
{
	kf_buf *b = pr->out;
	if (b->cap - b->n < n + 1)
		kf_print_grow(b, n);
	return b->p + b->n;
}

static inline void put(printer *pr, const char *s, size_t n)
{
	memcpy(room(pr, n), s, n);
	pr->out->n += n;
}

/* Short constants: the copy is inlined. */
#define PUTS(pr, lit) put(pr, lit, sizeof lit - 1)

static inline void putch(printer *pr, char ch)
{
	*room(pr, 1) = ch;
	pr->out->n++;
}

/* A text whose storage is readable 16 bytes past its end (kf_str_padded,
 * kf_print_keep): copied in 16-byte pieces without a call. */
static inline void put_padded(printer *pr, const pstr *t)
{
	char *d = room(pr, t->n + 16);
	for (uint32_t i = 0; i < t->n; i += 16)
		memcpy(d + i, t->s + i, 16);
	pr->out->n += t->n;
}

/* put_padded into room already made; returns the end. */
static inline char *copy_padded(char *d, const pstr *t)
{
	for (uint32_t i = 0; i < t->n; i += 16)
		memcpy(d + i, t->s + i, 16);
	return d + t->n;
}

/* The text of value v's printed name for a plain copy; false when it takes
 * more (`#k`, or a broken graph's unnamed value). */
static inline bool vname_text(printer *pr, kf_vid v, pstr *t)
{
	uint32_t e = v < pr->g->nval ? pr->pn[v] : 0;
	if (!e || (e & PN_MULTI))
		return false;
	if (e & PN_GEN) {
		*t = pr->gen[e & PN_INDEX];
	} else {
		size_t n;
		t->s = kf_str_padded(pr->c, e, &n);
		t->n = (uint32_t)n;
	}
	return true;
}

#endif
