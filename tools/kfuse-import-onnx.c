/* kfuse-import-onnx: ONNX model in, .kf text out. */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cli.h"
#include "npy.h"
#include "onnx_import.h"
#include "tensor.h"

static const char usage[] =
	"usage: kfuse-import-onnx MODEL.onnx|- [-o OUT.kf|-] [options]\n"
	"Translates an ONNX model (- reads it from stdin) into kfuse's text IR, written\n"
	"to OUT.kf (default, or -: stdout).  Initializers of more than N elements are\n"
	"written as .npy files into a weights directory and named with file(\"...\")\n"
	"relative to the .kf file (stdout's text is read from the current directory).\n"
	"  -o OUT.kf               the output (default: stdout)\n"
	"  --weights-dir D         the weights directory (default: OUT.kf.weights beside\n"
	"                          OUT.kf; on stdout everything stays inline without it)\n"
	"  --inline-max N          initializers up to N elements stay inline (default 64)\n"
	"  --bind NAME=FILE.npy    freeze graph input NAME as the constant in the file (axes,\n"
	"                          shapes or sizes a model takes as inputs); repeatable\n"
	"  --allow-unsupported     keep ops kfuse cannot express as `opaque @Op` nodes with\n"
	"                          the model's types and attributes (a plugin op Op runs them)\n"
	"  -h, --help, --version\n"
	"Dynamic axes become symbolic dims (f32[batch,seq,768]); docs/onnx.md.\n";

enum { O_WEIGHTS = 256, O_INLINE_MAX, O_ALLOW, O_BIND, O_VERSION };

#define MAXBIND 64

typedef struct opt {
	const char *model, *out, *wdir;
	char *bind[MAXBIND];
	int nbind;
	kf_onnx_opts o;
} opt;

/* 0 to go on; else main returns parse_args's value - 1 (so --help is 0). */
static int parse_args(int argc, char **argv, opt *o)
{
	static const struct option longs[] = {
		{"weights-dir", required_argument, 0, O_WEIGHTS}, {"inline-max", required_argument, 0, O_INLINE_MAX},
		{"allow-unsupported", no_argument, 0, O_ALLOW}, {"bind", required_argument, 0, O_BIND},
		{"help", no_argument, 0, 'h'}, {"version", no_argument, 0, O_VERSION}, {0, 0, 0, 0},
	};
	long long n;
	int ch;
	while ((ch = getopt_long(argc, argv, ":o:h", longs, NULL)) != -1) {
		switch (ch) {
		case 'o': o->out = strcmp(optarg, "-") ? optarg : NULL; break;
		case O_WEIGHTS: o->wdir = optarg; break;
		case O_INLINE_MAX:
			if (!kf_cli_int("--inline-max", optarg, 0, (long long)(~0ULL >> 1), &n))
				return kf_cli_status() + 1;
			o->o.inline_max = n;
			break;
		case O_ALLOW: o->o.allow_unsupported = true; break;
		case O_BIND:
			if (!strchr(optarg, '=') || optarg[0] == '=' || !strchr(optarg, '=')[1])
				return kf_cli_usage("--bind wants NAME=FILE.npy, not '%s'", optarg) + 1;
			if (o->nbind == MAXBIND)
				return kf_cli_usage("more than %d --bind", MAXBIND) + 1;
			o->bind[o->nbind++] = optarg;
			break;
		case 'h': fputs(usage, stdout); return 1;
		case O_VERSION: kf_cli_version(); return 1;
		default: return kf_cli_bad_option(ch, argv) + 1;
		}
	}
	if (argc - optind != 1)
		return kf_cli_usage(argc == optind ? "no model file (use - for stdin)"
						   : "one model file only ('%s' is a second)",
				    argv[argc > optind + 1 ? optind + 1 : 0]) + 1;
	o->model = argv[optind];
	return 0;
}

/* Where the weights go and how the text names them: relative to the .kf
 * file's directory (the current one for stdout). */
static int weights(kf_ctx *c, opt *o, kf_buf *dir, kf_buf *ref)
{
	if (o->wdir)
		kf_buf_puts(dir, o->wdir);
	else if (o->out)
		kf_buf_printf(dir, "%s.weights", o->out);
	else
		return 0; /* stdout without --weights-dir: all inline */
	if (mkdir(dir->p, 0777) != 0 && errno != EEXIST) {
		kf_error(c, (kf_loc){kf_source_add(c, dir->p, NULL, 0), 0}, "cannot create the weights directory: %s",
			 strerror(errno));
		return -1;
	}
	kf_buf kfdir = {0};
	kf_path_dir(&kfdir, o->out ? o->out : "");
	int rc = kf_path_rel(ref, kfdir.p, dir->p);
	kf_buf_free(&kfdir);
	if (rc < 0) {
		kf_error(c, KF_NOLOC, "cannot read the current directory");
		return -1;
	}
	kf_buf_putc(ref, '/');
	o->o.weights_dir = dir->p;
	o->o.weights_ref = ref->p;
	return 0;
}

/* --bind NAME=FILE: the tensors, read now; -1 after an error. */
static int read_binds(kf_ctx *c, opt *o, kf_onnx_bind *b, kf_tensor *t)
{
	for (int i = 0; i < o->nbind; i++) {
		char *eq = strchr(o->bind[i], '=');
		*eq = 0;
		if (kf_npy_read(c, eq + 1, &t[i]) < 0)
			return -1;
		b[i] = (kf_onnx_bind){o->bind[i], &t[i]};
	}
	o->o.bind = b;
	o->o.nbind = o->nbind;
	return 0;
}

/* The text to stdout, or to path whole or not at all (a temporary beside
 * it, renamed when every byte is written: a failure leaves the old file). */
static int write_out(kf_ctx *c, const char *path, kf_module *m)
{
	char *tmp = NULL;
	FILE *f = path ? kf_atomic_open(path, &tmp) : stdout;
	kf_loc at = {kf_source_add(c, path ? path : "<stdout>", NULL, 0), 0};
	if (!f) {
		kf_error(c, at, "cannot open for writing: %s", strerror(errno));
		return -1;
	}
	errno = 0;
	bool ok = kf_print_module_file(f, m) == 0;
	int e = errno;
	if (path) {
		int ce = kf_atomic_close(f, tmp, path, ok);
		if (ok && ce)
			e = ce;
		ok = ok && ce == 0;
	} else {
		ok &= fflush(f) == 0;
	}
	if (!ok) {
		kf_error(c, at, "write failed: %s", strerror(e ? e : errno ? errno : EIO));
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	opt o = {.o = {.inline_max = 64}};
	kf_cli_init("kfuse-import-onnx", 2);
	int st = parse_args(argc, argv, &o);
	if (st)
		return st - 1;
	kf_ctx *c = kf_ctx_new();
	kf_buf dir = {0}, ref = {0};
	kf_onnx_bind b[MAXBIND];
	kf_tensor bt[MAXBIND] = {0};
	kf_module *m = read_binds(c, &o, b, bt) == 0 && weights(c, &o, &dir, &ref) == 0
			       ? kf_onnx_import_file(c, o.model, &o.o)
			       : NULL;
	int rc = 1;
	if (m) {
		for (uint32_t i = 0; i < m->ngraph; i++)
			kf_verify(m->graph[i]);
		/* the graphs live where the text goes */
		kf_buf kfdir = {0};
		kf_path_dir(&kfdir, o.out ? o.out : "");
		for (uint32_t i = 0; i < m->ngraph; i++)
			m->graph[i]->dir = kf_intern_cstr(c, kfdir.p);
		kf_buf_free(&kfdir);
		if (kf_nerrors(c) == 0 && write_out(c, o.out, m) == 0)
			rc = 0;
	}
	kf_diag_flush(c, stderr);
	kf_buf_free(&dir);
	kf_buf_free(&ref);
	kf_module_free(m);
	for (int i = 0; i < o.nbind; i++)
		kf_tensor_free(&bt[i]);
	kf_ctx_free(c);
	return rc;
}
