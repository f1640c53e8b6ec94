/*
 * pipelined: the supervisor daemon.
 *
 *   pipelined [-dnvV] [-f conf]
 *
 * -d stays in the foreground (systemd runs it so, Type=notify), -n checks
 * the configuration and exits, -nv also prints the effective configuration.
 * SIGTERM and SIGINT stop accepting and exit, leaving running jobs under
 * their shims (a restart re-adopts them); SIGHUP reloads the configuration,
 * keeping the old one when the new one does not parse.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "exec.h"
#include "pipelined.h"
#include "plcommon.h"

static uv_signal_t sig_term, sig_int, sig_hup;
static int verbose;

static void
usage(void)
{
	fprintf(stderr, "usage: pipelined [-dnvV] [-f conf]\n");
	exit(2);
}

static const char *
default_conf(void)
{
	static char buf[PATH_MAX];
	snprintf(buf, sizeof(buf), "%s/../etc/pipelined.conf", self_dir());
	if (access(buf, R_OK) == 0)
		return buf;
	return "/etc/pipelined.conf";
}

static void notify_status(void);

static void
on_check(uv_check_t *c)
{
	feed_flush();
}

static void
on_wake(uv_async_t *a)
{
	sched_wake();
	notify_status();
}

/* STATUS= for systemctl status: how many jobs run now. A no-op when not
 * started by systemd (no NOTIFY_SOCKET). */
static void
notify_status(void)
{
	static int last = -1;
	if (D->running == last)
		return;
	last = D->running;
	char st[256];
	snprintf(st, sizeof(st), "STATUS=%d job%s running, %d plugin stage%s", D->running,
	    D->running == 1 ? "" : "s", plugin_nstages(), plugin_nstages() == 1 ? "" : "s");
	sd_notify(0, st);
}

static void
stop(int code)
{
	sd_notify(0, "STOPPING=1");
	D->shutting_down = 1;
	unlink(D->conf->control_socket);
	unlink(D->conf->feed_socket);
	/* Job threads may be blocked waiting for their children: do not wait
	 * for them. Every state is already committed. */
	exit(code);
}

static void
on_term(uv_signal_t *s, int signum)
{
	log_info("received %s: stopping; running jobs stay under their shims",
	    signum == SIGTERM ? "SIGTERM" : "SIGINT");
	stop(0);
}

/* A commit failed (the disk is full): the scheduler's memory is ahead of
 * the store. Stop, exit 1, so that the service manager starts the daemon
 * again; the restart loads what the store holds and re-adopts the jobs,
 * whose shims carry on. */
static void
on_store_fail(const char *why)
{
	log_warnx("store: a commit failed (%s); stopping so that a restart reconciles"
	    " the scheduler with the store; running jobs stay under their shims", why);
	stop(1);
}

static void
on_hup(uv_signal_t *s, int signum)
{
	struct conf *nc = xcalloc(1, sizeof(*nc));
	char *errs = NULL;
	if (conf_load(nc, D->conf->path, &errs) == -1) {
		log_warnx("reload: %s does not parse; keeping the running configuration:\n%s",
		    D->conf->path, errs ? errs : "");
		free(errs);
		conf_free(nc);
		free(nc);
		return;
	}
	free(errs);
	if (strcmp(nc->state_dir, D->conf->state_dir) != 0 ||
	    strcmp(nc->control_socket, D->conf->control_socket) != 0 ||
	    strcmp(nc->feed_socket, D->conf->feed_socket) != 0)
		log_warnx("reload: state_dir and socket changes take effect at the next start");
	snprintf(nc->state_dir, sizeof(nc->state_dir), "%s", D->conf->state_dir);
	snprintf(nc->control_socket, sizeof(nc->control_socket), "%s", D->conf->control_socket);
	snprintf(nc->feed_socket, sizeof(nc->feed_socket), "%s", D->conf->feed_socket);
	/* Resources in use carry over. */
	for (int i = 0; i < nc->nres; i++) {
		struct resource *old = conf_resource(D->conf, nc->res[i].name);
		if (old)
			nc->res[i].used = old->used;
	}
	/* Running jobs keep a pointer to the old configuration: it is kept. */
	D->conf = nc;
	log_setlevel(nc->log_level);
	plugin_load_dir(nc->plugin_dir, &plugin_host);
	log_info("reload: configuration %s loaded", nc->path);
	sched_kick();
}

int
main(int argc, char **argv)
{
	const char *conf_path = NULL;
	int foreground = 0, check_only = 0, ch;
	while ((ch = getopt(argc, argv, "df:nvV")) != -1) {
		switch (ch) {
		case 'd': foreground = 1; break;
		case 'f': conf_path = optarg; break;
		case 'n': check_only = 1; break;
		case 'v': verbose = 1; break;
		case 'V': printf("pipelined %s (plugin ABI %d, protocol %d)\n", PL_VERSION,
		    PL_ABI_VERSION, PL_PROTO_VERSION); return 0;
		default: usage();
		}
	}
	if (optind != argc)
		usage();
	if (conf_path == NULL)
		conf_path = default_conf();
	log_init(1, LOG_LVL_INFO, NULL);

	static struct daemon d;
	static struct conf conf;
	D = &d;
	d.loop_thread = pthread_self();
	D->runs_tail = &D->runs;
	char *errs = NULL;
	if (conf_load(&conf, conf_path, &errs) == -1) {
		fputs(errs ? errs : "configuration error\n", stderr);
		return 1;
	}
	D->conf = &conf;
	if (check_only) {
		if (verbose)
			conf_print(&conf, stdout);
		printf("configuration OK\n");
		return 0;
	}
	/* Searchable (0711): jobs run as their submitters reach their own
	 * directories below it; nothing in it is readable by others. */
	if (plc_mkdirs(conf.state_dir, 0711) == -1) {
		fprintf(stderr, "pipelined: %s: %s\n", conf.state_dir, strerror(errno));
		return 1;
	}
	if (!foreground) {
		/* Detach: the parent returns once the child has forked. */
		pid_t pid = fork();
		if (pid == -1)
			fatal("fork");
		if (pid > 0)
			_exit(0);
		setsid();
		int fd = open("/dev/null", O_RDWR);
		if (fd >= 0) {
			dup2(fd, 0);
			dup2(fd, 1);
			dup2(fd, 2);
			if (fd > 2)
				close(fd);
		}
	}
	log_init(foreground, conf.log_level, conf.log_file);
	signal(SIGPIPE, SIG_IGN);
	proc_reserve_fd();

	char dbpath[PATH_MAX];
	snprintf(dbpath, sizeof(dbpath), "%s/pipelined.db", conf.state_dir);
	if (store_open(&D->store, dbpath) == -1)
		fatalx("cannot open the store %s", dbpath);
	store_set_announce(D->store, feed_announce);
	if (notify_start(&conf, D->store) == -1)
		fatalx("cannot start the notification thread");
	store_set_outbox(D->store, notify_classify, notify_wake);
	store_set_fail(D->store, on_store_fail);

	int np = plugin_load_dir(conf.plugin_dir, &plugin_host);
	log_info("loaded %d plugin%s (%d stage%s) from %s", np, np == 1 ? "" : "s",
	    plugin_nstages(), plugin_nstages() == 1 ? "" : "s", conf.plugin_dir);

	D->loop = uv_default_loop();
	uv_async_init(D->loop, &D->wake, on_wake);
	uv_check_init(D->loop, &D->flush);
	uv_check_start(&D->flush, on_check);
	uv_unref((uv_handle_t *)&D->flush);
	uv_signal_init(D->loop, &sig_term);
	uv_signal_start(&sig_term, on_term, SIGTERM);
	uv_signal_init(D->loop, &sig_int);
	uv_signal_start(&sig_int, on_term, SIGINT);
	uv_signal_init(D->loop, &sig_hup);
	uv_signal_start(&sig_hup, on_hup, SIGHUP);

	if (httpd_start(&conf, dbpath) == -1)
		fatalx("cannot serve http on %s", conf.http_listen);
	if (control_listen(conf.control_socket) == -1)
		fatalx("cannot listen on %s", conf.control_socket);
	if (feed_listen(conf.feed_socket) == -1)
		fatalx("cannot listen on %s", conf.feed_socket);
	exec_local_run_shims(1);
	int nruns = sched_init();
	if (nruns < 0)
		fatalx("cannot load runs from the store");
	log_info("pipelined %s ready: control %s, feed %s, %d run%s known", PL_VERSION,
	    conf.control_socket, conf.feed_socket, nruns, nruns == 1 ? "" : "s");
	sd_notify(0, "READY=1");
	notify_status();
	feed_flush();
	uv_run(D->loop, UV_RUN_DEFAULT);
	return 0;
}
