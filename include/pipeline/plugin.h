/*
 * pipeline/plugin.h: the stage plugin ABI of pipelined.
 *
 * A plugin is a shared object in the daemon's plugin directory. It exports
 * pl_plugin_abi, the ABI version it was built for, which the host reads
 * first, and pl_plugin_init, which the host then calls once with its
 * function table; PL_PLUGIN() (at the end) defines both: the init keeps
 * the table and registers the plugin's stages with host->register_stage(). The same table is offered by `pipelinectl stage`
 * so a stage also runs by hand, without a daemon.
 *
 * Threading: a stage's check hook runs on the daemon's loop thread and must
 * not block. Its run hook runs on a job thread of its own and may block
 * (spawn and wait, HTTP, hashing, quantizing); for a run of another user
 * than the daemon's it runs in a stage process of its own as that user
 * (pipeline-stage, with the same table: see PL_STAGE_SPAWN_ONLY). Every host function below is
 * safe to call from a job thread. Strings returned by the host stay valid
 * until the run (or check) hook returns unless stated otherwise.
 *
 * Errors: ABI functions return PL_OK (0) or a negative PL_E* code;
 * host->strerror() names it. pipeline-plugin(3) documents every symbol
 * defined here, and tests/integration/build/docs.sh checks that it names
 * each and no other.
 */
#ifndef PIPELINE_PLUGIN_H
#define PIPELINE_PLUGIN_H

#include <stddef.h>
#include <stdint.h>
#include <stdarg.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Bumped on any change of the structs, of the table or of what a function
 * means. The host and its plugins must speak the same version, and every
 * struct that crosses the boundary must be of exactly the host's size.
 * 2: struct pl_exit starts with abi and size, as every struct that
 * crosses the boundary does.
 * 3: struct pl_key gains choices, and the flag PL_KEY_CHECKPOINT; struct
 * pl_stage declares what may be reused (PL_STAGE_REUSE,
 * PL_STAGE_REUSE_ASKED, reuse_key, reuse_check).
 * 4: struct pl_host gains check_files, at its end. */
#define PL_ABI_VERSION 4

/* The two symbols a plugin exports: its entry point, and the ABI version
 * it was built for (a const uint32_t the host reads before it calls the
 * entry point, so that it can refuse a plugin of another version naming
 * both). */
#define PL_ENTRY_SYMBOL "pl_plugin_init"
#define PL_ABI_SYMBOL "pl_plugin_abi"

#if defined(__GNUC__)
#define PL_EXPORT __attribute__((visibility("default")))
#define PL_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define PL_EXPORT
#define PL_PRINTF(a, b)
#endif

/* Result codes, generated with their strings from one list. */
#define PL_ERRORS(X)                                                        \
	X(PL_OK,        0, "success")                                       \
	X(PL_EINVAL,   -1, "invalid argument or spec value")                \
	X(PL_EIO,      -2, "input/output error")                            \
	X(PL_ENOMEM,   -3, "out of memory")                                 \
	X(PL_ECANCELED,-4, "cancelled")                                     \
	X(PL_ENOENT,   -5, "not found")                                     \
	X(PL_EABI,     -6, "ABI version mismatch")                          \
	X(PL_EEXIST,   -7, "already exists")                                \
	X(PL_ECHILD,   -8, "child process failed")                          \
	X(PL_ELOST,    -9, "process lost (shim vanished)")                  \
	X(PL_ETIMEDOUT,-10, "timed out")                                    \
	X(PL_EVERIFY,  -11, "verification failed")                          \
	X(PL_ENOSYS,   -12, "not supported by this host")                   \
	X(PL_EFAIL,    -13, "stage failed")                                 \
	X(PL_EREJECTED,-14, "rejected: the work was done and judged not good enough")

enum pl_error {
#define PL_X_ENUM(name, val, str) name = (val),
	PL_ERRORS(PL_X_ENUM)
#undef PL_X_ENUM
};

/* Log levels for host->log(). */
enum pl_level { PL_LOG_ERROR = 0, PL_LOG_WARN = 1, PL_LOG_INFO = 2, PL_LOG_DEBUG = 3 };

/* The kinds of value a stage key takes; the host checks the syntax of each
 * before the stage's check hook sees the section. */
enum pl_key_type {
	PL_KEY_STRING = 1,  /* any text */
	PL_KEY_INT,         /* decimal integer, may be negative */
	PL_KEY_FLOAT,       /* strtod number */
	PL_KEY_BOOL,        /* yes/no, true/false, on/off, 1/0 */
	PL_KEY_DURATION,    /* 10, 10s, 5m, 2h, 1d (seconds when unitless) */
	PL_KEY_SIZE,        /* 100, 100K, 8M, 2G, 1T (bytes, powers of 1024) */
	PL_KEY_PATH,        /* a filesystem path (relative: to the spec's directory) */
	PL_KEY_LIST,        /* comma- or space-separated words */
	PL_KEY_INPUT        /* an input: a path, or JOB.ARTIFACT, or unset to take
	                       the upstream artifact named by pl_key.artifact */
};

/* Key flags. */
#define PL_KEY_REQUIRED 0x1   /* must be present in the spec (by hand too) */
#define PL_KEY_HIDDEN   0x2   /* accepted but not listed in help */
#define PL_KEY_FILE     0x4   /* PATH/INPUT: a path set in the spec must name a
                                 regular file readable now (checked at submit) */
#define PL_KEY_DIR      0x8   /* PATH/INPUT: ... a directory readable now */
#define PL_KEY_MIN      0x10  /* INT, SIZE, FLOAT, DURATION: refuse a value below min */
#define PL_KEY_MAX      0x20  /* ... above max */
#define PL_KEY_VOLATILE 0x40  /* the key does not change what the stage makes
                                 (threads, a server's address, a timeout): it
                                 is left out of the job's reuse key */
#define PL_KEY_CHECKPOINT 0x80 /* a checkpoint records the key's value: a job
                                 program resumes only from one made with the
                                 same value (train's configuration digest) */

/* One key a stage accepts; a stage's table ends with PL_KEY_END.
 * Keys not in the table (and not common keys) are refused at submit. */
struct pl_key {
	const char *name;
	int type;              /* enum pl_key_type */
	const char *def;       /* the default as text, or NULL for none */
	unsigned flags;        /* PL_KEY_* */
	const char *artifact;  /* PL_KEY_INPUT: upstream artifact name to default to */
	const char *help;      /* one line, shown by `pipelinectl stage STAGE --help` */
	int64_t min;           /* with PL_KEY_MIN: the smallest value accepted */
	int64_t max;           /* with PL_KEY_MAX: the largest value accepted */
	const char *choices;   /* STRING: the values accepted, separated by '|'
	                          ("auto|yes|no"); NULL: any */
};

/* A key table entry of each type, written with designated initializers;
 * the default is the key's only one:
 *     static const struct pl_key keys[] = {
 *         PL_KEY_INT(.name = "lora_r", .help = "LoRA rank", .def = "16",
 *             .flags = PL_KEY_MIN, .min = 1),
 *         PL_KEY_END
 *     };
 * The host refuses, at registration, a stage whose default does not parse
 * as its key's type or lies outside its bounds, so that host->get_int()
 * and its kin return the default of a key left unset and never their def
 * argument: a stage reads a key with a default through the table, passing
 * 0 as def. A key's bounds and choices are checked by the host (and by the
 * job programs, from jobs/pljob/keys.py), not by the stage's check hook. */
#define PL_KEY_STRING(...)   { .type = PL_KEY_STRING, __VA_ARGS__ }
#define PL_KEY_INT(...)      { .type = PL_KEY_INT, __VA_ARGS__ }
#define PL_KEY_FLOAT(...)    { .type = PL_KEY_FLOAT, __VA_ARGS__ }
#define PL_KEY_BOOL(...)     { .type = PL_KEY_BOOL, __VA_ARGS__ }
#define PL_KEY_DURATION(...) { .type = PL_KEY_DURATION, __VA_ARGS__ }
#define PL_KEY_SIZE(...)     { .type = PL_KEY_SIZE, __VA_ARGS__ }
#define PL_KEY_PATH(...)     { .type = PL_KEY_PATH, __VA_ARGS__ }
#define PL_KEY_LIST(...)     { .type = PL_KEY_LIST, __VA_ARGS__ }
#define PL_KEY_INPUT(...)    { .type = PL_KEY_INPUT, __VA_ARGS__ }
/* The entry that ends a key table. */
#define PL_KEY_END           { .name = NULL }

/* Opaque handle to one job (or to one check of a spec section). */
typedef struct pl_job pl_job;

/* A stage. Structs that cross the boundary start with abi and size: the
 * host refuses one of another ABI or of another size than its own,
 * naming the plugin and both ABIs. */
#define PL_STAGE_ADOPTABLE 0x1 /* the run hook may be re-entered after a daemon
                                  restart: its work is in spawned children that
                                  host->spawn() re-adopts by name, and its own
                                  progress lives in job values */
#define PL_STAGE_SPAWN_ONLY 0x2 /* the run hook opens no path of the spec
                                  itself: all its work is done by the programs
                                  it spawns, which run as the run's owner, so
                                  the daemon may run it in its own process for
                                  any owner (without: a stage of another user's
                                  run runs in a stage process as that user) */
/* Reuse (pipeline-plugin(3) REUSE): a job whose key (its stage, code, keys
 * and the digests of its inputs) is that of an earlier job that did its
 * work is not run, and takes that job's artifacts and values. A stage
 * declares here whether its jobs may be: */
#define PL_STAGE_REUSE 0x4      /* by default: what it makes is a function of
                                  its key (and, with reuse_check, of what a
                                  server still holds); reuse = no turns it off */
#define PL_STAGE_REUSE_ASKED 0x8 /* only where the spec says reuse = yes (a
                                  command whose effects the key cannot see) */
/* A stage with neither is never reused (gate: it decides against the
 * incumbent of the moment); reuse = yes on its jobs is refused at submit. */
struct pl_stage {
	uint32_t abi;          /* PL_ABI_VERSION */
	uint32_t size;         /* sizeof(struct pl_stage) */
	const char *name;      /* the stage name used in specs, [a-z0-9_-] */
	const char *summary;   /* one line for `pipelinectl stage --list` */
	unsigned flags;        /* PL_STAGE_* */
	const struct pl_key *keys;
	/* Validate the section beyond key syntax (cross-key rules, files that
	 * must exist). Report each problem with host->check_error() and return
	 * PL_OK if there were none; NULL skips. Must not block. */
	int (*check)(pl_job *job);
	/* Do the work. Return PL_OK on success, a negative code on failure
	 * after logging why (host->fail() sets the message operators see). */
	int (*run)(pl_job *job);
	uint32_t key_size;     /* sizeof(struct pl_key) */
	/* Reuse, for a stage that may be reused; both may be NULL. Called
	 * before the job would run (and for `pipelinectl submit --plan`),
	 * where only get(), input(), run_get(), conf_get(), value_get(),
	 * artifact_find() and log() may be used; each must be quick (a
	 * bounded request to a server). */
	/* What the key must hold that no key or file of the job shows:
	 * "NAME=VALUE" lines written to buf (the version of the server the
	 * stage talks to, the digest of what a tag serves now). PL_OK, or a
	 * negative code with why in buf: then the job is not reused. */
	int (*reuse_key)(pl_job *job, char *buf, size_t len);
	/* An earlier job of the same key, run/jobname, whose files are there
	 * as recorded: PL_OK when what it made outside them still stands
	 * (the server still holds the tag it created, at the same digest),
	 * else a negative code with why in buf: the job runs, and
	 * `pipelinectl explain` says why. */
	int (*reuse_check)(pl_job *job, const char *run, const char *jobname, char *why,
	    size_t len);
};
/* A struct pl_stage with abi, size and key_size set, and the members
 * given as designated initializers:
 *     static const struct pl_stage st = PL_STAGE(.name = "exec",
 *         .summary = "runs a command", .keys = keys, .run = run);
 */
#define PL_STAGE(...) { .abi = PL_ABI_VERSION, .size = sizeof(struct pl_stage), \
	.key_size = sizeof(struct pl_key), __VA_ARGS__ }

/* How host->spawn() starts a process. Zero-initialise, set abi and size;
 * zero is every other member's default. */
struct pl_spawn {
	uint32_t abi;
	uint32_t size;
	const char *name;          /* unique within the attempt, e.g. "main", "launch-3";
	                              a restarted daemon re-adopts by this name */
	const char *const *argv;   /* argv[0] is looked up in PATH */
	const char *const *env;    /* extra NAME=VALUE entries, NULL-terminated, may be NULL */
	const char *cwd;           /* NULL: the job's work directory */
	const char *resume_from;   /* exported as PL_RESUME_FROM when set */
	double timeout;            /* seconds, 0: the job's own timeout only */
	/* Called on the job thread for every line the child writes to its
	 * events file (pipeline-job(7)), after the host has stored it. Return
	 * non-zero to have the host stop the child (SIGTERM, grace, SIGKILL). */
	int (*on_event)(void *arg, const char *type, const char *json_line);
	void *arg;
};

/* How a spawned process ended. The caller sets abi and size (PL_EXIT_INIT);
 * the host writes the rest. */
struct pl_exit {
	uint32_t abi;     /* PL_ABI_VERSION */
	uint32_t size;    /* sizeof(struct pl_exit) */
	int exited;       /* 1: exit() with status; 0: killed by signal */
	int status;       /* exit status when exited */
	int signal;       /* signal number when killed */
	int adopted;      /* 1: the process was re-adopted after a daemon restart */
	double seconds;   /* wall time */
	char error[256];  /* the last "error" event's message, if any */
};
#define PL_EXIT_INIT { .abi = PL_ABI_VERSION, .size = sizeof(struct pl_exit) }

/* The host's function table: every function is set. */
struct pl_host {
	uint32_t abi;      /* PL_ABI_VERSION of the host */
	uint32_t size;     /* sizeof(struct pl_host) */
	const char *host_name; /* "pipelined" or "pipelinectl" */

	/* Registration, during pl_plugin_init only. */
	int (*register_stage)(void *plugin, const struct pl_stage *stage);

	const char *(*strerror)(int code);

	/* Logging into the job's log (and the daemon log at WARN and above). */
	void (*log)(pl_job *job, int level, const char *fmt, ...) PL_PRINTF(3, 4);
	/* Set the one-line failure message shown by status; returns PL_EFAIL
	 * so a run hook can `return host->fail(job, "...")`. */
	int (*fail)(pl_job *job, const char *fmt, ...) PL_PRINTF(2, 3);

	/* Spec values, resolved: the section's value or the key's default.
	 * get() returns NULL when the key is unset and has no default; the
	 * others return def then, which a stage passes as 0 for a key its
	 * table gives a default (see PL_KEY_INT()). */
	const char *(*get)(pl_job *job, const char *key);
	int64_t (*get_int)(pl_job *job, const char *key, int64_t def);
	double (*get_double)(pl_job *job, const char *key, double def);
	int (*get_bool)(pl_job *job, const char *key, int def);
	/* Durations in seconds, sizes in bytes, as typed in pl_key. */
	double (*get_duration)(pl_job *job, const char *key, double def);
	int64_t (*get_size)(pl_job *job, const char *key, int64_t def);
	/* A resolved input path (PL_KEY_INPUT or PL_KEY_PATH): absolute.
	 * Returns NULL (and logs) when it cannot be resolved. */
	const char *(*input)(pl_job *job, const char *key);
	/* The [run] section (name, previous, ...) and the daemon config
	 * ("section.key"; NULL when absent). */
	const char *(*run_get)(pl_job *job, const char *key);
	const char *(*conf_get)(pl_job *job, const char *section_key);

	/* Check hook only: report a problem with a key of this section; the
	 * host prefixes file:line of the key (or of the section when unset). */
	void (*check_error)(pl_job *job, const char *key, const char *fmt, ...) PL_PRINTF(3, 4);

	/* Identity. */
	const char *(*run_name)(pl_job *job);
	const char *(*job_name)(pl_job *job);
	int (*attempt)(pl_job *job);        /* 1 for the first attempt */
	int (*adopted)(pl_job *job);        /* 1 when re-entered after a restart */
	/* The job's work directory: kept across attempts (checkpoints live here);
	 * outputs are written here unless a key names another place. */
	const char *(*workdir)(pl_job *job);

	/* Progress and events: stored, then published on the feed. */
	void (*progress)(pl_job *job, double done, double total, const char *unit);
	void (*metric)(pl_job *job, const char *name, int64_t step, double value);
	/* A custom event: type becomes "job.<type>" on the feed; json is an
	 * object's text (or NULL) merged into the event. */
	void (*event)(pl_job *job, const char *type, const char *json);

	/* Spawn a child under pipeline-shim and wait for it, reading its
	 * events as they come. Blocks. With the same spec->name in a
	 * re-entered attempt, re-adopts the process still running (or returns
	 * the exit it recorded) instead of starting another. spec and out
	 * carry abi and size; PL_EINVAL (logged, naming the plugin) for a
	 * struct of another ABI or of another size than the host's. */
	int (*spawn)(pl_job *job, const struct pl_spawn *spec, struct pl_exit *out);

	/* Register a finished file (or directory) as an artifact. The host
	 * computes size and sha256 (directories: of a sorted manifest of
	 * relative names and file digests) and stores it. */
	int (*artifact)(pl_job *job, const char *name, const char *path);
	/* Look an artifact up: run NULL means this run; job NULL means any
	 * job of it (the newest). Copies the path and, if sha256 is non-NULL,
	 * the hex digest (65 bytes). PL_ENOENT when there is none. */
	int (*artifact_find)(pl_job *job, const char *run, const char *jobname,
	    const char *name, char *path, size_t pathlen, char *sha256);

	/* 1 once the job is cancelled (or its timeout passed); long loops
	 * check it between units of work and return PL_ECANCELED. */
	int (*cancelled)(pl_job *job);

	/* Values: small named strings stored per job, readable by any later
	 * job or run (digests, scores, calibration pairs, loop counters).
	 * value_get returns a malloc'd copy the caller frees, NULL if unset. */
	int (*value_set)(pl_job *job, const char *key, const char *value);
	char *(*value_get)(pl_job *job, const char *run, const char *jobname,
	    const char *key);
	/* Every value with this key across all runs, newest first, as a JSON
	 * array of {"run","job","value","ts"}; malloc'd; NULL on error. */
	char *(*value_history)(pl_job *job, const char *key, int limit);

	/* As artifact(), with the sha256 (64 lowercase hex digits) that the
	 * stage computed over the bytes it wrote itself, instead of the host
	 * reading the artifact again; for a directory, by exactly the host's
	 * definition (see artifact()). The host checks that the path exists,
	 * computes the size and stores the given digest. PL_EINVAL for a
	 * malformed digest, PL_EIO when the path cannot be read. */
	int (*artifact_digest)(pl_job *job, const char *name, const char *path,
	    const char *sha256_hex);

	/* Check hook only: 1 when the hook may open, stat or read the paths
	 * the spec names (probes of an input's content), 0 when the check
	 * is one without files: the host then checks no path either, and
	 * the hook checks what it can without them (syntax, bounds,
	 * cross-key rules). A daemon's restart checks its stored runs so:
	 * their files were checked at submit and may have moved since. */
	int (*check_files)(pl_job *job);
};

/* The entry point every plugin exports; PL_PLUGIN() below defines it.
 * It returns PL_EABI for a host of another ABI, registers stages and
 * returns PL_OK. On failure the host undoes every registration this
 * plugin made and unloads it. The host calls it only when pl_plugin_abi
 * is its own ABI version. */
typedef int (*pl_plugin_init_fn)(const struct pl_host *host, void *plugin);

/* Declares a plugin, once, at file scope after its stages:
 *     static const struct pl_host *host;
 *     ...
 *     PL_PLUGIN(&host, &stage_a, &stage_b)
 * defines the exported pl_plugin_abi (PL_ABI_VERSION) and pl_plugin_init,
 * which refuses a host of another ABI (PL_EABI), keeps the host's table
 * in *hostp (hostp may be NULL) and registers the stages in order,
 * returning the first refusal. */
#define PL_PLUGIN(hostp, ...)                                               \
	PL_EXPORT extern const uint32_t pl_plugin_abi;                      \
	PL_EXPORT const uint32_t pl_plugin_abi = PL_ABI_VERSION;            \
	PL_EXPORT int pl_plugin_init(const struct pl_host *, void *);       \
	PL_EXPORT int                                                       \
	pl_plugin_init(const struct pl_host *pl_host_, void *pl_plugin_)    \
	{                                                                   \
		static const struct pl_stage *const pl_stages_[] = { __VA_ARGS__ }; \
		const struct pl_host **pl_hostp_ = (hostp);                 \
		if (pl_host_->abi != PL_ABI_VERSION)                        \
			return PL_EABI;                                     \
		if (pl_hostp_ != NULL)                                      \
			*pl_hostp_ = pl_host_;                              \
		for (size_t pl_i_ = 0; pl_i_ < sizeof(pl_stages_) /         \
		    sizeof(pl_stages_[0]); pl_i_++) {                       \
			int pl_rc_ = pl_host_->register_stage(pl_plugin_,   \
			    pl_stages_[pl_i_]);                             \
			if (pl_rc_ != PL_OK)                                \
				return pl_rc_;                              \
		}                                                           \
		return PL_OK;                                               \
	}

#ifdef __cplusplus
}
#endif
#endif /* PIPELINE_PLUGIN_H */
