/* kfuse-import-onnx: ONNX model in, .kf text out. */
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include "onnx_import.h"

static void usage(FILE *f)
{
	fputs("usage: kfuse-import-onnx MODEL.onnx [-o OUT.kf] [--weights-dir D] [--inline-max N]\n"
	      "                         [--allow-unsupported] [--max-memory SIZE]\n"
	      "Translates an ONNX model into kfuse's text IR.  Initializers of more than N\n"
	      "elements (default 64) are written as .npy files into D (default: OUT.weights\n"
	      "beside OUT; without -o everything stays inline) and named with file(\"...\").\n"
	      "  --allow-unsupported  keep ops kfuse cannot express as opaque onnx_<Op> nodes\n"
	      "  --max-memory SIZE    memory budget of the parsed model and its tensors (8G, 512M;\n"
	      "                       default 3/4 of physical memory)\n"
	      "The output and the weights are written atomically: on failure nothing half-written\n"
	      "is left.  kfuse-run reads the weights only below its --data-root (by default the\n"
	      "directory of the .kf), so a --weights-dir elsewhere needs --data-root there.\n", f);
}

int main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"weights-dir", required_argument, 0, 'w'}, {"inline-max", required_argument, 0, 'n'},
		{"allow-unsupported", no_argument, 0, 'u'}, {"help", no_argument, 0, 'h'},
		{"max-memory", required_argument, 0, 'm'},
		{"version", no_argument, 0, 'V'},           {0, 0, 0, 0},
	};
	kf_onnx_opts o = {.inline_max = 64};
	const char *out = NULL, *wdir = NULL;
	int ch;
	while ((ch = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (ch) {
		case 'o': out = optarg; break;
		case 'w': wdir = optarg; break;
		case 'n': o.inline_max = atoll(optarg); break;
		case 'u': o.allow_unsupported = true; break;
		case 'm': {
			uint64_t bytes;
			if (kf_mem_parse(optarg, &bytes) != 0) {
				fprintf(stderr, "kfuse-import-onnx: error: --max-memory needs a size such as 8G or "
					"512M, not '%s'\n", optarg);
				return 2;
			}
			kf_mem_set_budget(bytes);
			break;
		}
		case 'h': usage(stdout); return 0;
		case 'V': puts("kfuse-import-onnx " KF_VERSION); return 0;
		default: usage(stderr); return 2;
		}
	}
	if (argc - optind != 1) {
		usage(stderr);
		return 2;
	}
	/* paths that would not fit are refused, not cut (a cut one names
	 * another file) */
	if ((out && strlen(out) >= PATH_MAX - 16) || (wdir && strlen(wdir) >= PATH_MAX - 16)) {
		fprintf(stderr, "kfuse-import-onnx: error: the output or weights path is too long\n");
		return 2;
	}
	char defdir[PATH_MAX], ref[PATH_MAX + 2];
	if (out && !wdir) {
		snprintf(defdir, sizeof defdir, "%s.weights", out);
		wdir = defdir;
	}
	if (wdir) {
		/* the text names the weights relative to the .kf file when they sit
		 * in a folder beside it, else by the path as given */
		char tmp[PATH_MAX], outdir[PATH_MAX] = ".";
		snprintf(tmp, sizeof tmp, "%s", out ? out : ".");
		if (out)
			snprintf(outdir, sizeof outdir, "%s", dirname(tmp));
		char wtmp[PATH_MAX];
		snprintf(wtmp, sizeof wtmp, "%s", wdir);
		char *wparent = dirname(wtmp);
		char wtmp2[PATH_MAX];
		snprintf(wtmp2, sizeof wtmp2, "%s", wdir);
		if (strcmp(wparent, outdir) == 0)
			snprintf(ref, sizeof ref, "%s/", basename(wtmp2));
		else
			snprintf(ref, sizeof ref, "%s/", wdir);
		mkdir(wdir, 0777);
		o.weights_dir = wdir;
		o.weights_ref = ref;
	}
	kf_ctx *c = kf_ctx_new();
	kf_module *m = kf_onnx_import_file(c, argv[optind], &o);
	int rc = 1;
	if (m) {
		for (uint32_t i = 0; i < m->ngraph; i++)
			kf_verify(m->graph[i]);
		if (kf_nerrors(c) == 0) {
			/* atomic: a full disk or a kill leaves no truncated .kf */
			kf_buf b = {0};
			kf_print_module(&b, m);
			int e = kf_write_file(out, b.p, b.n);
			if (e)
				kf_error(c, (kf_loc){kf_source_add(c, out ? out : "<stdout>", NULL, 0), 0},
					 "cannot write: %s", kf_file_strerror(e));
			rc = e ? 1 : 0;
			kf_buf_free(&b);
		}
	}
	kf_diag_flush(c, stderr);
	kf_module_free(m);
	kf_ctx_free(c);
	return rc;
}
