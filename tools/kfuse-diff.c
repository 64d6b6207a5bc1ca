/* kfuse-diff: structural diff of two .kf files, blind to value names, node
 * order and whitespace.
 *
 * Every value gets a structural hash bottom-up: graph inputs by position,
 * node results by (op, attributes, types, constant payload, operand hashes,
 * sorted for commutative ops, body structure, result index).  Two graphs are
 * equal when their outputs hash alike in order.  When they differ, a walk
 * from the outputs pairs nodes of both sides and descends only into operands
 * whose hashes differ, so what it reports is the smallest differing part:
 * nodes whose own op, attributes or types differ while their operands match
 * as far as the walk can pair them.  Linear in graph size.
 *
 * Exit status: 0 equal, 1 different, 2 error.
 */
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "cli.h"
#include "kf.h"

typedef struct side {
	const char *path;
	kf_graph *g;
	uint64_t *h; /* per value */
} side;

typedef struct differ {
	kf_ctx *c;
	bool ignore_attrs;
	double rtol; /* < 0: constants compared exactly, inside the hash */
	side a, b;
	uint64_t *seen; /* visited pair keys, open addressing */
	uint32_t seencap, nseen;
	int ndiff, maxshow;
} differ;

static uint64_t mix(uint64_t h, uint64_t v)
{
	h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
	return h * 0xff51afd7ed558ccdULL;
}

static uint64_t hash_attrs(const differ *d, const kf_graph *g, const kf_node *x)
{
	uint64_t h = 7;
	if (d->ignore_attrs)
		return h;
	for (uint32_t i = 0; i < x->nattr; i++) {
		/* keys hash by text: the two graphs share one context, so ids agree */
		h = mix(h, x->attr[i].key);
		h = mix(h, kf_attrval_hash(&x->attr[i].v));
	}
	return h;
}

static uint64_t hash_const(const differ *d, const kf_graph *g, const kf_node *x)
{
	const kf_const *k = x->cst;
	if (!k)
		return 0;
	uint64_t h = mix(k->kind, k->n);
	if (k->kind == KF_CONST_FILE)
		return mix(h, k->path);
	if (d->rtol >= 0)
		return h; /* values compared with tolerance when pairs are checked */
	for (uint64_t i = 0; i < k->n; i++)
		h = mix(h, kf_const_elem_bits(k, i));
	return h;
}

static void hash_block(differ *d, side *s, kf_bid b, uint64_t salt);

static uint64_t hash_node(differ *d, side *s, kf_nid n)
{
	kf_graph *g = s->g;
	kf_node *x = &g->node[n];
	uint64_t h = mix(0x51ed, x->op);
	h = mix(h, hash_attrs(d, g, x));
	h = mix(h, hash_const(d, g, x));
	for (uint32_t i = 0; i < x->nres; i++)
		h = mix(h, g->val[x->res0 + i].type);
	uint64_t ops = 0;
	bool comm = kf_op(d->c, x->op)->flags & KF_OPF_COMMUTATIVE;
	for (uint32_t i = 0; i < x->nin; i++) {
		uint64_t v = s->h[kf_in(g, n, i)];
		ops = comm ? ops + v * 0x9e3779b97f4a7c15ULL + (v >> 29) : mix(ops, v);
	}
	h = mix(h, ops);
	if (x->body != KF_NONE) {
		hash_block(d, s, x->body, h);
		kf_nid y = kf_block_terminator(g, x->body);
		for (uint32_t i = 0; y != KF_NONE && i < g->node[y].nin; i++)
			h = mix(h, s->h[kf_in(g, y, i)]);
	}
	return h;
}

static void hash_block(differ *d, side *s, kf_bid b, uint64_t salt)
{
	kf_graph *g = s->g;
	for (uint32_t i = 0; i < g->blk[b].narg; i++)
		s->h[g->blk[b].arg[i]] = mix(mix(0xa7, i), g->val[g->blk[b].arg[i]].type);
	kf_foreach_node(g, b, n) {
		uint64_t h = hash_node(d, s, n);
		for (uint32_t i = 0; i < g->node[n].nres; i++)
			s->h[g->node[n].res0 + i] = mix(h, i);
	}
	(void)salt;
}

/* ---- reporting ---- */

static void print_source_line(const side *s, kf_loc loc, const char *label)
{
	kf_ctx *c = s->g->ctx;
	size_t len;
	const char *text = loc.src == KF_NONE ? NULL : kf_source_text(c, loc.src, &len);
	if (!text) {
		printf("  %s %s: (no source position)\n", label, s->path);
		return;
	}
	int line, col;
	kf_source_linecol(c, loc.src, loc.off, &line, &col);
	uint32_t start = loc.off - (uint32_t)(col - 1), end = loc.off;
	while (end < len && text[end] != '\n')
		end++;
	while (start < end && (text[start] == ' ' || text[start] == '\t'))
		start++;
	int n = (int)(end - start);
	printf("  %s %s:%d: %.*s%s\n", label, s->path, line, n > 160 ? 160 : n, text + start,
	       n > 160 ? " ..." : "");
}

static void print_value(const side *s, kf_vid v, const char *label)
{
	kf_graph *g = s->g;
	if (g->val[v].def != KF_NONE) {
		print_source_line(s, g->node[g->val[v].def].loc, label);
		return;
	}
	kf_buf b = {0};
	kf_print_type(&b, g->ctx, g->val[v].type);
	printf("  %s %s: input #%u %%%s : %s\n", label, s->path, g->val[v].idx,
	       kf_str(g->ctx, g->val[v].name), b.p);
	kf_buf_free(&b);
}

static void attr_text(kf_buf *b, const kf_ctx *c, const kf_attrval *v)
{
	switch (v->kind) {
	case KF_ATTR_INT: kf_buf_printf(b, "%lld", (long long)v->i); break;
	case KF_ATTR_FLOAT: kf_buf_float(b, v->f, KF_F64); break;
	case KF_ATTR_STR: kf_buf_printf(b, "\"%s\"", kf_str(c, v->s)); break;
	case KF_ATTR_BOOL: kf_buf_puts(b, v->b ? "true" : "false"); break;
	case KF_ATTR_LIST:
		kf_buf_putc(b, '[');
		for (uint32_t i = 0; i < v->n; i++) {
			if (i)
				kf_buf_puts(b, ", ");
			attr_text(b, c, &v->list[i]);
		}
		kf_buf_putc(b, ']');
		break;
	}
}

static const kf_attrval *find_attr(const kf_node *x, kf_sid key)
{
	for (uint32_t i = 0; i < x->nattr; i++)
		if (x->attr[i].key == key)
			return &x->attr[i].v;
	return NULL;
}

/* Names what differs between two nodes of one op: attributes by key, types. */
static void explain_attrs(differ *d, const kf_node *x, const kf_node *y)
{
	kf_ctx *c = d->c;
	for (int pass = 0; pass < 2; pass++) {
		const kf_node *p = pass ? y : x, *q = pass ? x : y;
		for (uint32_t i = 0; i < p->nattr; i++) {
			const kf_attrval *o = find_attr(q, p->attr[i].key);
			if (o && (pass || kf_attrval_eq(&p->attr[i].v, o)))
				continue;
			kf_buf b = {0};
			if (!o) {
				attr_text(&b, c, &p->attr[i].v);
				printf("    attribute '%s' only in %s: %s\n", kf_str(c, p->attr[i].key),
				       pass ? d->b.path : d->a.path, b.p);
			} else {
				attr_text(&b, c, &p->attr[i].v);
				kf_buf_puts(&b, " vs ");
				attr_text(&b, c, o);
				printf("    attribute '%s': %s\n", kf_str(c, p->attr[i].key), b.p);
			}
			kf_buf_free(&b);
		}
	}
}

static bool const_close(const differ *d, const kf_const *p, const kf_const *q)
{
	if (!p || !q)
		return p == q;
	if (p->kind != q->kind || p->n != q->n)
		return false;
	for (uint64_t i = 0; i < p->n; i++) {
		double a = p->f ? p->f[i] : p->i ? (double)p->i[i] : 0;
		double b = q->f ? q->f[i] : q->i ? (double)q->i[i] : 0;
		if (a == b || (isnan(a) && isnan(b)))
			continue;
		if (!(fabs(a - b) <= d->rtol * fmax(fabs(a), fabs(b))))
			return false;
	}
	return true;
}

/* What differs in the node itself, apart from its operands; NULL if nothing. */
static const char *local_difference(differ *d, kf_nid m, kf_nid n)
{
	const kf_node *x = &d->a.g->node[m], *y = &d->b.g->node[n];
	if (x->op != y->op)
		return "op differs";
	if (x->nin != y->nin)
		return "operand count differs";
	if (x->nres != y->nres)
		return "result count differs";
	for (uint32_t i = 0; i < x->nres; i++)
		if (d->a.g->val[x->res0 + i].type != d->b.g->val[y->res0 + i].type)
			return "result type differs";
	if (hash_attrs(d, d->a.g, x) != hash_attrs(d, d->b.g, y))
		return "attributes differ";
	if (hash_const(d, d->a.g, x) != hash_const(d, d->b.g, y))
		return "constant value differs";
	if (d->rtol >= 0 && !const_close(d, x->cst, y->cst))
		return "constant value differs beyond --rtol";
	return NULL;
}

static void report(differ *d, kf_vid va, kf_vid vb, const char *what)
{
	d->ndiff++;
	if (d->ndiff > d->maxshow)
		return;
	printf("difference %d: %s\n", d->ndiff, what);
	print_value(&d->a, va, "-");
	print_value(&d->b, vb, "+");
	kf_nid m = d->a.g->val[va].def, n = d->b.g->val[vb].def;
	if (m != KF_NONE && n != KF_NONE && d->a.g->node[m].op == d->b.g->node[n].op && !d->ignore_attrs)
		explain_attrs(d, &d->a.g->node[m], &d->b.g->node[n]);
}

static bool seen_pair(differ *d, kf_vid va, kf_vid vb)
{
	uint64_t key = ((uint64_t)va << 32 | vb) + 1;
	if ((d->nseen + 1) * 2 > d->seencap) {
		uint32_t cap = d->seencap ? d->seencap * 2 : 1024;
		uint64_t *t = calloc(cap, sizeof *t);
		for (uint32_t i = 0; i < d->seencap; i++)
			if (d->seen[i]) {
				uint32_t j = (uint32_t)mix(0, d->seen[i]) & (cap - 1);
				while (t[j])
					j = (j + 1) & (cap - 1);
				t[j] = d->seen[i];
			}
		free(d->seen);
		d->seen = t;
		d->seencap = cap;
	}
	uint32_t j = (uint32_t)mix(0, key) & (d->seencap - 1);
	for (; d->seen[j]; j = (j + 1) & (d->seencap - 1))
		if (d->seen[j] == key)
			return true;
	d->seen[j] = key;
	d->nseen++;
	return false;
}

typedef struct pair { kf_vid a, b; } pair;

/* Pairs the operands of two commutative nodes: equal hashes first, then the
 * rest in order. */
static int pair_operands(differ *d, kf_nid m, kf_nid n, pair *out)
{
	kf_graph *ga = d->a.g, *gb = d->b.g;
	uint32_t k = ga->node[m].nin;
	bool comm = kf_op(d->c, ga->node[m].op)->flags & KF_OPF_COMMUTATIVE;
	if (!comm) {
		for (uint32_t i = 0; i < k; i++)
			out[i] = (pair){kf_in(ga, m, i), kf_in(gb, n, i)};
		return (int)k;
	}
	bool usedb[16] = {0}, useda[16] = {0};
	int np = 0;
	for (uint32_t i = 0; i < k && i < 16; i++)
		for (uint32_t j = 0; j < k && j < 16; j++)
			if (!usedb[j] && d->a.h[kf_in(ga, m, i)] == d->b.h[kf_in(gb, n, j)]) {
				usedb[j] = useda[i] = true;
				break;
			}
	for (uint32_t i = 0, j = 0; i < k && i < 16; i++) {
		if (useda[i])
			continue;
		while (j < k && usedb[j])
			j++;
		out[np++] = (pair){kf_in(ga, m, i), kf_in(gb, n, j++)};
	}
	return np;
}

/* Iterative walk over value pairs whose hashes differ. */
static void walk(differ *d, kf_vid ra, kf_vid rb)
{
	uint32_t cap = 64, top = 0;
	pair *stack = malloc(cap * sizeof *stack);
	stack[top++] = (pair){ra, rb};
	while (top) {
		pair p = stack[--top];
		if (d->a.h[p.a] == d->b.h[p.b] || seen_pair(d, p.a, p.b))
			continue;
		kf_nid m = d->a.g->val[p.a].def, n = d->b.g->val[p.b].def;
		if (m == KF_NONE || n == KF_NONE) {
			report(d, p.a, p.b, m == KF_NONE && n == KF_NONE ? "graph inputs differ" : "input vs computed value");
			continue;
		}
		const char *what = local_difference(d, m, n);
		if (what) {
			report(d, p.a, p.b, what);
			if (d->a.g->node[m].op != d->b.g->node[n].op || d->a.g->node[m].nin != d->b.g->node[n].nin)
				continue;
		}
		if (d->a.g->node[m].body != KF_NONE) {
			kf_nid ya = kf_block_terminator(d->a.g, d->a.g->node[m].body);
			kf_nid yb = kf_block_terminator(d->b.g, d->b.g->node[n].body);
			if (ya != KF_NONE && yb != KF_NONE && !what &&
			    d->a.g->node[ya].nin == d->b.g->node[yb].nin) {
				for (uint32_t i = 0; i < d->a.g->node[ya].nin; i++) {
					if (top + 1 >= cap)
						stack = realloc(stack, (cap *= 2) * sizeof *stack);
					stack[top++] = (pair){kf_in(d->a.g, ya, i), kf_in(d->b.g, yb, i)};
				}
			}
		}
		pair ops[64];
		int k = d->a.g->node[m].nin <= 64 ? pair_operands(d, m, n, ops) : 0;
		bool any = false;
		for (int i = k - 1; i >= 0; i--) {
			if (d->a.h[ops[i].a] == d->b.h[ops[i].b])
				continue;
			any = true;
			if (top + 1 >= cap)
				stack = realloc(stack, (cap *= 2) * sizeof *stack);
			stack[top++] = ops[i];
		}
		if (!what && !any && d->a.g->node[m].body == KF_NONE)
			report(d, p.a, p.b, "differs (operand order or a difference the walk cannot isolate)");
	}
	free(stack);
}

static int cmp_u64(const void *x, const void *y)
{
	uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
	return a < b ? -1 : a > b;
}

/* Nodes not reachable from the outputs still count: compare the multisets of
 * all top-level node hashes. */
static int count_unmatched(differ *d)
{
	uint64_t *ha = NULL, *hb = NULL;
	size_t na = 0, nb = 0;
	for (int s = 0; s < 2; s++) {
		side *sd = s ? &d->b : &d->a;
		size_t k = 0;
		uint64_t *h = malloc((sd->g->nnode + 1) * sizeof *h);
		kf_foreach_node(sd->g, 0, n)
			if (sd->g->node[n].nres)
				h[k++] = sd->h[sd->g->node[n].res0];
		qsort(h, k, sizeof *h, cmp_u64);
		if (s)
			hb = h, nb = k;
		else
			ha = h, na = k;
	}
	size_t i = 0, j = 0;
	int diff = 0;
	while (i < na || j < nb) {
		if (j >= nb || (i < na && ha[i] < hb[j]))
			i++, diff++;
		else if (i >= na || hb[j] < ha[i])
			j++, diff++;
		else
			i++, j++;
	}
	free(ha);
	free(hb);
	return diff;
}

static int diff_graphs(differ *d, kf_graph *ga, kf_graph *gb)
{
	d->a.g = ga;
	d->b.g = gb;
	d->a.h = calloc(ga->nval + 1, sizeof(uint64_t));
	d->b.h = calloc(gb->nval + 1, sizeof(uint64_t));
	hash_block(d, &d->a, 0, 0);
	hash_block(d, &d->b, 0, 0);
	int before = d->ndiff;
	kf_nid ra = kf_block_terminator(ga, 0), rb = kf_block_terminator(gb, 0);
	if (ga->blk[0].narg != gb->blk[0].narg) {
		printf("@%s: %u inputs vs %u\n", kf_str(d->c, ga->name), ga->blk[0].narg, gb->blk[0].narg);
		d->ndiff++;
	} else if (ra == KF_NONE || rb == KF_NONE || ga->node[ra].nin != gb->node[rb].nin) {
		printf("@%s: %u outputs vs %u\n", kf_str(d->c, ga->name), ra == KF_NONE ? 0 : ga->node[ra].nin,
		       rb == KF_NONE ? 0 : gb->node[rb].nin);
		d->ndiff++;
	} else {
		for (uint32_t i = 0; i < ga->blk[0].narg; i++)
			if (d->a.h[ga->blk[0].arg[i]] != d->b.h[gb->blk[0].arg[i]])
				report(d, ga->blk[0].arg[i], gb->blk[0].arg[i], "input type differs");
		for (uint32_t i = 0; i < ga->node[ra].nin; i++)
			walk(d, kf_in(ga, ra, i), kf_in(gb, rb, i));
		if (d->ndiff == before) {
			int k = count_unmatched(d);
			if (k) {
				printf("@%s: outputs match, but %d node(s) not reachable from them differ\n",
				       kf_str(d->c, ga->name), k);
				d->ndiff++;
			}
		}
	}
	free(d->a.h);
	free(d->b.h);
	return d->ndiff - before;
}

static void usage(FILE *f)
{
	fputs("usage: kfuse-diff [options] A.kf B.kf\n"
	      "Structural diff of two graphs, blind to value names, node order and whitespace.\n"
	      "  --ignore-attrs   compare without attributes\n"
	      "  --rtol R         constants equal within relative tolerance R\n"
	      "  --max N          show at most N differences (default 10)\n"
	      "  -h, --help, --version\n"
	      "Exit status: 0 equal, 1 different, 2 an error (a file or a usage error).\n", f);
}

int main(int argc, char **argv)
{
	differ d = {.rtol = -1, .maxshow = 10};
	static const struct option opts[] = {
		{"ignore-attrs", no_argument, 0, 'i'}, {"rtol", required_argument, 0, 'r'},
		{"max", required_argument, 0, 'm'},    {"help", no_argument, 0, 'h'},
		{"version", no_argument, 0, 'V'},      {0, 0, 0, 0},
	};
	int ch;
	long long n;
	kf_cli_init("kfuse-diff", 2);
	while ((ch = getopt_long(argc, argv, ":h", opts, NULL)) != -1) {
		switch (ch) {
		case 'i': d.ignore_attrs = true; break;
		case 'r':
			if (!kf_cli_double("--rtol", optarg, 0, &d.rtol))
				return kf_cli_status();
			break;
		case 'm':
			if (!kf_cli_int("--max", optarg, 0, 1000000000, &n))
				return kf_cli_status();
			d.maxshow = (int)n;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': kf_cli_version(); return 0;
		default: return kf_cli_bad_option(ch, argv);
		}
	}
	if (argc - optind != 2)
		return kf_cli_usage("two files to compare, A.kf and B.kf (%d given)", argc - optind);
	kf_ctx *c = kf_ctx_new();
	d.c = c;
	d.a.path = argv[optind];
	d.b.path = argv[optind + 1];
	kf_module *ma = kf_parse_file(c, d.a.path);
	kf_module *mb = ma ? kf_parse_file(c, d.b.path) : NULL;
	int rc = 2;
	for (uint32_t i = 0; ma && mb && i < ma->ngraph + mb->ngraph; i++)
		kf_verify(i < ma->ngraph ? ma->graph[i] : mb->graph[i - ma->ngraph]);
	if (ma && mb && kf_nerrors(c) == 0) {
		rc = 0;
		if (ma->ngraph != mb->ngraph) {
			printf("%s has %u graphs, %s has %u\n", d.a.path, ma->ngraph, d.b.path, mb->ngraph);
			rc = 1;
		}
		for (uint32_t i = 0; i < ma->ngraph && i < mb->ngraph; i++)
			if (diff_graphs(&d, ma->graph[i], mb->graph[i]))
				rc = 1;
		if (d.ndiff > d.maxshow)
			printf("... %d differences in all (--max to show more)\n", d.ndiff);
	}
	kf_diag_flush(c, stderr);
	free(d.seen);
	kf_module_free(ma);
	kf_module_free(mb);
	kf_ctx_free(c);
	return rc;
}
