/* cli.h: what the kfuse tools' command lines share (getopt_long, as every
 * tool parses its options).
 *
 * The conventions (docs/tools.md): `--help` prints the usage to stdout and
 * exits 0; `--version` prints "TOOL (kfuse X.Y.Z)" and exits 0; a usage
 * error (unknown option, missing or malformed value, wrong operands) prints
 * one line saying what is wrong and one line pointing at --help, and exits
 * with the tool's usage status (2 unless the tool says otherwise).  A
 * number is taken whole or not at all: `--seed abc`, `--seed 1x` and
 * `--seed -1` are errors, never 0.
 */
#ifndef KF_CLI_H
#define KF_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

/* The tool's name in messages and its usage exit status; set once by
 * kf_cli_init (argv[0]'s basename is not used: a test runs the tools by
 * absolute path, and messages should not depend on it). */
void kf_cli_init(const char *prog, int usage_status);
const char *kf_cli_prog(void);
int kf_cli_status(void); /* the usage exit status */

/* "PROG: error: <fmt>" and "Try 'PROG --help' for more information." on
 * stderr; returns the usage status, for `return kf_cli_usage(...)`. */
int kf_cli_usage(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The message for what getopt_long returned '?' or ':' for (the optstring
 * must begin with ':' so that a missing value is told apart); returns the
 * usage status.  argv and the optind after the call, as getopt left them. */
int kf_cli_bad_option(int ch, char **argv);

/* `PROG (kfuse VERSION)` on stdout. */
void kf_cli_version(void);
/* The same and `standard rules: DIR` (kf_std_rules), for the tools that
 * apply rules. */
void kf_cli_version_rules(void);

/* Whole-string numbers for option OPT (named in the message): false after
 * the usage message (kf_cli_usage) when s is not one, or is outside [lo,
 * hi]; the caller then returns kf_cli_status(). */
bool kf_cli_u64(const char *opt, const char *s, uint64_t *out);
bool kf_cli_int(const char *opt, const char *s, long long lo, long long hi, long long *out);
bool kf_cli_double(const char *opt, const char *s, double lo, double *out);

#endif
