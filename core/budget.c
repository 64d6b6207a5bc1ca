/* budget.c: the memory budget of the data an input can make kfuse hold.
 *
 * A 150-byte .kf can declare a tensor of gigabytes, and a small ONNX file
 * can ask protobuf for a large repeated field.  Every tensor (runtime/
 * tensor.c) and the importer's parsed model (onnx/unpack.c) reserve their
 * bytes here first, so that such an input fails with a message naming the
 * budget instead of taking the machine's memory.  The budget is one number
 * for the process, as physical memory is one resource of the process: the
 * default is 3/4 of physical memory, or of the cgroup's limit when that is
 * lower (a container); tools change it with --max-memory.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kf_int.h"

static uint64_t budget; /* 0 until set or first asked for */
static uint64_t in_use;

/* cgroup v2's memory.max, when it is a number. */
static uint64_t cgroup_limit(void)
{
	FILE *f = fopen("/sys/fs/cgroup/memory.max", "r");
	if (!f)
		return 0;
	unsigned long long v = 0;
	int ok = fscanf(f, "%llu", &v) == 1;
	fclose(f);
	return ok ? (uint64_t)v : 0;
}

uint64_t kf_mem_default_budget(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
	uint64_t phys = pages > 0 && size > 0 ? (uint64_t)pages * (uint64_t)size : (uint64_t)8 << 30;
	uint64_t cg = cgroup_limit();
	if (cg && cg < phys)
		phys = cg;
	return phys / 4 * 3;
}

uint64_t kf_mem_budget(void)
{
	uint64_t b = __atomic_load_n(&budget, __ATOMIC_RELAXED);
	if (!b) {
		b = kf_mem_default_budget();
		__atomic_store_n(&budget, b, __ATOMIC_RELAXED);
	}
	return b;
}

void kf_mem_set_budget(uint64_t bytes)
{
	__atomic_store_n(&budget, bytes ? bytes : kf_mem_default_budget(), __ATOMIC_RELAXED);
}

uint64_t kf_mem_in_use(void)
{
	return __atomic_load_n(&in_use, __ATOMIC_RELAXED);
}

bool kf_mem_reserve(uint64_t n)
{
	uint64_t b = kf_mem_budget();
	uint64_t cur = __atomic_load_n(&in_use, __ATOMIC_RELAXED);
	do {
		if (n > b || cur > b - n)
			return false;
	} while (!__atomic_compare_exchange_n(&in_use, &cur, cur + n, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED));
	return true;
}

void kf_mem_release(uint64_t n)
{
	uint64_t cur = __atomic_load_n(&in_use, __ATOMIC_RELAXED);
	/* saturating: a block made outside kf_mem_reserve cannot wrap it */
	while (!__atomic_compare_exchange_n(&in_use, &cur, cur > n ? cur - n : 0, true, __ATOMIC_RELAXED,
					    __ATOMIC_RELAXED))
		;
}

int kf_mem_parse(const char *s, uint64_t *bytes)
{
	char *end;
	if (!s || !isdigit((unsigned char)*s))
		return -1;
	double v = strtod(s, &end);
	static const char units[] = "KMGT";
	double scale = 1;
	if (*end) {
		const char *u = strchr(units, toupper((unsigned char)*end));
		if (!u)
			return -1;
		scale = (double)((uint64_t)1 << (10 * (u - units + 1)));
		end++;
		if (*end == 'i' || *end == 'I')
			end++;
		if (*end == 'b' || *end == 'B')
			end++;
	}
	if (*end || v <= 0 || v * scale > 9.2e18)
		return -1;
	*bytes = (uint64_t)(v * scale);
	return *bytes ? 0 : -1;
}

void kf_mem_why(char *buf, size_t n, uint64_t need)
{
	snprintf(buf, n, "%llu bytes would exceed the memory budget of %llu bytes (%llu in use; "
		 "--max-memory changes it)", (unsigned long long)need, (unsigned long long)kf_mem_budget(),
		 (unsigned long long)kf_mem_in_use());
}
