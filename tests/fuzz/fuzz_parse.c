/* fuzz_parse: the .kf lexer, parser and verifier on arbitrary bytes.
 *
 * Whatever the bytes, kf_parse either builds a module or leaves errors in
 * the context; every graph it builds must survive kf_verify, and every
 * diagnostic must render (line, column, source line and caret) without
 * reading outside the text.  Crashes, sanitizer reports and leaks are the
 * findings; a module that parses with an error count is one too. */
#include <stdint.h>
#include <stdlib.h>
#include "kf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kf_parse(c, "fuzz.kf", (const char *)data, size);
	if (m && kf_nerrors(c) != 0)
		abort(); /* a module is built only from a file without errors */
	if (!m && kf_nerrors(c) == 0)
		abort(); /* a failure always says why */
	for (uint32_t i = 0; m && i < m->ngraph; i++)
		kf_verify(m->graph[i]);
	kf_buf diag = {0};
	kf_diag_render(c, &diag);
	kf_buf_free(&diag);
	kf_module_free(m);
	kf_ctx_free(c);
	return 0;
}
