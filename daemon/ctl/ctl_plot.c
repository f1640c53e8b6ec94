/*
 * ctl_plot.c: pipelinectl plot RUN [--vs RUN] [--job JOB] -o FILE.png|svg
 *
 * Draws a train job's loss per step, across every resumed segment, with
 * its learning rate on the second axis and a dashed line at each step a
 * relaunch resumed from; with --vs, the other run's curves on the same
 * axes. The figures are the store's per-step metrics (the train stage
 * keeps one value per step across every relaunch), not a log of the last
 * segment (G30). gnuplot draws it, called as a program; the picture
 * appears under its final name only when whole.
 */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl.h"
#include "plio.h"
#include "pld.h"

struct series {
	char run[128];
	char job[128];
	char loss[PATH_MAX];	/* data files: "step value" lines */
	char lr[PATH_MAX];
	long *resumes;
	int nresumes;
	int nloss, nlr;
	double lo[3], hi[3];	/* the steps', losses' and rates' extremes */
};

enum { R_STEP, R_LOSS, R_LR };

/* Why the plot failed, said once by ctl_fail() after the temporary files
 * are gone: the code and the message. */
static const char *plot_code = "ELOCAL";
static char plot_err[PATH_MAX + 4352];

/* Widen a series' extremes to take v. */
static void
range_add(struct series *s, int which, int n, double v)
{
	if (n == 0 || v < s->lo[which])
		s->lo[which] = v;
	if (n == 0 || v > s->hi[which])
		s->hi[which] = v;
}

/* The run's train job: the one named, or the first of stage train. */
static int
train_job(const char *run, const char *want, char *out, size_t outsz)
{
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "run", run);
	if (ctl_request(PLV_status, a, &r) == -1)
		return -1;
	int found = 0;
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "jobs")) {
		if (want ? strcmp(jstr(x, "name"), want) == 0 :
		    strcmp(jstr(x, "stage"), "train") == 0) {
			snprintf(out, outsz, "%s", jstr(x, "name"));
			found = 1;
			break;
		}
	}
	cJSON_Delete(r);
	if (!found) {
		if (want)
			ctl_fail(CTL_ENOENT, "ENOENT", "run %s has no job %s", run, want);
		ctl_fail(CTL_ENOENT, "ENOENT", "run %s has no job of stage train (name one with --job)",
		    run);
	}
	return 0;
}

/* Fetch the job's metrics and write loss and lr as data files in dir. */
static int
fetch(struct series *s, const char *dir, int idx)
{
	cJSON *a = cJSON_CreateObject(), *r = NULL;
	cJSON_AddStringToObject(a, "run", s->run);
	cJSON_AddStringToObject(a, "job", s->job);
	if (ctl_request(PLV_metrics, a, &r) == -1)
		return -1;
	snprintf(s->loss, sizeof(s->loss), "%s/loss-%d.dat", dir, idx);
	snprintf(s->lr, sizeof(s->lr), "%s/lr-%d.dat", dir, idx);
	FILE *fl = fopen(s->loss, "w"), *fr = fopen(s->lr, "w");
	if (fl == NULL || fr == NULL) {
		snprintf(plot_err, sizeof(plot_err), "%s: %s", dir, strerror(errno));
		if (fl != NULL)
			fclose(fl);
		if (fr != NULL)
			fclose(fr);
		cJSON_Delete(r);
		return -1;
	}
	const cJSON *x;
	cJSON_ArrayForEach(x, cJSON_GetObjectItemCaseSensitive(r, "metrics")) {
		const char *name = jstr(x, "name");
		long step = (long)jnum(x, "step");
		double v = jnum(x, "value");
		if (strcmp(name, "loss") == 0) {
			fprintf(fl, "%ld %.9g\n", step, v);
			range_add(s, R_STEP, s->nloss, (double)step);
			range_add(s, R_LOSS, s->nloss++, v);
		} else if (strcmp(name, "lr") == 0) {
			fprintf(fr, "%ld %.9g\n", step, v);
			range_add(s, R_LR, s->nlr++, v);
		} else if (strcmp(name, "resumed") == 0) {
			s->resumes = xrealloc(s->resumes, (size_t)s->nresumes + 1, sizeof(long));
			s->resumes[s->nresumes++] = step;
		}
	}
	cJSON_Delete(r);
	int e1 = fclose(fl), e2 = fclose(fr);
	if (e1 != 0 || e2 != 0) {
		snprintf(plot_err, sizeof(plot_err), "%s: %s", dir, strerror(errno));
		return -1;
	}
	if (s->nloss == 0) {
		plot_code = "ENODATA";
		snprintf(plot_err, sizeof(plot_err), "job %s of run %s has no loss metric yet",
		    s->job, s->run);
		return -1;
	}
	return 0;
}

/* Write a gnuplot string literal: single quotes, doubled inside. */
static void
gp_str(FILE *f, const char *s)
{
	fputc('\'', f);
	for (; *s; s++) {
		if (*s == '\'')
			fputc('\'', f);
		fputc(*s, f);
	}
	fputc('\'', f);
}

static void
plot_usage(void)
{
	fprintf(stderr, "usage: pipelinectl plot RUN [--vs RUN] [--job JOB] "
	    "[--size WxH] -o FILE.png|FILE.svg\n");
	exit(2);
}

int
ctl_plot(int argc, char **argv)
{
	const char *out = NULL, *job = NULL, *size = "1000,600";
	struct series s[2];
	char sizebuf[32], tmp[PATH_MAX], script[PATH_MAX];

	memset(s, 0, sizeof(s));
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-o") == 0 && i + 1 < argc)
			out = argv[++i];
		else if (strcmp(argv[i], "--vs") == 0 && i + 1 < argc)
			snprintf(s[1].run, sizeof(s[1].run), "%s", argv[++i]);
		else if (strcmp(argv[i], "--job") == 0 && i + 1 < argc)
			job = argv[++i];
		else if (strcmp(argv[i], "--size") == 0 && i + 1 < argc) {
			int w, h;
			if (sscanf(argv[++i], "%dx%d", &w, &h) != 2 || w < 100 || h < 100 ||
			    w > 10000 || h > 10000)
				ctl_fail(CTL_EUSAGE, "EUSAGE",
				    "--size wants WIDTHxHEIGHT in pixels, 100 to 10000");
			snprintf(sizebuf, sizeof(sizebuf), "%d,%d", w, h);
			size = sizebuf;
		} else if (argv[i][0] == '-')
			plot_usage();
		else if (s[0].run[0] == '\0')
			snprintf(s[0].run, sizeof(s[0].run), "%s", argv[i]);
		else
			plot_usage();
	}
	if (s[0].run[0] == '\0' || out == NULL)
		plot_usage();
	int nser = s[1].run[0] ? 2 : 1;
	const char *ext = strrchr(out, '.');
	const char *term;
	if (ext && strcmp(ext, ".png") == 0)
		term = "pngcairo";
	else if (ext && strcmp(ext, ".svg") == 0)
		term = "svg";
	else
		ctl_fail(CTL_EUSAGE, "EUSAGE", "%s: the output's name must end in .png or .svg", out);

	/* gnuplot is a program we call; say which package brings it. */
	if (system("command -v gnuplot >/dev/null 2>&1") != 0)
		ctl_fail(CTL_ERROR, "ELOCAL",
		    "gnuplot is not installed (Debian: apt-get install gnuplot-nox)");

	char dir[] = "/tmp/pipelinectl-plot.XXXXXX";
	if (mkdtemp(dir) == NULL)
		ctl_fail(CTL_ERROR, "ELOCAL", "%s: %s", dir, strerror(errno));
	int rc = 1;
	for (int i = 0; i < nser; i++) {
		if (train_job(s[i].run, job, s[i].job, sizeof(s[i].job)) == -1 ||
		    fetch(&s[i], dir, i) == -1)
			goto out;
	}

	/* The picture goes to a temporary name beside its final one. */
	snprintf(tmp, sizeof(tmp), "%s.tmp.%d%s", out, (int)getpid(), ext);
	snprintf(script, sizeof(script), "%s/plot.gp", dir);
	FILE *f = fopen(script, "w");
	if (f == NULL) {
		snprintf(plot_err, sizeof(plot_err), "%s: %s", script, strerror(errno));
		goto out;
	}
	fprintf(f, "set terminal %s size %s noenhanced font 'sans,10'\n", term, size);
	fprintf(f, "set output ");
	gp_str(f, tmp);
	fprintf(f, "\nset title ");
	char title[512];
	if (nser == 2)
		snprintf(title, sizeof(title), "training loss: %s (%s) vs %s (%s)",
		    s[0].run, s[0].job, s[1].run, s[1].job);
	else
		snprintf(title, sizeof(title), "training loss: %s (%s)", s[0].run, s[0].job);
	gp_str(f, title);
	fprintf(f, "\nset xlabel 'optimizer step'\nset ylabel 'loss'\n"
	    "set ytics nomirror\nset grid\nset key outside bottom center horizontal\n");
	/* An axis whose values are all one (a constant learning rate, a
	 * single step) gets a range around that value: gnuplot would warn
	 * and label every tick of its own widened range alike. */
	int nlr = 0;
	for (int i = 0; i < nser; i++)
		nlr += s[i].nlr;
	static const char *const axis[3] = { "x", "y", "y2" };
	for (int a = R_STEP; a <= R_LR; a++) {
		double lo = 0, hi = 0;
		int n = 0;
		for (int i = 0; i < nser; i++) {
			if (a == R_LR && s[i].nlr == 0)
				continue;
			if (n++ == 0 || s[i].lo[a] < lo)
				lo = s[i].lo[a];
			if (n == 1 || s[i].hi[a] > hi)
				hi = s[i].hi[a];
		}
		if (n == 0 || hi - lo > fabs(hi) * 1e-9)
			continue;
		if (a == R_LR) /* a rate is never below 0: from 0 to twice it */
			fprintf(f, "set y2range [0:%.9g]\n", lo > 0 ? 2 * lo : 1);
		else {
			double d = a == R_STEP ? 1 : lo != 0 ? fabs(lo) * 0.1 : 1;
			fprintf(f, "set %srange [%.9g:%.9g]\n", axis[a], lo - d, hi + d);
		}
	}
	if (nlr > 0)
		fprintf(f, "set y2label 'learning rate'\nset y2tics\nset format y2 '%%.3g'\n");
	/* A dashed line at each step a relaunch resumed from. */
	int arrow = 1;
	for (int i = 0; i < nser; i++)
		for (int k = 0; k < s[i].nresumes; k++) {
			fprintf(f, "set arrow %d from %ld, graph 0 to %ld, graph 1 nohead "
			    "dt 2 lw 1 lc rgb '%s'\n", arrow++, s[i].resumes[k], s[i].resumes[k],
			    i == 0 ? "#c03030" : "#3060c0");
			fprintf(f, "set label %d ", arrow);
			char lab[160];
			snprintf(lab, sizeof(lab), "resume %s", s[i].run);
			gp_str(f, lab);
			fprintf(f, " at %ld, graph %.2f left rotate by 90 offset -0.8,0 tc rgb '%s'\n",
			    s[i].resumes[k], i == 0 ? 0.03 : 0.4, i == 0 ? "#c03030" : "#3060c0");
			arrow++;
		}
	fprintf(f, "plot ");
	static const char *colour[2] = { "#c03030", "#3060c0" };
	for (int i = 0; i < nser; i++) {
		char lab[300];
		if (i > 0)
			fprintf(f, ", ");
		gp_str(f, s[i].loss);
		snprintf(lab, sizeof(lab), "loss %s", s[i].run);
		fprintf(f, " using 1:2 with %s lw 2 lc rgb '%s' title ",
		    s[i].nloss > 1 ? "lines" : "points pt 7", colour[i]);
		gp_str(f, lab);
		if (s[i].nlr > 0) {
			fprintf(f, ", ");
			gp_str(f, s[i].lr);
			snprintf(lab, sizeof(lab), "lr %s", s[i].run);
			fprintf(f, " using 1:2 axes x1y2 with %s lc rgb '%s' title ",
			    s[i].nlr > 1 ? "lines dt 3 lw 1.5" : "points pt 6", colour[i]);
			gp_str(f, lab);
		}
	}
	fprintf(f, "\nunset output\n");
	if (fclose(f) != 0) {
		snprintf(plot_err, sizeof(plot_err), "%s: %s", script, strerror(errno));
		goto out;
	}

	pid_t pid = fork();
	if (pid == -1) {
		snprintf(plot_err, sizeof(plot_err), "fork: %s", strerror(errno));
		goto out;
	}
	/* gnuplot's own words go to a file: shown when it fails, not
	 * between pipelinectl's lines when it draws. */
	char gperr[PATH_MAX];
	snprintf(gperr, sizeof(gperr), "%s/gnuplot.err", dir);
	if (pid == 0) {
		int fd = open(gperr, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
		if (fd == -1 || dup2(fd, 2) == -1)
			_exit(126);
		execlp("gnuplot", "gnuplot", script, (char *)NULL);
		_exit(127);
	}
	int st;
	while (waitpid(pid, &st, 0) == -1 && errno == EINTR)
		;
	struct stat sb;
	if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || stat(tmp, &sb) == -1 || sb.st_size == 0) {
		char *said = plc_read_file(gperr, NULL, 4096);
		snprintf(plot_err, sizeof(plot_err), "gnuplot drew no %s (%s %d)%s%s", out,
		    WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
		    said && *said ? ":\n" : "", said ? said : "");
		free(said);
		unlink(tmp);
		unlink(gperr);
		goto out;
	}
	unlink(gperr);
	/* Whole: fsync, then the final name. */
	FILE *g = fopen(tmp, "r+");
	if (g == NULL || fsync(fileno(g)) == -1 || fclose(g) != 0 || rename(tmp, out) == -1) {
		snprintf(plot_err, sizeof(plot_err), "%s: %s", out, strerror(errno));
		unlink(tmp);
		goto out;
	}
	if (ctl_json) {
		cJSON *o = cJSON_CreateObject();
		cJSON_AddStringToObject(o, "path", out);
		cJSON_AddStringToObject(o, "run", s[0].run);
		cJSON_AddStringToObject(o, "job", s[0].job);
		cJSON_AddNumberToObject(o, "steps", s[0].nloss);
		cJSON_AddNumberToObject(o, "resumes", s[0].nresumes);
		if (nser == 2)
			cJSON_AddStringToObject(o, "vs", s[1].run);
		char *t = cJSON_PrintUnformatted(o);
		printf("%s\n", t);
		free(t);
		cJSON_Delete(o);
	} else
		printf("%s: loss of %s over %d steps, %d resume(s)%s%s\n", out, s[0].run,
		    s[0].nloss, s[0].nresumes, nser == 2 ? ", against " : "",
		    nser == 2 ? s[1].run : "");
	rc = 0;
out:
	for (int i = 0; i < nser; i++) {
		if (s[i].loss[0])
			unlink(s[i].loss);
		if (s[i].lr[0])
			unlink(s[i].lr);
		free(s[i].resumes);
	}
	snprintf(script, sizeof(script), "%s/plot.gp", dir);
	unlink(script);
	rmdir(dir);
	if (rc != 0 && plot_err[0] != '\0')
		ctl_fail(CTL_ERROR, plot_code, "%s", plot_err);
	return rc;
}
