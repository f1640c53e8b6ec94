/*
 * test_ollama.c: the Ollama client (plugins/lib/serve/ollama.c) against the
 * Ollama API stand-in (tests/standins/ollama_standin.py): version, tags,
 * ps, load, unload that answers before the runner is gone, unload-and-wait
 * with its bound, the G21 reload race, 404s and transport errors, and name
 * normalisation.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ollama.h"
#include "runner.h"

static pid_t standin_pid = -1;
static char tmpdir[PATH_MAX];

static double
now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void
stop_standin(void)
{
	if (standin_pid > 0) {
		kill(standin_pid, SIGTERM);
		waitpid(standin_pid, NULL, 0);
		standin_pid = -1;
	}
}

/* Start the stand-in with extra arguments; returns its base URL. */
static void
start_standin(char *url, size_t len, const char *const *extra)
{
	const char *top = getenv("TOP");
	char script[PATH_MAX], portfile[PATH_MAX], logf[PATH_MAX];
	const char *argv[40];
	int n = 0;

	snprintf(script, sizeof(script), "%s/tests/standins/ollama_standin.py",
	    top ? top : ".");
	snprintf(portfile, sizeof(portfile), "%s/port", tmpdir);
	snprintf(logf, sizeof(logf), "%s/standin.log", tmpdir);
	unlink(portfile);
	unlink(logf);
	argv[n++] = "/usr/bin/python3";
	argv[n++] = script;
	argv[n++] = "--port-file";
	argv[n++] = portfile;
	argv[n++] = "--log";
	argv[n++] = logf;
	for (; extra && *extra && n < 38; extra++)
		argv[n++] = *extra;
	argv[n] = NULL;

	standin_pid = fork();
	if (standin_pid == 0) {
		execv(argv[0], (char *const *)argv);
		_exit(127);
	}
	for (int i = 0; i < 200; i++) {
		FILE *f = fopen(portfile, "r");
		int port = 0;
		if (f != NULL) {
			if (fscanf(f, "%d", &port) == 1 && port > 0) {
				fclose(f);
				snprintf(url, len, "http://127.0.0.1:%d/", port);
				return;
			}
			fclose(f);
		}
		usleep(50000);
	}
	fprintf(stderr, "test_ollama: the stand-in did not start (%s)\n", script);
	stop_standin();
	exit(1);
}

static int
log_count(const char *event, const char *model)
{
	char logf[PATH_MAX], line[1024], pat[512];
	int n = 0;

	snprintf(logf, sizeof(logf), "%s/standin.log", tmpdir);
	snprintf(pat, sizeof(pat), "\"event\": \"%s\", \"model\": \"%s\"", event, model);
	FILE *f = fopen(logf, "r");
	if (f == NULL)
		return -1;
	while (fgets(line, sizeof(line), f) != NULL)
		if (strstr(line, pat) != NULL)
			n++;
	fclose(f);
	return n;
}

static int
ps_has(struct ollama *c, const char *name)
{
	struct ollama_list l;
	if (ollama_ps(c, &l) == -1) {
		fprintf(stderr, "ps: %s\n", c->error);
		return -1;
	}
	int has = ollama_list_has(&l, name);
	ollama_list_free(&l);
	return has;
}

static void
case_names(void)
{
	char out[512];
	CHECK(ollama_name_norm("gemma3", out, sizeof(out)) == 0 &&
	    strcmp(out, "gemma3:latest") == 0, "%s", out);
	CHECK(ollama_name_norm("Gemma3:4B", out, sizeof(out)) == 0 &&
	    strcmp(out, "gemma3:4b") == 0, "%s", out);
	CHECK(ollama_name_norm("registry.ollama.ai/library/nomic-embed-text", out,
	    sizeof(out)) == 0 && strcmp(out, "nomic-embed-text:latest") == 0, "%s", out);
	CHECK(ollama_name_norm("localhost:5000/me/router", out, sizeof(out)) == 0 &&
	    strcmp(out, "localhost:5000/me/router:latest") == 0, "%s", out);
	CHECK(ollama_name_norm("me/router:v18", out, sizeof(out)) == 0 &&
	    strcmp(out, "me/router:v18") == 0, "%s", out);
	CHECK(ollama_name_eq("nomic-embed-text", "nomic-embed-text:latest"), "eq");
	CHECK(!ollama_name_eq("router:v17", "router:v18"), "tags differ");
	CHECK(!ollama_name_eq("router", "router:v18"), "latest is a tag");
	CHECK(!ollama_name_eq("", ""), "empty names never match");
	char tiny[8];
	CHECK(ollama_name_norm("abcdefgh", tiny, sizeof(tiny)) == -1, "too long");
}

/* The server profiles: the cgo engine before 0.30, llama-server after;
 * only the releases in OLLAMA_TESTED are tested ones. */
static void
case_profile(void)
{
	int tested = -1;
	CHECK(ollama_profile("0.24.0", &tested) == OLLAMA_PROFILE_CGO && tested == 1, "0.24.0");
	CHECK(ollama_profile("0.34.2", &tested) == OLLAMA_PROFILE_LLAMA_SERVER && tested == 1,
	    "0.34.2");
	CHECK(ollama_profile("0.29.9", &tested) == OLLAMA_PROFILE_CGO && tested == 0, "0.29.9");
	CHECK(ollama_profile("0.30.0", &tested) == OLLAMA_PROFILE_LLAMA_SERVER && tested == 0,
	    "0.30.0");
	CHECK(ollama_profile("0.34.21", &tested) == OLLAMA_PROFILE_LLAMA_SERVER && tested == 0,
	    "0.34.21 is not 0.34.2");
	CHECK(ollama_profile("1.2.0", &tested) == OLLAMA_PROFILE_LLAMA_SERVER && tested == 0,
	    "1.2.0");
	CHECK(ollama_profile("0.0.0", &tested) == OLLAMA_PROFILE_UNKNOWN && tested == 0, "dev");
	CHECK(ollama_profile("dev", &tested) == OLLAMA_PROFILE_UNKNOWN, "unparsed");
	/* /api/ps of 0.30 and later: context_length per runner. */
	struct ollama_list l;
	char err[128];
	const char *ps = "{\"models\":[{\"name\":\"a:latest\",\"model\":\"a:latest\","
	    "\"size\":10,\"context_length\":1024},{\"name\":\"b:latest\"}]}";
	CHECK(ollama_parse_list(ps, strlen(ps), &l, err, sizeof(err)) == 0 && l.n == 2 &&
	    l.v[0].context_length == 1024 && l.v[1].context_length == 0, "ps context_length");
	ollama_list_free(&l);
}

static void
case_basic(void)
{
	char url[256], ver[64];
	struct ollama c;
	struct ollama_list l;
	const char *args[] = {
		"--version", "0.99.1", "--model", "gemma3:4b=4100",
		"--model", "nomic-embed-text=300", "--model", "router:v17=4200",
		"--loaded", "nomic-embed-text", "--unload-delay", "0.6", NULL
	};

	start_standin(url, sizeof(url), args);
	CHECK(ollama_init(&c, url, 5) == 0, "init: %s", c.error);
	CHECK(strcmp(c.url + strlen(c.url) - 1, "/") != 0, "trailing slash kept: %s", c.url);
	CHECK(ollama_version(&c, ver, sizeof(ver)) == 0, "version: %s", c.error);
	CHECK(strcmp(ver, "0.99.1") == 0, "version %s", ver);

	CHECK(ollama_tags(&c, &l) == 0, "tags: %s", c.error);
	CHECK(l.n == 3, "tags: %zu models", l.n);
	CHECK(ollama_list_has(&l, "router:v17"), "router:v17 in tags");
	CHECK(ollama_list_has(&l, "NOMIC-embed-text"), "names compare normalised");
	for (size_t i = 0; i < l.n; i++)
		if (ollama_name_eq(l.v[i].name, "gemma3:4b"))
			CHECK(l.v[i].size == 4100ULL * 1024 * 1024, "size %llu",
			    (unsigned long long)l.v[i].size);
	ollama_list_free(&l);

	/* Only the embedding model is loaded; ps prints it with its tag. */
	CHECK(ollama_ps(&c, &l) == 0, "ps: %s", c.error);
	CHECK(l.n == 1 && strcmp(l.v[0].name, "nomic-embed-text:latest") == 0,
	    "ps: %zu, %s", l.n, l.n ? l.v[0].name : "-");
	CHECK(l.n == 1 && l.v[0].size_vram == 300ULL * 1024 * 1024, "size_vram");
	CHECK(l.n == 1 && l.v[0].expires_at[0] != '\0', "expires_at");
	ollama_list_free(&l);

	CHECK(ollama_load(&c, "gemma3:4b", "-1", 8192) == 0, "load: %s", c.error);
	CHECK(ps_has(&c, "gemma3:4b") == 1, "loaded");
	CHECK(ollama_load(&c, "router:v17", "\"10m\"", 0) == 0, "load: %s", c.error);
	CHECK(ollama_load(&c, "router:v17", "not json", 0) == -1, "bad keep_alive");

	/* The unload answer comes first; the runner goes 0.6 s later. */
	CHECK(ollama_unload(&c, "gemma3:4b") == 0, "unload: %s", c.error);
	CHECK(ps_has(&c, "gemma3:4b") == 1, "still listed right after the unload");
	double t0 = now_s();
	CHECK(ollama_unload_wait(&c, "gemma3:4b", 5, 0.05) == 0, "unload_wait: %s", c.error);
	CHECK(ps_has(&c, "gemma3:4b") == 0, "gone after unload_wait");
	CHECK(now_s() - t0 > 0.2, "unload_wait returned before the runner left");

	/* Bounded: a wait shorter than the runner's exit times out. */
	errno = 0;
	CHECK(ollama_unload_wait(&c, "router:v17", 0.2, 0.05) == -1 && errno == ETIMEDOUT,
	    "bounded wait: errno %d", errno);
	CHECK(strstr(c.error, "router:v17") != NULL, "error names the model: %s", c.error);

	/* Unloading what is not loaded is a no-op that succeeds. */
	CHECK(ollama_unload_wait(&c, "gemma3:4b", 1, 0.05) == 0, "no-op unload: %s", c.error);

	/* A name the server does not have: 404 with Ollama's message. */
	CHECK(ollama_unload(&c, "missing-model") == -1, "unknown model");
	CHECK(c.status == 404 && strstr(c.error, "not found") != NULL,
	    "status %ld: %s", c.status, c.error);
	CHECK(log_count("unload", "gemma3:4b") == 3, "stand-in saw %d unloads",
	    log_count("unload", "gemma3:4b"));
	CHECK(log_count("unload", "nomic-embed-text:latest") == 0, "embedding untouched");
	stop_standin();

	/* Nothing listening: a transport error, reported. */
	CHECK(ollama_ps(&c, &l) == -1 && c.status == 0 && c.error[0] != '\0',
	    "transport error: %s", c.error);
}

static void
case_race(void)
{
	char url[256];
	struct ollama c;
	const char *args[] = {
		"--model", "gemma3:4b", "--model", "nomic-embed-text",
		"--loaded", "gemma3:4b", "--loaded", "nomic-embed-text",
		"--unload-delay", "0.1", "--race", "2", "--race-delay", "0.4",
		"--race-models", "gemma3:4b", NULL
	};

	start_standin(url, sizeof(url), args);
	ollama_init(&c, url, 5);
	/* G21: each eviction is followed by a reload, twice, then no more. */
	for (int round = 1; round <= 3; round++) {
		CHECK(ollama_unload_wait(&c, "gemma3:4b", 3, 0.05) == 0, "round %d: %s",
		    round, c.error);
		usleep(800000);
		int back = ps_has(&c, "gemma3:4b");
		CHECK(back == (round <= 2), "round %d: listed %d", round, back);
	}
	CHECK(log_count("reload", "gemma3:4b") == 2, "reloads %d",
	    log_count("reload", "gemma3:4b"));
	CHECK(ps_has(&c, "nomic-embed-text") == 1, "embedding model stays");
	stop_standin();
}

static const struct unit_case cases[] = {
	UNIT_CASE(names),
	UNIT_CASE(profile),
	UNIT_CASE(basic),
	UNIT_CASE(race),
	UNIT_END
};

int
main(int argc, char **argv)
{
	snprintf(tmpdir, sizeof(tmpdir), "%s", getenv("TEST_TMP") ? getenv("TEST_TMP") : "/tmp");
	if (getenv("TEST_TMP") == NULL) {
		snprintf(tmpdir, sizeof(tmpdir), "/tmp/test_ollama.XXXXXX");
		if (mkdtemp(tmpdir) == NULL)
			return 1;
	}
	int rc = unit_main(argc, argv, cases);

	stop_standin();
	return rc;
}
