/* file.c: writing a file so that it is whole or untouched: the bytes go
 * to a fresh temporary beside it, which is renamed over it when every
 * write succeeded (as git's lock files and SQLite's journal do), so a
 * failed run never leaves a truncated output or destroys its input. */
#include <errno.h>
#include <fcntl.h>
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
