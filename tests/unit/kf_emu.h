/* kf_emu.h: runs an emitted CUDA kernel on the host, for unit tests on a
 * machine without a GPU (include after cmocka.h).  The kernel's text is
 * compiled as C++ with the prelude (its inline-assembly helpers replaced)
 * and a shim that implements the CUDA it uses: a block's threads are fibers
 * (ucontext) switched at __syncthreads and at the warp's collective
 * operations, which run when all 32 lanes have arrived (shuffles, ldmatrix,
 * mma.sync m16n8k16 on f16 and bf16, m16n8k8 on tf32); cp.async copies are deferred to the
 * cp.async.wait_group that must cover them (so a read before the wait sees
 * stale data, as it may on a GPU); shared memory is filled with NaN bytes
 * before each block; blocks run one after the other, __device__ globals
 * and atomics are plain memory.  A block whose threads all wait for
 * something that never comes is a deadlock: the run fails with a message.
 *
 * Hopper's machinery too: mbarriers (arrivals, transaction bytes, phase
 * parity), TMA 2-D copies with the 128-byte swizzle (zeros out of range),
 * wgmma m64nNk16 with operands by descriptor (K-major, or N-major with
 * trans-b) or A from registers, asynchronous (computed at the
 * wgmma.wait_group that covers it, the accumulators NaN until then); named
 * barriers (bar.sync, bar.arrive); clusters and multicast are not emulated.
 * The CUDA it implements is in tests/unit/emu/ (cuda_pre.h before the
 * prelude, cuda_post.h after it, launch.h after the kernel); the kernel's
 * text is compiled as written but for four rewrites: the wgmma helpers'
 * chunks are dropped (the shim has every shape), `extern __shared__`
 * loses its qualifier (kf_smem), other `__shared__` arrays become static
 * (shared by the block's fibers, blocks running in turn), and statements of
 * inline assembly go to kf_emu_asm (fences and register hints pass; others
 * stop the run).
 *
 * kfe_run(kernel, params) writes the parameters to a temporary directory,
 * compiles the program with the host's c++, runs it and reads the outputs
 * back; false when there is no c++ (the test then says so and skips). */
#ifndef KF_EMU_H
#define KF_EMU_H
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "emit_cuda.h"
#include "kf_emu_fma.h"
#include "kf.h"
#include "interp.h"
#include "equiv.h"
#include "tensor.h"

/* emu/launch.h's kf_load leaves 1024 NaN bytes past each buffer */
_Static_assert(KF_EMIT_READ_PAST <= 1024, "emu/launch.h reads too few bytes past a buffer");

/* Writes n bytes to dir/name. */
static inline bool kfe_write(const char *dir, const char *name, const void *p, size_t n)
{
	char path[600];
	snprintf(path, sizeof path, "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	bool ok = f && fwrite(p, 1, n, f) == n;
	if (f)
		fclose(f);
	return ok;
}

/* The prelude without the chunks that hold inline assembly (the shim has
 * those functions): a chunk is a line that starts in column 0 and the
 * indented or continued lines after it. */
static inline void kfe_prelude(kf_buf *o)
{
	const char *p = kf_emit_prelude();
	while (*p) {
		const char *e = p, *asmv = NULL;
		bool cont = false;
		do {
			const char *nl = strchr(e, '\n');
			const char *end = nl ? nl + 1 : e + strlen(e);
			const char *a = strstr(e, "asm");
			if (a && a < end)
				asmv = a;
			cont = end - e >= 2 && end[-2] == '\\';
			e = end;
		} while (*e && (cont || *e == ' ' || *e == '\t'));
		if (!asmv)
			kf_buf_put(o, p, (size_t)(e - p));
		p = e;
	}
}

/* src with every `from` replaced by `to`. */
static inline void kfe_replace(kf_buf *o, const char *src, const char *from, const char *to)
{
	const char *p = src, *h;
	while ((h = strstr(p, from))) {
		kf_buf_put(o, p, (size_t)(h - p));
		kf_buf_puts(o, to);
		p = h + strlen(from);
	}
	kf_buf_puts(o, p);
}

/* k's text with its first `from` replaced by `to` (a test's corrupted
 * kernel, which the comparison must catch); `from` must be there. */
static inline void kfe_corrupt(kf_kernel *k, const char *from, const char *to)
{
	char *p = strstr(k->src, from);
	assert_non_null(p);
	kf_buf t = {0};
	kf_buf_put(&t, k->src, (size_t)(p - k->src));
	kf_buf_puts(&t, to);
	kf_buf_puts(&t, p + strlen(from));
	kf_buf_putc(&t, 0);
	free(k->src);
	k->src = t.p;
}

/* src without the chunks `#ifndef KF_WGMMA...` to their `#endif`: the
 * wgmma helpers, one for each shape a kernel uses (the shim has them all). */
static inline void kfe_drop_wgmma(kf_buf *o, const char *src)
{
	const char *p = src, *h;
	while ((h = strstr(p, "#ifndef KF_WGMMA"))) {
		const char *e = strstr(h, "#endif\n");
		assert_non_null(e);
		kf_buf_put(o, p, (size_t)(h - p));
		p = e + strlen("#endif\n");
	}
	kf_buf_puts(o, p);
}

/* The kernel's text, rewritten for the host (see above). */
static inline void kfe_kernel_text(const kf_kernel *k, kf_buf *o)
{
	kf_buf a = {0}, b = {0}, c = {0};
	kfe_drop_wgmma(&c, k->src);
	kf_buf_putc(&c, 0);
	kfe_replace(&a, c.p, "extern __shared__", "extern");
	kf_buf_putc(&a, 0);
	kfe_replace(&b, a.p, "__shared__", "static");
	kf_buf_putc(&b, 0);
	kfe_replace(o, b.p, "asm volatile(", "KF_EMU_ASM(");
	kf_buf_free(&a);
	kf_buf_free(&b);
	kf_buf_free(&c);
}

/* The call of kernel k: each parameter from its signature, pointers from
 * kf_p[], tensor maps from kf_tm[] (built from k->tmap), a sized plan's
 * size arguments kd<i> from kf_kd[i]. */
static inline void kfe_call(const kf_kernel *k, kf_buf *o)
{
	const char *sig = strstr(k->src, "extern \"C\"");
	assert_non_null(sig);
	sig = strstr(sig, k->name);
	assert_non_null(sig);
	sig += strlen(k->name);
	assert_true(*sig == '(');
	const char *end = strchr(sig, ')');
	int np = 0, nt = 0;
	kf_buf_printf(o, "%s(", k->name);
	for (const char *p = sig + 1; p < end;) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		const char *e = c ? c : end;
		/* the type is the text before the last word */
		const char *w = e;
		while (w > p && w[-1] != ' ' && w[-1] != '*')
			w--;
		while (p < w && *p == ' ')
			p++;
		if (np + nt)
			kf_buf_puts(o, ", ");
		if (strstr(p, "KfTmap") && strstr(p, "KfTmap") < e)
			kf_buf_printf(o, "kf_tm[%d]", nt++);
		else if (w[0] == 'k' && w[1] == 'd' && w[2] >= '0' && w[2] <= '9')
			kf_buf_printf(o, "(%.*s)kf_kd[%d]", (int)(w - p), p, atoi(w + 2));
		else
			kf_buf_printf(o, "(%.*s)kf_p[%d]", (int)(w - p), p, np++);
		p = c ? c + 1 : end;
	}
	kf_buf_puts(o, ")");
}

/* The host program of kernel k: the kernel, and a main that reads its
 * launch from DIR/launch.txt (grid x, y, z, threads, then per parameter
 * its bytes and whether it is read, then the size arguments, then per
 * tensor map param elem inner outer mid box_inner box_outer) and the
 * parameters from DIR/p<j>.bin, runs the grid and writes the outputs back:
 * so one compile of a kernel's text runs it at every size. */
static inline void kfe_program(const kf_kernel *k, kf_buf *src)
{
	kf_buf_puts(src, "#include \"cuda_pre.h\"\n");
	kfe_prelude(src);
	kf_buf_puts(src, "#include \"cuda_post.h\"\n");
	kfe_kernel_text(k, src);
	kf_buf_puts(src, "\n#include \"launch.h\"\n");
	uint32_t np = k->nin + k->nout;
	kf_buf_printf(src, "static unsigned char *kf_p[%u];\nstatic KfTmap kf_tm[4];\nstatic long long kf_kd[32];\n"
			   "static void kf_body(void) { ", np + 1);
	kfe_call(k, src);
	kf_buf_printf(src, "; }\nint main(int argc, char **argv) {\n  (void)argc;\n  char path[4200];\n"
			   "  snprintf(path, sizeof path, \"%%s/launch.txt\", argv[1]);\n  FILE *f = fopen(path, \"r\");\n"
			   "  unsigned gx, gy, gz, nt;\n  size_t n[%u];\n  int rd[%u];\n"
			   "  if (!f || fscanf(f, \"%%u %%u %%u %%u\", &gx, &gy, &gz, &nt) != 4) return 2;\n"
			   "  for (unsigned j = 0; j < %u; j++) {\n    char name[32];\n"
			   "    if (fscanf(f, \"%%zu %%d\", &n[j], &rd[j]) != 2) return 2;\n"
			   "    snprintf(name, sizeof name, \"p%%u.bin\", j);\n    kf_p[j] = kf_load(argv[1], name, n[j], rd[j]);\n  }\n"
			   "  for (int i = 0; i < 32; i++) if (fscanf(f, \"%%lld\", &kf_kd[i]) != 1) return 2;\n"
			   "  for (int i = 0; i < %d; i++) {\n    int pa, el, bi, bo;\n    long long in, ou, mi;\n"
			   "    if (fscanf(f, \"%%d %%d %%lld %%lld %%lld %%d %%d\", &pa, &el, &in, &ou, &mi, &bi, &bo) != 7) return 2;\n"
			   "    kf_tm[i] = {kf_p[pa], el, in, ou, mi, bi, bo};\n  }\n  fclose(f);\n"
			   "  int rc = kf_run(gx, gy, gz, nt, kf_body);\n  if (rc) return rc;\n"
			   "  for (unsigned j = %u; j < %u; j++) {\n    char name[32];\n"
			   "    snprintf(name, sizeof name, \"p%%u.bin\", j);\n"
			   "    if (kf_save(argv[1], name, kf_p[j], n[j])) return 2;\n  }\n  return 0;\n}\n",
		      np + 1, np + 1, np, k->ntmap, k->nin, np);
}

/* Runs kernel k on the host over params in[0..k->nin) (in the kernel's
 * parameter order, their data as stored), writing out[0..k->nout)
 * (allocated by the caller with their types).  The grid is k->units (or
 * $KFE_WALK_GRID for a walking kernel) x k->grid_y x k->grid_z blocks of
 * k->block threads; kd: a sized plan's
 * sizes (kf_emit_dyn's order; NULL: none).  The program of a kernel's text
 * is compiled once per process (by its name, in $TMPDIR) and run for each
 * call.  Returns false when there is no C++ compiler. */
static char kfe_bindir[64];

/* Removes the programs at exit (KFE_KEEP=1 keeps them). */
static inline void kfe_cleanup(void)
{
	char cmd[128];
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", kfe_bindir);
	if (kfe_bindir[0] && !getenv("KFE_KEEP") && system(cmd) != 0)
		fprintf(stderr, "emu: %s not removed\n", kfe_bindir);
}

static inline bool kfe_run_sized(const kf_kernel *k, const kf_tensor *in, kf_tensor *out, const int64_t *kd, int nkd)
{
	char *bindir = kfe_bindir;
	char dir[] = "/tmp/kfuse-emu-XXXXXX", name[64], cmd[1024], exe[160];
	if (system("c++ --version > /dev/null 2>&1") != 0)
		return false;
	assert_true(k->cluster <= 1 && k->ntmap <= 4 && nkd <= 32);
	if (!bindir[0]) {
		snprintf(bindir, sizeof kfe_bindir, "/tmp/kfuse-emu-bin-XXXXXX");
		assert_non_null(mkdtemp(bindir));
		atexit(kfe_cleanup);
	}
	assert_non_null(mkdtemp(dir));
	/* by the text's hash, not the kernel's name: a test may change the text */
	uint64_t h = 0xcbf29ce484222325ULL;
	for (const char *c = k->src; *c; c++)
		h = (h ^ (unsigned char)*c) * 0x100000001b3ULL;
	snprintf(exe, sizeof exe, "%s/%016llx", bindir, (unsigned long long)h);
	if (access(exe, X_OK) != 0) {
		kf_buf src = {0};
		kfe_program(k, &src);
		snprintf(name, sizeof name, "%016llx.cc", (unsigned long long)h);
		assert_true(kfe_write(bindir, name, src.p, src.n));
		kf_buf_free(&src);
		snprintf(cmd, sizeof cmd, "c++ -std=c++17 -O1%s -w -I%s/unit/emu -o %s %s.cc 2> %s/cc.log || (cat %s/cc.log >&2; false)",
			 kft_emu_fma(), KF_TEST_DATA, exe, exe, bindir, bindir);
		int rc = system(cmd);
		if (rc != 0)
			fprintf(stderr, "emu: the kernel does not compile on the host (kept in %s)\n", bindir);
		assert_int_equal(rc, 0);
	}
	uint32_t np = k->nin + k->nout;
	kf_buf l = {0};
	/* a kernel that walks its units (k->walk) gets $KFE_WALK_GRID blocks
	 * when set (fewer than its units: each block walks several, as on a
	 * GPU with fewer SMs than units) */
	long long gx = k->units;
	const char *wg = getenv("KFE_WALK_GRID");
	if (k->walk && wg && atoll(wg) > 0 && atoll(wg) < gx)
		gx = atoll(wg);
	kf_buf_printf(&l, "%lld %u %u %d\n", gx, k->grid_y ? k->grid_y : 1, k->grid_z ? k->grid_z : 1, k->block);
	for (uint32_t j = 0; j < np; j++)
		kf_buf_printf(&l, "%zu %d\n", j < k->nin ? in[j].nbytes : out[j - k->nin].nbytes, j < k->nin);
	for (int i = 0; i < 32; i++)
		kf_buf_printf(&l, "%lld ", (long long)(i < nkd ? kd[i] : 0));
	kf_buf_putc(&l, '\n');
	for (int j = 0; j < k->ntmap; j++) {
		const kf_tmap_spec *m = &k->tmap[j];
		kf_buf_printf(&l, "%d %d %lld %lld %lld %d %d\n", m->param, m->elem, (long long)m->inner, (long long)m->outer,
			      (long long)m->mid, m->box_inner, m->box_outer);
	}
	assert_true(kfe_write(dir, "launch.txt", l.p, l.n));
	kf_buf_free(&l);
	for (uint32_t j = 0; j < k->nin; j++) {
		snprintf(name, sizeof name, "p%u.bin", j);
		assert_true(kfe_write(dir, name, in[j].data, in[j].nbytes));
	}
	snprintf(cmd, sizeof cmd, "%s %s", exe, dir);
	assert_int_equal(system(cmd), 0);
	for (uint32_t j = 0; j < k->nout; j++) {
		char path[600];
		snprintf(path, sizeof path, "%s/p%u.bin", dir, k->nin + j);
		FILE *f = fopen(path, "rb");
		assert_non_null(f);
		assert_int_equal(fread(out[j].data, 1, out[j].nbytes, f), out[j].nbytes);
		fclose(f);
	}
	/* KFE_KEEP=1 keeps the program and its data, for a debugger */
	if (getenv("KFE_KEEP"))
		fprintf(stderr, "emu: kept in %s (program %s)\n", dir, exe);
	else {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		assert_int_equal(system(cmd), 0);
	}
	return true;
}

static inline bool kfe_run(const kf_kernel *k, const kf_tensor *in, kf_tensor *out)
{
	return kfe_run_sized(k, in, out, NULL, 0);
}
/* The emulation's verdict on a kernel: skipped when it could not run here
 * (bad < 0: no C++ compiler), else no element out of tolerance. */
static inline void kfe_expect_clean(int64_t bad)
{
	if (bad < 0) {
		skip();
		return;
	}
	assert_int_equal(bad, 0);
}

/* par[j]: the graph input of g that kernel k reads as its parameter j (the
 * unit tests' kernels read graph inputs only). */
static inline void kfe_params_from_inputs(const kf_graph *g, const kf_kernel *k, const kf_tensor *in, kf_tensor *par)
{
	uint32_t na = g->blk[0].narg;
	for (uint32_t j = 0; j < k->nin; j++) {
		uint32_t i = 0;
		while (i < na && g->blk[0].arg[i] != k->in[j])
			i++;
		assert_true(i < na);
		par[j] = in[i];
	}
}
/* g2 (a clone) returning kernel k's parameters, then its outputs: one
 * interpreter run gives the values the kernel reads and should write. */
static inline void kfe_return_params(kf_graph *g2, const kf_kernel *k)
{
	uint32_t np = k->nin + k->nout;
	kf_vid ret[64];
	kf_tid ty[64];
	assert_true(np <= 64);
	for (uint32_t j = 0; j < np; j++) {
		ret[j] = j < k->nin ? k->in[j] : k->out[j - k->nin];
		ty[j] = kf_V(g2, ret[j])->type;
	}
	kf_node_erase(g2, kf_block_terminator(g2, 0));
	kf_node_new(g2, 0, KF_NONE, KF_OP_RETURN, ret, np, NULL, 0);
	kf_graph_set_results(g2, ty, np);
}

/* Node n's kernel k (of graph g, whose inputs are in[0..nin)) emulated on
 * the interpreter's values of its inputs; the elements of its outputs out
 * of tolerance (each differing output described on stderr, labelled). */
static inline int64_t kfe_check_node(kf_graph *g, kf_nid n, const kf_kernel *k, const kf_tensor *in, int nin,
				     const char *model)
{
	uint32_t np = k->nin + k->nout;
	kf_graph *g2 = kf_graph_clone(g);
	kfe_return_params(g2, k);
	kf_tensor *val = calloc(np, sizeof *val), *got = calloc(k->nout + 1, sizeof *got);
	assert_non_null(val);
	if (kf_interp_run(g2, in, nin, val, (int)np) != 0)
		kft_fail_diags(g->ctx, model);
	for (uint32_t j = 0; j < k->nout; j++)
		assert_int_equal(kf_tensor_alloc_type(&got[j], kf_vtype(g, k->out[j])), 0);
	int64_t bad = 0;
	if (kfe_run(k, val, got)) {
		for (uint32_t j = 0; j < k->nout; j++) {
			const kf_tensor *want = &val[k->nin + j];
			/* f32 kernels against the interpreter's f64 math; tensor
			 * cores round to 16 bits, and a kernel over 16-bit values
			 * keeps in f32 what the interpreter rounds after each op
			 * (the models' values are O(1)) */
			bool lowp = k->sm90a;
			for (uint32_t q = 0; q < np; q++)
				lowp |= val[q].dtype == KF_F16 || val[q].dtype == KF_BF16;
			/* a fused body's 16-bit intermediates, kept in f32 by the kernel */
			if (kf_N(g, n)->op == KF_OP_FUSION)
				kf_foreach_node(g, kf_N(g, n)->body, m)
					for (uint32_t r = 0; r < kf_N(g, m)->nres; r++) {
						kf_dtype dt = (kf_dtype)kf_vtype(g, kf_res(g, m, r))->dtype;
						lowp |= dt == KF_F16 || dt == KF_BF16;
					}
			double rtol = lowp ? 2e-2 : 2e-3, atol = lowp ? 2e-2 : 2e-4;
			kf_equiv_stat st;
			kf_equiv_compare(&got[j], want, rtol, atol, &st);
			if (st.nbad) {
				kf_buf d = {0};
				kf_equiv_describe(&d, &st);
				fprintf(stderr, "emu %s: %s (%s %s, tile %s) output %u: %.*s\n", model, k->name,
					kf_op(g->ctx, kf_N(g, n)->op)->name, kf_attr_str(g, n, "kind", ""),
					kf_attr_str(g, n, "tile", "default"), j, (int)d.n, d.p);
				kf_buf_free(&d);
			}
			bad += st.nbad;
		}
	}
	for (uint32_t j = 0; j < np; j++)
		kf_tensor_free(&val[j]);
	for (uint32_t j = 0; j < k->nout; j++)
		kf_tensor_free(&got[j]);
	free(val);
	free(got);
	kf_graph_free(g2);
	return bad;
}

#endif
