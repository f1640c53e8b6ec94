/* procstat.h: one reading of /proc/PID/stat for every program (the
 * daemon, its parent, pipeline-shim), libc only. */
#ifndef PROCSTAT_H
#define PROCSTAT_H

#include <stdint.h>
#include <sys/types.h>

/* The fields of proc(5)'s /proc/PID/stat that the programs use, by their
 * numbers there. */
struct proc_stat {
	char	 state;		/* 3: R, S, D, Z, X, ... */
	pid_t	 ppid;		/* 4 */
	pid_t	 pgrp;		/* 5 */
	unsigned long flags;	/* 9: PF_EXITING is 0x4 */
	uint64_t start;		/* 22: clock ticks after boot */
};

/* Fill *ps from /proc/PID/stat (the command name may hold spaces and
 * parentheses: the fields are read after its last ')'): 0, or -1 when
 * the process is gone or its line unreadable (*ps then all zeros, or the
 * fields read before the line ended). */
int	proc_stat_read(pid_t pid, struct proc_stat *ps);

#endif
