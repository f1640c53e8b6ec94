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
#include <getopt.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "executor.h"
#include "pld.h"
#include "server.h"
#include "metrics.h"
#include "http.h"
#include "plio.h"
#include "priv.h"

/* The loop's handles and what the parts were given, pipelined.c's own:
 * sched.c, control.c and feed.c get what they need at start. */
static uv_loop_t *loop;
static uv_check_t flush;        /* after each loop pass: deliver what the loop
                                   thread itself announced (no self-wake) */
static uv_signal_t sig_term, sig_int, sig_hup;
static uv_timer_t files_sweep;	/* idle file servers past their time */
static struct conf *conf;       /* replaced by a reload */
static int started_root;        /* started as root: the daemon process may be no longer */
static struct store *store;
static int verbose;


/* The usage: on standard output and exit 0 when asked for (-h, --help),
 * else on standard error and exit 2. */
static void
usage(int asked)
{
	FILE *f = asked ? stdout : stderr;
	fprintf(f, "usage: pipelined [-dnvV] [-f conf]\n"
	    "  -d, --foreground   stay in the foreground and log to standard error\n"
	    "  -f, --config conf  the configuration (default: the tree's or /etc/pipelined.conf)\n"
	    "  -n, --check        check the configuration and every path it names, then exit\n"
	    "  -v, --verbose      with -n, print the configuration in effect\n"
	    "  -V, --version      the version, plugin ABI and protocol\n"
	    "  -h, --help         this help\n"
	    "See pipelined(8).\n");
	exit(asked ? 0 : 2);
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

static void sd_status(void);

static void
on_check(uv_check_t *c)
{
	feed_flush();
	sd_status();
}

/* STATUS= for systemctl status: how many jobs run now, at most once a
 * second, the last count a moment later (status_timer): a DAG of short
 * jobs changes it twice a job, and in a split daemon each is a round
 * trip to the parent on this thread. Nothing when not started by systemd
 * (no NOTIFY_SOCKET, which both processes inherit). */
#define STATUS_EVERY_S 1.0
static uv_timer_t status_timer;

static void
on_status_timer(uv_timer_t *t)
{
	(void)t;
	sd_status();
}

static void
sd_status(void)
{
	static int last = -1, on = -1;
	static double sent = -1e9;
	if (on == -1)
		on = getenv("NOTIFY_SOCKET") != NULL;
	int running = sched_running();
	if (!on || running == last)
		return;
	double wait = sent + STATUS_EVERY_S - plc_mono_secs();
	if (wait > 0) {
		if (!uv_is_active((uv_handle_t *)&status_timer))
			uv_timer_start(&status_timer, on_status_timer, (uint64_t)(wait * 1000) + 1, 0);
		return;
	}
	last = running;
	sent = plc_mono_secs();
	char st[256];
	snprintf(st, sizeof(st), "STATUS=%d job%s running, %d plugin stage%s", running,
	    running == 1 ? "" : "s", plugin_nstages(), plugin_nstages() == 1 ? "" : "s");
	priv_notify(st);
}

static void
stop(int code)
{
	priv_notify("STOPPING=1");
	sched_stop();
	unlink(conf->control_socket);
	unlink(conf->feed_socket);
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

/* The configuration file read, with the default user of a daemon started
 * as root (conf_default_user()). */
static int
load_conf(struct conf *c, const char *path, char **errs)
{
	if (conf_load(c, path, errs) == -1)
		return -1;
	return started_root ? conf_default_user(c, errs) : 0;
}

static void
on_files_sweep(uv_timer_t *t)
{
	(void)t;
	owner_files_idle(0);
}

/* SIGHUP: read the configuration again and apply at once every key that
 * can be (pipelined.conf(5), RELOADING); the keys bound at start keep their
 * running values (conf_keep_restart), and the log line names each one that
 * changed, so that it never says a value is in force when it is not. */
static void
on_hup(uv_signal_t *s, int signum)
{
	struct conf *nc = xcalloc(1, sizeof(*nc));
	char *errs = NULL;
	if (load_conf(nc, conf->path, &errs) == -1) {
		log_warnx("reload: %s does not parse; keeping the running configuration:\n%s",
		    conf->path, errs ? errs : "");
		free(errs);
		conf_free(nc);
		free(nc);
		return;
	}
	free(errs);
	char restart[512], kept[128];
	conf_keep_restart(nc, conf, restart, sizeof(restart));
	httpd_reconf(nc, kept, sizeof(kept));
	/* Split, the parent gave them (priv_reload()): the daemon process,
	 * no member of the group, cannot. */
	if (nc->gid != conf->gid && !priv_active()) {
		sock_regroup(nc->control_socket, nc->gid);
		sock_regroup(nc->feed_socket, nc->gid);
	}
	/* The parent reloads its rules too: no idle file server started
	 * under the old ones is handed out again (priv.c). */
	owner_files_idle(1);
	/* Running jobs keep a pointer to the old configuration: it is kept.
	 * The scheduler carries the resources in use over, and passes. */
	conf = nc;
	log_setlevel(nc->log_level);
	plugin_load_dir(nc->plugin_dir, &plugin_host);
	notify_reconf(nc);
	if (restart[0] == '\0' && kept[0] == '\0')
		log_info("reload: configuration %s loaded: every value is in force", nc->path);
	else
		log_warnx("reload: configuration %s loaded, but for %s%s%s%s%s: their running "
		    "values stay", nc->path, restart, *restart ? ", which need a restart" : "",
		    *restart && *kept ? ", and " : "", kept, *kept ? ", refused (above)" : "");
	sched_reconf(nc);
}

/* The privileged parent's SIGHUP: its configuration read again. */
static int
priv_reload(struct priv_rules *r)
{
	struct conf *nc = xcalloc(1, sizeof(*nc));
	char *errs = NULL;
	int rc = load_conf(nc, conf->path, &errs);
	if (rc == 0 && nc->gid != r->group)
		become_regroup(conf, nc->gid);
	if (rc == 0)
		priv_rules_load(r, nc);
	free(errs);
	conf_free(nc);
	free(nc);
	return rc;
}

/* The pid file, state_dir/pipelined.pid, holds a write lock (fcntl) for
 * the daemon's life: a second daemon on the same state directory finds
 * the lock and names its holder, whose pid the kernel reports (F_GETLK),
 * so a stale file left by a kill -9 means nothing. The lock is the
 * process's own: not inherited by children, gone with the process. */
/* Who holds the lock on byte `at` of the pid file fd: 0 when none. */
static pid_t
lock_holder(int fd, off_t at)
{
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = at, .l_len = 1 };
	return fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK ? fl.l_pid : 0;
}

/* A daemon split in two (priv.c) holds byte 0 in its privileged parent
 * and byte 1 in its daemon process; one process, the whole file. Half
 * of a split daemon is one on its way out (the other half died, and it
 * follows): waited for, up to PIDFILE_WAIT_S. */
#define PIDFILE_WAIT_S 5
static pid_t
pidfile_holder(const char *state_dir)
{
	char path[PATH_MAX];
	snprintf(path, sizeof(path), "%s/pipelined.pid", state_dir);
	int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
	if (fd == -1)
		return 0;
	pid_t p0 = 0, p1 = 0;
	for (int i = 0; i < PIDFILE_WAIT_S * 20; i++) {
		p0 = lock_holder(fd, 0);
		p1 = lock_holder(fd, 1);
		if ((p0 == 0) == (p1 == 0))
			break;
		usleep(50000);
	}
	close(fd);
	return p0 ? p0 : p1;
}

static int
pidfile_lock(const char *state_dir)
{
	char path[PATH_MAX], buf[32];
	snprintf(path, sizeof(path), "%s/pipelined.pid", state_dir);
	int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd == -1) {
		fprintf(stderr, "pipelined: %s: %s\n", path, strerror(errno));
		return -1;
	}
	struct flock fl = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
	if (fcntl(fd, F_SETLK, &fl) == -1) {
		struct flock q = { .l_type = F_WRLCK, .l_whence = SEEK_SET };
		if (fcntl(fd, F_GETLK, &q) == 0 && q.l_type != F_UNLCK)
			fprintf(stderr, "pipelined: another pipelined runs (pid %d) on %s\n",
			    (int)q.l_pid, state_dir);
		else
			fprintf(stderr, "pipelined: %s: lock: %s\n", path, strerror(errno));
		close(fd);
		return -1;
	}
	int n = snprintf(buf, sizeof(buf), "%d\n", (int)getpid());
	if (ftruncate(fd, 0) == -1 || pwrite(fd, buf, (size_t)n, 0) != n)
		log_warn("%s: %s", __func__, path);
	return fd;	/* kept open: the lock lives as long as the daemon */
}

/* Detach without lying: the parent waits until the child has bound its
 * sockets and port and loaded the store, and exits 0 only then; a child
 * that fails on the way has said why on the terminal (log_tee_stderr) and
 * its exit status becomes the parent's. Returns, in the child, the pipe
 * end that detached() writes once ready. */
static int
detach(void)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) == -1)
		fatal("pipe2");
	fflush(NULL);
	pid_t pid = fork();
	if (pid == -1)
		fatal("fork");
	if (pid > 0) {
		close(p[1]);
		char c;
		ssize_t n;
		do
			n = read(p[0], &c, 1);
		while (n == -1 && errno == EINTR);
		if (n == 1)
			_exit(0);
		int st;
		if (waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) != 0)
			_exit(WEXITSTATUS(st));
		_exit(1);
	}
	close(p[0]);
	setsid();
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		if (fd > 0)
			close(fd);
	}
	return p[1];
}

/* Ready: tell the waiting parent, and let go of its terminal. */
static void
detached(int ready_fd)
{
	log_tee_stderr(0);
	if (write(ready_fd, "1", 1) != 1)
		log_warn("%s: write", __func__);
	close(ready_fd);
	int fd = open("/dev/null", O_RDWR);
	if (fd >= 0) {
		dup2(fd, 0);
		dup2(fd, 1);
		dup2(fd, 2);
		if (fd > 2)
			close(fd);
	}
}

int
main(int argc, char **argv)
{
	const char *conf_path = NULL;
	int foreground = 0, check_only = 0, ch;
	static const struct option longopts[] = {
		{ "foreground", no_argument, NULL, 'd' },
		{ "config", required_argument, NULL, 'f' },
		{ "check", no_argument, NULL, 'n' },
		{ "verbose", no_argument, NULL, 'v' },
		{ "version", no_argument, NULL, 'V' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 }
	};
	while ((ch = getopt_long(argc, argv, "df:nvVh", longopts, NULL)) != -1) {
		switch (ch) {
		case 'h': usage(1); break;
		case 'd': foreground = 1; break;
		case 'f': conf_path = optarg; break;
		case 'n': check_only = 1; break;
		case 'v': verbose = 1; break;
		case 'V': printf("pipelined %s (plugin ABI %d, protocol %d)\n", PL_VERSION,
		    PL_ABI_VERSION, PL_PROTO_VERSION); return 0;
		default: usage(0);
		}
	}
	if (optind != argc)
		usage(0);
	if (conf_path == NULL)
		conf_path = default_conf();
	log_init(1, LOG_LVL_INFO, NULL);

	static struct conf conf0;
	conf = &conf0;
	char *errs = NULL;
	started_root = geteuid() == 0;
	if (load_conf(conf, conf_path, &errs) == -1) {
		fputs(errs ? errs : "configuration error\n", stderr);
		return 1;
	}
	pid_t other = pidfile_holder(conf->state_dir);
	if (check_only) {
		if (conf_check(conf, other > 0, &errs) == -1) {
			fputs(errs, stderr);
			return 1;
		}
		if (verbose)
			conf_print(conf, stdout);
		if (other > 0)
			printf("pipelined (pid %d) runs on this configuration: the sockets and "
			    "http_listen it holds were not checked\n", (int)other);
		printf("configuration OK\n");
		return 0;
	}
	if (other > 0) {
		fprintf(stderr, "pipelined: another pipelined runs (pid %d) on %s\n", (int)other,
		    conf->state_dir);
		return 1;
	}
	if (conf_check(conf, 0, &errs) == -1) {
		fputs(errs, stderr);
		return 1;
	}
	int ready_fd = foreground ? -1 : detach();
	/* Searchable (0711): jobs run as their submitters reach their own
	 * directories below it; nothing in it is readable by others. */
	if (plc_mkdirs(conf->state_dir, 0711) == -1) {
		fprintf(stderr, "pipelined: %s: %s\n", conf->state_dir, strerror(errno));
		return 1;
	}
	int pidfd = pidfile_lock(conf->state_dir);
	if (pidfd == -1)
		return 1;
	if (log_init(foreground, conf->log_level, conf->log_file) == -1) {
		fprintf(stderr, "pipelined: log_file %s: %s\n", conf->log_file, strerror(errno));
		return 1;
	}
	if (!foreground)
		log_tee_stderr(1);
	/* Root's last acts for the user (become.c); root is given up below,
	 * by the daemon process alone when the daemon is split. */
	int drop = conf->user[0] && geteuid() == 0;
	if (drop && become_prepare(conf) == -1)
		return 1;
	signal(SIGPIPE, SIG_IGN);
	/* Multi-user: the privileged parent forks off here, before the
	 * store, the plugins and the threads (priv.c); what follows is the
	 * daemon process, which becomes the user first, when one is set. */
	if (priv_start(conf, priv_reload, pidfd, drop ? become_drop : NULL) == -1)
		fatal("cannot start the privileged parent");
	if (drop && geteuid() == 0 && become_drop(conf) == -1)
		return 1;
	if (drop)
		log_info("became %s (uid %u): root given up%s", conf->user, (unsigned)geteuid(),
		    priv_active() ? "; the privileged parent keeps it" : "");
	proc_reserve_fd();

	char dbpath[PATH_MAX];
	snprintf(dbpath, sizeof(dbpath), "%s/pipelined.db", conf->state_dir);
	if (store_open(&store, dbpath) == -1)
		fatalx("cannot open the store %s", dbpath);
	store_set_announce(store, feed_announce);
	if (notify_start(conf, store) == -1)
		fatalx("cannot start the notification thread");
	store_set_outbox(store, notify_classify, notify_wake);
	store_set_fail(store, on_store_fail);
	/* A gc killed between its mark and its unlinks is finished before
	 * anything can reference its files again. */
	gc_finish(store, conf);

	int np = plugin_load_dir(conf->plugin_dir, &plugin_host);
	log_info("loaded %d plugin%s (%d stage%s) from %s", np, np == 1 ? "" : "s",
	    plugin_nstages(), plugin_nstages() == 1 ? "" : "s", conf->plugin_dir);

	loop = uv_default_loop();
	uv_check_init(loop, &flush);
	uv_check_start(&flush, on_check);
	uv_unref((uv_handle_t *)&flush);
	uv_timer_init(loop, &status_timer);
	uv_unref((uv_handle_t *)&status_timer);
	uv_signal_init(loop, &sig_term);
	uv_signal_start(&sig_term, on_term, SIGTERM);
	uv_signal_init(loop, &sig_int);
	uv_signal_start(&sig_int, on_term, SIGINT);
	uv_signal_init(loop, &sig_hup);
	uv_signal_start(&sig_hup, on_hup, SIGHUP);
	if (priv_active()) {
		uv_timer_init(loop, &files_sweep);
		uv_timer_start(&files_sweep, on_files_sweep, 1000, 1000);
		uv_unref((uv_handle_t *)&files_sweep);
	}

	if (httpd_start(conf, dbpath) == -1)
		fatalx("cannot serve http on %s", conf->http_listen);
	const struct listen_ctx ctx = { .loop = loop, .store = store, .conf = &conf,
		.login_code = httpd_login_code };
	if (control_listen(&ctx, conf->control_socket) == -1)
		fatalx("cannot listen on %s", conf->control_socket);
	if (feed_listen(&ctx, conf->feed_socket) == -1)
		fatalx("cannot listen on %s", conf->feed_socket);
	exec_local_run_shims(1);
	int nruns = sched_init(loop, store, conf);
	if (nruns < 0)
		fatalx("cannot load runs from the store");
	log_info("pipelined %s ready: control %s, feed %s, %d run%s known", PL_VERSION,
	    conf->control_socket, conf->feed_socket, nruns, nruns == 1 ? "" : "s");
	priv_notify("READY=1");
	if (ready_fd >= 0)
		detached(ready_fd);
	sd_status();
	feed_flush();
	uv_run(loop, UV_RUN_DEFAULT);
	return 0;
}
