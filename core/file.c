/* file.c: writing a file so that it is whole or untouched: the bytes go
 * to a fresh temporary beside it, which is renamed over it when every
 * write succeeded (as git's lock files and SQLite's journal do), so a
 * failed run never leaves a truncated output or destroys its input. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "kf_int.h"

/* Creates a fresh file beside path; its permissions follow the umask as a
 * plain fopen's would (mkstemp would give 0600). */
static int open_temp(const char *path, char *tmp, size_t tmplen)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	for (int attempt = 0; attempt < 16; attempt++) {
		snprintf(tmp, tmplen, "%s.tmp.%ld.%lx", path, (long)getpid(),
			 (unsigned long)ts.tv_nsec + (unsigned long)attempt * 7919);
		int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
		if (fd >= 0 || errno != EEXIST)
			return fd;
	}
	return -1;
}

FILE *kf_atomic_open(const char *path, char **tmp)
{
	size_t tmplen = strlen(path) + 48;
	*tmp = malloc(tmplen);
	if (!*tmp)
		return NULL;
	int fd = open_temp(path, *tmp, tmplen);
	FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
	if (!f) {
		int e = errno;
		if (fd >= 0) {
			close(fd);
			unlink(*tmp);
		}
		free(*tmp);
		*tmp = NULL;
		errno = e;
	}
	return f;
}

int kf_atomic_close(FILE *f, char *tmp, const char *path, bool ok)
{
	int err = ok ? 0 : EIO;
	if (fclose(f) != 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) != 0)
		err = errno;
	if (err)
		unlink(tmp);
	free(tmp);
	return err;
}

int kf_write_atomic(const char *path, const void *const *part, const size_t *len, int nparts)
{
	size_t tmplen = strlen(path) + 48;
	char *tmp = malloc(tmplen);
	if (!tmp)
		return ENOMEM;
	int fd = open_temp(path, tmp, tmplen), err = fd < 0 ? errno : 0;
	for (int i = 0; !err && i < nparts; i++)
		err = kf_write_all(fd, part[i], len[i]);
	if (fd >= 0 && close(fd) != 0 && !err)
		err = errno;
	if (!err && rename(tmp, path) != 0)
		err = errno;
	if (err && fd >= 0)
		unlink(tmp);
	free(tmp);
	return err;
}
