/*
 * test_slurm.c: the Slurm side of the slurm executor (daemon/server/slurm.c),
 * without a cluster: state names and their mapping, the parsers fed with
 * outputs captured from Slurm 22.05 on the test cluster
 * (tests/tools/slurm-cluster.sh), the executor options, and the batch
 * script, run under /bin/sh with the real pipeline-shim to check a
 * restart's resume from the newest complete checkpoint, the refusal after
 * the daemon recorded the end, USR1 forwarding and the exit status.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plio.h"
#include "slurm.h"
#include "runner.h"

/* Captured with `scontrol show job -o ID` on the test cluster. */
static const char *sc_pending =
    "JobId=17 JobName=ok.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901743 Nice=0 Account=(null) QOS=(null) JobState=PENDING Reason=PartitionTimeLimit Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=00:10:00 TimeMin=N/A SubmitTime=2026-11-29T23:16:05 EligibleTime=2026-11-29T23:16:05 AccrueTime=2026-11-29T23:16:05 StartTime=Unknown EndTime=Unknown Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T23:16:05 Scheduler=Main Partition=short AllocNode:Sid=localhost:7059 ReqNodeList=(null) ExcNodeList=(null) NodeList= NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=256M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryCPU=256M MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/sx/ok.sh WorkDir=/tmp/sx StdErr=/dev/null StdIn=/dev/null StdOut=/dev/null Power= \n";
static const char *sc_completed =
    "JobId=1 JobName=ok.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901759 Nice=0 Account=(null) QOS=(null) JobState=COMPLETED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00 TimeLimit=UNLIMITED TimeMin=N/A SubmitTime=2026-11-29T23:07:47 EligibleTime=2026-11-29T23:07:47 AccrueTime=2026-11-29T23:07:47 StartTime=2026-11-29T23:07:49 EndTime=2026-11-29T23:07:49 Deadline=N/A SuspendTime=None SecsPreSuspend=0 LastSchedEval=2026-11-29T23:07:49 Scheduler=Main Partition=debug AllocNode:Sid=localhost:7059 ReqNodeList=(null) ExcNodeList=(null) NodeList=vm BatchHost=vm NumNodes=1 NumCPUs=1 NumTasks=1 CPUs/Task=1 ReqB:S:C:T=0:0:*:* TRES=cpu=1,mem=12052M,node=1,billing=1 Socks/Node=* NtasksPerN:B:S:C=0:0:*:* CoreSpec=* MinCPUsNode=1 MinMemoryNode=0 MinTmpDiskNode=0 Features=(null) DelayBoot=00:00:00 OverSubscribe=OK Contiguous=0 Licenses=(null) Network=(null) Command=/tmp/sx/ok.sh WorkDir=/tmp/sx StdErr=/tmp/sx/ok.1.out StdIn=/dev/null StdOut=/tmp/sx/ok.1.out Power= \n";
/* Excerpts of the same lines for other endings (every key of interest as
 * printed; the long tails cut). */
static const char *sc_timeout =
    "JobId=14 JobName=to.sh UserId=root(0) GroupId=root(0) MCS_label=N/A Priority=4294901745 Nice=0 Account=(null) QOS=(null) JobState=TIMEOUT Reason=TimeLimit Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=143:0 RunTime=00:01:29 TimeLimit=00:01:00 NodeList=vm BatchHost=vm Command=/tmp/sx/to.sh WorkDir=/tmp/sx Power= ";
static const char *sc_cancelled =
    "JobId=12 JobName=long.sh UserId=root(0) GroupId=root(0) JobState=CANCELLED Reason=None Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:01 NodeList=vm BatchHost=vm";
static const char *sc_requeued =
    "JobId=12 JobName=long.sh UserId=root(0) GroupId=root(0) JobState=PENDING Reason=BeginTime Dependency=(null) Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:15 RunTime=00:00:00 EligibleTime=2026-11-29T23:11:01 NodeList=";
static const char *sc_memkill =
    "JobId=15 JobName=oom.sh UserId=root(0) GroupId=root(0) JobState=FAILED Reason=JobLaunchFailure Dependency=(null) Requeue=1 Restarts=0 BatchFlag=1 Reboot=0 ExitCode=0:9 RunTime=00:00:01 NodeList=vm BatchHost=vm";
/* Hand-made: a value with spaces (WorkDir), a state Slurm 22.05 prints on
 * clusters with cgroups, and a node failure. */
static const char *sc_spaces =
    "JobId=77 JobName=x JobState=OUT_OF_MEMORY Reason=OutOfMemory Restarts=2 ExitCode=0:125 Command=/a b/run.sh WorkDir=/data/my jobs/x StdOut=/data/my jobs/x/log NodeList=gpu[01-02] Power=";
static const char *sc_nodefail =
    "JobId=78 JobName=x JobState=NODE_FAIL Reason=NodeDown Restarts=0 ExitCode=0:0 NodeList=gpu03";

/* Captured from jobcomp/filetxt (JobCompLoc): a requeue writes a record
 * too, then the final one. */
static const char *jobcomp_text =
    "JobId=12 UserId=root(0) GroupId=root(0) Name=long.sh JobState=CANCELLED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-29T23:08:56 EndTime=2026-11-29T23:08:57 NodeList=vm NodeCnt=1 ProcCnt=1 WorkDir=/tmp/sx ReservationName= Tres=cpu=1,mem=256M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T23:08:55 EligibleTime=2026-11-29T23:08:55 DerivedExitCode=0:0 ExitCode=0:0 \n"
    "JobId=12 UserId=root(0) GroupId=root(0) Name=long.sh JobState=PENDING Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-29T23:08:56 EndTime=2026-11-29T23:09:00 NodeList=vm NodeCnt=0 ProcCnt=1 WorkDir=/tmp/sx ReservationName= Tres=cpu=1,mem=256M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T23:08:55 EligibleTime=2026-11-29T23:08:55 DerivedExitCode=0:0 ExitCode=0:15 \n"
    "JobId=2 UserId=root(0) GroupId=root(0) Name=fail.sh JobState=FAILED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-29T23:07:52 EndTime=2026-11-29T23:07:52 NodeList=vm NodeCnt=1 ProcCnt=1 WorkDir=/tmp/sx ReservationName= Tres=cpu=1,mem=12052M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T23:07:47 EligibleTime=2026-11-29T23:07:47 DerivedExitCode=0:0 ExitCode=3:0 \n"
    "JobId=120 UserId=root(0) GroupId=root(0) Name=other JobState=COMPLETED Partition=debug ExitCode=0:0 \n"
    "JobId=12 UserId=root(0) GroupId=root(0) Name=long.sh JobState=COMPLETED Partition=debug TimeLimit=UNLIMITED StartTime=2026-11-29T23:11:02 EndTime=2026-11-29T23:11:32 NodeList=vm NodeCnt=1 ProcCnt=1 WorkDir=/tmp/sx ReservationName= Tres=cpu=1,mem=256M,node=1,billing=1 Account= QOS= WcKey= Cluster=unknown SubmitTime=2026-11-29T23:08:55 EligibleTime=2026-11-29T23:11:01 DerivedExitCode=0:0 ExitCode=0:0 \n";

static void
case_states(void)
{
	CHECK(slurm_state_parse("PENDING") == SLURM_PENDING, "PENDING");
	CHECK(slurm_state_parse("CANCELLED by 0") == SLURM_CANCELLED, "sacct form");
	CHECK(slurm_state_parse("COMPLETING+") == SLURM_COMPLETING, "trailing flag");
	CHECK(slurm_state_parse("PD") == SLURM_PENDING, "compact code");
	CHECK(slurm_state_parse("OOM") == SLURM_OUT_OF_MEMORY, "compact OOM");
	CHECK(slurm_state_parse("pending") == SLURM_UNKNOWN, "lower case is not Slurm's");
	CHECK(slurm_state_parse("") == SLURM_UNKNOWN, "empty");
	CHECK(strcmp(slurm_state_name(SLURM_NODE_FAIL), "NODE_FAIL") == 0, "name");

	static const struct { int st, proc; const char *cls; } m[] = {
		{ SLURM_PENDING, PROC_QUEUED, "" },
		{ SLURM_REQUEUED, PROC_QUEUED, "" },
		{ SLURM_REQUEUE_HOLD, PROC_QUEUED, "" },
		{ SLURM_CONFIGURING, PROC_QUEUED, "" },
		{ SLURM_RUNNING, PROC_RUNNING, "" },
		{ SLURM_COMPLETING, PROC_RUNNING, "" },
		{ SLURM_SUSPENDED, PROC_RUNNING, "" },
		{ SLURM_COMPLETED, PROC_ENDED, "" },
		{ SLURM_FAILED, PROC_ENDED, "" },
		{ SLURM_TIMEOUT, PROC_ENDED, "timeout" },
		{ SLURM_DEADLINE, PROC_ENDED, "timeout" },
		{ SLURM_NODE_FAIL, PROC_ENDED, "node_fail" },
		{ SLURM_BOOT_FAIL, PROC_ENDED, "node_fail" },
		{ SLURM_PREEMPTED, PROC_ENDED, "preempted" },
		{ SLURM_CANCELLED, PROC_ENDED, "cancelled" },
		{ SLURM_OUT_OF_MEMORY, PROC_ENDED, "oom" },
	};
	for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++) {
		CHECK(slurm_proc_state(m[i].st) == m[i].proc, "%s -> proc state %d",
		    slurm_state_name(m[i].st), slurm_proc_state(m[i].st));
		CHECK(strcmp(slurm_end_class(m[i].st), m[i].cls) == 0, "%s -> class %s",
		    slurm_state_name(m[i].st), slurm_end_class(m[i].st));
		CHECK(slurm_state_terminal(m[i].st) == (m[i].proc == PROC_ENDED), "%s terminal",
		    slurm_state_name(m[i].st));
	}
}

static void
case_scontrol(void)
{
	struct slurm_job j;
	CHECK(slurm_parse_scontrol(sc_pending, &j) == 0, "pending");
	CHECK(strcmp(j.id, "17") == 0, "id %s", j.id);
	CHECK(j.state == SLURM_PENDING, "state %s", j.state_name);
	CHECK(strcmp(j.reason, "PartitionTimeLimit") == 0, "reason \"%s\"", j.reason);
	CHECK(j.restarts == 0, "restarts %d", j.restarts);
	CHECK(j.nodes[0] == '\0', "nodes \"%s\"", j.nodes);

	CHECK(slurm_parse_scontrol(sc_completed, &j) == 0, "completed");
	CHECK(j.state == SLURM_COMPLETED && j.reason[0] == '\0', "%s \"%s\"", j.state_name, j.reason);
	CHECK(j.have_exit && j.exit_status == 0 && j.exit_signal == 0, "exit");
	CHECK(strcmp(j.nodes, "vm") == 0, "nodes \"%s\"", j.nodes);

	CHECK(slurm_parse_scontrol(sc_timeout, &j) == 0, "timeout");
	CHECK(j.state == SLURM_TIMEOUT && strcmp(j.reason, "TimeLimit") == 0, "%s %s",
	    j.state_name, j.reason);
	CHECK(j.exit_status == 143 && j.exit_signal == 0, "ExitCode 143:0 -> %d:%d",
	    j.exit_status, j.exit_signal);

	CHECK(slurm_parse_scontrol(sc_cancelled, &j) == 0, "cancelled");
	CHECK(j.state == SLURM_CANCELLED && j.exit_signal == 15, "%s %d", j.state_name, j.exit_signal);

	CHECK(slurm_parse_scontrol(sc_requeued, &j) == 0, "requeued");
	CHECK(j.state == SLURM_PENDING && j.restarts == 1 && strcmp(j.reason, "BeginTime") == 0,
	    "%s restarts %d %s", j.state_name, j.restarts, j.reason);

	CHECK(slurm_parse_scontrol(sc_memkill, &j) == 0, "mem kill");
	CHECK(j.state == SLURM_FAILED && j.exit_signal == 9, "%s %d", j.state_name, j.exit_signal);

	CHECK(slurm_parse_scontrol(sc_spaces, &j) == 0, "spaces");
	CHECK(j.state == SLURM_OUT_OF_MEMORY && j.restarts == 2, "%s %d", j.state_name, j.restarts);
	CHECK(strcmp(j.nodes, "gpu[01-02]") == 0, "nodes \"%s\"", j.nodes);
	CHECK(strcmp(j.reason, "OutOfMemory") == 0, "reason %s", j.reason);

	CHECK(slurm_parse_scontrol(sc_nodefail, &j) == 0, "node fail");
	CHECK(j.state == SLURM_NODE_FAIL && strcmp(j.reason, "NodeDown") == 0, "%s", j.state_name);

	/* Not a job record. */
	CHECK(slurm_parse_scontrol("slurm_load_jobs error: Invalid job id specified\n", &j) == -1,
	    "error text");
	CHECK(slurm_parse_scontrol("", &j) == -1, "empty");
	CHECK(slurm_parse_scontrol("JobId=5 JobState=WEIRD", &j) == -1, "unknown state");
	CHECK(slurm_parse_scontrol("JobState=RUNNING", &j) == -1, "no id");
	/* Only the first line counts. */
	CHECK(slurm_parse_scontrol("JobId=5 JobState=RUNNING\nJobId=6 JobState=FAILED\n", &j) == 0 &&
	    strcmp(j.id, "5") == 0 && j.state == SLURM_RUNNING, "first line");
}

static void
case_others(void)
{
	struct slurm_job j;
	/* squeue -h -j 17 -o '%i|%T|%r|%N' (captured). */
	CHECK(slurm_parse_squeue("17|PENDING|PartitionTimeLimit|\n", "17", &j) == 0, "squeue");
	CHECK(j.state == SLURM_PENDING && strcmp(j.reason, "PartitionTimeLimit") == 0, "squeue %s",
	    j.reason);
	CHECK(slurm_parse_squeue("18|RUNNING|None|vm\n", "18", &j) == 0 && j.reason[0] == '\0' &&
	    strcmp(j.nodes, "vm") == 0, "squeue running");
	CHECK(slurm_parse_squeue("18|RUNNING|None|vm\n", "1", &j) == -1, "other id");
	CHECK(slurm_parse_squeue("", "1", &j) == -1, "empty squeue");

	/* sacct -n -P -X (accounting is off on the test cluster, so this is
	 * sacct's documented format, not a capture). */
	CHECK(slurm_parse_sacct("41|CANCELLED by 0|0:15|None|vm\n", "41", &j) == 0, "sacct");
	CHECK(j.state == SLURM_CANCELLED && j.exit_signal == 15, "sacct %s %d", j.state_name,
	    j.exit_signal);
	CHECK(slurm_parse_sacct("42|PENDING|0:0|Resources|None assigned\n", "42", &j) == 0 &&
	    strcmp(j.reason, "Resources") == 0 && j.nodes[0] == '\0', "sacct pending");
	CHECK(slurm_parse_sacct("Slurm accounting storage is disabled\n", "42", &j) == -1,
	    "accounting off");

	CHECK(slurm_parse_jobcomp(jobcomp_text, "12", &j) == 0, "jobcomp 12");
	CHECK(j.state == SLURM_COMPLETED, "last record wins: %s", j.state_name);
	CHECK(strcmp(j.source, "jobcomp") == 0, "source %s", j.source);
	CHECK(slurm_parse_jobcomp(jobcomp_text, "2", &j) == 0 && j.state == SLURM_FAILED &&
	    j.exit_status == 3, "jobcomp 2: %s %d", j.state_name, j.exit_status);
	CHECK(slurm_parse_jobcomp(jobcomp_text, "1", &j) == -1, "1 is not a prefix of 12 or 120");
	CHECK(slurm_parse_jobcomp("", "1", &j) == -1, "empty jobcomp");

	char id[64];
	CHECK(slurm_parse_sbatch("17\n", id, sizeof(id)) == 0 && strcmp(id, "17") == 0, "sbatch");
	CHECK(slurm_parse_sbatch("17;pltest\n", id, sizeof(id)) == 0 && strcmp(id, "17") == 0,
	    "sbatch cluster");
	CHECK(slurm_parse_sbatch("sbatch: warning: can't honor --ntasks-per-node\n42\n", id,
	    sizeof(id)) == 0 && strcmp(id, "42") == 0, "sbatch warning first");
	CHECK(slurm_parse_sbatch("sbatch: error: Invalid generic resource (gres) specification\n",
	    id, sizeof(id)) == -1, "sbatch error");
	CHECK(slurm_parse_sbatch("123456789012345678901234567890\n", id, 8) == -1, "too long");

	char v[256];
	const char *cfg = "Configuration data as of 2026-11-29T23:16:06\n"
	    "JobCompHost             = localhost\n"
	    "JobCompLoc              = /tmp/pl-slurm/jobcomp.txt\n"
	    "JobCompType             = jobcomp/filetxt\n";
	CHECK(slurm_parse_config(cfg, "JobCompLoc", v, sizeof(v)) == 0 &&
	    strcmp(v, "/tmp/pl-slurm/jobcomp.txt") == 0, "JobCompLoc \"%s\"", v);
	CHECK(slurm_parse_config(cfg, "JobComp", v, sizeof(v)) == -1, "prefix is not a key");
}

static void
case_opts(void)
{
	struct slurm_opts o;
	char err[256] = "";
	CHECK(slurm_opts_parse(NULL, &o, err, sizeof(err)) == 0, "none");
	CHECK(strcmp(o.signal, "USR1@120") == 0 && o.requeue == 1 && o.poll == 1, "defaults");
	CHECK(slurm_opts_parse("partition=gpu\ngres = gpu:1\ntime=1-12:00:00\nmem=16G\n"
	    "account=lab\nsbatch_options=--qos=high --exclusive\nsignal=USR2@300\npoll=1.5\n"
	    "requeue=no\nresources=gpu\n", &o, err, sizeof(err)) == 0, "all: %s", err);
	CHECK(strcmp(o.partition, "gpu") == 0 && strcmp(o.gres, "gpu:1") == 0 &&
	    strcmp(o.time, "1-12:00:00") == 0 && strcmp(o.mem, "16G") == 0 &&
	    strcmp(o.account, "lab") == 0 && strcmp(o.sbatch_options, "--qos=high --exclusive") == 0 &&
	    strcmp(o.signal, "USR2@300") == 0 && o.poll == 1.5 && o.requeue == 0, "values");
	CHECK(slurm_opts_parse("poll_interval=2s\nsignal_before=5m\nbin_dir=/opt/slurm/bin\n", &o,
	    err, sizeof(err)) == 0, "conf keys: %s", err);
	CHECK(o.poll == 2 && strcmp(o.signal, "USR1@300") == 0 &&
	    strcmp(o.bin_dir, "/opt/slurm/bin") == 0, "conf keys: %g %s %s", o.poll, o.signal,
	    o.bin_dir);
	CHECK(slurm_opts_parse("signal_before=0\n", &o, err, sizeof(err)) == 0 &&
	    strcmp(o.signal, "none") == 0, "signal_before=0");
	static const char *bad[] = { "time=12h", "mem=lots", "signal=USR1@soon", "poll=0",
	    "requeue=maybe", "gres=gpu: 1", "partition=a b", "nokey", "poll_interval=1d",
	    "signal_before=soon", NULL };
	static const char *key[] = { "time", "mem", "signal", "poll", "requeue", "gres",
	    "partition", "nokey", "poll_interval", "signal_before" };
	for (int i = 0; bad[i]; i++) {
		err[0] = '\0';
		CHECK(slurm_opts_parse(bad[i], &o, err, sizeof(err)) == -1, "%s accepted", bad[i]);
		CHECK(strstr(err, key[i]) != NULL, "%s: error does not name the key: %s", bad[i], err);
	}
}

/* ---------------------------------------------------------------- script */

static char tmp[PATH_MAX];

static void
put(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");
	if (f == NULL) {
		perror(path);
		exit(1);
	}
	fputs(text, f);
	fclose(f);
}

static char *
slurp(const char *path)
{
	return plc_read_file(path, NULL, 1 << 20);
}

/* A checkpoint in pipeline-job(7) form; corrupt writes a wrong hash. */
static void
make_checkpoint(const char *root, int step, int complete, int corrupt)
{
	char d[PATH_MAX + 64], f[PATH_MAX + 96], hex[65], line[256];
	snprintf(d, sizeof(d), "%s/checkpoint-%d", root, step);
	plc_mkdirs(d, 0755);
	char body[64];
	snprintf(body, sizeof(body), "weights of step %d\n", step);
	snprintf(f, sizeof(f), "%s/adapter.bin", d);
	put(f, body);
	plc_sha256_buf(body, strlen(body), hex);
	if (corrupt)
		hex[0] = hex[0] == '0' ? '1' : '0';
	if (complete) {
		snprintf(line, sizeof(line), "%s  adapter.bin\n", hex);
		snprintf(f, sizeof(f), "%s/COMPLETE", d);
		put(f, line);
	}
}

/* Run the script with sh, output appended to log; returns the wait status. With usr1,
 * sends SIGUSR1 to the shell once the file usr1 (in dir) exists. */
static int
run_script(const char *script, const char *dir, const char *log, int restart, const char *usr1)
{
	pid_t pid = fork();
	if (pid == 0) {
		/* What Slurm does with --output and --open-mode=append. */
		int fd = open(log, O_WRONLY | O_APPEND | O_CREAT, 0644);
		if (fd >= 0) {
			dup2(fd, 1);
			dup2(fd, 2);
		}
		char rc[16];
		snprintf(rc, sizeof(rc), "%d", restart);
		setenv("SLURM_RESTART_COUNT", rc, 1);
		setenv("SLURM_JOB_ID", "4242", 1);
		/* A variable of the batch step's that the job's env replaces. */
		setenv("PL_NOTE", "the batch step's", 1);
		execl("/bin/sh", "sh", script, (char *)NULL);
		_exit(127);
	}
	if (usr1) {
		char sj[PATH_MAX + 16];
		snprintf(sj, sizeof(sj), "%s/%s", dir, usr1);
		for (int i = 0; i < 500 && access(sj, F_OK) != 0; i++)
			usleep(10000);
		usleep(200000); /* let the child install its trap */
		kill(pid, SIGUSR1);
	}
	int st;
	waitpid(pid, &st, 0);
	return st;
}

static void
case_script(void)
{
	const char *top = getenv("TOP") ? getenv("TOP") : ".";
	char shim[PATH_MAX + 32];
	snprintf(shim, sizeof(shim), "%s/daemon/pipeline-shim", top);
	if (access(shim, X_OK) != 0) {
		fprintf(stderr, "test_slurm: %s not built; run make first\n", shim);
		check_failures++;
		return;
	}
	char dir[PATH_MAX + 16], work[PATH_MAX + 16], log[PATH_MAX + 16], ck[PATH_MAX + 32];
	char script[PATH_MAX + 32], f[PATH_MAX + 64];
	snprintf(dir, sizeof(dir), "%s/proc", tmp);
	snprintf(work, sizeof(work), "%s/work", tmp);
	snprintf(log, sizeof(log), "%s/job.log", tmp);
	snprintf(ck, sizeof(ck), "%s/checkpoints", work);
	snprintf(script, sizeof(script), "%s/job.sbatch", dir);
	plc_mkdirs(dir, 0755);
	plc_mkdirs(ck, 0755);
	make_checkpoint(ck, 25, 1, 0);
	make_checkpoint(ck, 40, 0, 0);   /* no marker: being written */
	make_checkpoint(ck, 50, 1, 1);   /* marker does not match */

	struct slurm_opts o;
	char err[256];
	slurm_opts_parse("partition=debug\ntime=10\nmem=1G\ngres=gpu:1\n"
	    "sbatch_options=--qos=high --exclusive\n", &o, err, sizeof(err));
	char envw[PATH_MAX + 32], envq[] = "PL_NOTE=it's \"quoted\" $HOME `x`";
	snprintf(envw, sizeof(envw), "PL_WORKDIR=%s", work);
	/* LD_PRELOAD: a library that is not there, which the loader names on
	 * standard error in every process that has it in its environment. */
	char *envp[] = { envw, "PL_RUN=v18", "PL_JOB=train", envq,
	    "LD_PRELOAD=/nonexistent/pl-preload.so", NULL };
	char *argv[] = { shim, "-d", dir, "-l", log, "-c", work, "--", "/bin/sh", "-c",
	    "printf '%s\\n' \"${PL_RESUME_FROM:-none}\" > resume.txt; "
	    "printf '%s\\n' \"$PL_NOTE\" > note.txt; printf '%s\\n' \"$SLURM_JOB_ID\" > slurmid.txt; "
	    "tr '\\0' '\\n' < /proc/$PPID/environ > shim-env.txt; exit 3", NULL };

	/* Options and paths that an #SBATCH line cannot carry are refused. */
	/* The records directory, where the daemon records the end. */
	char rdir[PATH_MAX];
	proc_records_dir(dir, rdir, sizeof(rdir));
	CHECK(slurm_script(&o, "/a dir", "/a dir/.shim/x", log, argv, envp, work, err,
	    sizeof(err)) == NULL &&
	    strstr(err, "--chdir") != NULL, "space in dir: %s", err);
	char *bad_env[] = { "1X=y", NULL };
	CHECK(slurm_script(&o, dir, rdir, log, argv, bad_env, work, err, sizeof(err)) == NULL,
	    "bad env name accepted");

	char *text = slurm_script(&o, dir, rdir, log, argv, envp, work, err, sizeof(err));
	CHECK(text != NULL, "script: %s", err);
	if (text == NULL)
		return;
	CHECK(strstr(text, "#SBATCH --job-name=pl.v18.train\n") != NULL, "job name");
	CHECK(strstr(text, "#SBATCH --requeue\n") != NULL, "requeue");
	CHECK(strstr(text, "#SBATCH --signal=B:USR1@120\n") != NULL, "signal");
	CHECK(strstr(text, "#SBATCH --partition=debug\n#SBATCH --gres=gpu:1\n#SBATCH --time=10\n"
	    "#SBATCH --mem=1G\n") != NULL, "resources");
	CHECK(strstr(text, "#SBATCH --qos=high\n#SBATCH --exclusive\n") != NULL, "extra options");
	/* The extra options come first: sbatch takes an option's last
	 * occurrence, so the daemon's own lines win over them. */
	CHECK(strstr(text, "#SBATCH --exclusive\n") < strstr(text, "#SBATCH --job-name=") &&
	    strstr(text, "#SBATCH --job-name=") < strstr(text, "#SBATCH --output="),
	    "the extra options are not before the daemon's own");
	CHECK(strstr(text, "#SBATCH --open-mode=append\n") != NULL, "append");
	put(script, text);
	free(text);

	/* First run: the job's status comes through; no resume. */
	int st = run_script(script, dir, log, 0, NULL);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "first run: status %d", st);
	snprintf(f, sizeof(f), "%s/resume.txt", work);
	char *t = slurp(f);
	CHECK(t && strcmp(t, "none\n") == 0, "first run resumed from %s", t ? t : "(nothing)");
	free(t);
	snprintf(f, sizeof(f), "%s/note.txt", work);
	t = slurp(f);
	CHECK(t && strcmp(t, "it's \"quoted\" $HOME `x`\n") == 0, "env quoting: %s", t ? t : "(none)");
	free(t);
	snprintf(f, sizeof(f), "%s/exit.json", dir);
	CHECK(access(f, F_OK) == 0, "no exit record after the first run");
	/* The job gets the batch step's environment (Slurm's variables). */
	snprintf(f, sizeof(f), "%s/slurmid.txt", work);
	t = slurp(f);
	CHECK(t && strcmp(t, "4242\n") == 0, "SLURM_JOB_ID in the job: %s", t ? t : "(none)");
	free(t);
	/* The shim, which the script runs as the daemon's user (root), got
	 * none of the job's environment: only PATH. */
	snprintf(f, sizeof(f), "%s/shim-env.txt", work);
	t = slurp(f);
	CHECK(t && strcmp(t, "PATH=/usr/sbin:/usr/bin:/sbin:/bin\n") == 0,
	    "the shim's environment: %s", t ? t : "(none)");
	free(t);
	t = slurp(log);
	CHECK(t && strstr(t, "pl-preload.so") != NULL, "the job's program lacks its LD_PRELOAD");
	/* Twice, from the job's sh and its tr: no process of the script's
	 * (env, the shim) had it. */
	int npre = 0;
	for (const char *q = t; q && (q = strstr(q, "pl-preload.so")) != NULL; q++)
		npre++;
	CHECK(npre == 2, "LD_PRELOAD named %d times, not 2 (the job's sh and tr): %s", npre,
	    t ? t : "");
	free(t);

	/* A restart (requeue): the exit record is moved aside and the newest
	 * complete checkpoint (25; 40 has no marker, 50 a bad hash) is the
	 * one to resume from. */
	st = run_script(script, dir, log, 1, NULL);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3, "restart: status %d", st);
	snprintf(f, sizeof(f), "%s/resume.txt", work);
	t = slurp(f);
	char want[PATH_MAX + 64];
	snprintf(want, sizeof(want), "%s/checkpoint-25\n", ck);
	CHECK(t && strcmp(t, want) == 0, "restart resumed from %s, not %s", t ? t : "(nothing)", want);
	free(t);
	snprintf(f, sizeof(f), "%s/exit.json.restart-1", dir);
	CHECK(access(f, F_OK) == 0, "previous exit record not kept as %s", f);
	t = slurp(log);
	CHECK(t && strstr(t, "checkpoint-50: a file does not match its sha256") != NULL,
	    "the corrupt checkpoint is not reported in the log");
	CHECK(t && strstr(t, "resuming from ") != NULL, "resume not logged");
	free(t);

	/* USR1 to the batch shell (Slurm's --signal=B:USR1@T) reaches the
	 * job's process group through the shim, even when the job has
	 * rewritten shim.json (its directory is its own) to name another
	 * process group: that one is never signalled. */
	pid_t other = fork();
	if (other == 0) {
		setpgid(0, 0);
		signal(SIGUSR1, SIG_DFL);
		for (;;)
			pause();
	}
	setpgid(other, other);
	char cmd2[512];
	snprintf(cmd2, sizeof(cmd2),
	    "trap 'echo got-usr1 > usr1.txt; exit 7' USR1; "
	    "printf '{\"shim_pid\":%d,\"child_pid\":%d,\"pgid\":%d}\\n' > %s/.forged; "
	    "mv -f %s/.forged %s/shim.json; touch %s/forged; i=0; "
	    "while [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; exit 0",
	    (int)other, (int)other, (int)other, dir, dir, dir, dir);
	char *argv2[] = { shim, "-d", dir, "-l", log, "-c", work, "--", "/bin/sh", "-c", cmd2, NULL };
	text = slurm_script(&o, dir, rdir, log, argv2, envp, work, err, sizeof(err));
	put(script, text);
	free(text);
	snprintf(f, sizeof(f), "%s/forged", dir);
	unlink(f);
	st = run_script(script, dir, log, 0, "forged");
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7, "USR1: status %d", st);
	snprintf(f, sizeof(f), "%s/usr1.txt", work);
	CHECK(access(f, F_OK) == 0, "USR1 never reached the job");
	int ost;
	CHECK(waitpid(other, &ost, WNOHANG) == 0,
	    "the process group the job named in shim.json was signalled");
	kill(other, SIGKILL);
	waitpid(other, &ost, 0);

	/* Once the daemon recorded the end, in its records directory, a
	 * late requeue runs nothing. */
	plc_mkdirs(rdir, 0711);
	snprintf(f, sizeof(f), "%s/slurm.ended", rdir);
	put(f, "");
	snprintf(f, sizeof(f), "%s/resume.txt", work);
	unlink(f);
	st = run_script(script, dir, log, 2, NULL);
	CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ended: status %d", st);
	CHECK(access(f, F_OK) != 0, "the job ran again after its end was recorded");
}

/* ---------------------------------------------------------------- commands */

static void
put_exec(const char *dir, const char *name, const char *body)
{
	char f[PATH_MAX + 64];
	snprintf(f, sizeof(f), "%s/%s", dir, name);
	put(f, body);
	chmod(f, 0755);
}

/*
 * slurm_query's sources in order, slurm_submit's and slurm_cancel's
 * command lines, against stand-in commands in a bin_dir (the real cluster
 * is the integration tests' business; here each source is made to answer
 * or fail on purpose).
 */
static void
case_commands(void)
{
	char bin[PATH_MAX + 16], args[PATH_MAX + 16], jc[PATH_MAX + 16], mode[PATH_MAX + 16];
	snprintf(bin, sizeof(bin), "%s/bin", tmp);
	snprintf(args, sizeof(args), "%s/args", tmp);
	snprintf(jc, sizeof(jc), "%s/jobcomp.txt", tmp);
	snprintf(mode, sizeof(mode), "%s/mode", tmp);
	plc_mkdirs(bin, 0755);
	char body[4096];
	/* scontrol: "show config" names the jobcomp file; "show job" answers
	 * by the mode file: known, forgotten (Invalid job id) or down. */
	snprintf(body, sizeof(body),
	    "#!/bin/sh\n"
	    "if [ \"$1 $2\" = \"show config\" ]; then\n"
	    "  echo 'JobCompLoc              = %s'; echo 'JobCompType             = jobcomp/filetxt'; exit 0\n"
	    "fi\n"
	    "case $(cat %s) in\n"
	    "known) echo 'JobId=%%s JobName=x JobState=RUNNING Reason=None Restarts=0 ExitCode=0:0 NodeList=n1' | sed \"s/%%s/$4/\";;\n"
	    "down) echo 'slurm_load_jobs error: Unable to contact slurm controller (connect failure)'; exit 1;;\n"
	    "*) echo 'slurm_load_jobs error: Invalid job id specified'; exit 1;;\n"
	    "esac\n", jc, mode);
	put_exec(bin, "scontrol", body);
	put_exec(bin, "sacct", "#!/bin/sh\necho 'Slurm accounting storage is disabled'\nexit 1\n");
	snprintf(body, sizeof(body), "#!/bin/sh\necho \"$@\" >> %s\n"
	    "case \"$*\" in *bad*) echo 'sbatch: error: Batch job submission failed: Invalid account or account/partition combination specified' >&2; exit 1;; esac\n"
	    "echo 'sbatch: warning: nothing much'; echo '4711;pltest'\n", args);
	put_exec(bin, "sbatch", body);
	snprintf(body, sizeof(body), "#!/bin/sh\necho \"scancel $*\" >> %s\n", args);
	put_exec(bin, "scancel", body);
	slurm_set_bin_dir(bin);

	struct slurm_job j;
	char err[256] = "";
	put(mode, "known\n");
	CHECK(slurm_query("77", "", &j, err, sizeof(err)) == 1 && strcmp(j.source, "scontrol") == 0 &&
	    j.state == SLURM_RUNNING && strcmp(j.nodes, "n1") == 0, "scontrol: %s %s", j.source, err);
	put(mode, "forgotten\n");
	CHECK(slurm_query("77", "", &j, err, sizeof(err)) == 0, "forgotten, no jobcomp file");
	put(jc, jobcomp_text);
	/* The jobcomp file found through `scontrol show config`. */
	CHECK(slurm_query("12", "", &j, err, sizeof(err)) == 1 && strcmp(j.source, "jobcomp") == 0 &&
	    j.state == SLURM_COMPLETED, "jobcomp via config: %d %s", j.state, j.source);
	CHECK(slurm_query("99", jc, &j, err, sizeof(err)) == 0, "unknown everywhere");
	put(mode, "down\n");
	CHECK(slurm_query("12", jc, &j, err, sizeof(err)) == -1 && strstr(err, "Unable to contact") != NULL,
	    "controller down: %s", err);

	char id[64], script[PATH_MAX + 16];
	snprintf(script, sizeof(script), "%s/job.sbatch", tmp);
	put(script, "#!/bin/sh\n");
	CHECK(slurm_submit(script, id, sizeof(id), err, sizeof(err)) == 0 && strcmp(id, "4711") == 0,
	    "submit: %s %s", id, err);
	char bad[PATH_MAX + 16];
	snprintf(bad, sizeof(bad), "%s/bad.sbatch", tmp);
	put(bad, "#!/bin/sh\n");
	CHECK(slurm_submit(bad, id, sizeof(id), err, sizeof(err)) == -1 &&
	    strstr(err, "Invalid account") != NULL, "refusal message: %s", err);

	unlink(args);
	CHECK(slurm_cancel("4711", 0, err, sizeof(err)) == 0, "cancel");
	CHECK(slurm_cancel("4711", SIGKILL, err, sizeof(err)) == 0, "kill");
	CHECK(slurm_cancel("4711", SIGTERM, err, sizeof(err)) == 0, "term");
	CHECK(slurm_cancel("4711", SIGUSR1, err, sizeof(err)) == 0, "usr1");
	char *t = slurp(args);
	CHECK(t && strcmp(t, "scancel 4711\nscancel 4711\nscancel --signal=15 --full 4711\n"
	    "scancel --signal=10 --batch 4711\n") == 0, "scancel lines:\n%s", t ? t : "(none)");
	free(t);

	snprintf(body, sizeof(body), "%s/nosuch", tmp);
	slurm_set_bin_dir(body);
	CHECK(slurm_query("12", jc, &j, err, sizeof(err)) == -1 && strstr(err, "nosuch") != NULL,
	    "missing scontrol: %s", err);
	slurm_set_bin_dir(NULL);
}

/* A spec's sbatch_options: shape and placement only. */
static void
case_spec_options(void)
{
	char err[512];
	CHECK(slurm_spec_options_check("--qos=high --exclusive\t--gpus=2 --nodes=1 "
	    "--constraint=a100&nvlink --mail-type=END", err, sizeof(err)) == 0, "refused: %s", err);
	CHECK(slurm_spec_options_check("", err, sizeof(err)) == 0, "empty refused: %s", err);
	static const char *const bad[] = { "--output=/etc/x", "--error=/x", "--input=/x",
	    "--chdir=/", "--export=ALL,LD_PRELOAD=/x.so", "--export-file=/x", "--uid=0",
	    "--gid=0", "--get-user-env", "--wrap=id", "-o", "-D/", "--open-mode=truncate",
	    "--qosx=1", "qos=high", "--qos=\"a b\"", "--qos=a\\b", "--qos=a\x01", NULL };
	for (int i = 0; bad[i]; i++) {
		char opt[64];
		snprintf(opt, sizeof(opt), "--qos=high %s", bad[i]);
		err[0] = '\0';
		CHECK(slurm_spec_options_check(opt, err, sizeof(err)) == -1 && err[0] != '\0',
		    "accepted: %s", bad[i]);
	}
	CHECK(slurm_spec_options_check("--uid=0", err, sizeof(err)) == -1 &&
	    strstr(err, "\"--uid=0\" is not an option a spec may give") != NULL, "message: %s", err);
}

static const struct unit_case cases[] = {
	UNIT_CASE(states),
	UNIT_CASE(scontrol),
	UNIT_CASE(others),
	UNIT_CASE(opts),
	UNIT_CASE(script),
	UNIT_CASE(spec_options),
	UNIT_CASE(commands),
	UNIT_END
};

int
main(int argc, char **argv)
{
	int rc;

	snprintf(tmp, sizeof(tmp), "%s/test_slurm.XXXXXX", getenv("TEST_TMP") ? getenv("TEST_TMP") : "/tmp");
	if (mkdtemp(tmp) == NULL) {
		perror("mkdtemp");
		return 1;
	}
	rc = unit_main(argc, argv, cases);
	if (rc == 0) {
		char cmd[PATH_MAX + 16];
		snprintf(cmd, sizeof(cmd), "rm -rf %s", tmp);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", tmp);
	} else
		fprintf(stderr, "test_slurm: files kept in %s\n", tmp);
	return rc;
}
