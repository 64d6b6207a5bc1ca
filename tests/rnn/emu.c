/* rnn-emu NAME...: the persistent kernels of exported recurrences
 * (tests/rnn/data/NAME.onnx, tests/rnn/gen.py) run on the host
 * (tests/unit/persistent_emu.h) against the interpreter, on the inputs
 * PyTorch saw: each persistent node of the model after the standard
 * pipeline's `canonicalize,cse,persistent,canonicalize,cse` (cse inside
 * the node's body, as the models' pipeline runs it), with a grid smaller than its
 * groups (a block loops over several) and a second launch bit-identical
 * to the first. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"

#include "npy.h"
#include "onnx_import.h"
#include "pass.h"
#include "passes.h"
#include "persistent_emu.h"

/* The model as kfuse-import-onnx -o FILE imports it: weights of more than
 * 64 elements in files of dir (inline ones fold where they meet a zero
 * state: step 0's matmul would be a constant). */
static kf_module *import(kf_ctx *c, const char *name, const char *dir, const char *amp)
{
	char path[512], ref[512];
	snprintf(path, sizeof path, "%s/%s.onnx", KF_RNN_DATA, name);
	snprintf(ref, sizeof ref, "%s/", dir);
	kf_onnx_opts o = {.inline_max = 64, .weights_dir = dir, .weights_ref = ref};
	kf_module *m = kf_onnx_import_file(c, path, &o);
	if (!m)
		kf_diag_flush(c, stderr);
	assert_non_null(m);
	kf_passreg reg = {0};
	kf_passes_builtin(&reg);
	char pipe[160];
	snprintf(pipe, sizeof pipe, "%s%s%scanonicalize,cse,persistent,canonicalize,cse", amp ? "amp{dtype=" : "",
		 amp ? amp : "", amp ? "}," : "");
	kf_pipeline *p = kf_pipeline_parse(c, &reg, pipe);
	assert_non_null(p);
	kf_runopts ro = {.verify_each = true};
	int rc = kf_pipeline_run(p, m, &ro);
	if (rc != 0)
		kf_diag_flush(c, stderr);
	assert_int_equal(rc, 0);
	kf_pipeline_free(p);
	kf_passreg_free(&reg);
	return m;
}

static void model(void **st)
{
	/* NAME@f16, NAME@bf16: the model after amp{dtype=...} (the f32
	 * inputs; the kernel computes in f32 what the interpreter rounds at
	 * every op: compared within a few of the type's ulps) */
	char name[128];
	snprintf(name, sizeof name, "%s", (const char *)*st);
	char *at = strchr(name, '@');
	const char *amp = NULL;
	if (at) {
		*at = 0;
		amp = at + 1;
	}
	kf_ctx *c = kf_ctx_new();
	kf_rt_register(c);
	char dir[] = "/tmp/kfuse-rnn-emu-XXXXXX";
	assert_non_null(mkdtemp(dir));
	kf_module *m = import(c, name, dir, amp), *m2 = import(c, name, dir, amp);
	kf_graph *g = m->graph[0], *g2 = m2->graph[0];
	uint32_t na = g2->blk[0].narg;
	kf_tensor in[16];
	assert_true(na <= 16);
	for (uint32_t i = 0; i < na; i++) {
		char path[512];
		snprintf(path, sizeof path, "%s/%s.in%u.npy", KF_RNN_DATA, name, i);
		if (kf_npy_read(c, path, &in[i]) != 0)
			kf_diag_flush(c, stderr);
		const kf_type *t = kf_vtype(g2, g2->blk[0].arg[i]);
		assert_int_equal(in[i].dtype, t->dtype);
		assert_int_equal(kf_tensor_numel(&in[i]), kf_type_numel(t));
	}
	int n = 0;
	while (kft_nth_persistent(g, n) != KF_NONE)
		n++;
	assert_true(n > 0);
	for (int i = 0; i < n; i++) {
		char label[200];
		snprintf(label, sizeof label, "%s node %d", name, i);
		/* g2 becomes the graph of node i's parameters: a fresh one each */
		kf_module *mi = i ? import(c, name, dir, amp) : NULL;
		kft_emu e = {.grid = 3, .label = label};
		if (amp && !strcmp(amp, "f16"))
			e.rtol = 2e-2, e.atol = 4e-3;
		else if (amp)
			e.rtol = 5e-2, e.atol = 3e-2;
		int64_t bad = kft_emu_run(g, mi ? mi->graph[0] : g2, i, &e, in);
		if (bad >= 0)
			assert_int_equal(bad, 0);
		kf_module_free(mi);
	}
	for (uint32_t i = 0; i < na; i++)
		kf_tensor_free(&in[i]);
	kf_module_free(m);
	kf_module_free(m2);
	kf_ctx_free(c);
	kft_rmdir(dir);
}

int main(int argc, char **argv)
{
	struct CMUnitTest *t = calloc((size_t)argc, sizeof *t);
	for (int i = 1; i < argc; i++)
		t[i - 1] = (struct CMUnitTest){argv[i], model, NULL, NULL, argv[i]};
	int rc = _cmocka_run_group_tests("rnn-emu", t, (size_t)argc - 1, NULL, NULL);
	free(t);
	return rc;
}
