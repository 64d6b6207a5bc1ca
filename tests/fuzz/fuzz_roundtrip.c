/* fuzz_roundtrip: the printer is a fixed point of the parser.
 *
 * For input that parses and verifies: print it, parse the print (which must
 * succeed and verify: every dump is re-parseable IR), print again; the two
 * prints must be byte-identical.  Any difference aborts with both texts, so
 * that the finding is a crash libFuzzer saves. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "kf.h"

static bool verifies(kf_module *m)
{
	int bad = 0;
	for (uint32_t i = 0; i < m->ngraph; i++)
		bad += kf_verify(m->graph[i]);
	return bad == 0;
}

static void fail(kf_ctx *c, const char *why, const kf_buf *a, const kf_buf *b)
{
	fprintf(stderr, "fuzz_roundtrip: %s\n--- first print ---\n%.*s\n", why, (int)a->n, a->p);
	if (b)
		fprintf(stderr, "--- second print ---\n%.*s\n", (int)b->n, b->p);
	kf_diag_flush(c, stderr);
	abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kf_parse(c, "fuzz.kf", (const char *)data, size);
	if (!m || !verifies(m)) {
		kf_module_free(m);
		kf_ctx_free(c);
		return 0;
	}
	kf_buf p1 = {0}, p2 = {0};
	kf_print_module(&p1, m);
	kf_module_free(m);
	kf_module *m2 = kf_parse(c, "printed.kf", p1.p, p1.n);
	if (!m2)
		fail(c, "the printed text does not parse", &p1, NULL);
	if (!verifies(m2))
		fail(c, "the printed text does not verify", &p1, NULL);
	kf_print_module(&p2, m2);
	if (p1.n != p2.n || memcmp(p1.p, p2.p, p1.n) != 0)
		fail(c, "print(parse(print(x))) differs from print(x)", &p1, &p2);
	kf_module_free(m2);
	kf_buf_free(&p1);
	kf_buf_free(&p2);
	kf_ctx_free(c);
	return 0;
}
