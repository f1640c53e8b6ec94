/*
 * probe.c: the probe stage. Runs jobs/probe.py (one forward and backward on
 * the longest example, model.train() set, every memory fix on, no optimizer
 * step) under a host-memory cap, and turns its peak into a calibrated
 * prediction of the real training run's peak (F24):
 *
 *     predicted = probe peak x (1 - over-estimate)
 *
 * where the over-estimate is the mean of 1 - real/probe over the newest
 * calibration_pairs probe/real pairs stored for this GPU and recipe (every
 * finished train run adds one: value "probe_pair"), or over_estimate (the
 * seed's 4.7%) until there are any. A prediction above budget_mb minus
 * margin_mb fails the job before any training is spent, with the numbers
 * and the highest LoRA rank predicted to fit (about 15 MB per rank, F31).
 *
 * The host-memory cap (G20): a probe without model.train() silently turned
 * gradient checkpointing off and spilled every activation into pinned host
 * memory until the host thrashed. The job runs in a memory cgroup capped at
 * host_mem_cap (memcap.h); when no cgroup can be made the stage refuses,
 * unless host_mem_cap = off.
 *
 * The result is stored as the job value "probe" (JSON), which train reads
 * to add its calibration pair.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "pipeline/plugin.h"
#include "plio.h"
#include "inputcheck.h"
#include "memcap.h"
#include "pyjob.h"
#include "trainkeys.h"
#include "vramcal.h"

static const struct pl_host *host;

static const struct pl_key probe_keys[] = {
	PL_TRAIN_RECIPE_KEYS,
	PL_KEY_STRING(.name = "example_key",
	    .help = "probe this example instead of the longest"),
	PL_KEY_FLOAT(.name = "budget_mb",
	    .help = "GPU memory training may use, MB (default: the capacity the job reports)"),
	PL_KEY_FLOAT(.name = "margin_mb", .def = "256", .flags = PL_KEY_MIN, .min = 0,
	    .help = "MB kept free below budget_mb"),
	PL_KEY_FLOAT(.name = "over_estimate", .def = "4.7",
	    .help = "percent the probe over-estimates a real run by, until calibration pairs "
	    "exist"),
	PL_KEY_INT(.name = "calibration_pairs", .def = "5", .flags = PL_KEY_MIN, .min = 0,
	    .help = "how many of the newest probe/real pairs the over-estimate averages"),
	PL_KEY_FLOAT(.name = "mb_per_rank", .def = "15",
	    .help = "probe MB per LoRA rank unit, for the suggested rank (F31)"),
	PL_KEY_BOOL(.name = "prune", .def = "no", .flags = PL_KEY_HIDDEN,
	    .help = "set by a sweep: a prediction that does not fit rejects the job, "
	    "pruning its variants, instead of failing it"),
	PL_KEY_STRING(.name = "fits_if", .flags = PL_KEY_HIDDEN,
	    .help = "set by a sweep: the probes of the sets with as much or more of every "
	    "memory-relevant value; when one of them fits, so does this one, unmeasured"),
	PL_KEY_STRING(.name = "gpu",
	    .help = "the GPU's name for calibration (default: what the job reports)"),
	PL_KEY_STRING(.name = "recipe",
	    .help = "the recipe's name for calibration (default: ENGINE:base directory name)"),
	PL_KEY_STRING(.name = "host_mem_cap", .def = "12G",
	    .help = "host-memory cap of the probe process (a size, or off; G20)"),
	PL_KEY_END
};

struct probe_run {
	int have_memory;
	double peak_mb, pre_step_mb, capacity_mb;
	char gpu[128];
	int have_oom;
	char oom_phase[32];
	double oom_mb, oom_capacity_mb;
};

static int
probe_event(void *arg, const char *type, const char *line)
{
	struct probe_run *p = arg;

	if (strcmp(type, "memory") == 0) {
		p->have_memory = 1;
		p->peak_mb = pyjob_event_num(line, "peak_mb", -1);
		p->pre_step_mb = pyjob_event_num(line, "pre_step_mb", -1);
		p->capacity_mb = pyjob_event_num(line, "capacity_mb", 0);
		if (pyjob_event_str(line, "gpu", p->gpu, sizeof(p->gpu)) == -1)
			pyjob_event_str(line, "device", p->gpu, sizeof(p->gpu));
	} else if (strcmp(type, "oom") == 0) {
		p->have_oom = 1;
		pyjob_event_str(line, "phase", p->oom_phase, sizeof(p->oom_phase));
		p->oom_mb = pyjob_event_num(line, "mb", 0);
		p->oom_capacity_mb = pyjob_event_num(line, "capacity_mb", 0);
	}
	return 0;
}

static int
probe_check(pl_job *job)
{
	const char *cap = host->get(job, "host_mem_cap");
	if (cap != NULL && memcap_parse_size(cap) < 0)
		host->check_error(job, "host_mem_cap", "\"%s\" is not a size "
		    "(12G, 512M) or off", cap);
	double budget = host->get(job, "budget_mb") != NULL ?
	    host->get_double(job, "budget_mb", 0) : -1;
	double margin = host->get_double(job, "margin_mb", 0);
	if (host->get(job, "budget_mb") != NULL && budget <= 0)
		host->check_error(job, "budget_mb", "must be positive");
	else if (budget > 0 && budget - margin <= 0)
		/* No prediction can fit: the run would fail at the probe. */
		host->check_error(job, "budget_mb", "budget_mb %g - margin_mb %g = %g MB leaves "
		    "nothing for training: raise budget_mb or lower margin_mb (default 256)",
		    budget, margin, budget - margin);
	double oe = host->get_double(job, "over_estimate", 0);
	if (oe <= -100 || oe >= 100)
		host->check_error(job, "over_estimate", "%g%% is not a percentage "
		    "strictly between -100 and 100", oe);
	if (host->get_double(job, "mb_per_rank", 0) <= 0)
		host->check_error(job, "mb_per_rank", "must be positive");
	plc_check_base(host, job, "base");
	trainkeys_check(host, job);
	return PL_OK;
}

/* The recipe's calibration name: the key, else ENGINE:basename(base). */
static void
recipe_name(pl_job *job, char *buf, size_t len)
{
	const char *r = host->get(job, "recipe");
	if (r != NULL && *r != '\0')
		snprintf(buf, len, "%s", r);
	else
		vramcal_recipe_name(host->get(job, "engine"), host->get(job, "base"),
		    buf, len);
}

/*
 * A sweep's probe of a set that another set dominates (fits_if: the
 * probes of the sets with as much or more of every memory-relevant
 * value, lora_r and per_device_train_batch_size, whose memory only grows
 * with them): when one of those predicted a fit within this job's budget
 * and margin, this one fits too and is not measured. Its value "probe"
 * says by which, and has no probe_mb, so its training stores no
 * calibration pair (a pair needs the figure of its own configuration).
 * 1 when it so fits, 0 when it must be measured.
 */
static int
probe_dominated(pl_job *job)
{
	const char *list = host->get(job, "fits_if");
	char names[1024], *save = NULL;
	if (list == NULL || *list == '\0')
		return 0;
	snprintf(names, sizeof(names), "%s", list);
	double margin = host->get_double(job, "margin_mb", 0);
	for (char *n = strtok_r(names, ", ", &save); n != NULL; n = strtok_r(NULL, ", ", &save)) {
		char *pv = host->value_get(job, NULL, n, "probe");
		cJSON *o = pv != NULL ? cJSON_Parse(pv) : NULL;
		free(pv);
		const cJSON *pm = cJSON_GetObjectItemCaseSensitive(o, "predicted_mb");
		const cJSON *bm = cJSON_GetObjectItemCaseSensitive(o, "budget_mb");
		const cJSON *rk = cJSON_GetObjectItemCaseSensitive(o, "lora_r");
		double budget = host->get(job, "budget_mb") != NULL ?
		    host->get_double(job, "budget_mb", 0) : cJSON_IsNumber(bm) ? bm->valuedouble : 0;
		if (!cJSON_IsNumber(pm) || !cJSON_GetObjectItemCaseSensitive(o, "probe_mb") ||
		    !(budget > 0) || pm->valuedouble > budget - margin) {
			cJSON_Delete(o);
			continue;
		}
		double pred = pm->valuedouble;
		int rank = cJSON_IsNumber(rk) ? (int)rk->valuedouble : 0;
		cJSON_Delete(o);
		cJSON *v = cJSON_CreateObject();
		cJSON_AddStringToObject(v, "fits_by", n);
		cJSON_AddNumberToObject(v, "fits_by_predicted_mb", pred);
		cJSON_AddNumberToObject(v, "budget_mb", budget);
		cJSON_AddNumberToObject(v, "margin_mb", margin);
		cJSON_AddNumberToObject(v, "lora_r", (double)host->get_int(job, "lora_r", 0));
		char *text = cJSON_PrintUnformatted(v);
		cJSON_Delete(v);
		int rc = host->value_set(job, "probe", text);
		free(text);
		if (rc != PL_OK) {
			host->log(job, PL_LOG_WARN, "probe: storing the probe value: %s; "
			    "measuring instead", host->strerror(rc));
			return 0;
		}
		host->log(job, PL_LOG_INFO, "probe: fits without a measure: %s (lora_r %d, as "
		    "much or more of every memory-relevant value) predicts %.0f MB, within "
		    "budget_mb %.0f - margin_mb %.0f = %.0f MB", n, rank, pred, budget, margin,
		    budget - margin);
		return 1;
	}
	return 0;
}

static int
probe_run(pl_job *job)
{
	struct pyjob pj;
	struct probe_run p;
	struct pl_spawn sp;
	struct pl_exit ex = PL_EXIT_INIT;
	struct memcap mc;
	char how[512], why[1024];
	int rc;

	memset(&p, 0, sizeof(p));
	memset(&mc, 0, sizeof(mc));
	if (probe_dominated(job))
		return PL_OK;
	rc = pyjob_prepare(host, job, probe_keys, "probe", NULL, &pj);
	if (rc != PL_OK)
		return rc;

	const char *capstr = host->get(job, "host_mem_cap");
	int64_t cap = memcap_parse_size(capstr ? capstr : "12G");
	const char *const *argv = pj.argv;
	if (cap < 0)
		return host->fail(job, "probe: host_mem_cap \"%s\" is not a size or off",
		    capstr);
	if (cap > 0) {
		if (memcap_create(&mc, cap, "probe", why, sizeof(why)) == -1)
			return host->fail(job, "probe: cannot cap the probe's host memory "
			    "at %s (G20): %s; set host_mem_cap = off to run it without "
			    "a cap", capstr, why);
		argv = memcap_argv(&mc, pj.argv);
		host->log(job, PL_LOG_INFO, "probe: host memory capped at %s (%s%s%s)",
		    capstr, memcap_kind_str(mc.kind), mc.dir[0] ? " " : "", mc.dir);
	} else
		host->log(job, PL_LOG_WARN, "probe: host_mem_cap = off: the probe runs "
		    "without a host-memory cap (G20)");

	memset(&sp, 0, sizeof(sp));
	sp.abi = PL_ABI_VERSION;
	sp.size = sizeof(sp);
	sp.name = "probe";
	sp.argv = argv;
	sp.on_event = probe_event;
	sp.arg = &p;
	rc = host->spawn(job, &sp, &ex);
	uint64_t host_peak = 0;
	int oom_kills = 0;
	int capped = mc.kind != MEMCAP_NONE;
	int capkind = mc.kind;
	if (capped)
		memcap_finish(&mc, &host_peak, &oom_kills);
	if (host->cancelled(job))
		return PL_ECANCELED;
	if (rc != PL_OK)
		return host->fail(job, "probe: spawning %s: %s", pj.script,
		    host->strerror(rc));
	if (capped && host_peak > 0)
		host->log(job, PL_LOG_INFO, "probe: host memory peak %.1f MB of the %s cap",
		    (double)host_peak / 1048576.0, capstr);

	int rank = (int)host->get_int(job, "lora_r", 0);
	double mbpr = host->get_double(job, "mb_per_rank", 0);
	double margin = host->get_double(job, "margin_mb", 0);

	/* A systemd scope keeps no OOM count we can read: a SIGKILL there is
	 * taken to be the cap's. */
	if (capped && !ex.exited && ex.signal == SIGKILL &&
	    (oom_kills != 0 || capkind == MEMCAP_SYSTEMD))
		return host->fail(job, "probe: killed by the host-memory cap of %s "
		    "(host peak %.0f MB): a probe must not spill activations to host "
		    "memory; is model.train() set so that gradient checkpointing is "
		    "on? (G20)", capstr, (double)host_peak / 1048576.0);
	if (p.have_oom || (ex.exited && ex.status == PYJOB_EXIT_OOM)) {
		/* The probe itself did not fit: its need is at least oom_mb. */
		double capmb = p.oom_capacity_mb > 0 ? p.oom_capacity_mb :
		    host->get_double(job, "budget_mb", 0);
		if (!p.have_oom || !(p.oom_mb > 0) || !(capmb > 0)) {
			pyjob_exit_str(&ex, how, sizeof(how));
			return host->fail(job, "probe: out of GPU memory at lora_r %d: %s",
			    rank, how);
		}
		int r = vramcal_max_rank(p.oom_mb, 0.0, rank, mbpr, capmb - margin);
		char hint[160];
		if (r > 0)
			snprintf(hint, sizeof(hint), "so lora_r %d or lower at most "
			    "(~%g MB per rank, F31)", r, mbpr);
		else
			snprintf(hint, sizeof(hint), "and no lower rank is predicted "
			    "to fit %.1f MB - margin_mb %.0f (~%g MB per rank, F31)",
			    capmb, margin, mbpr);
		return host->fail(job, "probe: out of GPU memory in %s: %.2f MB needed "
		    "of %.2f MB at lora_r %d; the probe alone needs at least that, %s",
		    p.oom_phase[0] ? p.oom_phase : "the probe", p.oom_mb, capmb, rank,
		    hint);
	}
	if (!ex.exited || ex.status != 0) {
		pyjob_exit_str(&ex, how, sizeof(how));
		return host->fail(job, "probe: %s", how);
	}
	if (!p.have_memory || !(p.peak_mb > 0))
		return host->fail(job, "probe: the job exited 0 without a memory "
		    "event carrying peak_mb");

	/* Calibration. */
	char gpu[128], recipe[PATH_MAX];
	const char *g = host->get(job, "gpu");
	snprintf(gpu, sizeof(gpu), "%s", g && *g ? g : p.gpu[0] ? p.gpu : "unnamed-gpu");
	recipe_name(job, recipe, sizeof(recipe));
	int want = (int)host->get_int(job, "calibration_pairs", 0);
	struct vramcal_pair pairs[64];
	int np = 0;
	if (want > 64)
		want = 64;
	if (want > 0 && host->value_history != NULL) {
		char *hist = host->value_history(job, "probe_pair", 1000);
		if (hist != NULL) {
			np = vramcal_pairs_from_history(hist, gpu, recipe, pairs, (size_t)want);
			if (np < 0) {
				host->log(job, PL_LOG_WARN, "probe: the probe_pair history "
				    "is not a JSON array; using over_estimate");
				np = 0;
			}
			free(hist);
		}
	}
	double def = host->get_double(job, "over_estimate", 0) / 100.0;
	double over = vramcal_over_estimate(pairs, (size_t)np, def);
	double pred = vramcal_predict(p.peak_mb, over);
	double budget = host->get(job, "budget_mb") ? host->get_double(job, "budget_mb", 0) :
	    p.capacity_mb;
	if (!(budget > 0))
		return host->fail(job, "probe: no budget: set budget_mb (the job "
		    "reported no capacity_mb); probe peak %.1f MB predicts %.0f MB",
		    p.peak_mb, pred);
	double limit = budget - margin;
	int fit = vramcal_max_rank(p.peak_mb, over, rank, mbpr, limit);

	cJSON *v = cJSON_CreateObject();
	cJSON_AddStringToObject(v, "gpu", gpu);
	cJSON_AddStringToObject(v, "recipe", recipe);
	cJSON_AddNumberToObject(v, "probe_mb", p.peak_mb);
	if (p.pre_step_mb >= 0)
		cJSON_AddNumberToObject(v, "pre_step_mb", p.pre_step_mb);
	cJSON_AddNumberToObject(v, "over_estimate_pct", round(over * 1000.0) / 10.0);
	cJSON_AddNumberToObject(v, "pairs", np);
	cJSON_AddNumberToObject(v, "predicted_mb", pred);
	cJSON_AddNumberToObject(v, "budget_mb", budget);
	cJSON_AddNumberToObject(v, "margin_mb", margin);
	cJSON_AddNumberToObject(v, "lora_r", rank);
	cJSON_AddNumberToObject(v, "max_rank", fit);
	if (capped && host_peak > 0)
		cJSON_AddNumberToObject(v, "host_peak_mb", round((double)host_peak / 104857.6) / 10.0);
	char *text = cJSON_PrintUnformatted(v);
	cJSON_Delete(v);
	rc = host->value_set(job, "probe", text);
	host->log(job, PL_LOG_INFO, "probe: %s", text);
	free(text);
	if (rc != PL_OK)
		return host->fail(job, "probe: storing the probe value: %s",
		    host->strerror(rc));
	host->metric(job, "probe_peak_mb", 0, p.peak_mb);
	host->metric(job, "predicted_mb", 0, pred);

	char basis[256];
	if (np > 0)
		snprintf(basis, sizeof(basis), "the mean of %d probe/real pair%s for "
		    "%s, %s", np, np == 1 ? "" : "s", gpu, recipe);
	else
		snprintf(basis, sizeof(basis), "over_estimate: no probe/real pairs "
		    "yet for %s, %s", gpu, recipe);
	if (pred > limit) {
		/* A sweep's probe: the variant is pruned (rejected, its jobs
		 * skipped), not failed; the figures are the reason. */
		int prune = host->get_bool(job, "prune", 0);
		rc = 0;
		if (fit > 0)
			rc = host->fail(job, "probe: predicted peak %.0f MB (probe %.1f MB "
			    "x (1 - %.1f%%), %s) exceeds budget_mb %.0f - margin_mb %.0f = "
			    "%.0f MB at lora_r %d; the highest rank predicted to fit is "
			    "lora_r %d (~%g MB per rank, F31)", pred, p.peak_mb,
			    over * 100.0, basis, budget, margin, limit, rank, fit, mbpr);
		else
			rc = host->fail(job, "probe: predicted peak %.0f MB (probe %.1f MB "
			    "x (1 - %.1f%%), %s) exceeds budget_mb %.0f - margin_mb %.0f = "
			    "%.0f MB at lora_r %d, and no rank is predicted to fit "
			    "(~%g MB per rank, F31)", pred, p.peak_mb, over * 100.0, basis,
			    budget, margin, limit, rank, mbpr);
		return prune ? PL_EREJECTED : rc;
	}
	host->log(job, PL_LOG_INFO, "probe: predicted peak %.0f MB (probe %.1f MB x "
	    "(1 - %.1f%%), %s) fits budget_mb %.0f - margin_mb %.0f = %.0f MB",
	    pred, p.peak_mb, over * 100.0, basis, budget, margin, limit);
	return PL_OK;
}

static const struct pl_stage probe_stage = PL_STAGE(
	.name = "probe",
	.summary = "one-step VRAM probe, calibrated; refuses a config that will not fit",
	.flags = PL_STAGE_REUSE,
	.keys = probe_keys,
	.check = probe_check,
	.run = probe_run);

PL_PLUGIN(&host, &probe_stage)
