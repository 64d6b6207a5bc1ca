/* fuzz_check: kfuse-check, the FileCheck clone, on an arbitrary check file
 * and input.
 *
 * The check file's parser is not separable from the tool's state (options,
 * variables, the canonicalised buffers), so the whole tool runs: its main,
 * compiled under another name, on two temporary files.  Input layout:
 * byte 0 picks options (bit 0 --match-full-lines, 1 --strict-whitespace,
 * 2 --ignore-case, 3 --enable-var-scope, 4 --allow-empty, 5 --dump-input
 * =always, 6 -DVAR=x and -D#NUM=3, 7 --implicit-check-not=bad); then the
 * check text up to the first NUL byte (or the first newline when there is
 * none), then the input text.  The tool must exit 0, 1 or 2, never crash. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int kfc_tool_main(int argc, char **argv); /* tools/kfuse-check/main.c's main */

static char dir[64], check_path[96], input_path[96];

static void remove_files(void)
{
	unlink(check_path);
	unlink(input_path);
	rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	snprintf(dir, sizeof dir, "/tmp/kf-fuzz-check-XXXXXX");
	if (!mkdtemp(dir)) {
		perror("fuzz_check: mkdtemp");
		abort();
	}
	snprintf(check_path, sizeof check_path, "%s/check.txt", dir);
	snprintf(input_path, sizeof input_path, "%s/input.txt", dir);
	atexit(remove_files);
	return 0;
}

static void put(const char *path, const uint8_t *p, size_t n)
{
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f) != 0) {
		perror(path);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	uint8_t flags = data[0];
	data++, size--;
	const uint8_t *sep = memchr(data, 0, size);
	if (!sep)
		sep = memchr(data, '\n', size);
	size_t nc = sep ? (size_t)(sep - data) : size;
	put(check_path, data, nc);
	put(input_path, sep ? sep + 1 : data + size, sep ? size - nc - 1 : 0);

	char *argv[16];
	int argc = 0;
	argv[argc++] = "kfuse-check";
	argv[argc++] = check_path;
	argv[argc++] = "--input-file";
	argv[argc++] = input_path;
	if (flags & 1)
		argv[argc++] = "--match-full-lines";
	if (flags & 2)
		argv[argc++] = "--strict-whitespace";
	if (flags & 4)
		argv[argc++] = "--ignore-case";
	if (flags & 8)
		argv[argc++] = "--enable-var-scope";
	if (flags & 16)
		argv[argc++] = "--allow-empty";
	argv[argc++] = flags & 32 ? "--dump-input=always" : "--dump-input=never";
	if (flags & 64) {
		argv[argc++] = "-DVAR=x";
		argv[argc++] = "-D#NUM=3";
	}
	if (flags & 128)
		argv[argc++] = "--implicit-check-not=bad";
	argv[argc] = NULL;
	int rc = kfc_tool_main(argc, argv);
	if (rc < 0 || rc > 2)
		abort(); /* FileCheck's exit codes are 0, 1 and 2 */
	return 0;
}
