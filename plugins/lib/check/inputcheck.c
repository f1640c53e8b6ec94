/*
 * inputcheck.c: submit-time checks of a stage's inputs (inputcheck.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cjson/cJSON.h>

#include "gguf.h"
#include "inputcheck.h"
#include "plio.h"

/* The path key is set to in the spec, or NULL (unset: an upstream
 * artifact; JOB.ARTIFACT: not made yet; a check without files, where
 * nothing the spec names is opened). */
static const char *
set_path(const struct pl_host *host, pl_job *job, const char *key)
{
	const char *v = host->get(job, key);

	if (v == NULL || *v == '\0' || !host->check_files(job))
		return NULL;
	return host->input(job, key);
}

void
plc_check_base(const struct pl_host *host, pl_job *job, const char *key)
{
	const char *dir = set_path(host, job, key);
	char p[PATH_MAX], arch[128];
	size_t len;
	char *text;
	cJSON *cfg;

	if (dir == NULL)
		return;
	snprintf(p, sizeof(p), "%s/config.json", dir);
	if ((text = plc_read_file(p, &len, 4u << 20)) == NULL) {
		host->check_error(job, key, "%s: %s", p, strerror(errno));
		return;
	}
	cfg = cJSON_ParseWithLength(text, len);
	if (!cJSON_IsObject(cfg)) {
		const char *at = cJSON_GetErrorPtr();
		int line = 1;
		for (const char *q = text; at != NULL && q < at && q < text + len; q++)
			line += *q == '\n';
		host->check_error(job, key, "%s:%d: not a JSON object", p, line);
	} else if (gguf_convert_arch(cfg, arch, sizeof(arch)) == -1) {
		host->check_error(job, key, "%s: architecture %s is not one convert supports "
		    "(Gemma3ForCausalLM, Gemma3ForConditionalGeneration)", p, arch);
	}
	cJSON_Delete(cfg);
	free(text);
}

void
plc_check_corpus(const struct pl_host *host, pl_job *job, const char *key, int nlines)
{
	const char *path = set_path(host, job, key);
	char buf[256 * 1024];
	ssize_t n;
	int fd, lineno = 0;

	if (path == NULL)
		return;
	if ((fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) == -1) {
		host->check_error(job, key, "%s: %s", path, strerror(errno));
		return;
	}
	n = pread(fd, buf, sizeof(buf) - 1, 0);
	close(fd);
	if (n < 0) {
		host->check_error(job, key, "%s: %s", path, strerror(errno));
		return;
	}
	buf[n] = '\0';
	for (char *line = buf, *nl; line < buf + n && lineno < nlines; line = nl + 1) {
		lineno++;
		if ((nl = strchr(line, '\n')) == NULL) {
			if (n == (ssize_t)sizeof(buf) - 1)
				break;	/* cut by the read: the job checks it whole */
			nl = buf + n;
		}
		*nl = '\0';
		if (line[strspn(line, " \t\r")] == '\0')
			continue;
		cJSON *o = cJSON_Parse(line);
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(o, "messages");
		/* The shape a line must have goes with each error about it. */
		static const char shape[] = "; a line is one JSON object: {\"key\": \"ex1\", "
		    "\"messages\": [{\"role\": \"user\", \"content\": \"...\"}, "
		    "{\"role\": \"assistant\", \"content\": \"...\"}]} (a system message "
		    "may come first)";
		if (!cJSON_IsObject(o))
			host->check_error(job, key, "%s:%d: not a JSON object%s", path, lineno, shape);
		else if (!cJSON_IsArray(m) || cJSON_GetArraySize(m) < 2)
			host->check_error(job, key, "%s:%d: \"messages\" must list at least a "
			    "prompt and a response%s", path, lineno, shape);
		cJSON_Delete(o);
	}
}
