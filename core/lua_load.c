/* lua_load.c: loading rule paths, reading their embedded examples, and the
 * structural graph comparison the examples are checked with. */
#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "kf_int.h"
#include "lua_int.h"

/* ---- loading ---------------------------------------------------------------------- */

static int cmp_str(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The *.lua files of dir, sorted; NULL-terminated, malloc'd. */
static char **list_dir(const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	char **v = NULL;
	uint32_t n = 0, cap = 0;
	struct dirent *e;
	while ((e = readdir(d))) {
		size_t k = strlen(e->d_name);
		if (k < 5 || strcmp(e->d_name + k - 4, ".lua") || e->d_name[0] == '.')
			continue;
		kf_grow((void **)&v, &cap, n + 2, sizeof *v);
		size_t m = strlen(dir) + k + 2;
		v[n] = malloc(m);
		snprintf(v[n], m, "%s/%s", dir, e->d_name);
		n++;
	}
	closedir(d);
	kf_grow((void **)&v, &cap, n + 1, sizeof *v);
	v[n] = NULL;
	qsort(v, n, sizeof *v, cmp_str);
	return v;
}

kf_lrules *kf_lua_rules_load(kf_ctx *c, const char *path)
{
	kf_lhost *h = kf_lhost_get(c);
	if (!h) {
		kf_error(c, KF_NOLOC, "cannot start Lua for the rules in %s", path);
		return NULL;
	}
	for (uint32_t i = 0; i < h->nset; i++)
		if (!strcmp(h->set[i]->path, path)) {
			if (h->set[i]->broken)
				kf_error(c, KF_NOLOC, "the rules in '%s' failed to load", path);
			return h->set[i]->broken ? NULL : h->set[i];
		}
	struct stat st;
	if (stat(path, &st) != 0) {
		kf_error(c, (kf_loc){kf_source_add(c, path, NULL, 0), 0}, "no such rule file or directory");
		return NULL;
	}
	kf_lrules *r = calloc(1, sizeof *r);
	r->h = h;
	r->path = strdup(path);
	size_t n = strlen(path);
	while (n > 1 && path[n - 1] == '/')
		n--;
	char **files;
	if (S_ISDIR(st.st_mode)) {
		r->root = strndup(path, n);
		files = list_dir(r->root);
	} else {
		const char *slash = strrchr(path, '/');
		r->root = slash ? strndup(path, (size_t)(slash - path)) : strdup(".");
		files = calloc(2, sizeof *files);
		files[0] = strdup(path);
	}
	h->root = r->root;
	r->first = h->nfile;
	int bad = 0;
	for (char **f = files; f && *f; f++) {
		/* the ops a file declares come from it: a module that uses them
		 * names the file (kf_op_origin) */
		uint32_t nop = h->nop;
		bad |= kf_lrun_file(h, *f) < 0;
		for (uint32_t i = nop; i < h->nop; i++)
			kf_op_set_origin(c, h->op[i]->op, *f);
		free(*f);
	}
	free(files);
	r->nfile = h->nfile - r->first;
	for (uint32_t i = r->first; i < h->nfile; i++)
		for (uint32_t k = 0; k < h->file[i].n; k++)
			kf_ruleset_add(&r->set, &h->rule[h->file[i].first + k]->r);
	/* kept even when broken, so that the host frees it */
	kf_grow((void **)&h->set, &h->capset, h->nset + 1, sizeof *h->set);
	h->set[h->nset++] = r;
	if (bad) {
		r->broken = true;
		return NULL;
	}
	return r;
}

const kf_ruleset *kf_lua_rules_set(const kf_lrules *r)
{
	return &r->set;
}

kf_ctx *kf_lrules_ctx(const kf_lrules *r)
{
	return r->h->ctx;
}

bool kf_lrules_file_at(const kf_lrules *r, uint32_t i, kf_ruleset *out, const char **path)
{
	kf_lhost *h = r->h;
	memset(out, 0, sizeof *out);
	for (uint32_t k = r->first; k < r->first + r->nfile; k++) {
		const kf_lfile *f = &h->file[k];
		if (f->module || i--)
			continue;
		for (uint32_t q = 0; q < f->n; q++)
			kf_ruleset_add(out, &h->rule[f->first + q]->r);
		*path = f->path;
		return true;
	}
	return false;
}

bool kf_lua_rules_file(const kf_lrules *r, uint32_t i, kf_ruleset *out, const char **path)
{
	return kf_lrules_file_at(r, i, out, path);
}

/* ---- structural comparison ----------------------------------------------------------- */

#define MIX(h, x) ((h) = ((h) ^ (uint64_t)(x)) * 0x100000001b3ULL + 0x9e3779b97f4a7c15ULL)

/* Hashes of every value of block 0, in order (a block is topologically
 * sorted): arguments by position, results by op, attributes, constant
 * payload, type and operands (sorted for commutative ops). */
static uint64_t *value_hashes(kf_graph *g)
{
	uint64_t *hv = calloc(g->nval ? g->nval : 1, sizeof *hv);
	const kf_block *b = &g->blk[0];
	for (uint32_t i = 0; i < b->narg; i++) {
		uint64_t x = 0x1234;
		MIX(x, i);
		MIX(x, g->val[b->arg[i]].type);
		hv[b->arg[i]] = x;
	}
	kf_foreach_node(g, 0, n) {
		const kf_node *nd = kf_N(g, n);
		uint64_t x = 0xcbf29ce484222325ULL;
		MIX(x, nd->op);
		MIX(x, nd->sym);
		for (uint32_t i = 0; i < nd->nattr; i++) {
			MIX(x, nd->attr[i].key);
			MIX(x, kf_attrval_hash(&nd->attr[i].v));
		}
		if (nd->cst) {
			const kf_const *k = nd->cst;
			MIX(x, k->path);
			for (uint64_t i = 0; i < k->n; i++)
				MIX(x, kf_const_elem_bits(k, i));
		}
		bool comm = nd->nin == 2 && (kf_op(g->ctx, nd->op)->flags & KF_OPF_COMMUTATIVE);
		if (comm) {
			uint64_t a = hv[kf_in(g, n, 0)], c = hv[kf_in(g, n, 1)];
			MIX(x, a < c ? a : c);
			MIX(x, a < c ? c : a);
		} else {
			for (uint32_t i = 0; i < nd->nin; i++)
				MIX(x, hv[kf_in(g, n, i)]);
		}
		for (uint32_t r = 0; r < nd->nres; r++) {
			uint64_t y = x;
			MIX(y, r);
			MIX(y, g->val[nd->res0 + r].type);
			hv[nd->res0 + r] = y;
		}
	}
	return hv;
}

bool kf_graph_same(kf_graph *a, kf_graph *b, kf_buf *why)
{
	const kf_block *ba = &a->blk[0], *bb = &b->blk[0];
	if (ba->narg != bb->narg) {
		kf_buf_printf(why, "%u inputs, expected %u", ba->narg, bb->narg);
		return false;
	}
	for (uint32_t i = 0; i < ba->narg; i++)
		if (a->val[ba->arg[i]].type != b->val[bb->arg[i]].type) {
			kf_buf_printf(why, "input %u has another type", i + 1);
			return false;
		}
	kf_nid ra = kf_block_terminator(a, 0), rb = kf_block_terminator(b, 0);
	if (ra == KF_NONE || rb == KF_NONE || kf_N(a, ra)->nin != kf_N(b, rb)->nin) {
		kf_buf_printf(why, "a different number of results");
		return false;
	}
	uint64_t *ha = value_hashes(a), *hb = value_hashes(b);
	bool same = true;
	for (uint32_t k = 0; k < kf_N(a, ra)->nin && same; k++)
		if (ha[kf_in(a, ra, k)] != hb[kf_in(b, rb, k)]) {
			kf_buf_printf(why, "result %u is computed differently", k + 1);
			same = false;
		}
	free(ha);
	free(hb);
	return same;
}

/* ---- examples ------------------------------------------------------------------------- */

typedef struct exjob {
	kf_lhost *h;
	int ref;
	uint32_t i;
	const char *before, *after;
	size_t nbefore, nafter;
} exjob;

/* examples[i+1] -> before, after strings (kept alive by the table).
 * [-1, +0, e] */
static int example_body(lua_State *L)
{
	exjob *j = lua_touserdata(L, 1);
	lua_rawgeti(L, LUA_REGISTRYINDEX, j->ref);
	if (lua_rawgeti(L, -1, (lua_Integer)j->i + 1) == LUA_TNIL)
		return 0;
	if (!lua_istable(L, -1))
		return luaL_error(L, "example %d is not a {before = ..., after = ...} table", (int)j->i + 1);
	lua_getfield(L, -1, "before");
	lua_getfield(L, -2, "after");
	if (!lua_isstring(L, -2) || !lua_isstring(L, -1))
		return luaL_error(L, "example %d needs 'before' and 'after' texts", (int)j->i + 1);
	j->before = lua_tolstring(L, -2, &j->nbefore);
	j->after = lua_tolstring(L, -1, &j->nafter);
	return 0;
}

/* A copy of n bytes that may hold NULs (strndup would stop at the first:
 * found by fuzzing), NUL-terminated. */
static char *dup_bytes(const char *p, size_t n)
{
	char *q = malloc(n + 1);
	if (q) {
		memcpy(q, p, n);
		q[n] = 0;
	}
	return q;
}

/* Reads example i of table ref; 1, 0 past the end, -1 on a malformed one. */
static int read_example(kf_lhost *h, int ref, uint32_t i, kf_rule_example *ex)
{
	exjob j = {h, ref, i, NULL, NULL, 0, 0};
	int top = lua_gettop(h->L);
	lua_pushcfunction(h->L, example_body);
	lua_pushlightuserdata(h->L, &j);
	if (kf_lcall(h, 1, 0, KF_NOLOC, NULL, 0) < 0)
		return -1;
	if (j.before) {
		/* copies: the strings belong to the Lua table */
		ex->before = dup_bytes(j.before, j.nbefore);
		ex->after = dup_bytes(j.after, j.nafter);
		ex->nbefore = j.nbefore;
		ex->nafter = j.nafter;
	}
	lua_settop(h->L, top);
	return j.before != NULL;
}

int kf_lua_rules_example(kf_lrules *r, uint32_t k, kf_rule_example *ex)
{
	kf_lhost *h = r->h;
	memset(ex, 0, sizeof *ex);
	uint32_t seen = 0;
	for (uint32_t fi = 0;; fi++) {
		kf_ruleset fs;
		const char *path;
		if (!kf_lrules_file_at(r, fi, &fs, &path))
			return 0;
		/* the file's table, then each rule's */
		const kf_lfile *f = NULL;
		for (uint32_t q = r->first; q < r->first + r->nfile; q++)
			if (h->file[q].path == path)
				f = &h->file[q];
		for (int32_t q = -1; q < (int32_t)fs.n; q++) {
			int ref = q < 0 ? f->examples_ref : ((kf_lrule *)fs.rule[q]->user)->examples_ref;
			if (ref == LUA_NOREF)
				continue;
			snprintf(h->what, sizeof h->what, "the examples of '%s'", path);
			for (uint32_t i = 0;; i++) {
				int rc = read_example(h, ref, i, ex);
				if (rc <= 0) {
					if (rc < 0) {
						kf_ruleset_free(&fs);
						return -1;
					}
					break;
				}
				if (seen++ == k) {
					ex->path = path;
					ex->index = i + 1;
					ex->rule = q < 0 ? NULL : fs.rule[q]->name;
					ex->rules = fs;
					return 1;
				}
				free(ex->before);
				free(ex->after);
				ex->before = ex->after = NULL;
			}
		}
		kf_ruleset_free(&fs);
	}
}

void kf_rule_example_free(kf_rule_example *ex)
{
	free(ex->before);
	free(ex->after);
	kf_ruleset_free(&ex->rules);
	memset(ex, 0, sizeof *ex);
}
