/* ctx.c: the context (strings, types, ops, diagnostics) and the op registry. */
#include <stdlib.h>
#include <string.h>
#include "kf_int.h"

kf_ctx *kf_ctx_new(void)
{
	kf_ctx *c = kf_xrealloc(NULL, sizeof *c);
	memset(c, 0, sizeof *c);
	kf_intern(c, "", 0); /* sid 0 is the empty string: "no name" */
	kf_ops_builtin_init(c);
	return c;
}

void kf_ctx_free(kf_ctx *c)
{
	if (!c)
		return;
	if (c->ext_release)
		c->ext_release(c);
	kf_diag_free_all(c);
	free(c->str);
	free(c->strtab.slot);
	for (uint32_t i = 0; c->type && i * KF_TYPE_CHUNK < c->ntype; i++)
		free(c->type[i]);
	free(c->type);
	free(c->typetab.slot);
	free(c->op);
	free(c->op_origin);
	free(c->optab.slot);
	kf_arena_free(&c->arena);
	free(c->data_root);
	free(c);
}

void kf_ctx_set_data_root(kf_ctx *c, const char *dir)
{
	free(c->data_root);
	c->data_root = dir ? kf_xrealloc(NULL, strlen(dir) + 1) : NULL;
	if (dir)
		strcpy(c->data_root, dir);
}

const char *kf_ctx_data_root(const kf_ctx *c) { return c->data_root; }

void kf_ctx_set_ext(kf_ctx *c, void *ext, void (*release)(kf_ctx *c))
{
	c->ext = ext;
	c->ext_release = release;
}

void *kf_ctx_ext(const kf_ctx *c) { return c->ext; }

/* ---- op registry: an array in registration order plus a name table ---- */

static uint32_t op_find(const kf_ctx *c, const char *name, size_t n, uint32_t *slot)
{
	uint32_t mask = c->optab.cap - 1;
	uint32_t i = (uint32_t)kf_hash_bytes(name, n, KF_HASH_SEED) & mask;
	for (;; i = (i + 1) & mask) {
		uint32_t id = c->optab.slot[i];
		if (id == KF_NONE || (strlen(c->op[id].name) == n && memcmp(c->op[id].name, name, n) == 0)) {
			*slot = i;
			return id;
		}
	}
}

int kf_op_count(const kf_ctx *c) { return (int)c->nop; }
const kf_opinfo *kf_op(const kf_ctx *c, int op) { return &c->op[op]; }
kf_opinfo *kf_op_mut(kf_ctx *c, int op) { return &c->op[op]; }

void kf_op_detach(kf_ctx *c, int op, kf_infer_fn gone, const char *doc)
{
	kf_opinfo *oi = &c->op[op];
	oi->infer = gone;
	oi->cpu = NULL;
	oi->cuda = NULL;
	oi->attrs = NULL;
	oi->doc = doc;
	oi->user = NULL;
}

void kf_op_set_origin(kf_ctx *c, int op, const char *path)
{
	if (op < 0 || (uint32_t)op >= c->nop)
		return;
	if ((uint32_t)op >= c->norigin) {
		uint32_t n = c->nop + 16;
		c->op_origin = kf_xrealloc(c->op_origin, n * sizeof *c->op_origin);
		memset(c->op_origin + c->norigin, 0xff, (n - c->norigin) * sizeof *c->op_origin);
		c->norigin = n;
	}
	c->op_origin[op] = kf_intern_cstr(c, path);
}

const char *kf_op_origin(const kf_ctx *c, int op)
{
	if (op < 0 || (uint32_t)op >= c->norigin || c->op_origin[op] == KF_NONE)
		return NULL;
	return kf_str(c, c->op_origin[op]);
}

int kf_op_lookup(const kf_ctx *c, const char *name, size_t n)
{
	if (!c->optab.cap)
		return -1;
	uint32_t slot, id = op_find(c, name, n, &slot);
	return id == KF_NONE ? -1 : (int)id;
}

int kf_op_register(kf_ctx *c, const kf_opinfo *info)
{
	size_t n = strlen(info->name);
	if (kf_op_lookup(c, info->name, n) >= 0) {
		kf_error(c, KF_NOLOC, "op '%s' is already registered", info->name);
		return -1;
	}
	if (c->nop >= UINT16_MAX) {
		kf_error(c, KF_NOLOC, "too many ops registered");
		return -1;
	}
	if (!c->optab.cap || (c->nop + 1) * 2 > c->optab.cap) {
		uint32_t cap = c->optab.cap ? c->optab.cap * 2 : 128;
		free(c->optab.slot);
		c->optab.slot = kf_xrealloc(NULL, cap * sizeof(uint32_t));
		memset(c->optab.slot, 0xff, cap * sizeof(uint32_t));
		c->optab.cap = cap;
		for (uint32_t id = 0; id < c->nop; id++) {
			uint32_t slot;
			op_find(c, c->op[id].name, strlen(c->op[id].name), &slot);
			c->optab.slot[slot] = id;
		}
	}
	kf_grow((void **)&c->op, &c->capop, c->nop + 1, sizeof *c->op);
	uint32_t id = c->nop++, slot;
	c->op[id] = *info;
	c->op[id].name = kf_strdup_arena(&c->arena, info->name, n);
	op_find(c, info->name, n, &slot);
	c->optab.slot[slot] = id;
	return (int)id;
}
