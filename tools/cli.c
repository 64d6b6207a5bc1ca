/* cli.c: the tools' shared command-line conventions (cli.h). */
#include <errno.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "kf.h"

/* A tool's process has one command line: the only state here, set once in
 * main before anything else runs (the library below stays reentrant). */
static const char *prog = "kfuse";
static int status = 2;

void kf_cli_init(const char *name, int usage_status)
{
	prog = name;
	status = usage_status;
}

const char *kf_cli_prog(void)
{
	return prog;
}

int kf_cli_status(void)
{
	return status;
}

int kf_cli_usage(const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	fprintf(stderr, "%s: error: ", prog);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\nTry '%s --help' for more information.\n", prog);
	return status;
}

int kf_cli_bad_option(int ch, char **argv)
{
	/* getopt_long leaves optind past the word it refused (and past a
	 * missing value's place); optopt is the short option, 0 for a long
	 * one it did not know */
	const char *word = optind > 0 ? argv[optind - 1] : "?";
	if (ch == ':') {
		if (optopt && optopt < 256 && word[0] == '-' && word[1] != '-')
			return kf_cli_usage("option '-%c' needs a value", optopt);
		return kf_cli_usage("option '%s' needs a value", word);
	}
	if (optopt && optopt < 256 && (word[0] != '-' || word[1] != '-'))
		return kf_cli_usage("unknown option '-%c'", optopt);
	/* an unknown or ambiguous long option: name it without its value */
	const char *eq = strchr(word, '=');
	return kf_cli_usage("unknown option '%.*s'", eq ? (int)(eq - word) : (int)strlen(word), word);
}

void kf_cli_version(void)
{
	printf("%s (kfuse %s)\n", prog, KF_VERSION);
}

void kf_cli_version_rules(void)
{
	kf_buf d = {0};
	kf_cli_version();
	printf("standard rules: %s\n", kf_std_rules(&d) == 0 ? d.p : "not found (set KFUSE_RULES_PATH)");
	kf_buf_free(&d);
}

bool kf_cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out)
{
	char *end;
	errno = 0;
	long long v = strtoll(s, &end, 10);
	if (!s[0] || *end || errno || v < lo || v > hi) {
		if (hi == (long long)(~0ULL >> 1))
			kf_cli_usage("%s needs an integer >= %lld, not '%s'", opt, lo, s);
		else
			kf_cli_usage("%s needs an integer in %lld..%lld, not '%s'", opt, lo, hi, s);
		return false;
	}
	*out = v;
	return true;
}

bool kf_cli_u64(const char *opt, const char *s, uint64_t *out)
{
	char *end;
	errno = 0;
	/* strtoull takes "-1" as 2^64-1: refuse any sign */
	unsigned long long v = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
	if (!(s[0] >= '0' && s[0] <= '9') || *end || errno) {
		kf_cli_usage("%s needs a non-negative integer, not '%s'", opt, s);
		return false;
	}
	*out = v;
	return true;
}

bool kf_cli_double(const char *opt, const char *s, double lo, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(s, &end);
	if (!s[0] || *end || errno || !(v >= lo) || v != v) {
		kf_cli_usage("%s needs a number >= %g, not '%s'", opt, lo, s);
		return false;
	}
	*out = v;
	return true;
}
