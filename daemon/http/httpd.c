/*
 * httpd.c: the daemon's HTTP listener (http_listen in pipelined.conf).
 * Connections are accepted by a thread of ours that waits, without a
 * thread per client, for each request's whole header (the acceptor,
 * below: deadlines and size limits), then served by libmicrohttpd with a
 * thread per connection, so a scrape or a page never waits on the loop
 * thread or the scheduler, nor they on it.
 *
 * Routes: GET /metrics, the Prometheus text exposition (metrics.c); the
 * status page and its JSON and event stream (web.c); /login, the one-time
 * link pipelinectl web prints. Everything is read through the store's
 * read-only handles (store_ro.h; WAL: readers do not block the writer),
 * the status feed and counters kept in atomics; nothing here changes
 * anything.
 * Every request needs a credential and a Host: name the listener is
 * configured for, and sees the runs its credential may (access.c).
 */
#include <arpa/inet.h>
#include <pthread.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "pld.h"
#include "http.h"
#include "access.h"
#include "metrics.h"
#include "plio.h"

static struct MHD_Daemon *httpd;

/* What every response says about itself: only our own scripts, styles
 * and connections, no framing, no sniffing, no referrer. */
#define CSP "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self';" \
    " connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

/* Every connection serves one request (Connection: close): the next
 * request's header goes through the acceptor's checks as the first did. */
static void
headers(struct MHD_Response *r, const char *type)
{
	MHD_add_response_header(r, "Content-Type", type);
	MHD_add_response_header(r, "Cache-Control", "no-store");
	MHD_add_response_header(r, "Content-Security-Policy", CSP);
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	MHD_add_response_header(r, "Connection", "close");
}

static enum MHD_Result
reply(struct MHD_Connection *c, unsigned int status, const char *type, char *body,
    size_t len)
{
	struct MHD_Response *r = MHD_create_response_from_buffer(len, body,
	    MHD_RESPMEM_MUST_FREE);
	if (r == NULL) {
		free(body);
		return MHD_NO;
	}
	headers(r, type);
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result
reply_text(struct MHD_Connection *c, unsigned int status, const char *text)
{
	char *b = strdup(text);
	return b ? reply(c, status, "text/plain; charset=utf-8", b, strlen(b)) : MHD_NO;
}

/* ---- access ------------------------------------------------------------ */

/*
 * Every request needs a credential, on loopback too: the bearer token
 * (http_token: sees every run, and the only way to /metrics but an admin's
 * session), or the session cookie /login sets for a one-time link that
 * pipelinectl web printed, which sees what the user who ran it may see
 * (access.c). The cookie is a random session id, never the token; the
 * daemon keeps its HMAC with an expiry, the viewer and the uid whose it
 * is. Tokens, codes and session ids are compared as HMACs under a key
 * drawn at start, so the time a comparison takes says nothing of where or
 * whether the lengths differ.
 *
 * Codes and sessions are kept per user: a user holds at most
 * CODES_PER_USER unused links and SESSIONS_PER_USER sessions, and a new
 * one replaces that user's oldest, never another user's (a member's
 * logins used to push an admin's session out of a table shared by all).
 * All users together hold at most CODES_MAX and SESSIONS_MAX; past that a
 * new one is refused until one ends.
 */
static char token[256];
static unsigned char hmac_key[32];
static pthread_mutex_t codes_mtx = PTHREAD_MUTEX_INITIALIZER;
#define CODE_LIFETIME 600
#define CODES_PER_USER 8
#define CODES_MAX 1024
#define SESSION_LIFETIME (8 * 3600)
#define SESSIONS_PER_USER 16
#define SESSIONS_MAX 4096

/* A login code or a session: the HMAC of its secret, when it ends, the
 * viewer it gives (access.c) and the uid whose it is; a session's serial
 * number and the connections it holds open (the acceptor's bounds). */
struct cred {
	unsigned char mac[32];
	double until;
	int64_t viewer;
	uid_t uid;
	uint64_t serial;
	int conns;
};
struct creds {
	struct cred *v;
	int n, cap, per_user, max;
};
static struct creds codes = { NULL, 0, 0, CODES_PER_USER, CODES_MAX };
static struct creds sessions = { NULL, 0, 0, SESSIONS_PER_USER, SESSIONS_MAX };
static uint64_t next_serial = 1;
static unsigned char token_mac[32];
/* The values a reload may change while requests are served (token,
 * token_mac, hosts, any_numeric, header_timeout): read under it, written by
 * httpd_reconf() on the loop thread. */
static pthread_rwlock_t cfg_lk = PTHREAD_RWLOCK_INITIALIZER;

static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void
key_draw(void)
{
	key_ok = RAND_bytes(hmac_key, sizeof(hmac_key)) == 1;
	if (!key_ok)
		log_warnx("key_draw: no random bytes for the comparison key");
}

/* The HMAC of s under the key drawn at start: 0, or -1. */
static int
mac(const char *s, unsigned char out[32])
{
	unsigned int n = 0;
	pthread_once(&key_once, key_draw);
	if (!key_ok || HMAC(EVP_sha256(), hmac_key, sizeof(hmac_key), (const unsigned char *)s,
	    strlen(s), out, &n) == NULL || n != 32)
		return -1;
	return 0;
}

int
httpd_equal(const char *a, const char *b)
{
	unsigned char ha[32], hb[32];
	if (*a == '\0' || *b == '\0' || mac(a, ha) == -1 || mac(b, hb) == -1)
		return 0;
	return CRYPTO_memcmp(ha, hb, sizeof(ha)) == 0;
}

static int
random_hex(char *out, size_t nbytes)
{
	unsigned char r[32];
	if (nbytes > sizeof(r) || RAND_bytes(r, (int)nbytes) != 1)
		return -1;
	for (size_t i = 0; i < nbytes; i++)
		snprintf(out + 2 * i, 3, "%02x", r[i]);
	return 0;
}

/*
 * Keep a new credential, the HMAC of its secret m, for uid: after what
 * has expired is dropped, in the place of uid's oldest when uid holds
 * per_user already, else a new entry while all hold fewer than max.
 * Returns it, or NULL (the set is full of other users' live ones). Under
 * codes_mtx.
 */
static struct cred *
creds_add(struct creds *s, const unsigned char m[32], double lifetime, int64_t viewer,
    uid_t uid)
{
	double now = now_wall();
	int w = 0, mine = 0, oldest = -1;
	for (int i = 0; i < s->n; i++)
		if (s->v[i].until > now)
			s->v[w++] = s->v[i];
	s->n = w;
	for (int i = 0; i < s->n; i++) {
		if (s->v[i].uid != uid)
			continue;
		mine++;
		if (oldest == -1 || s->v[i].until < s->v[oldest].until)
			oldest = i;
	}
	struct cred *c;
	if (mine >= s->per_user) {
		c = &s->v[oldest];
	} else if (s->n >= s->max) {
		return NULL;
	} else {
		if (s->n == s->cap) {
			int ncap = s->cap ? 2 * s->cap : 16;
			struct cred *nv = realloc(s->v, (size_t)ncap * sizeof(*nv));
			if (nv == NULL)
				return NULL;
			s->v = nv;
			s->cap = ncap;
		}
		c = &s->v[s->n++];
	}
	memcpy(c->mac, m, sizeof(c->mac));
	c->until = now + lifetime;
	c->viewer = viewer;
	c->uid = uid;
	c->serial = next_serial++;
	c->conns = 0;
	return c;
}

/* The live credential whose secret's HMAC is m, or NULL. Under codes_mtx;
 * the pointer is good until the lock is let go. */
static struct cred *
creds_find(struct creds *s, const unsigned char m[32])
{
	double now = now_wall();
	struct cred *found = NULL;
	for (int i = 0; i < s->n; i++)
		if (s->v[i].until > now && CRYPTO_memcmp(s->v[i].mac, m, 32) == 0)
			found = &s->v[i];
	return found;
}

/* A one-time login code (pipelinectl web) of uid, good for ten minutes;
 * its session sees what viewer may (access.c). 0, or -1: no random
 * bytes, or every place held by other users' codes. */
int
httpd_login_code(char *out, size_t outsz, int64_t viewer, uid_t uid)
{
	unsigned char m[32];
	if (outsz < 33 || random_hex(out, 16) == -1 || mac(out, m) == -1)
		return -1;
	pthread_mutex_lock(&codes_mtx);
	struct cred *c = creds_add(&codes, m, CODE_LIFETIME, viewer, uid);
	pthread_mutex_unlock(&codes_mtx);
	if (c == NULL)
		log_warnx("httpd_login_code: %d login links unused: none for uid %u until one "
		    "is used or expires", CODES_MAX, (unsigned)uid);
	return c ? 0 : -1;
}

/* Take a code: 0 with its viewer and uid, -1 when it is not good. */
static int
code_take(const char *code, int64_t *viewer, uid_t *uid)
{
	unsigned char m[32];
	if (*code == '\0' || mac(code, m) == -1)
		return -1;
	pthread_mutex_lock(&codes_mtx);
	struct cred *c = creds_find(&codes, m);
	if (c != NULL) {
		c->until = 0;	/* once */
		*viewer = c->viewer;
		*uid = c->uid;
	}
	pthread_mutex_unlock(&codes_mtx);
	return c ? 0 : -1;
}

/* A new session of uid for viewer: its id in id (65 bytes), 0 or -1. The
 * user's oldest session makes room (SESSIONS_PER_USER). */
static int
session_new(int64_t viewer, uid_t uid, char *id)
{
	unsigned char m[32];
	if (random_hex(id, 32) == -1 || mac(id, m) == -1)
		return -1;
	pthread_mutex_lock(&codes_mtx);
	struct cred *c = creds_add(&sessions, m, SESSION_LIFETIME, viewer, uid);
	pthread_mutex_unlock(&codes_mtx);
	if (c == NULL)
		log_warnx("session_new: %d sessions open: none for uid %u until one expires",
		    SESSIONS_MAX, (unsigned)uid);
	return c ? 0 : -1;
}

/* Who a request is: the viewer its credential gives (access.c), or
 * NO_VIEWER; for a session, its serial number and uid (serial 0: the
 * token). */
#define NO_VIEWER ((int64_t)-2)
struct who {
	int64_t viewer;
	uint64_t serial;
	uid_t uid;
};

static struct who
request_who(struct MHD_Connection *c)
{
	const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
	unsigned char m[32];
	struct who w = { NO_VIEWER, 0, (uid_t)-1 };
	if (h != NULL && strncmp(h, "Bearer ", 7) == 0 && h[7] != '\0' && mac(h + 7, m) == 0) {
		pthread_rwlock_rdlock(&cfg_lk);
		int ok = token[0] != '\0' && CRYPTO_memcmp(m, token_mac, sizeof(m)) == 0;
		pthread_rwlock_unlock(&cfg_lk);
		if (ok) {
			w.viewer = ACCESS_ALL;
			return w;
		}
	}
	const char *k = MHD_lookup_connection_value(c, MHD_COOKIE_KIND, "pl_session");
	if (k == NULL || *k == '\0' || mac(k, m) == -1)
		return w;
	pthread_mutex_lock(&codes_mtx);
	struct cred *s = creds_find(&sessions, m);
	if (s != NULL) {
		w.viewer = s->viewer;
		w.serial = s->serial;
		w.uid = s->uid;
	}
	pthread_mutex_unlock(&codes_mtx);
	return w;
}

/*
 * Connections held per session and per user (http_max_per_session,
 * http_max_per_user), beside libmicrohttpd's per address: so one user's
 * pages, or a flood of connections that ask for a large reply and never
 * read it, cannot take the connections a scrape needs (a user's
 * connections share one address behind a proxy or on loopback). The
 * acceptor reads the session cookie from the header it peeked and counts
 * the connection against its session and its uid before handing it on
 * (held[fd]); one over either bound gets 429 there and never reaches
 * libmicrohttpd. The count ends when libmicrohttpd closes the connection
 * (on_conn_closed(), which it calls before it closes the descriptor). A
 * request whose session libmicrohttpd reads is not the one the acceptor
 * counted is refused (on_request()), so no cookie is read one way there
 * and another here.
 */
struct held {
	int on;
	uint64_t serial;
	uid_t uid;
};
static struct held *held;	/* by descriptor */
static int nheld;
static struct ucount {
	uid_t uid;
	int n;
} *ucounts;
static int nucounts, ucounts_cap;
static int max_per_session, max_per_user;

static struct ucount *
ucount_of(uid_t uid, int add)
{
	for (int i = 0; i < nucounts; i++)
		if (ucounts[i].uid == uid)
			return &ucounts[i];
	if (!add)
		return NULL;
	if (nucounts == ucounts_cap) {
		int ncap = ucounts_cap ? 2 * ucounts_cap : 16;
		struct ucount *nu = realloc(ucounts, (size_t)ncap * sizeof(*nu));
		if (nu == NULL)
			return NULL;
		ucounts = nu;
		ucounts_cap = ncap;
	}
	ucounts[nucounts] = (struct ucount){ uid, 0 };
	return &ucounts[nucounts++];
}

/* The connection on fd ended: its session and user hold one fewer. Once
 * per count; under codes_mtx. */
static void
held_end_locked(int fd)
{
	if (fd < 0 || fd >= nheld || !held[fd].on)
		return;
	held[fd].on = 0;
	for (int i = 0; i < sessions.n; i++)
		if (sessions.v[i].serial == held[fd].serial && sessions.v[i].conns > 0)
			sessions.v[i].conns--;
	struct ucount *u = ucount_of(held[fd].uid, 0);
	if (u != NULL && --u->n <= 0)
		*u = ucounts[--nucounts];
}

static void
held_end(int fd)
{
	pthread_mutex_lock(&codes_mtx);
	held_end_locked(fd);
	pthread_mutex_unlock(&codes_mtx);
}

/* The value of the first pl_session cookie of a request header (buf, len
 * bytes, complete) into out: 1, or 0 when it has none. */
static int
head_session(const char *buf, size_t len, char *out, size_t outsz)
{
	for (const char *p = buf, *end = buf + len; p < end; ) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		size_t ll = nl ? (size_t)(nl - p) : (size_t)(end - p);
		if (ll > 7 && strncasecmp(p, "Cookie:", 7) == 0) {
			for (const char *q = p + 7; q < p + ll; ) {
				while (q < p + ll && (*q == ' ' || *q == '\t' || *q == ';'))
					q++;
				size_t cl = 0;
				while (q + cl < p + ll && q[cl] != ';' && q[cl] != '\r')
					cl++;
				if (cl > 11 && strncmp(q, "pl_session=", 11) == 0) {
					snprintf(out, outsz, "%.*s", (int)(cl - 11), q + 11);
					return 1;
				}
				q += cl;
				if (q < p + ll && *q == '\r')
					break;
			}
		}
		p += ll + 1;
	}
	return 0;
}

/*
 * May a connection whose request header is buf (len bytes) be served on
 * fd? 0: yes, counted against its session when it names a live one;
 * -1: its session or user holds its bound already, with the answer's
 * text in why.
 */
static int
held_begin(int fd, const char *buf, size_t len, char *why, size_t whylen)
{
	char id[80];
	unsigned char m[32];
	if (!head_session(buf, len, id, sizeof(id)) || *id == '\0' || mac(id, m) == -1)
		return 0;
	int rc = 0;
	pthread_mutex_lock(&codes_mtx);
	held_end_locked(fd);	/* a count the descriptor's last connection left */
	struct cred *s = creds_find(&sessions, m);
	struct ucount *u = s ? ucount_of(s->uid, 1) : NULL;
	if (s == NULL) {
		;	/* not a session: libmicrohttpd's side answers 401 */
	} else if (max_per_session > 0 && s->conns >= max_per_session) {
		snprintf(why, whylen, "this session has %d connections open "
		    "(http_max_per_session): try again when one has ended\n", s->conns);
		rc = -1;
	} else if (u == NULL || (max_per_user > 0 && u->n >= max_per_user)) {
		snprintf(why, whylen, "this user's sessions have %d connections open "
		    "(http_max_per_user): try again when one has ended\n", u ? u->n : 0);
		rc = -1;
	} else {
		if (fd >= nheld) {
			int nn = fd + 64;
			struct held *nh = realloc(held, (size_t)nn * sizeof(*nh));
			if (nh == NULL) {
				pthread_mutex_unlock(&codes_mtx);
				snprintf(why, whylen, "out of memory\n");
				return -1;
			}
			memset(nh + nheld, 0, (size_t)(nn - nheld) * sizeof(*nh));
			held = nh;
			nheld = nn;
		}
		held[fd] = (struct held){ 1, s->serial, s->uid };
		s->conns++;
		u->n++;
	}
	if (u != NULL && u->n == 0)
		*u = ucounts[--nucounts];
	pthread_mutex_unlock(&codes_mtx);
	return rc;
}

/* Was the connection on fd counted against the session serial? */
static int
held_by(int fd, uint64_t serial)
{
	pthread_mutex_lock(&codes_mtx);
	int ok = fd >= 0 && fd < nheld && held[fd].on && held[fd].serial == serial;
	pthread_mutex_unlock(&codes_mtx);
	return ok;
}

/* libmicrohttpd is done with a connection; it closes the descriptor after
 * this returns. */
static void
on_conn_closed(void *cls, struct MHD_Connection *c, void **socket_ctx,
    enum MHD_ConnectionNotificationCode code)
{
	if (code != MHD_CONNECTION_NOTIFY_CLOSED)
		return;
	const union MHD_ConnectionInfo *i = MHD_get_connection_info(c,
	    MHD_CONNECTION_INFO_CONNECTION_FD);
	if (i != NULL)
		held_end(i->connect_fd);
}

static enum MHD_Result
login(struct MHD_Connection *c)
{
	const char *code = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "code");
	const char *run = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run");
	int64_t viewer;
	uid_t uid;
	char id[65];
	if (code == NULL || code_take(code, &viewer, &uid) == -1)
		return reply_text(c, MHD_HTTP_UNAUTHORIZED,
		    "this login link is not valid (used, expired, or never issued): "
		    "run pipelinectl web for a new one\n");
	if (session_new(viewer, uid, id) == -1)
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "no session could be made: too "
		    "many open (see the daemon's log)\n");
	struct MHD_Response *r = MHD_create_response_from_buffer(0, "", MHD_RESPMEM_PERSISTENT);
	if (r == NULL)
		return MHD_NO;
	char cookie[200], loc[200];
	snprintf(cookie, sizeof(cookie), "pl_session=%s; Path=/; Max-Age=%d; HttpOnly; "
	    "SameSite=Strict", id, SESSION_LIFETIME);
	snprintf(loc, sizeof(loc), "/%s%s", run && valid_run_ref(run) && strlen(run) < 128 ?
	    "#run=" : "", run && valid_run_ref(run) && strlen(run) < 128 ? run : "");
	headers(r, "text/plain; charset=utf-8");
	MHD_add_response_header(r, "Set-Cookie", cookie);
	MHD_add_response_header(r, "Location", loc);
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_SEE_OTHER, r);
	MHD_destroy_response(r);
	return ret;
}

/*
 * Is host (a Host: header) one of names (space-separated host names or
 * addresses, without ports)? "NAME", "NAME:PORT", "[V6]" and "[V6]:PORT"
 * are taken; names compare without case. So a page a browser loaded from
 * another name (DNS rebinding) is not answered.
 */
int
httpd_host_allowed(const char *host, const char *names)
{
	if (host == NULL || names == NULL)
		return 0;
	const char *h = host, *end;
	if (*h == '[') {
		h++;
		end = strchr(h, ']');
		if (end == NULL || (end[1] != '\0' && end[1] != ':'))
			return 0;
	} else {
		end = strchr(h, ':');
		if (end == NULL)
			end = h + strlen(h);
	}
	if (*end == ':' || (*end == ']' && end[1] == ':')) {
		const char *p = strchr(end, ':') + 1;
		if (*p == '\0')
			return 0;
		for (; *p; p++)
			if (*p < '0' || *p > '9')
				return 0;
	}
	size_t hl = (size_t)(end - h);
	if (hl == 0)
		return 0;
	for (const char *n = names; *n;) {
		while (*n == ' ' || *n == ',')
			n++;
		size_t nl = strcspn(n, " ,");
		if (nl == hl && strncasecmp(n, h, hl) == 0)
			return 1;
		n += nl;
	}
	return 0;
}

/* ---- /api/events ------------------------------------------------------- */

/* Event streams open now: at most http_max_streams, below the connection
 * limit, so a scrape always finds a connection. */
static int nstreams, max_streams;

static ssize_t
sse_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
	ssize_t n = web_sse_read(cls, buf, max);
	return n < 0 ? MHD_CONTENT_READER_END_OF_STREAM : n;
}

static void
sse_free(void *cls)
{
	web_sse_close(cls);
	__atomic_sub_fetch(&nstreams, 1, __ATOMIC_RELAXED);
}

static enum MHD_Result
events(struct MHD_Connection *c, int64_t viewer)
{
	const char *run = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run");
	const char *last = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Last-Event-ID");
	const char *since = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "since");
	/* A reconnect resumes after the last event the browser saw. */
	long long from = last ? atoll(last) : since ? atoll(since) : 0;
	if (__atomic_add_fetch(&nstreams, 1, __ATOMIC_RELAXED) >
	    __atomic_load_n(&max_streams, __ATOMIC_RELAXED)) {
		__atomic_sub_fetch(&nstreams, 1, __ATOMIC_RELAXED);
		struct MHD_Response *r = MHD_create_response_from_buffer(
		    sizeof("too many status pages open (http_max_streams)\n") - 1,
		    "too many status pages open (http_max_streams)\n", MHD_RESPMEM_PERSISTENT);
		if (r == NULL)
			return MHD_NO;
		headers(r, "text/plain; charset=utf-8");
		MHD_add_response_header(r, "Retry-After", "10");
		enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_SERVICE_UNAVAILABLE, r);
		MHD_destroy_response(r);
		return ret;
	}
	struct sse *s = web_sse_open(run, from, viewer);
	if (s == NULL) {
		__atomic_sub_fetch(&nstreams, 1, __ATOMIC_RELAXED);
		return reply_text(c, MHD_HTTP_SERVICE_UNAVAILABLE, "the status feed is not reachable\n");
	}
	struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384,
	    sse_cb, s, sse_free);
	if (r == NULL) {
		sse_free(s);
		return MHD_NO;
	}
	headers(r, "text/event-stream; charset=utf-8");
	enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static char hosts[600];
static int any_numeric;	/* listening on every address: numeric Host: names too */

/* Is a Host: header an address written as a number ("10.0.0.2:9464",
 * "[fe80::1]")? */
static int
host_numeric(const char *host)
{
	char h[64];
	unsigned char a[16];
	if (host == NULL)
		return 0;
	if (*host == '[') {
		const char *rb = strchr(host, ']');
		if (rb == NULL || (size_t)(rb - host - 1) >= sizeof(h))
			return 0;
		snprintf(h, sizeof(h), "%.*s", (int)(rb - host - 1), host + 1);
		return inet_pton(AF_INET6, h, a) == 1;
	}
	snprintf(h, sizeof(h), "%.*s", (int)strcspn(host, ":"), host);
	return inet_pton(AF_INET, h, a) == 1;
}

static int is_wildcard(const struct sockaddr_storage *ss);

static enum MHD_Result
on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
    const char *version, const char *upload, size_t *upload_size, void **ctx)
{
	if (strcmp(method, "GET") != 0 && strcmp(method, "HEAD") != 0) {
		/* Nothing here takes a body or changes anything. */
		return reply_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET\n");
	}
	const char *host = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Host");
	pthread_rwlock_rdlock(&cfg_lk);
	int host_ok = httpd_host_allowed(host, hosts) || (any_numeric && host_numeric(host));
	pthread_rwlock_unlock(&cfg_lk);
	if (!host_ok)
		return reply_text(c, 421, "this listener does not answer for that Host: name "
		    "(http_host in pipelined.conf)\n");
	if (strcmp(url, "/login") == 0)
		return login(c);
	struct who w = request_who(c);
	int64_t viewer = w.viewer;
	if (viewer == NO_VIEWER)
		return reply_text(c, MHD_HTTP_UNAUTHORIZED,
		    "a credential is needed: run pipelinectl web for a login link, or send "
		    "http_token as a bearer token\n");
	const union MHD_ConnectionInfo *fdi = MHD_get_connection_info(c,
	    MHD_CONNECTION_INFO_CONNECTION_FD);
	if (w.serial != 0 && (fdi == NULL || !held_by(fdi->connect_fd, w.serial)))
		return reply_text(c, MHD_HTTP_BAD_REQUEST, "the session cookie must come once, "
		    "in a Cookie: header of its own or first among the cookies\n");
	if (strcmp(url, "/metrics") == 0) {
		/* Every run's labels: the token's, or an admin's session. */
		if (viewer != ACCESS_ALL)
			return reply_text(c, MHD_HTTP_FORBIDDEN, "/metrics shows every run: it needs "
			    "http_token as a bearer token, or the session of an admin\n");
		size_t len;
		char *body = metrics_render(&len);
		if (body == NULL)
			return reply_text(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
			    "the store could not be read; see the daemon's log\n");
		return reply(c, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8",
		    body, len);
	}
	if (strcmp(url, "/api/events") == 0)
		return events(c, viewer);
	if (strncmp(url, "/api/", 5) == 0) {
		size_t len = 0;
		int status;
		char err[512];
		char *b = web_api(url, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "run"),
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "job"),
		    MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "offset"), viewer, &len,
		    &status, err, sizeof(err));
		if (b == NULL)
			return reply_text(c, (unsigned)status, err);
		return reply(c, MHD_HTTP_OK, "application/json", b, len);
	}
	if (strcmp(url, "/favicon.ico") == 0)	/* none: say so without an error */
		return reply(c, MHD_HTTP_NO_CONTENT, "text/plain", strdup(""), 0);
	const char *type;
	size_t len;
	char *b = web_static(url, &type, &len);
	if (b != NULL)
		return reply(c, MHD_HTTP_OK, type, b, len);
	return reply_text(c, MHD_HTTP_NOT_FOUND, "not found\n");
}

/* ---- the acceptor ------------------------------------------------------ */

/*
 * Connections are accepted here, not by libmicrohttpd: a connection is
 * handed to it (MHD_add_connection) only once its request's whole header
 * has arrived, within http_header_timeout of the connection, with a
 * request line of at most HEAD_MAX_LINE bytes and a header of at most
 * HEAD_MAX. The header is read with MSG_PEEK, so libmicrohttpd reads it
 * again as sent. A slow client (a header line every few seconds) costs a
 * descriptor and a list entry here until its deadline, never a thread;
 * one over a limit gets 414 or 431 with the headers every answer has.
 * At most http_max_connections wait here; one more pushes out the one
 * that has waited longest.
 */
#define HEAD_MAX_LINE 8192
#define HEAD_MAX 16384

int
httpd_head_scan(const char *buf, size_t len)
{
	const char *nl = memchr(buf, '\n', len);
	if (nl == NULL)
		return len > HEAD_MAX_LINE ? HEAD_URI_LONG : HEAD_MORE;
	if ((size_t)(nl - buf) > HEAD_MAX_LINE)
		return HEAD_URI_LONG;
	/* The header ends at an empty line: "\n\r\n" or "\n\n". */
	for (const char *p = nl; p != NULL; ) {
		size_t left = (size_t)(buf + len - p);	/* from this '\n' on */
		if ((left >= 2 && p[1] == '\n') || (left >= 3 && p[1] == '\r' && p[2] == '\n'))
			return (size_t)(p - buf) + 3 <= HEAD_MAX ? HEAD_DONE : HEAD_TOO_LARGE;
		p = left > 1 ? memchr(p + 1, '\n', left - 1) : NULL;
	}
	return len >= HEAD_MAX ? HEAD_TOO_LARGE : HEAD_MORE;
}

struct pend {
	int fd;
	struct sockaddr_storage sa;
	socklen_t salen;
	double deadline;
	int closing;		/* an answer was sent: reading what is left, then closed */
	int dead;		/* closed: freed after the events at hand */
	struct pend *next, *prev;
};

static int lfd = -1, epfd = -1, stopfd[2] = { -1, -1 };
static pthread_t acc_thread;
static int acc_running;
static struct pend *phead, *ptail;
static struct pend *grave;	/* closed in this pass of acc_main(), freed after it */
static int npend, max_pend;
static double header_timeout;

static void
pend_close(struct pend *p)
{
	if (p->prev)
		p->prev->next = p->next;
	else
		phead = p->next;
	if (p->next)
		p->next->prev = p->prev;
	else
		ptail = p->prev;
	npend--;
	if (p->fd >= 0)
		close(p->fd);
	/* An event for it may still be among those epoll_wait() returned. */
	p->dead = 1;
	p->next = grave;
	grave = p;
}

/* Answer 414, 431 or 429 with the headers of every answer, then read what
 * the client still sends for a second (a close with unread data would
 * reset the connection before the client read the answer). */
static void
pend_refuse(struct pend *p, int status, const char *body)
{
	const char *why = status == 414 ? "URI Too Long" : status == 431 ?
	    "Request Header Fields Too Large" : "Too Many Requests";
	char buf[2048];
	int n = snprintf(buf, sizeof(buf), "HTTP/1.1 %d %s\r\nContent-Type: text/plain; "
	    "charset=utf-8\r\nCache-Control: no-store\r\nContent-Security-Policy: %s\r\n"
	    "X-Content-Type-Options: nosniff\r\nReferrer-Policy: no-referrer\r\n%s"
	    "Connection: close\r\nContent-Length: %zu\r\n\r\n%s", status, why, CSP,
	    status == 429 ? "Retry-After: 10\r\n" : "", strlen(body), body);
	if (n < 0 || n >= (int)sizeof(buf) ||
	    send(p->fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT) != n) {
		pend_close(p);
		return;
	}
	shutdown(p->fd, SHUT_WR);
	p->closing = 1;
	p->deadline = plc_mono_secs() + 1;
}

/* Read what a client sent so far: hand it on, refuse it, or wait. */
static void
pend_read(struct pend *p)
{
	static char buf[HEAD_MAX];
	if (p->dead)
		return;
	if (p->closing) {
		ssize_t n;
		while ((n = recv(p->fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0)
			;
		if (n == 0 || (errno != EAGAIN && errno != EINTR))
			pend_close(p);
		return;
	}
	ssize_t n = recv(p->fd, buf, sizeof(buf), MSG_PEEK | MSG_DONTWAIT);
	if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
		pend_close(p);
		return;
	}
	if (n < 0)
		return;
	switch (httpd_head_scan(buf, (size_t)n)) {
	case HEAD_MORE:
		return;
	case HEAD_URI_LONG:
		pend_refuse(p, 414, "the request line is too long\n");
		return;
	case HEAD_TOO_LARGE:
		pend_refuse(p, 431, "the request header is too large\n");
		return;
	}
	char why[256];
	if (held_begin(p->fd, buf, (size_t)n, why, sizeof(why)) == -1) {
		pend_refuse(p, 429, why);
		return;
	}
	epoll_ctl(epfd, EPOLL_CTL_DEL, p->fd, NULL);
	/* libmicrohttpd closes the socket if it cannot take it (its
	 * connection limit, or the per-address one), telling on_conn_closed()
	 * first if it had made a connection of it. */
	int fd = p->fd;
	if (MHD_add_connection(httpd, fd, (struct sockaddr *)&p->sa, p->salen) != MHD_YES)
		held_end(fd);
	p->fd = -1;
	pend_close(p);
}

static void
acc_accept(void)
{
	for (;;) {
		struct pend *p = xcalloc(1, sizeof(*p));
		p->salen = sizeof(p->sa);
		p->fd = accept4(lfd, (struct sockaddr *)&p->sa, &p->salen,
		    SOCK_NONBLOCK | SOCK_CLOEXEC);
		if (p->fd == -1) {
			int e = errno;
			free(p);
			if ((e == EMFILE || e == ENFILE) && phead != NULL) {
				pend_close(phead);	/* make room: the longest waiting */
				continue;
			}
			if (e == EMFILE || e == ENFILE)
				log_warnx("acc_accept: out of descriptors (http_max_connections "
				    "= %d)", max_pend);
			return;
		}
		if (npend >= max_pend)
			pend_close(phead);
		pthread_rwlock_rdlock(&cfg_lk);
		p->deadline = plc_mono_secs() + header_timeout;
		pthread_rwlock_unlock(&cfg_lk);
		p->prev = ptail;
		if (ptail)
			ptail->next = p;
		else
			phead = p;
		ptail = p;
		npend++;
		struct epoll_event ev = { .events = EPOLLIN | EPOLLET | EPOLLRDHUP, .data.ptr = p };
		if (epoll_ctl(epfd, EPOLL_CTL_ADD, p->fd, &ev) == -1) {
			pend_close(p);
			continue;
		}
		pend_read(p);	/* the header may be here already */
	}
}

static void
grave_free(void)
{
	while (grave) {
		struct pend *p = grave;
		grave = p->next;
		free(p);
	}
}

static void *
acc_main(void *arg)
{
	struct epoll_event ev[64];
	for (;;) {
		int n = epoll_wait(epfd, ev, 64, 250);
		for (int i = 0; i < n; i++) {
			if (ev[i].data.ptr == &lfd)
				acc_accept();
			else if (ev[i].data.ptr == stopfd)
				goto out;
			else
				pend_read(ev[i].data.ptr);
		}
		/* Past their deadline: dropped without an answer. */
		double now = plc_mono_secs();
		for (struct pend *p = phead, *next; p; p = next) {
			next = p->next;
			if (p->deadline <= now)
				pend_close(p);
		}
		grave_free();
	}
out:
	while (phead)
		pend_close(phead);
	grave_free();
	return NULL;
}

static int
acc_start(const struct sockaddr_storage *ss, socklen_t len, const char *addr)
{
	int one = 1;
	lfd = socket(ss->ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (lfd == -1 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) == -1 ||
	    bind(lfd, (const struct sockaddr *)ss, len) == -1 || listen(lfd, 1024) == -1) {
		log_warn("acc_start: %s", addr);
		return -1;
	}
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd == -1 || pipe2(stopfd, O_CLOEXEC) == -1) {
		log_warn("acc_start: epoll");
		return -1;
	}
	struct epoll_event el = { .events = EPOLLIN, .data.ptr = &lfd };
	struct epoll_event es = { .events = EPOLLIN, .data.ptr = stopfd };
	if (epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &el) == -1 ||
	    epoll_ctl(epfd, EPOLL_CTL_ADD, stopfd[0], &es) == -1 ||
	    pthread_create(&acc_thread, NULL, acc_main, NULL) != 0) {
		log_warn("acc_start: epoll_ctl");
		return -1;
	}
	acc_running = 1;
	return 0;
}

static void
acc_stop(void)
{
	if (acc_running) {
		if (write(stopfd[1], "x", 1) != 1)
			log_warn("acc_stop: write");
		pthread_join(acc_thread, NULL);
		acc_running = 0;
	}
	int *fds[] = { &lfd, &epfd, &stopfd[0], &stopfd[1] };
	for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
		if (*fds[i] >= 0) {
			close(*fds[i]);
			*fds[i] = -1;
		}
}

static int
is_wildcard(const struct sockaddr_storage *ss)
{
	if (ss->ss_family == AF_INET)
		return ((const struct sockaddr_in *)ss)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)ss)->sin6_addr);
}

static struct sockaddr_storage listen_ss;	/* http_listen, as bound at start */

/* The bearer token, checked as at start: 16 characters or more, and
 * required off loopback. Called with cfg_lk held for writing, or before
 * the listener serves. */
static int
set_token(const char *t, char *err, size_t errsz)
{
	unsigned char m[32];
	if (httpd_token_problem(&listen_ss, t, err, errsz) == -1)
		return -1;
	if (t[0] != '\0' && mac(t, m) == -1) {
		snprintf(err, errsz, "http_token: no key to compare it under");
		return -1;
	}
	snprintf(token, sizeof(token), "%s", t);
	memcpy(token_mac, m, sizeof(m));
	return 0;
}

/* The names this listener answers for: http_host, or the listen address
 * and localhost. */
static void
set_hosts(const char *http_host)
{
	any_numeric = 0;
	if (http_host[0] != '\0') {
		snprintf(hosts, sizeof(hosts), "%s", http_host);
		return;
	}
	char addr[INET6_ADDRSTRLEN] = "";
	if (listen_ss.ss_family == AF_INET)
		inet_ntop(AF_INET, &((struct sockaddr_in *)&listen_ss)->sin_addr, addr, sizeof(addr));
	else
		inet_ntop(AF_INET6, &((struct sockaddr_in6 *)&listen_ss)->sin6_addr, addr,
		    sizeof(addr));
	snprintf(hosts, sizeof(hosts), "%s localhost", addr);
	/* On every address: any address written as a number (a page that
	 * rebinds a name to us sends the name). */
	any_numeric = is_wildcard(&listen_ss);
}

int
httpd_start(const struct conf *conf, const char *dbpath)
{
	struct sockaddr_storage ss;
	socklen_t len;
	char err[256];
	const char *listen = conf->http_listen;

	if (listen == NULL || *listen == '\0')
		return 0;
	if (httpd_parse_addr(listen, &ss, &len, err, sizeof(err)) == -1) {
		log_warnx("httpd_start: http_listen %s", err);
		return -1;
	}
	listen_ss = ss;
	if (set_token(conf->http_token, err, sizeof(err)) == -1) {
		log_warnx("httpd_start: %s", err);
		return -1;
	}
	set_hosts(conf->http_host);
	max_streams = conf->http_max_streams;
	max_per_session = conf->http_max_per_session;
	max_per_user = conf->http_max_per_user;
	max_pend = conf->http_max_connections;
	header_timeout = conf->http_header_timeout;
	if (metrics_init(dbpath) == -1)
		return -1;
	web_init(dbpath, conf->feed_socket, conf->state_dir, conf->web_dir);
	unsigned int flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
	    MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
	/* A thread per connection: a page's event stream blocks on the feed
	 * in its own thread; scrapes and page requests are milliseconds. The
	 * threads are bounded by http_max_connections, the streams among them
	 * by http_max_streams; a connection that makes no progress for
	 * http_timeout (a page that stopped reading) is closed. */
	httpd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, NULL,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned int)conf->http_max_connections,
	    MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned int)conf->http_max_per_ip,
	    MHD_OPTION_CONNECTION_TIMEOUT, (unsigned int)(conf->http_timeout < 1 ? 1 :
	    conf->http_timeout),
	    MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(4 * HEAD_MAX),
	    MHD_OPTION_NOTIFY_CONNECTION, on_conn_closed, NULL,
	    MHD_OPTION_END);
	if (httpd == NULL) {
		log_warnx("httpd_start: libmicrohttpd did not start");
		return -1;
	}
	if (acc_start(&ss, len, listen) == -1) {
		log_warnx("httpd_start: cannot listen on %s (in use, or not an address "
		    "of this machine)", listen);
		acc_stop();
		MHD_stop_daemon(httpd);
		httpd = NULL;
		return -1;
	}
	log_info("http: listening on http://%s/ (status page, /metrics) for Host: %s", listen,
	    hosts);
	return 0;
}

int
httpd_reconf(struct conf *conf, char *kept, size_t len)
{
	char err[256];
	int rc = 0;
	kept[0] = '\0';
	if (httpd == NULL)	/* nothing listens: http_listen needs a restart */
		return 0;
	pthread_rwlock_wrlock(&cfg_lk);
	if (strcmp(conf->http_token, token) != 0 && set_token(conf->http_token, err,
	    sizeof(err)) == -1) {
		log_warnx("reload: %s; the running http_token stays", err);
		snprintf(conf->http_token, sizeof(conf->http_token), "%s", token);
		snprintf(kept + strlen(kept), len - strlen(kept), "%shttp_token", *kept ? ", " : "");
		rc = -1;
	}
	set_hosts(conf->http_host);
	header_timeout = conf->http_header_timeout;
	pthread_rwlock_unlock(&cfg_lk);
	/* conf's http_max_connections is the running one (a restart key). */
	if (conf->http_max_streams >= conf->http_max_connections) {
		log_warnx("reload: http_max_streams %d is not below the running "
		    "http_max_connections (%d); the running http_max_streams stays",
		    conf->http_max_streams, conf->http_max_connections);
		conf->http_max_streams = __atomic_load_n(&max_streams, __ATOMIC_RELAXED);
		snprintf(kept + strlen(kept), len - strlen(kept), "%shttp_max_streams",
		    *kept ? ", " : "");
		rc = -1;
	}
	__atomic_store_n(&max_streams, conf->http_max_streams, __ATOMIC_RELAXED);
	/* The bounds per session and per user count under codes_mtx. */
	pthread_mutex_lock(&codes_mtx);
	max_per_session = conf->http_max_per_session;
	max_per_user = conf->http_max_per_user;
	pthread_mutex_unlock(&codes_mtx);
	return rc;
}
