/* type.c: dtypes and hash-consed tensor types. */
#include <stdlib.h>
#include <string.h>
#include "kf_int.h"

static const struct {
	const char *name;
	uint8_t size, isfloat;
} dtypes[KF_NDTYPE] = {
	[KF_F16] = {"f16", 2, 1}, [KF_BF16] = {"bf16", 2, 1}, [KF_F32] = {"f32", 4, 1},
	[KF_F64] = {"f64", 8, 1}, [KF_I1] = {"i1", 1, 0},     [KF_I8] = {"i8", 1, 0},
	[KF_I32] = {"i32", 4, 0}, [KF_I64] = {"i64", 8, 0},
};

const char *kf_dtype_name(kf_dtype t) { return (unsigned)t < KF_NDTYPE ? dtypes[t].name : "?"; }
size_t kf_dtype_size(kf_dtype t) { return (unsigned)t < KF_NDTYPE ? dtypes[t].size : 0; }
bool kf_dtype_is_float(kf_dtype t) { return (unsigned)t < KF_NDTYPE && dtypes[t].isfloat; }

int kf_dtype_parse(const char *s, size_t n)
{
	for (int i = 0; i < KF_NDTYPE; i++)
		if (strlen(dtypes[i].name) == n && memcmp(dtypes[i].name, s, n) == 0)
			return i;
	return -1;
}

kf_type kf_type_make(kf_dtype dt, int rank, const int64_t *dims)
{
	kf_type t;
	memset(&t, 0, sizeof t);
	t.dtype = (uint8_t)dt;
	t.rank = (uint8_t)rank;
	for (int i = 0; i < rank && i < KF_MAX_RANK; i++)
		t.dim[i] = dims[i];
	return t;
}

bool kf_type_is_static(const kf_type *t)
{
	for (int i = 0; i < t->rank; i++)
		if (KF_IS_SYM(t->dim[i]))
			return false;
	return true;
}

int64_t kf_type_numel(const kf_type *t)
{
	int64_t n = 1;
	for (int i = 0; i < t->rank; i++) {
		int64_t d = t->dim[i];
		if (KF_IS_SYM(d))
			return -1;
		if (d && n > ((int64_t)1 << 62) / d)
			return -1;
		n *= d;
	}
	return n;
}

static uint64_t type_hash(const kf_type *t)
{
	return kf_hash_bytes(t, 2 + sizeof(int64_t) * 0, KF_HASH_SEED) ^
	       kf_hash_bytes(t->dim, sizeof(int64_t) * t->rank, (uint64_t)t->dtype * 31 + t->rank);
}

bool kf_type_same_shape(const kf_type *a, const kf_type *b)
{
	return a->rank == b->rank && memcmp(a->dim, b->dim, sizeof(int64_t) * a->rank) == 0;
}

static kf_type *type_at(const kf_ctx *c, uint32_t id) { return &c->type[id / KF_TYPE_CHUNK][id % KF_TYPE_CHUNK]; }

static uint32_t type_find(const kf_ctx *c, const kf_type *t, uint32_t *slot)
{
	uint32_t mask = c->typetab.cap - 1, i = (uint32_t)type_hash(t) & mask;
	for (;; i = (i + 1) & mask) {
		uint32_t id = c->typetab.slot[i];
		if (id == KF_NONE || kf_type_equal(type_at(c, id), t)) {
			*slot = i;
			return id;
		}
	}
}

kf_tid kf_type_intern(kf_ctx *c, const kf_type *t0)
{
	kf_type t = kf_type_make(t0->dtype, t0->rank > KF_MAX_RANK ? KF_MAX_RANK : t0->rank, t0->dim);
	if (!c->typetab.cap || (c->typetab.n + 1) * 2 > c->typetab.cap) {
		uint32_t cap = c->typetab.cap ? c->typetab.cap * 2 : 256;
		free(c->typetab.slot);
		c->typetab.slot = kf_xrealloc(NULL, cap * sizeof(uint32_t));
		memset(c->typetab.slot, 0xff, cap * sizeof(uint32_t));
		c->typetab.cap = cap;
		for (uint32_t id = 0; id < c->ntype; id++) {
			uint32_t slot;
			type_find(c, type_at(c, id), &slot);
			c->typetab.slot[slot] = id;
		}
	}
	uint32_t slot;
	uint32_t id = type_find(c, &t, &slot);
	if (id != KF_NONE)
		return id;
	if (c->ntype % KF_TYPE_CHUNK == 0) { /* a new chunk; the old ones stay */
		uint32_t k = c->ntype / KF_TYPE_CHUNK;
		kf_grow((void **)&c->type, &c->captype, k + 1, sizeof *c->type);
		c->type[k] = kf_xrealloc(NULL, KF_TYPE_CHUNK * sizeof(kf_type));
	}
	id = c->ntype++;
	*type_at(c, id) = t;
	c->typetab.slot[slot] = id;
	c->typetab.n++;
	return id;
}

const kf_type *kf_type_get(const kf_ctx *c, kf_tid id) { return type_at(c, id); }
