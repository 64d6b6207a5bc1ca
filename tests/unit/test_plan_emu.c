/* Every kernel of real models, run on the host (tests/unit/kf_emu.h)
 * against the interpreter: a model of tests/models (PyTorch exports) is
 * loaded, specialised to the sizes its test inputs give, run through the
 * standard pipeline, and each top-level node that has a kernel for the
 * H200 (kf_emit_node_for with wgmma) is emulated on the values the
 * interpreter computes for its inputs; its outputs must be what the
 * interpreter computes for them.  Node by node, so that a wrong kernel is
 * named, and no error carries from one kernel to the next.
 *
 * This is the check that no GPU is needed for: every kernel a model
 * compiles to (the new ONNX compositions' i64 reductions and iotas, the
 * Hopper attention and wgmma contractions, the row and loop kernels)
 * computes the model, not only compiles (tests/models/compile_model.sh).
 * What it does not cover: the CUDA backend's routing (cuBLAS for some
 * contractions, split-K, the persistent kernels), which only a GPU runs.
 * Skipped without a C++ compiler.
 *
 * By hand: KF_EMU_MODELS=zoo/bert,others/swin (any models of tests/models),
 * KF_EMU_AMP="amp{dtype=bf16}," (a pipeline prefix), KF_EMU_INPUTS=zeros|
 * huge|nan (edge-case inputs; "huge" through bf16 convolutions differs by
 * cancellation, within bf16's rounding, element by element). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>
#include "kf_test.h"
#include "kf_emu.h"
#include "kfuse_int.h"
#include "equiv.h"
#include "interp.h"
#include "npy.h"
#include "passes.h"

#define PIPELINE                                                                                                  \
	"canonicalize,cse,rules,canonicalize,cse,layout,pad-channels,canonicalize,cse,merge-matmul,fuse-attention," \
	"fuse-conv,fuse-matmul,fuse,dce"

/* The test inputs of DIR/NAME (NAME.in<i>.npy; f32 files of a bf16
 * graph's inputs rounded to bf16); their count. */
static int load_inputs(kf_ctx *c, kf_graph *g, const char *model, kf_tensor *in, int max)
{
	int n = 0;
	for (; n < max && (uint32_t)n < g->blk[0].narg; n++) {
		char path[600];
		snprintf(path, sizeof path, "%s/models/%s.in%d.npy", KF_TEST_DATA, model, n);
		FILE *f = fopen(path, "rb");
		if (!f)
			break;
		fclose(f);
		bool rounded;
		if (kf_npy_read_input(c, path, (kf_dtype)kf_vtype(g, g->blk[0].arg[n])->dtype, &in[n], &rounded) != 0)
			kft_fail_diags(c, path);
	}
	return n;
}

/* $KF_EMU_INPUTS: the inputs replaced by edge cases, where kernels and
 * the interpreter must still agree (NaN matching NaN): "zeros" (every
 * input, ints too: a mask of zeros pads everything, rows masked whole),
 * "huge" (floats times 1e30: overflow in squares and exponents), "nan"
 * (every 7th float NaN). */
static void extreme_inputs(kf_tensor *in, int n, const char *mode)
{
	if (!mode)
		return;
	bool zeros = !strcmp(mode, "zeros");
	for (int i = 0; i < n; i++) {
		if (!zeros && !kf_dtype_is_float((kf_dtype)in[i].dtype))
			continue;
		for (int64_t e = 0, ne = kf_tensor_numel(&in[i]); e < ne; e++) {
			if (zeros)
				kf_tensor_set(&in[i], e, 0);
			else if (!strcmp(mode, "huge"))
				kf_tensor_set(&in[i], e, kf_tensor_get(&in[i], e) * 1e30);
			else if (!strcmp(mode, "nan") && e % 7 == 3)
				kf_tensor_set(&in[i], e, NAN);
		}
	}
}

/* g2 (a copy of g, same ids) returns the values kernel k reads, then the
 * ones it writes: the interpreter's values for its parameters. */
/* model through `amp` (pre: "amp{dtype=bf16},") or none (""). */
static void run_model_amp(const char *model, const char *pre);

static void run_model(const char *model)
{
	run_model_amp(model, getenv("KF_EMU_AMP") ? getenv("KF_EMU_AMP") : "");
}

static void run_model_amp(const char *model, const char *pre)
{
	if (system("c++ --version > /dev/null 2>&1") != 0) {
		fprintf(stderr, "emu: no C++ compiler, %s not emulated\n", model);
		return;
	}
	char path[600];
	snprintf(path, sizeof path, "%s/models/%s.onnx", KF_TEST_DATA, model);
	kfuse_ctx *kc = kfuse_new();
	kfuse_model *km = kfuse_load(kc, path);
	if (!km)
		fail_msg("%s", kfuse_error(kc));
	kf_ctx *c = kc->c;
	kf_rt_register(c);
	kf_graph *g = km->m->graph[0];
	kf_tensor in[8] = {0};
	int nin = load_inputs(c, g, model, in, 8);
	extreme_inputs(in, nin, getenv("KF_EMU_INPUTS"));
	assert_int_equal(nin, (int)g->blk[0].narg);
	/* the sizes of the test inputs, as a sized plan sees them */
	kf_symbind b = {0};
	if (kf_interp_bind_inputs(g, in, nin, &b) != 0)
		kft_fail_diags(c, model);
	bool changed = false;
	kf_specialize(g, b.sym, b.val, b.n, &changed);
	kf_symbind_free(&b);
	char pipe[512];
	snprintf(pipe, sizeof pipe, "%s%s", pre, PIPELINE);
	kft_run_pipe(c, km->m, pipe);
	kf_emit_target t = {.wgmma = 1};
	int kernels = 0, bad_kernels = 0;
	kf_foreach_node(g, 0, n) {
		kf_kernel k;
		int rc = kf_emit_node_for(g, n, &t, &k);
		if (rc < 0)
			kft_fail_diags(c, model);
		if (rc != 0)
			continue; /* no kernel: a const, an alias, a body run op by op */
		kernels++;
		if (kfe_check_node(g, n, &k, in, nin, model) > 0)
			bad_kernels++;
		kf_kernel_free(&k);
	}
	fprintf(stderr, "emu %s: %d kernels, %d differ from the interpreter\n", model, kernels, bad_kernels);
	for (int i = 0; i < nin; i++)
		kf_tensor_free(&in[i]);
	kfuse_model_free(km);
	kfuse_free(kc);
	assert_true(kernels > 0);
	assert_int_equal(bad_kernels, 0);
}

/* The importer's compositions (onnx/compose.c) in the models that need
 * them: ArgMax's i64 reductions, CumSum's masked sum, InstanceNormalization
 * (GroupNorm), DepthToSpace, ScatterND's gather (Swin's masks fold). */
static void test_activations(void **s) { (void)s; run_model("others/activations"); }
static void test_cliptext(void **s) { (void)s; run_model("others/cliptext"); }
static void test_diffusion(void **s) { (void)s; run_model("others/diffusion"); }
static void test_style(void **s) { (void)s; run_model("others/style"); }
/* attention with a key padding mask, the Hopper attention kernel */
static void test_crossattn(void **s) { (void)s; run_model("others/crossattn"); }
static void test_conformer(void **s) { (void)s; run_model("others/conformer"); }
static void test_gather_ops(void **s) { (void)s; run_model("others/gather_ops"); }
/* BERT with padding (its test inputs mask keys of one sequence: the
 * attention kernel's finfo.min overflow was found here) and GPT-2's causal
 * attention at the sizes of the dynamic export's test inputs */
static void test_bert_dyn(void **s) { (void)s; run_model("zoo/bert_dyn"); }
static void test_gpt2_dyn(void **s) { (void)s; run_model("zoo/gpt2_dyn"); }
/* transformers 5's Mistral: its causal and padding masks of finfo.min
 * made a slice of keys all masked; the exponents' fused multiply-add gave
 * inf weights there, NaN on the H200 (emulated with fma: kf_emu_fma.h) */
static void test_wild_mistral(void **s) { (void)s; run_model("wild/mistral"); }
/* cubic Resize (Keys' kernel, two coordinate modes) against the
 * interpreter, which matches PyTorch's bicubic (models/others/bicubic) */
static void test_bicubic(void **s) { (void)s; run_model("others/bicubic"); }
/* convolutions: the wgmma implicit GEMM, depthwise, pooling */
static void test_resnet18(void **s) { (void)s; run_model("zoo/resnet18"); }
/* Models exported in bf16 whose graphs mix f32 into bf16 (the importer
 * promotes as torch does: a float mask's scores, cosine similarity's eps) */
static void test_bf16_decoder(void **s) { (void)s; run_model("bf16/decoder_layer"); }
static void test_bf16_retrieval(void **s) { (void)s; run_model("bf16/retrieval"); }

/* $KF_EMU_MODELS: a comma-separated list (zoo/bert,others/swin) instead */
static void test_env(void **s)
{
	(void)s;
	char list[1024];
	snprintf(list, sizeof list, "%s", getenv("KF_EMU_MODELS"));
	for (char *m = strtok(list, ","); m; m = strtok(NULL, ","))
		run_model(m);
}

int main(void)
{
	if (getenv("KF_EMU_MODELS")) {
		const struct CMUnitTest env[] = {cmocka_unit_test(test_env)};
		return cmocka_run_group_tests(env, NULL, NULL);
	}
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_activations), cmocka_unit_test(test_cliptext), cmocka_unit_test(test_diffusion),
		cmocka_unit_test(test_style), cmocka_unit_test(test_crossattn), cmocka_unit_test(test_conformer),
		cmocka_unit_test(test_gather_ops), cmocka_unit_test(test_bert_dyn), cmocka_unit_test(test_gpt2_dyn),
		cmocka_unit_test(test_resnet18), cmocka_unit_test(test_wild_mistral),
		cmocka_unit_test(test_bicubic), cmocka_unit_test(test_bf16_decoder), cmocka_unit_test(test_bf16_retrieval),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
