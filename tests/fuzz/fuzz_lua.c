/* fuzz_lua: the Lua rule loader on an arbitrary script.
 *
 * The bytes are written to a temporary rules.lua and loaded with
 * kf_lua_rules_load in a fresh context, under small instruction and memory
 * budgets (so a runaway script is a budget error, not a fuzzer timeout);
 * when it loads, its embedded examples run (tracing, matching, rewriting).
 * Every failure must be an error in the context; nothing may crash, and
 * the sandbox must hold (no io, os or files outside the rule path). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "kf.h"
#include "lua_rules.h"
#include "plugin.h"
#include "rules.h"

static char dir[64], path[96];

static void remove_files(void)
{
	unlink(path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	snprintf(dir, sizeof dir, "/tmp/kf-fuzz-lua-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("fuzz_lua: mkdtemp");
		abort();
	}
	snprintf(path, sizeof path, "%s/rules.lua", dir);
	atexit(remove_files);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	FILE *f = fopen(path, "wb");
	if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) {
		perror(path);
		abort();
	}
	kf_ctx *c = kf_ctx_new();
	/* 2M instructions, 16 MiB per call, 64 MiB in all */
	kf_lua_set_limits(c, 2000000, (size_t)16 << 20, (size_t)64 << 20);
	kf_lua_set_time_limit(c, 2);
	kf_lrules *r = kf_lua_rules_load(c, path);
	if (!r && kf_nerrors(c) == 0)
		abort(); /* a failure always says why */
	if (r) {
		kf_buf log = {0};
		uint32_t nrun = 0;
		kf_rules_run_examples(r, &log, &nrun);
		kf_buf_free(&log);
	}
	kf_buf diag = {0};
	kf_diag_render(c, &diag);
	kf_buf_free(&diag);
	kf_plugin_release(c); /* the Lua state: kf_ctx_free does not free it */
	kf_ctx_free(c);
	return 0;
}
