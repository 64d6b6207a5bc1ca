/* dot.c: Graphviz text of graphs (kfuse-opt --emit=dot).
 *
 * Nodes are labelled with the op (and @symbol) and result types, constants
 * with their value when it is short; graph inputs are ellipses at the top,
 * outputs inverted houses at the bottom; one edge per operand, labelled #k
 * when it reads result k of a multi-result node; fusion nodes become
 * `subgraph cluster_N` boxes holding their bodies (whose arguments are drawn
 * as small circles fed by the fusion's operands).  Ids are handles (n12,
 * v3), so the text is stable for a given graph. */
#include <string.h>

#include "passes.h"

/* Appends s escaped for a double-quoted DOT string. */
static void esc(kf_buf *b, const char *s, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (s[i] == '"' || s[i] == '\\')
			kf_buf_putc(b, '\\');
		kf_buf_putc(b, s[i]);
	}
}

static void label_types(kf_buf *b, kf_graph *g, kf_nid n)
{
	kf_node *nd = kf_N(g, n);
	for (uint32_t i = 0; i < nd->nres; i++) {
		kf_buf t = {0};
		kf_print_type(&t, g->ctx, kf_V(g, kf_res(g, n, i))->type);
		kf_buf_puts(b, i ? ", " : "\\n");
		esc(b, t.p, t.n);
		kf_buf_free(&t);
	}
}

static void label_const(kf_buf *b, kf_graph *g, const kf_node *nd, kf_dtype dt)
{
	const kf_const *k = nd->cst;
	if (!k)
		return;
	if (k->kind == KF_CONST_FILE) {
		kf_buf_puts(b, " file(");
		esc(b, kf_str(g->ctx, k->path), kf_strlen(g->ctx, k->path));
		kf_buf_puts(b, ")");
	} else if (k->n == 1) {
		kf_buf_putc(b, ' ');
		if (k->f)
			kf_buf_float(b, k->f[0], dt);
		else if (k->i)
			kf_buf_printf(b, "%lld", (long long)k->i[0]);
	} else {
		kf_buf_printf(b, " dense<%llu>", (unsigned long long)k->n);
	}
}

/* The DOT id of the producer of v, and the edge label for its result index. */
static void src_of(kf_buf *b, kf_graph *g, kf_vid v)
{
	kf_nid d = kf_def(g, v);
	if (d == KF_NONE)
		kf_buf_printf(b, "v%u", v);
	else
		kf_buf_printf(b, "n%u", d);
}

static void edges(kf_buf *b, kf_graph *g, kf_nid n, const char *ind)
{
	kf_node *nd = kf_N(g, n);
	for (uint32_t i = 0; i < nd->nin; i++) {
		kf_vid v = kf_in(g, n, i);
		kf_buf_puts(b, ind);
		src_of(b, g, v);
		kf_buf_printf(b, " -> n%u", n);
		kf_nid d = kf_def(g, v);
		if (d != KF_NONE && kf_N(g, d)->nres > 1)
			kf_buf_printf(b, " [label=\"#%u\"]", kf_V(g, v)->idx);
		kf_buf_puts(b, ";\n");
	}
}

static void dot_block(kf_buf *b, kf_graph *g, kf_bid blk, int depth);

static void dot_node(kf_buf *b, kf_graph *g, kf_nid n, int depth)
{
	char ind[40];
	int w = depth * 2 + 2 < 38 ? depth * 2 + 2 : 38;
	memset(ind, ' ', (size_t)w);
	ind[w] = 0;
	kf_node *nd = kf_N(g, n);
	const kf_opinfo *oi = kf_op(g->ctx, nd->op);
	if (nd->body != KF_NONE) {
		kf_buf_printf(b, "%ssubgraph cluster_n%u {\n%s  label=\"%s", ind, n, ind, oi->name);
		if (nd->sym)
			kf_buf_printf(b, " @%s", kf_str(g->ctx, nd->sym));
		const char *kind = kf_attr_str(g, n, "kind", NULL);
		if (kind)
			kf_buf_printf(b, " (%s)", kind);
		kf_buf_printf(b, "\";\n%s  style=rounded; color=\"#4a7ab5\";\n", ind);
		kf_block *bb = &g->blk[nd->body];
		for (uint32_t i = 0; i < bb->narg; i++)
			kf_buf_printf(b, "%s  v%u [shape=circle, width=0.3, label=\"^%u\"];\n", ind, bb->arg[i], i);
		dot_block(b, g, nd->body, depth + 1);
		kf_buf_printf(b, "%s}\n", ind);
		/* Operand k feeds body argument k; the results come out of a point
		 * node that stands for the fusion's results. */
		for (uint32_t i = 0; i < nd->nin && i < bb->narg; i++) {
			kf_buf_puts(b, ind);
			src_of(b, g, kf_in(g, n, i));
			kf_buf_printf(b, " -> v%u;\n", bb->arg[i]);
		}
		kf_buf_printf(b, "%sn%u [shape=box, style=\"rounded,filled\", fillcolor=\"#dce8f5\", label=\"%s",
			      ind, n, nd->sym ? "@" : "");
		if (nd->sym)
			kf_buf_puts(b, kf_str(g->ctx, nd->sym));
		label_types(b, g, n);
		kf_buf_puts(b, "\"];\n");
		kf_nid y = kf_block_terminator(g, nd->body);
		if (y != KF_NONE)
			kf_buf_printf(b, "%sn%u -> n%u [style=dashed];\n", ind, y, n);
		return;
	}
	bool term = (oi->flags & KF_OPF_TERMINATOR) != 0;
	kf_buf_printf(b, "%sn%u [", ind, n);
	if (term)
		kf_buf_puts(b, "shape=invhouse, style=filled, fillcolor=\"#f5e3c8\", ");
	else if (nd->op == KF_OP_CONST)
		kf_buf_puts(b, "shape=box, style=filled, fillcolor=\"#eeeeee\", ");
	else
		kf_buf_puts(b, "shape=box, ");
	kf_buf_printf(b, "label=\"%s", oi->name);
	if (nd->op == KF_OP_CONST && nd->nres)
		label_const(b, g, nd, (kf_dtype)kf_vtype(g, kf_res(g, n, 0))->dtype);
	label_types(b, g, n);
	kf_buf_puts(b, "\"];\n");
	edges(b, g, n, ind);
}

static void dot_block(kf_buf *b, kf_graph *g, kf_bid blk, int depth)
{
	kf_foreach_node(g, blk, n)
		dot_node(b, g, n, depth);
}

void kf_dot_graph(kf_buf *b, kf_graph *g)
{
	const char *name = kf_str(g->ctx, g->name);
	kf_buf_puts(b, "digraph \"");
	esc(b, name, strlen(name));
	kf_buf_puts(b, "\" {\n  rankdir=TB;\n  graph [fontname=\"Helvetica\", fontsize=11];\n  node [fontname=\"Helvetica\", fontsize=10];\n"
		       "  edge [fontname=\"Helvetica\", fontsize=9];\n");
	kf_block *b0 = &g->blk[0];
	for (uint32_t i = 0; i < b0->narg; i++) {
		kf_vid v = b0->arg[i];
		kf_buf t = {0};
		kf_print_type(&t, g->ctx, kf_V(g, v)->type);
		kf_buf_printf(b, "  v%u [shape=ellipse, style=filled, fillcolor=\"#d5f0d5\", label=\"%%", v);
		const char *vn = kf_str(g->ctx, kf_V(g, v)->name);
		if (*vn)
			esc(b, vn, strlen(vn));
		else
			kf_buf_printf(b, "arg%u", i);
		kf_buf_puts(b, "\\n");
		esc(b, t.p, t.n);
		kf_buf_puts(b, "\"];\n");
		kf_buf_free(&t);
	}
	if (b0->narg) {
		kf_buf_puts(b, "  { rank=source;");
		for (uint32_t i = 0; i < b0->narg; i++)
			kf_buf_printf(b, " v%u;", b0->arg[i]);
		kf_buf_puts(b, " }\n");
	}
	dot_block(b, g, 0, 0);
	kf_buf_puts(b, "}\n");
}

void kf_dot_module(kf_buf *b, kf_module *m)
{
	for (uint32_t i = 0; i < m->ngraph; i++)
		kf_dot_graph(b, m->graph[i]);
}
