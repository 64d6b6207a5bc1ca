/* kcache.c: the on-disk kernel cache (see kcache.h).
 *
 * Entry file: "KFKC" magic, u32 format version, the 16-byte key, u64
 * payload length, u64 FNV-1a 64 checksum of the payload, then the payload.
 * All integers little endian.  The key is repeated inside so that a file
 * renamed or copied under the wrong name is not believed.
 */
#include "kcache.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define KC_MAGIC "KFKC"
#define KC_VERSION 1u
#define KC_HDR (4 + 4 + 16 + 8 + 8)

/* ---- hashing ------------------------------------------------------------------- */

typedef unsigned __int128 u128;

static u128 fnv128(u128 h, const void *p, size_t n)
{
	const u128 prime = ((u128)1 << 88) | 0x13b;
	const unsigned char *s = p;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= prime;
	}
	return h;
}

/* Each field is hashed with its length first, so ("ab","c") and ("a","bc")
 * differ. */
static u128 fnv128_field(u128 h, const void *p, size_t n)
{
	uint64_t len = n;
	h = fnv128(h, &len, sizeof len);
	return fnv128(h, p, n);
}

static uint64_t fnv64(const void *p, size_t n)
{
	const unsigned char *s = p;
	uint64_t h = 0xcbf29ce484222325ull;
	for (size_t i = 0; i < n; i++) {
		h ^= s[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

kf_kcache_key kf_kcache_key_of(const char *src, size_t srclen, const char *arch,
			       int nvrtc_major, int nvrtc_minor,
			       const char *const *opts, int nopts, int want_cubin)
{
	u128 h = ((u128)0x6c62272e07bb0142ull << 64) | 0x62b821756295c58dull;
	int32_t nums[5] = {(int32_t)KC_VERSION, nvrtc_major, nvrtc_minor, want_cubin != 0, nopts};

	h = fnv128_field(h, nums, sizeof nums);
	h = fnv128_field(h, arch, strlen(arch));
	for (int i = 0; i < nopts; i++)
		h = fnv128_field(h, opts[i], strlen(opts[i]));
	h = fnv128_field(h, src, srclen);
	return (kf_kcache_key){(uint64_t)(h >> 64), (uint64_t)h};
}

void kf_kcache_key_hex(kf_kcache_key k, char out[33])
{
	snprintf(out, 33, "%016llx%016llx", (unsigned long long)k.hi, (unsigned long long)k.lo);
}

/* ---- directory ----------------------------------------------------------------- */

int kf_kcache_default_dir(kf_buf *out)
{
	const char *d = getenv("KFUSE_CACHE_DIR");
	if (d && *d) {
		kf_buf_puts(out, d);
		return 0;
	}
	d = getenv("XDG_CACHE_HOME");
	/* The XDG spec says a relative path is invalid and to be ignored. */
	if (d && d[0] == '/') {
		kf_buf_printf(out, "%s/kfuse", d);
		return 0;
	}
	d = getenv("HOME");
	if (d && *d) {
		kf_buf_printf(out, "%s/.cache/kfuse", d);
		return 0;
	}
	return -1;
}

void kf_kcache_init(kf_kcache *kc, kf_ctx *c, const char *dir)
{
	kf_buf b = {0};
	memset(kc, 0, sizeof *kc);
	kc->ctx = c;
	if (dir)
		kf_buf_puts(&b, dir);
	else if (kf_kcache_default_dir(&b) < 0)
		return;
	kc->dir = b.p;
}

void kf_kcache_fini(kf_kcache *kc)
{
	free(kc->dir);
	memset(kc, 0, sizeof *kc);
}

/* mkdir -p; 0 if the directory exists afterwards. */
static int mkdirs(char *path)
{
	for (char *p = path + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = 0;
		int r = mkdir(path, 0755);
		*p = '/';
		if (r < 0 && errno != EEXIST)
			return -1;
	}
	if (mkdir(path, 0755) < 0 && errno != EEXIST)
		return -1;
	return 0;
}

static void entry_path(const kf_kcache *kc, kf_kcache_key key, kf_buf *out)
{
	char hex[33];
	kf_kcache_key_hex(key, hex);
	kf_buf_printf(out, "%s/%s.kc", kc->dir, hex);
}

static void put_u64(unsigned char *p, uint64_t v)
{
	for (int i = 0; i < 8; i++)
		p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
	uint64_t v = 0;
	for (int i = 0; i < 8; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

static void make_header(unsigned char *h, kf_kcache_key key, const void *data, size_t n)
{
	memcpy(h, KC_MAGIC, 4);
	h[4] = KC_VERSION & 0xff;
	h[5] = h[6] = h[7] = 0;
	put_u64(h + 8, key.hi);
	put_u64(h + 16, key.lo);
	put_u64(h + 24, n);
	put_u64(h + 32, fnv64(data, n));
}

/* ---- get and put ----------------------------------------------------------------- */

/* Reads a whole small file; -1 if absent or unreadable. */
static int slurp(const char *path, kf_buf *out)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return -1;
	char chunk[8192];
	size_t n;
	while ((n = fread(chunk, 1, sizeof chunk, f)) > 0)
		kf_buf_put(out, chunk, n);
	int bad = ferror(f);
	fclose(f);
	return bad ? -1 : 0;
}

int kf_kcache_get(kf_kcache *kc, kf_kcache_key key, kf_buf *out)
{
	kf_buf path = {0}, file = {0};
	int hit = 0;

	if (!kc->dir) {
		kc->misses++;
		return 0;
	}
	entry_path(kc, key, &path);
	if (slurp(path.p, &file) == 0) {
		const unsigned char *h = (const unsigned char *)file.p;
		uint64_t n = file.n >= KC_HDR ? get_u64(h + 24) : 0;
		if (file.n >= KC_HDR && memcmp(h, KC_MAGIC, 4) == 0 && h[4] == KC_VERSION &&
		    get_u64(h + 8) == key.hi && get_u64(h + 16) == key.lo &&
		    n == file.n - KC_HDR && get_u64(h + 32) == fnv64(h + KC_HDR, n)) {
			kf_buf_put(out, file.p + KC_HDR, n);
			hit = 1;
		} else {
			kc->corrupt++;
		}
	}
	if (hit)
		kc->hits++;
	else
		kc->misses++;
	kf_buf_free(&path);
	kf_buf_free(&file);
	return hit;
}

static int warn_once(kf_kcache *kc, const char *what, int err)
{
	if (!kc->warned)
		kf_warning(kc->ctx, KF_NOLOC, "kernel cache %s: %s: %s (kernels will be recompiled)",
			   kc->dir, what, strerror(err));
	kc->warned = true;
	return -1;
}

int kf_kcache_put(kf_kcache *kc, kf_kcache_key key, const void *data, size_t n)
{
	unsigned char hdr[KC_HDR];
	kf_buf path = {0}, tmp = {0};
	struct timespec ts;
	int rc = -1;

	if (!kc->dir)
		return -1;
	if (mkdirs(kc->dir) < 0)
		return warn_once(kc, "cannot create the directory", errno);
	entry_path(kc, key, &path);
	/* Unique per process and call, so concurrent writers never share a
	 * temporary; the rename makes the entry appear whole. */
	clock_gettime(CLOCK_REALTIME, &ts);
	kf_buf_printf(&tmp, "%s.tmp.%ld.%lx", path.p, (long)getpid(), (unsigned long)ts.tv_nsec);
	int fd = open(tmp.p, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		warn_once(kc, "cannot write an entry", errno);
		goto out;
	}
	make_header(hdr, key, data, n);
	int err = kf_write_all(fd, hdr, sizeof hdr);
	if (!err)
		err = kf_write_all(fd, data, n);
	int bad = err != 0;
	if (close(fd) < 0 && !bad) {
		bad = 1;
		err = errno;
	}
	if (!bad && rename(tmp.p, path.p) < 0) {
		bad = 1;
		err = errno;
	}
	if (bad) {
		unlink(tmp.p);
		warn_once(kc, "cannot write an entry", err);
		goto out;
	}
	kc->writes++;
	rc = 0;
out:
	kf_buf_free(&path);
	kf_buf_free(&tmp);
	return rc;
}

int kf_kcache_compile(kf_kcache *kc, kf_nvrtc *nv, const char *src, const char *name,
		      const char *arch, const char *const *opts, int nopts, int want_cubin,
		      kf_buf *out, kf_buf *log)
{
	int major = 0, minor = 0;
	if (!kc)
		return kf_nvrtc_compile(nv, src, name, arch, opts, nopts, want_cubin, out, log);
	if (kf_nvrtc_version(nv, &major, &minor) < 0)
		return -1;
	kf_kcache_key key = kf_kcache_key_of(src, strlen(src), arch, major, minor, opts, nopts, want_cubin);
	if (kf_kcache_get(kc, key, out))
		return 0;
	size_t before = out->n;
	if (kf_nvrtc_compile(nv, src, name, arch, opts, nopts, want_cubin, out, log) < 0)
		return -1;
	/* A failed put only costs a recompile next time. */
	kf_kcache_put(kc, key, out->p + before, out->n - before);
	return 0;
}
