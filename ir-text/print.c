/* print.c: graphs back to .kf text, in the form the parser reads.
 *
 * Value names are printed as written.  Passes make values without names and
 * may leave two values of one scope with the same name; each scope (graph
 * body, region body) is named before it is printed: the first holder keeps
 * a name, later ones get `name_1`, `name_2`, ..., unnamed values get `%0`,
 * `%1`, ..., and no generated name equals any name of that scope.  So
 * print(parse(text)) is a fixed point: the printed names are unique and
 * parse back to themselves.
 *
 * Speed and size: per-sid marks stamped with a scope id (no clearing), a
 * string set only for generated names, 4 bytes per value for its printed
 * name (its own sid, or a generated one), cached texts of types and op
 * names, and writes into the buffer without a call or a NUL each; O(n) in
 * the graph.  kf_print_module_file streams: the buffer goes to the file
 * every PRINT_CHUNK bytes, so a big module's text is never held whole.
 *
 * This file prints statements, blocks, graphs and modules; print_names.c
 * names the values of a scope, print_lit.c writes what is inside a
 * statement (types, attributes, constants); print_int.h is their shared
 * state. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include "print_int.h"

static void indent(printer *pr, int n)
{
	static const char sp[] = "                                ";
	for (; n > 32; n -= 32)
		put(pr, sp, 32);
	put(pr, sp, (size_t)n);
}

/* The common node, `%r = op(%a, %b) : type` (one result, at most 8
 * operands, no attributes, symbol, constant or region), written after one
 * room check: most of a big graph's text.  false: not such a node,
 * nothing written. */
static bool put_simple(printer *pr, kf_nid n, int ind)
{
	static const char sp[32] = "                                ";
	const kf_graph *g = pr->g;
	const kf_node *x = &g->node[n];
	pstr nm[9];
	if (x->nres != 1 || x->nin > 8 || x->nattr || x->sym || x->body != KF_NONE || x->op == KF_OP_CONST ||
	    ind > 32 || !vname_text(pr, x->res0, &nm[0]))
		return false;
	size_t need = 32 + 64 + nm[0].n;
	for (uint32_t i = 0; i < x->nin; i++) {
		if (!vname_text(pr, kf_in(g, n, i), &nm[i + 1]))
			return false;
		need += nm[i + 1].n + 20;
	}
	const pstr *op = kf_print_op_text(pr, x->op), *ty = kf_print_type_text(pr, g->val[x->res0].type);
	if (!ty)
		return false;
	char *d = room(pr, need + op->n + ty->n), *d0 = d;
	memcpy(d, sp, 32);
	d += ind;
	*d++ = '%';
	d = copy_padded(d, &nm[0]);
	memcpy(d, " = ", 3);
	d = copy_padded(d + 3, op);
	*d++ = '(';
	for (uint32_t i = 0; i < x->nin; i++) {
		if (i) {
			memcpy(d, ", ", 2);
			d += 2;
		}
		*d++ = '%';
		d = copy_padded(d, &nm[i + 1]);
	}
	memcpy(d, ") : ", 4);
	d = copy_padded(d + 4, ty);
	*d++ = '\n';
	pr->out->n += (size_t)(d - d0);
	return true;
}

/* ---- nodes, blocks, graphs ---- */

static void put_block(printer *pr, kf_bid b, int ind);

static void put_node(printer *pr, kf_nid n, int ind)
{
	kf_graph *g = pr->g;
	const kf_node *x = &g->node[n];
	if (put_simple(pr, n, ind))
		return;
	uint32_t flags = kf_op(pr->c, x->op)->flags;
	indent(pr, ind);
	if (x->nres) {
		kf_print_vname(pr, x->res0, false);
		if (x->nres > 1) {
			putch(pr, ':');
			kf_print_u64(pr, x->nres);
		}
		PUTS(pr, " = ");
	}
	put_padded(pr, kf_print_op_text(pr, x->op));
	if ((flags & KF_OPF_TERMINATOR) && x->body == KF_NONE) {
		for (uint32_t i = 0; i < x->nin; i++) {
			putch(pr, i ? ',' : ' ');
			if (i)
				putch(pr, ' ');
			kf_print_vname(pr, kf_in(g, n, i), true);
		}
		putch(pr, '\n');
		return;
	}
	if (x->op == KF_OP_CONST && x->cst) {
		putch(pr, ' ');
		kf_print_const(pr, x->cst, g->val[x->res0].type);
	} else {
		if (x->sym) {
			PUTS(pr, " @");
			put(pr, kf_str(pr->c, x->sym), kf_strlen(pr->c, x->sym));
		}
		putch(pr, '(');
		for (uint32_t i = 0; i < x->nin; i++) {
			if (i)
				PUTS(pr, ", ");
			kf_print_vname(pr, kf_in(g, n, i), true);
		}
		putch(pr, ')');
	}
	if (x->nattr)
		kf_print_attrs(pr, x);
	for (uint32_t i = 0; i < x->nres; i++) {
		if (i)
			PUTS(pr, ", ");
		else
			PUTS(pr, " : ");
		kf_print_put_type(pr, g->val[x->res0 + i].type);
	}
	if (x->body != KF_NONE) {
		PUTS(pr, " {\n");
		put_block(pr, x->body, ind);
		indent(pr, ind);
		putch(pr, '}');
	}
	putch(pr, '\n');
}

/* A region body: `^(args):` at the node's indent, its nodes two deeper. */
static void put_block(printer *pr, kf_bid bid, int ind)
{
	kf_graph *g = pr->g;
	kf_print_name_scope(pr, bid);
	indent(pr, ind);
	PUTS(pr, "^(");
	for (uint32_t i = 0; i < g->blk[bid].narg; i++) {
		kf_vid a = g->blk[bid].arg[i];
		if (i)
			PUTS(pr, ", ");
		kf_print_vname(pr, a, false);
		PUTS(pr, ": ");
		kf_print_put_type(pr, g->val[a].type);
	}
	PUTS(pr, "):\n");
	kf_foreach_node(g, bid, n) {
		put_node(pr, n, ind + 2);
		kf_print_flush(pr, false);
	}
}

static void print_graph(printer *pr)
{
	kf_graph *g = pr->g;
	pr->pn = calloc(g->nval ? g->nval : 1, sizeof *pr->pn);
	if (!pr->pn)
		abort();
	kf_print_name_scope(pr, 0);
	PUTS(pr, "graph @");
	put(pr, kf_str(pr->c, g->name), kf_strlen(pr->c, g->name));
	putch(pr, '(');
	for (uint32_t i = 0; i < g->blk[0].narg; i++) {
		kf_vid a = g->blk[0].arg[i];
		if (i)
			PUTS(pr, ", ");
		kf_print_vname(pr, a, false);
		PUTS(pr, ": ");
		kf_print_put_type(pr, g->val[a].type);
	}
	PUTS(pr, ") -> (");
	for (uint32_t i = 0; i < g->nres; i++) {
		if (i)
			PUTS(pr, ", ");
		kf_print_put_type(pr, g->res[i]);
	}
	PUTS(pr, ") {\n");
	kf_foreach_node(g, 0, n) {
		put_node(pr, n, 2);
		kf_print_flush(pr, false);
	}
	PUTS(pr, "}\n");
	pr->out->p[pr->out->n] = 0; /* room() kept a byte for it */
	free(pr->pn);
	pr->pn = NULL;
}

static void printer_free(printer *pr)
{
	free(pr->sm);
	free(pr->suf);
	free(pr->gen);
	free(pr->gset);
	free(pr->tc);
	free(pr->oc);
	kf_arena_free(&pr->arena);
}

void kf_print_graph(kf_buf *out, kf_graph *g)
{
	printer pr = {.out = out, .g = g, .c = g->ctx};
	print_graph(&pr);
	printer_free(&pr);
}

static void print_module(printer *pr, kf_module *m)
{
	/* `plugin "FILE"` lines first: a reader loads them before the graphs
	 * that use their ops */
	for (uint32_t i = 0; i < m->nplugin; i++) {
		put(pr, "plugin ", 7);
		kf_print_string(pr->out, kf_str(pr->c, m->plugin[i]), kf_strlen(pr->c, m->plugin[i]));
		putch(pr, '\n');
		if (i + 1 == m->nplugin)
			putch(pr, '\n');
	}
	for (uint32_t i = 0; i < m->ngraph; i++) {
		if (i)
			putch(pr, '\n');
		pr->g = m->graph[i];
		print_graph(pr);
	}
	printer_free(pr);
}

void kf_print_module(kf_buf *out, kf_module *m)
{
	print_module(&(printer){.out = out, .c = m->ctx}, m);
}

int kf_print_module_file(FILE *f, kf_module *m)
{
	kf_buf out = {0};
	printer pr = {.out = &out, .sink = f, .c = m->ctx};
	print_module(&pr, m);
	kf_print_flush(&pr, true);
	kf_buf_free(&out);
	if (pr.werr)
		errno = pr.werr;
	return pr.werr ? -1 : 0;
}
