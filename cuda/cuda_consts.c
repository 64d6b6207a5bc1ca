/* cuda_consts.c: device copies of file constants shared by the plans of
 * one backend (cuda_backend_int.h, kf_cb_consts).
 *
 * A symbolic graph gets a plan per input shape (api/dyn.c), each of a
 * specialised copy of the graph holding the same constants: without the
 * table each new shape read, converted and uploaded every weight again
 * (BERT-base: 440 MB, about 0.5 s of a new shape's 0.6 s on the dry run,
 * bench/results/2026-12-02-gpu-s5c-dynamic.log up to 2.6 s on the H200),
 * and held its own device copy.  Entries are keyed by the file's resolved
 * path and the constant's declared type, counted by the sessions that use
 * them, and freed by the last (the table outlives the backend while a plan
 * holds it).  Large inline constants are shared too, keyed by their
 * payload's address: a model loaded through the API from ONNX keeps its
 * initializers inline (api/kfuse.c), and every shape's copy of the graph
 * shares the payloads (kf_graph_clone), which live as long as the model,
 * longer than its plans, so an address names one payload while a plan
 * holds its entry.  (Session 8: BERT-base's first run at a new shape took
 * 1.5-2.2 s on the H200, re-uploading its 220 MB of f16 weights.) */
#include <stdlib.h>
#include <string.h>
#include "cuda_backend_int.h"

typedef struct cc_entry {
	char *key;
	kf_cuptr p;
	int refs;
} cc_entry;

struct kf_cb_consts {
	int refs;      /* the backend and each session that holds the table */
	cc_entry *e;
	uint32_t n, cap;
};

kf_cb_consts *kf_cb_consts_new(void)
{
	kf_cb_consts *cc = calloc(1, sizeof *cc);
	if (cc)
		cc->refs = 1;
	return cc;
}

kf_cb_consts *kf_cb_consts_retain(kf_cb_consts *cc)
{
	if (cc)
		cc->refs++;
	return cc;
}

void kf_cb_consts_release(kf_cb_consts *cc)
{
	if (!cc || --cc->refs > 0)
		return;
	for (uint32_t i = 0; i < cc->n; i++) /* none left: each session dropped its own */
		free(cc->e[i].key);
	free(cc->e);
	free(cc);
}

/* Inline constants of fewer bytes are uploaded per plan: the table's
 * lookups are linear, and small ones cost nothing to upload. */
#define CC_INLINE_MIN (64 * 1024)

void kf_cb_type_key(kf_buf *b, const kf_type *t)
{
	kf_buf_puts(b, kf_dtype_name(t->dtype));
	for (int i = 0; i < t->rank; i++)
		kf_buf_printf(b, "%c%lld", i ? 'x' : '[', (long long)t->dim[i]);
	kf_buf_puts(b, t->rank ? "]" : "[]");
}

int kf_cb_consts_key(kf_graph *g, kf_nid n, kf_buf *key)
{
	const kf_const *k = kf_N(g, n)->cst;
	const kf_type *t = kf_vtype(g, kf_res(g, n, 0));
	bool file = k && k->kind == KF_CONST_FILE;
	if (!k || !kf_type_is_static(t) ||
	    (!file && (k->kind != KF_CONST_DENSE || k->n < 2 ||
		       kf_type_numel(t) * (int64_t)kf_dtype_size((kf_dtype)t->dtype) < CC_INLINE_MIN)))
		return -1;
	kf_cb_type_key(key, t);
	if (file)
		kf_buf_printf(key, " %s/%s", g->dir ? kf_str(g->ctx, g->dir) : ".", kf_str(g->ctx, k->path));
	else
		kf_buf_printf(key, " inline %p %p", (const void *)k->f, (const void *)k->i);
	kf_buf_putc(key, '\0');
	return 0;
}

bool kf_cb_consts_get(kf_cb_consts *cc, const char *key, kf_cuptr *p)
{
	for (uint32_t i = 0; cc && i < cc->n; i++)
		if (!strcmp(cc->e[i].key, key)) {
			cc->e[i].refs++;
			*p = cc->e[i].p;
			return true;
		}
	return false;
}

int kf_cb_consts_put(kf_cb_consts *cc, const char *key, kf_cuptr p)
{
	if (cc->n == cc->cap) {
		uint32_t cap = cc->cap ? 2 * cc->cap : 64;
		cc_entry *e = realloc(cc->e, cap * sizeof *e);
		if (!e)
			return -1;
		cc->e = e;
		cc->cap = cap;
	}
	char *k = strdup(key);
	if (!k)
		return -1;
	cc->e[cc->n++] = (cc_entry){.key = k, .p = p, .refs = 1};
	return 0;
}

bool kf_cb_consts_drop(kf_cb_consts *cc, const char *key, kf_cuptr *p)
{
	for (uint32_t i = 0; i < cc->n; i++)
		if (!strcmp(cc->e[i].key, key)) {
			if (--cc->e[i].refs > 0)
				return false;
			*p = cc->e[i].p;
			free(cc->e[i].key);
			cc->e[i] = cc->e[--cc->n];
			return true;
		}
	return false;
}
