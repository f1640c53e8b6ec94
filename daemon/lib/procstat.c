/* procstat.c: /proc/PID/stat, read once for every program (procstat.h).
 * libc only: pipeline-shim links it alone. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "procstat.h"

int
proc_stat_read(pid_t pid, struct proc_stat *ps)
{
	char path[64], buf[4096];
	memset(ps, 0, sizeof(*ps));
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd == -1)
		return -1;
	ssize_t n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	char *p = strrchr(buf, ')');
	if (p == NULL)
		return -1;
	int field = 2;
	char *save = NULL;
	for (char *tok = strtok_r(p + 1, " ", &save); tok; tok = strtok_r(NULL, " ", &save)) {
		switch (++field) {
		case 3:
			ps->state = tok[0];
			break;
		case 4:
			ps->ppid = (pid_t)strtol(tok, NULL, 10);
			break;
		case 5:
			ps->pgrp = (pid_t)strtol(tok, NULL, 10);
			break;
		case 9:
			ps->flags = strtoul(tok, NULL, 10);
			break;
		case 22:
			ps->start = strtoull(tok, NULL, 10);
			return 0;
		}
	}
	return -1;
}
