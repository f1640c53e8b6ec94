/*
 * fuzz_control.c: control request lines (daemon/server/control.c) through the
 * daemon's own socket. A daemon's control socket, store, configuration
 * and scheduler are set up once in a temporary directory (no plugins:
 * every stage is unknown, so no spec is accepted and nothing runs); each
 * input is sent by a new client as request lines, after a hello unless it
 * starts with '!', and the loop runs until the daemon has answered and
 * closed. Every reply must be a JSON object with a status, an error one
 * with a code and a message, and each request line gets exactly one
 * reply until one that closes the connection.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "pld.h"
#include "server.h"
#include "pipeline/proto.h"
#include "fuzz.h"

static struct sockaddr_un sun = { .sun_family = AF_UNIX };
static uv_loop_t *loop;

static void
setup(void)
{
	static struct conf conf;
	static struct conf *confp = &conf;
	struct store *store;
	char path[PATH_MAX], text[2 * PATH_MAX], *errs = NULL;
	const char *dir = fz_tmpdir("fuzz_control");

	log_init(1, LOG_LVL_ERR, NULL);
	snprintf(path, sizeof(path), "%s/pipelined.conf", dir);
	snprintf(text, sizeof(text), "[daemon]\nstate_dir = %s\ncontrol_socket = %s/control.sock\n"
	    "feed_socket = %s/feed.sock\nplugin_dir = %s\n", dir, dir, dir, dir);
	fz_write(path, (const uint8_t *)text, strlen(text));
	if (conf_load(&conf, path, &errs) == -1) {
		fprintf(stderr, "fuzz_control: %s", errs);
		abort();
	}
	snprintf(path, sizeof(path), "%s/pipelined.db", dir);
	if (store_open(&store, path) == -1)
		abort();
	loop = uv_default_loop();
	const struct listen_ctx ctx = { .loop = loop, .store = store, .conf = &confp };
	if (control_listen(&ctx, conf.control_socket) == -1 ||
	    sched_init(loop, store, &conf) < 0)
		abort();
	snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", conf.control_socket);
}

static double
now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* One reply line: a JSON object with a status; an error has a code and
 * a message. Returns 1 when the daemon closes the connection after it. */
static int
check_reply(const char *line)
{
	cJSON *o = cJSON_Parse(line);
	const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "status");
	const cJSON *code = cJSON_GetObjectItemCaseSensitive(o, "code");
	if (!cJSON_IsObject(o) || !cJSON_IsString(st))
		abort();
	int closes = 0;
	if (strcmp(st->valuestring, "error") == 0) {
		if (!cJSON_IsString(code) ||
		    !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(o, "error")))
			abort();
		closes = strcmp(code->valuestring, "EVERSION") == 0 ||
		    strcmp(code->valuestring, "ETOOLONG") == 0;
	} else if (strcmp(st->valuestring, "ok") != 0) {
		abort();
	}
	cJSON_Delete(o);
	return closes;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static int ready;
	if (!ready) {
		setup();
		ready = 1;
	}
	int hello = !(size > 0 && data[0] == '!');
	char h[64];
	int hl = hello ? snprintf(h, sizeof(h), "{\"verb\":\"hello\",\"version\":%d}\n",
	    PL_PROTO_VERSION) : 0;
	size_t skip = hello ? 0 : 1, n = (size_t)hl + size - skip + 1;
	char *out = malloc(n);
	memcpy(out, h, (size_t)hl);
	memcpy(out + hl, data + skip, size - skip);
	out[n - 1] = '\n';
	/* The request lines the daemon dispatches: those not empty. */
	int want = 0;
	for (size_t i = 0, start = 0; i < n; i++)
		if (out[i] == '\n') {
			want += i > start;
			start = i + 1;
		}

	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd == -1 || connect(fd, (struct sockaddr *)&sun, sizeof(sun)) == -1)
		abort();
	size_t sent = 0, got = 0, cap = 65536;
	char *in = malloc(cap);
	int eof = 0, wrdone = 0;
	double t0 = now();
	while (!eof) {
		uv_run(loop, UV_RUN_NOWAIT);
		if (sent < n) {
			ssize_t w = send(fd, out + sent, n - sent, MSG_NOSIGNAL);
			if (w > 0)
				sent += (size_t)w;
			else if (w == -1 && errno != EAGAIN)
				sent = n;  /* the daemon closed: what is left is not read */
		} else if (!wrdone) {
			shutdown(fd, SHUT_WR);
			wrdone = 1;
		}
		if (got + 4096 > cap)
			in = realloc(in, cap *= 2);
		ssize_t r = recv(fd, in + got, cap - got - 1, 0);
		if (r > 0)
			got += (size_t)r;
		else if (r == 0)
			eof = 1;
		else if (errno != EAGAIN)
			abort();
		if (now() - t0 > 20) {
			fprintf(stderr, "fuzz_control: no end of the conversation in 20 s\n");
			abort();
		}
	}
	/* Let the daemon's side finish closing (its close callback). */
	for (int i = 0; i < 4; i++)
		uv_run(loop, UV_RUN_NOWAIT);
	close(fd);
	in[got] = '\0';
	if (memchr(in, '\0', got) != NULL)
		abort();   /* no NUL inside a reply */

	int replies = 0, closed = 0;
	for (char *l = in, *nl; *l; l = nl + 1) {
		if ((nl = strchr(l, '\n')) == NULL)
			abort();   /* a reply is a whole line */
		*nl = '\0';
		if (closed)
			abort();   /* nothing after a closing error */
		closed = check_reply(l);
		replies++;
	}
	if (closed ? replies > want : replies != want)
		abort();
	free(in);
	free(out);
	return 0;
}
