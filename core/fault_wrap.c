/* fault_wrap.c: the allocator wrappers (see fault.c).  Linked in only with
 * -Wl,--wrap=malloc,... (the tools, the tests, libkfuse.so), which is what
 * makes __wrap_malloc referenced and __real_malloc defined; nothing else
 * refers to this file, so a program linking libkfuse.a without those
 * options never pulls it in. */
#include "kf_int.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t sz);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);

/* NULL only for a request that may fail (kf_try_*: kf_fallible) or for a
 * size of 0, as malloc's; else kf_oom. */
static void *sure(void *p, bool asked)
{
	if (!p && asked && !kf_fallible)
		kf_oom();
	return p;
}

void *__wrap_malloc(size_t n) { return sure(kf_fault_alloc() ? NULL : __real_malloc(n), n != 0); }
void *__wrap_calloc(size_t n, size_t sz) { return sure(kf_fault_alloc() ? NULL : __real_calloc(n, sz), n && sz); }
char *__wrap_strdup(const char *s) { return sure(kf_fault_alloc() ? NULL : __real_strdup(s), true); }
char *__wrap_strndup(const char *s, size_t n) { return sure(kf_fault_alloc() ? NULL : __real_strndup(s, n), true); }

void *__wrap_realloc(void *p, size_t n)
{
	/* realloc(p, 0) frees: only a request for memory can fail */
	return sure(n && kf_fault_alloc() ? NULL : __real_realloc(p, n), n != 0);
}
