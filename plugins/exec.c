/* exec.c: the built-in `exec` stage: run a command under the shim.
 * It is a plugin like every other stage, and the smallest example of one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/plugin.h"

static const struct pl_host *host;

static const struct pl_key exec_keys[] = {
	PL_KEY_STRING(.name = "command", .flags = PL_KEY_REQUIRED,
	    .help = "the command line, run with /bin/sh -c (plain words not starting with a "
	    "shell builtin: run directly)"),
	PL_KEY_PATH(.name = "cwd",
	    .help = "the directory to run it in (default: the job's work directory)"),
	PL_KEY_STRING(.name = "env",
	    .help = "extra environment entries, NAME=value, space-separated"),
	PL_KEY_INPUT(.name = "input",
	    .help = "a file the command reads (a path, or JOB.ARTIFACT), exported as PL_INPUT;"
	    " its content enters the job's reuse key"),
	PL_KEY_END
};

static int
exec_check(pl_job *job)
{
	const char *env = host->get(job, "env");
	if (env != NULL) {
		char *copy = strdup(env), *save = NULL;
		for (char *w = strtok_r(copy, " \t\n", &save); w; w = strtok_r(NULL, " \t\n", &save))
			if (strchr(w, '=') == NULL || w[0] == '=')
				host->check_error(job, "env", "\"%s\" is not NAME=value", w);
		free(copy);
	}
	const char *cmd = host->get(job, "command");
	if (cmd != NULL && cmd[strspn(cmd, " \t\n")] == '\0')
		host->check_error(job, "command", "is empty");
	return PL_OK;
}

/* The shell's special builtins, common builtins and reserved words: a
 * command starting with one means nothing outside a shell (`exit 0` run
 * directly is "not found", status 127). GNU make keeps the same list. */
static const char *const sh_words[] = {
	".", ":", "alias", "bg", "break", "case", "cd", "command", "continue", "do",
	"done", "elif", "else", "esac", "eval", "exec", "exit", "export", "fc", "fg",
	"fi", "for", "getopts", "hash", "if", "jobs", "read", "readonly", "return",
	"set", "shift", "then", "times", "trap", "type", "ulimit", "umask", "unalias",
	"unset", "until", "wait", "while", NULL
};

/* Like make, run a command of plain words whose first word is not the
 * shell's own directly, without a /bin/sh in between: one exec fewer per
 * job. */
static int
plain_words(const char *cmd)
{
	if (*cmd == '\0')
		return 0;
	for (const char *c = cmd; *c; c++)
		if (strchr("|&;<>()$`\\\"'*?[]#~=%{}!\n\t", *c) != NULL)
			return 0;
	size_t n = strcspn(cmd + strspn(cmd, " "), " ");
	const char *first = cmd + strspn(cmd, " ");
	for (int i = 0; sh_words[i]; i++)
		if (strlen(sh_words[i]) == n && strncmp(first, sh_words[i], n) == 0)
			return 0;
	return 1;
}

static int
exec_run(pl_job *job)
{
	const char *cmd = host->get(job, "command");
	const char *argv[64] = { "/bin/sh", "-c", cmd, NULL };
	char *words = NULL;
	if (plain_words(cmd)) {
		words = strdup(cmd);
		int n = 0;
		char *save = NULL;
		for (char *w = strtok_r(words, " ", &save); w && n < 63; w = strtok_r(NULL, " ", &save))
			argv[n++] = w;
		argv[n] = NULL;
		if (n == 0 || n == 63) { /* too many words: let the shell split them */
			argv[0] = "/bin/sh";
			argv[1] = "-c";
			argv[2] = cmd;
			argv[3] = NULL;
		}
	}
	const char *envv[65] = { NULL };
	char *copy = NULL, inenv[4200] = "";
	const char *env = host->get(job, "env");
	int n = 0;
	if (host->get(job, "input") != NULL) {
		const char *in = host->input(job, "input");
		if (in == NULL) {
			free(words);
			return host->fail(job, "input %s cannot be used", host->get(job, "input"));
		}
		snprintf(inenv, sizeof(inenv), "PL_INPUT=%s", in);
		envv[n++] = inenv;
	}
	if (env != NULL) {
		copy = strdup(env);
		char *save = NULL;
		for (char *w = strtok_r(copy, " \t\n", &save); w && n < 64; w = strtok_r(NULL, " \t\n", &save))
			envv[n++] = w;
	}
	struct pl_spawn sp = {
		.abi = PL_ABI_VERSION, .size = sizeof(sp), .name = "main",
		.argv = argv, .env = envv,
		.cwd = host->get(job, "cwd") ? host->input(job, "cwd") : NULL,
	};
	if (host->get(job, "cwd") && sp.cwd == NULL) {
		free(copy);
		free(words);
		return host->fail(job, "cwd %s cannot be used", host->get(job, "cwd"));
	}
	struct pl_exit ex = PL_EXIT_INIT;
	int rc = host->spawn(job, &sp, &ex);
	free(copy);
	free(words);
	if (rc == PL_ECANCELED || rc == PL_ETIMEDOUT)
		return rc;
	if (rc != PL_OK)
		return host->fail(job, "the command could not be run to its end: %s", host->strerror(rc));
	if (ex.exited && ex.status == 0)
		return PL_OK;
	if (ex.exited)
		return host->fail(job, "the command exited with status %d%s%s", ex.status,
		    ex.error[0] ? ": " : "", ex.error);
	return host->fail(job, "the command was killed by signal %d%s%s", ex.signal,
	    ex.error[0] ? ": " : "", ex.error);
}

static const struct pl_stage exec_stage = PL_STAGE(
	.name = "exec",
	.summary = "run a command",
	.flags = PL_STAGE_ADOPTABLE | PL_STAGE_SPAWN_ONLY | PL_STAGE_REUSE_ASKED,
	.keys = exec_keys,
	.check = exec_check,
	.run = exec_run);

PL_PLUGIN(&host, &exec_stage)
