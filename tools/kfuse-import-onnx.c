/* kfuse-import-onnx: ONNX model in, .kf text out. */
#include <errno.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "npy.h"
#include "onnx_import.h"
#include "tensor.h"

static void usage(FILE *f)
{
	fputs("usage: kfuse-import-onnx MODEL.onnx [-o OUT.kf|-] [--weights-dir D] [--inline-max N]\n"
	      "                         [--bind NAME=FILE.npy]... [--allow-unsupported]\n"
	      "Translates an ONNX model into kfuse's text IR.  Initializers of more than N\n"
	      "elements (default 64) are written as .npy files into D (default: OUT.weights\n"
	      "beside OUT; without -o, or with -o -, everything stays inline) and named with\n"
	      "file(\"...\").  Dynamic axes become symbolic dims (f32[batch,seq,768]).\n"
	      "  -o -                 write the IR to stdout (the default)\n"
	      "  --bind NAME=FILE     freeze graph input NAME as the constant in FILE.npy (axes,\n"
	      "                       shapes or sizes a model takes as inputs); repeatable\n"
	      "  --allow-unsupported  keep ops kfuse cannot express as `opaque @Op` nodes with\n"
	      "                       the model's types and attributes (a plugin op Op runs them)\n", f);
}

#define MAXBIND 64

/* Where the weights go and how the text names them: a folder beside the
 * .kf file is named relative to it, any other by the path as given. */
static void weights_ref(const char *out, const char *wdir, char *ref, size_t cap)
{
	char tmp[PATH_MAX], outdir[PATH_MAX] = ".", wtmp[PATH_MAX], wtmp2[PATH_MAX];
	snprintf(tmp, sizeof tmp, "%s", out ? out : ".");
	if (out)
		snprintf(outdir, sizeof outdir, "%s", dirname(tmp));
	snprintf(wtmp, sizeof wtmp, "%s", wdir);
	snprintf(wtmp2, sizeof wtmp2, "%s", wdir);
	const char *wparent = dirname(wtmp), *name = strcmp(wparent, outdir) == 0 ? basename(wtmp2) : wdir;
	size_t n = strlen(name);
	if (n + 2 > cap)
		n = cap - 2;
	memcpy(ref, name, n);
	memcpy(ref + n, "/", 2);
}

/* --bind NAME=FILE: the tensors, read now; -1 after a message. */
static int read_binds(kf_ctx *c, char **spec, int n, kf_onnx_bind *b, kf_tensor *t)
{
	for (int i = 0; i < n; i++) {
		char *eq = strchr(spec[i], '=');
		if (!eq || eq == spec[i] || !eq[1]) {
			fprintf(stderr, "kfuse-import-onnx: error: --bind wants NAME=FILE.npy, not '%s'\n", spec[i]);
			return -1;
		}
		*eq = 0;
		if (kf_npy_read(c, eq + 1, &t[i]) < 0)
			return -1;
		b[i] = (kf_onnx_bind){spec[i], &t[i]};
	}
	return 0;
}

/* The text to stdout, or atomically to out (a failure leaves any old file). */
static int write_out(const char *out, const kf_buf *b)
{
	if (!out || !strcmp(out, "-")) {
		if (fwrite(b->p, 1, b->n, stdout) != b->n || fflush(stdout) != 0) {
			fprintf(stderr, "kfuse-import-onnx: error: cannot write to stdout: %s\n", strerror(errno));
			return 1;
		}
		return 0;
	}
	const void *part[1] = {b->p};
	size_t len[1] = {b->n};
	int err = kf_write_atomic(out, part, len, 1);
	if (err)
		fprintf(stderr, "%s: error: cannot write: %s\n", out, strerror(err));
	return err ? 1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"weights-dir", required_argument, 0, 'w'}, {"inline-max", required_argument, 0, 'n'},
		{"allow-unsupported", no_argument, 0, 'u'}, {"bind", required_argument, 0, 'b'},
		{"help", no_argument, 0, 'h'},              {"version", no_argument, 0, 'V'},
		{0, 0, 0, 0},
	};
	kf_onnx_opts o = {.inline_max = 64};
	const char *out = NULL, *wdir = NULL;
	char *bind[MAXBIND];
	int nbind = 0, ch;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'o': out = optarg; break;
		case 'w': wdir = optarg; break;
		case 'n': o.inline_max = atoll(optarg); break;
		case 'u': o.allow_unsupported = true; break;
		case 'b':
			if (nbind == MAXBIND) {
				fprintf(stderr, "kfuse-import-onnx: error: more than %d --bind\n", MAXBIND);
				return 2;
			}
			bind[nbind++] = optarg;
			break;
		case 'h': usage(stdout); return 0;
		case 'V': puts("kfuse-import-onnx " KF_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		usage(stderr);
		return 2;
	}
	bool to_file = out && strcmp(out, "-");
	if ((out && strlen(out) + sizeof ".weights" > PATH_MAX) || (wdir && strlen(wdir) + 2 > PATH_MAX)) {
		fprintf(stderr, "kfuse-import-onnx: error: the output or weights path is too long\n");
		return 2;
	}
	char defdir[PATH_MAX], ref[PATH_MAX + 2];
	if (to_file && !wdir) {
		snprintf(defdir, sizeof defdir, "%s.weights", out);
		wdir = defdir;
	}
	if (wdir) {
		weights_ref(to_file ? out : NULL, wdir, ref, sizeof ref);
		if (mkdir(wdir, 0777) != 0 && errno != EEXIST) {
			fprintf(stderr, "%s: error: cannot create the weights directory: %s\n", wdir, strerror(errno));
			return 1;
		}
		o.weights_dir = wdir;
		o.weights_ref = ref;
	}
	kf_ctx *c = kf_ctx_new();
	kf_onnx_bind b[MAXBIND];
	kf_tensor bt[MAXBIND] = {0};
	kf_module *m = NULL;
	int rc = 1;
	if (read_binds(c, bind, nbind, b, bt) == 0) {
		o.bind = b;
		o.nbind = nbind;
		m = kf_onnx_import_file(c, argv[optind], &o);
	}
	if (m) {
		for (uint32_t i = 0; i < m->ngraph; i++)
			kf_verify(m->graph[i]);
		if (kf_nerrors(c) == 0) {
			kf_buf t = {0};
			kf_print_module(&t, m);
			rc = write_out(out, &t);
			kf_buf_free(&t);
		}
	}
	kf_diag_flush(c, stderr);
	kf_module_free(m);
	for (int i = 0; i < nbind; i++)
		kf_tensor_free(&bt[i]);
	kf_ctx_free(c);
	return rc;
}
