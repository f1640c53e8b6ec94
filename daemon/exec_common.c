/* exec_common.c: reading the files the shim leaves behind, for every
 * executor. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pipelined.h"
#include "plcommon.h"

static cJSON *
read_json(const char *dir, const char *name)
{
	/* The process directory is the job's to write: no link followed. */
	char path[PATH_MAX + 32];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = file_open_at(AT_FDCWD, path, O_RDONLY, 0);
	char *t = fd == -1 ? NULL : plc_read_fd(fd, NULL, 1 << 20);
	if (fd >= 0)
		close(fd);
	if (t == NULL)
		return NULL;
	cJSON *o = cJSON_Parse(t);
	free(t);
	if (o != NULL && !cJSON_IsObject(o)) {
		cJSON_Delete(o);
		return NULL;
	}
	return o;
}

static int
num(const cJSON *o, const char *k, int def)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsNumber(v) ? v->valueint : def;
}

int
proc_read_exit(struct proc *p)
{
	cJSON *o = read_json(p->dir, "exit.json");
	if (o == NULL)
		return 0;
	p->exited = num(o, "exited", 0);
	p->status = num(o, "status", 0);
	p->sig = num(o, "signal", 0);
	p->state = PROC_ENDED;
	cJSON_Delete(o);
	return 1;
}

int
proc_read_shim(struct proc *p, pid_t *child_pid, pid_t *pgid, uint64_t *child_start)
{
	cJSON *o = read_json(p->dir, "shim.json");
	if (o == NULL)
		return -1;
	if (child_pid)
		*child_pid = num(o, "child_pid", 0);
	if (pgid)
		*pgid = num(o, "pgid", 0);
	const cJSON *cs = cJSON_GetObjectItemCaseSensitive(o, "child_start");
	if (child_start)
		*child_start = cJSON_IsNumber(cs) ? (uint64_t)cs->valuedouble : 0;
	if (p->pid <= 0)
		p->pid = num(o, "shim_pid", 0);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "shim_start");
	if (p->starttime == 0 && cJSON_IsNumber(st))
		p->starttime = (uint64_t)st->valuedouble;
	cJSON_Delete(o);
	return 0;
}

int
proc_write_json_atomic(const char *path, cJSON *obj)
{
	char *t = cJSON_PrintUnformatted(obj);
	size_t n = strlen(t);
	t[n] = '\n';
	int rc = plc_write_file_atomic(path, t, n + 1, 0640);
	free(t);
	return rc;
}
