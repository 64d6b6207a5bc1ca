/* fault.c: the allocator wrappers, the fatal out-of-memory exit, and fault
 * injection for tests.
 *
 * Every allocation kfuse code makes goes through the wrappers in
 * fault_wrap.c: the tools, the tests and libkfuse.so link every kfuse
 * object with -Wl,--wrap=malloc (calloc, realloc, strdup, strndup), so a
 * call to malloc is a call to __wrap_malloc.  (A program linking libkfuse.a
 * links without them: there nothing references fault_wrap.o, malloc is
 * libc's, and out of memory is that program's to handle.)  The wrappers
 * cannot fail: out of memory ends the process cleanly (kf_oom: a
 * message, open output temporaries removed, exit status 1), as git's and
 * GCC's xmalloc do, so no unchecked NULL is ever dereferenced and no output
 * is ever left half-written.  Where an input decides the size (tensor data,
 * a file read whole, a parsed model, a script's heap), the code asks with
 * kf_try_malloc/calloc/realloc instead, which return NULL, and reports an
 * error; those sizes are also bounded by the memory budget (budget.c).
 *
 * As SQLite's and Lua's test suites do, a test can make the Nth allocation
 * or the Nth write fail, and so walk every failure path of a tool:
 *
 *   KF_FAULT_ALLOC=N    the Nth allocation fails (ENOMEM), once
 *   KF_FAULT_ALLOC=N+   every allocation from the Nth on fails
 *   KF_FAULT_WRITE=N    the Nth write(2) of an output fails with ENOSPC
 *   KF_FAULT_COUNT=1    at exit, print "kfuse-fault: A allocations, W writes"
 *                       to stderr (how far a sweep must go)
 *
 * Allocations are counted in both kinds of wrapper, the Lua allocator and
 * kf_xrealloc/kf_arena included; what libc or a library allocates for
 * itself is not.  Writes are counted in kf_write_all, which every output
 * goes through (core/file.c).  tests/fault/sweep.py runs the tools so.
 *
 * The counters are process-wide globals: a fault is a fact of the process,
 * set once from the environment; they are atomics for the interpreter's
 * worker threads.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kf_int.h"

_Thread_local int kf_fallible;

static struct {
	int state;              /* 0 unread, 1 reading, 2 read */
	long alloc_at, write_at;
	bool alloc_all, count;
	long nalloc, nwrite;
} fi;

static long env_long(const char *name, bool *plus)
{
	const char *s = getenv(name); /* getenv allocates nothing */
	if (!s || !*s)
		return 0;
	char *end;
	long v = strtol(s, &end, 10);
	if (plus)
		*plus = *end == '+';
	return v > 0 ? v : 0;
}

static void report(void)
{
	char line[96];
	int n = snprintf(line, sizeof line, "kfuse-fault: %ld allocations, %ld writes\n",
			 __atomic_load_n(&fi.nalloc, __ATOMIC_RELAXED), __atomic_load_n(&fi.nwrite, __ATOMIC_RELAXED));
	if (write(2, line, (size_t)n) < 0) { /* nothing to do */ }
}

static void init(void)
{
	int expect = 0;
	if (!__atomic_compare_exchange_n(&fi.state, &expect, 1, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
		while (__atomic_load_n(&fi.state, __ATOMIC_ACQUIRE) != 2)
			;
		return;
	}
	fi.alloc_at = env_long("KF_FAULT_ALLOC", &fi.alloc_all);
	fi.write_at = env_long("KF_FAULT_WRITE", NULL);
	fi.count = env_long("KF_FAULT_COUNT", NULL) > 0;
	__atomic_store_n(&fi.state, 2, __ATOMIC_RELEASE);
	if (fi.count)
		atexit(report);
}

bool kf_fault_alloc(void)
{
	if (__atomic_load_n(&fi.state, __ATOMIC_ACQUIRE) != 2)
		init();
	long k = __atomic_add_fetch(&fi.nalloc, 1, __ATOMIC_RELAXED);
	if (fi.alloc_at && (k == fi.alloc_at || (fi.alloc_all && k > fi.alloc_at))) {
		errno = ENOMEM;
		return true;
	}
	return false;
}

bool kf_fault_write(void)
{
	if (__atomic_load_n(&fi.state, __ATOMIC_ACQUIRE) != 2)
		init();
	long k = __atomic_add_fetch(&fi.nwrite, 1, __ATOMIC_RELAXED);
	return fi.write_at && k == fi.write_at;
}

/* The fallible allocations: the wrappers (fault_wrap.c) let these fail
 * (kf_fallible says so); without the wrappers (a program linking
 * libkfuse.a on its own) malloc fails as it always does. */
void *kf_try_malloc(size_t n)
{
	kf_fallible++;
	void *p = malloc(n);
	kf_fallible--;
	return p;
}

void *kf_try_calloc(size_t n, size_t sz)
{
	kf_fallible++;
	void *p = calloc(n, sz);
	kf_fallible--;
	return p;
}

void *kf_try_realloc(void *p, size_t n)
{
	kf_fallible++;
	void *q = realloc(p, n);
	kf_fallible--;
	return q;
}

void kf_fatal(const char *what)
{
	char line[256];
	int n = snprintf(line, sizeof line, "kfuse: fatal: %s\n", what);
	if (write(2, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : sizeof line - 1) < 0) { /* nothing to do */ }
	kf_ofile_cleanup(); /* no half-written temporaries left behind */
	_exit(KF_EXIT_OOM);
}

void kf_oom(void)
{
	kf_fatal("out of memory");
}
