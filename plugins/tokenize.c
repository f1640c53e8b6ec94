/*
 * tokenize.c: the tokenize stage. Pre-tokenizes and masks the training
 * corpus in one process, jobs/tokenize_corpus.py (no datasets.map(), G10): the
 * base's chat template rendered with Jinja, prompt tokens masked, the
 * response and its end-of-turn as labels. The job program refuses an
 * example over max_seq_length, an empty response span, a double BOS, or a
 * prompt longer than the serving num_ctx minus num_ctx_margin (G01), naming
 * the example's key and its counts; this plugin passes that message on as
 * the job's failure.
 *
 * Artifacts (registered by the host from the job's artifact events):
 * "tokens", the token file, and "stats", a JSON summary. The plugin checks
 * both arrived, registers the corpus they were made from as "corpus" (its
 * digest is then on record, and register renders its examples through the
 * served template to compare with the tokens), and stores the summary (without the corpus keys, which can
 * be long; their count and digest instead) as the job value "stats", for
 * status and for later stages.
 *
 * The key table is the one definition of the job program's keys, their
 * defaults, bounds and choices: tokenize_corpus.py reads it from
 * jobs/pljob/keys.py (make jobkeys).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "inputcheck.h"
#include "pyjob.h"

static const struct pl_host *host;

static const struct pl_key tokenize_keys[] = {
	PL_KEY_PATH(.name = "base", .flags = PL_KEY_REQUIRED | PL_KEY_DIR,
	    .help = "the base model directory (tokenizer_config.json and its tokenizer)"),
	PL_KEY_INPUT(.name = "corpus", .flags = PL_KEY_REQUIRED | PL_KEY_FILE, .artifact = "corpus",
	    .help = "the training corpus, JSONL: {\"key\", \"messages\": [...]} per line"),
	PL_KEY_INT(.name = "max_seq_length", .def = "8192", .flags = PL_KEY_MIN, .min = 2,
	    .help = "longest example allowed, in tokens (prompt and response)"),
	PL_KEY_INT(.name = "num_ctx", .def = "9216", .flags = PL_KEY_MIN, .min = 1,
	    .help = "the context the served model gets (Ollama num_ctx, G01)"),
	PL_KEY_INT(.name = "num_ctx_margin", .def = "256", .flags = PL_KEY_MIN, .min = 0,
	    .help = "tokens a prompt must stay below num_ctx by (room for the answer)"),
	PL_KEY_PATH(.name = "output_dir",
	    .help = "where tokens.npz and stats.json go (default: the job's work directory)"),
	PL_KEY_BOOL(.name = "add_special_tokens", .def = "no",
	    .help = "also let the tokenizer add its own BOS (as tokenizer(text) does)"),
	PL_KEY_PATH(.name = "chat_template",
	    .help = "a Jinja chat template file instead of the one in tokenizer_config.json"),
	PL_KEY_STRING(.name = "end_of_turn", .def = "<end_of_turn>",
	    .help = "the end-of-turn marker that closes the response"),
	PL_KEY_STRING(.name = "tokenizer", .def = "auto", .choices = "auto|sentencepiece|hf",
	    .help = "which tokenizer library to use"),
	PL_KEY_INT(.name = "threads", .def = "2", .flags = PL_KEY_VOLATILE | PL_KEY_MIN, .min = 1,
	    .help = "tokenizer threads"),
	PL_KEY_STRING(.name = "python",
	    .help = "the Python interpreter (default: daemon.python, else /usr/bin/python3)"),
	PL_KEY_PATH(.name = "jobs_dir",
	    .help = "the directory holding tokenize_corpus.py (default: daemon.jobs_dir)"),
	PL_KEY_END
};

struct tok_run {
	pl_job *job;
	char tokens[PATH_MAX];
	char stats[PATH_MAX];
};

static int
tokenize_event(void *arg, const char *type, const char *line)
{
	struct tok_run *t = arg;
	char name[64];

	if (strcmp(type, "artifact") != 0 ||
	    pyjob_event_str(line, "name", name, sizeof(name)) == -1)
		return 0;
	if (strcmp(name, "tokens") == 0)
		pyjob_event_str(line, "path", t->tokens, sizeof(t->tokens));
	else if (strcmp(name, "stats") == 0)
		pyjob_event_str(line, "path", t->stats, sizeof(t->stats));
	return 0;
}

static int
tokenize_check(pl_job *job)
{
	int64_t ctx = host->get_int(job, "num_ctx", 0);
	int64_t margin = host->get_int(job, "num_ctx_margin", 0);

	if (ctx <= margin)
		host->check_error(job, "num_ctx", "%lld leaves no room above "
		    "num_ctx_margin %lld", (long long)ctx, (long long)margin);
	plc_check_base(host, job, "base");
	plc_check_corpus(host, job, "corpus", 5);
	return PL_OK;
}

/* The stats summary stored as a job value: everything but the key list,
 * which becomes its count and a digest (later stages compare corpora by
 * it without reading the file). */
static int
store_stats(pl_job *job, const char *path)
{
	char *text = plc_read_file(path, NULL, 256u << 20);
	if (text == NULL)
		return host->fail(job, "tokenize: stats %s: %s", path, strerror(errno));
	cJSON *st = cJSON_Parse(text);
	free(text);
	if (!cJSON_IsObject(st)) {
		cJSON_Delete(st);
		return host->fail(job, "tokenize: stats %s is not a JSON object", path);
	}
	cJSON *keys = cJSON_DetachItemFromObjectCaseSensitive(st, "corpus_keys");
	if (!cJSON_IsArray(keys)) {
		cJSON_Delete(keys);
		cJSON_Delete(st);
		return host->fail(job, "tokenize: stats %s has no corpus_keys list", path);
	}
	char *kt = cJSON_PrintUnformatted(keys);
	char hex[65];
	plc_sha256_buf(kt, strlen(kt), hex);
	cJSON_AddNumberToObject(st, "corpus_keys_count", cJSON_GetArraySize(keys));
	cJSON_AddStringToObject(st, "corpus_keys_sha256", hex);
	free(kt);
	cJSON_Delete(keys);
	const cJSON *ex = cJSON_GetObjectItemCaseSensitive(st, "examples");
	if (cJSON_IsNumber(ex))
		host->metric(job, "examples", 0, ex->valuedouble);
	const cJSON *sp = cJSON_GetObjectItemCaseSensitive(st, "shared_prefix_tokens");
	if (cJSON_IsNumber(sp))
		host->metric(job, "shared_prefix_tokens", 0, sp->valuedouble);
	sp = cJSON_GetObjectItemCaseSensitive(st, "shared_prefix_share");
	if (cJSON_IsNumber(sp))
		host->metric(job, "shared_prefix_share", 0, sp->valuedouble);
	char *summary = cJSON_PrintUnformatted(st);
	cJSON_Delete(st);
	int rc = host->value_set(job, "stats", summary);
	host->log(job, PL_LOG_INFO, "tokenize: %s", summary);
	free(summary);
	if (rc != PL_OK)
		return host->fail(job, "tokenize: storing the stats value: %s",
		    host->strerror(rc));
	return PL_OK;
}

static int
tokenize_run(pl_job *job)
{
	struct pyjob pj;
	struct tok_run t = { .job = job };
	struct pl_spawn sp;
	struct pl_exit ex = PL_EXIT_INIT;
	char how[512];

	int rc = pyjob_prepare(host, job, tokenize_keys, "tokenize_corpus", NULL, &pj);
	if (rc != PL_OK)
		return rc;
	memset(&sp, 0, sizeof(sp));
	sp.abi = PL_ABI_VERSION;
	sp.size = sizeof(sp);
	sp.name = "tokenize";
	sp.argv = pj.argv;
	sp.on_event = tokenize_event;
	sp.arg = &t;
	rc = host->spawn(job, &sp, &ex);
	if (host->cancelled(job))
		return PL_ECANCELED;
	if (rc != PL_OK)
		return host->fail(job, "tokenize: spawning %s: %s", pj.script,
		    host->strerror(rc));
	if (!ex.exited || ex.status != 0) {
		pyjob_exit_str(&ex, how, sizeof(how));
		return host->fail(job, "tokenize: %s", how);
	}
	if (t.tokens[0] == '\0' || t.stats[0] == '\0')
		return host->fail(job, "tokenize: the job exited 0 without its %s "
		    "artifact", t.tokens[0] == '\0' ? "tokens" : "stats");
	const char *corpus = host->input(job, "corpus");
	if (corpus == NULL || (rc = host->artifact(job, "corpus", corpus)) != PL_OK)
		return host->fail(job, "tokenize: registering the corpus %s as an artifact",
		    corpus ? corpus : "(unresolved)");
	return store_stats(job, t.stats);
}

static const struct pl_stage tokenize_stage = PL_STAGE(
	.name = "tokenize",
	.summary = "pre-tokenize and mask a corpus with the base's chat template",
	.flags = PL_STAGE_REUSE,
	.keys = tokenize_keys,
	.check = tokenize_check,
	.run = tokenize_run);

PL_PLUGIN(&host, &tokenize_stage)
