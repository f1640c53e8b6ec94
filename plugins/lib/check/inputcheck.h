/*
 * inputcheck.h: checks a stage's check hook makes on its inputs at submit
 * (`pipelinectl check`), so that a base or a corpus that cannot work is
 * reported before a run starts, each as FILE:LINE: KEY: message. The
 * host has already checked that the paths exist, are readable and are of
 * the right kind (PL_KEY_FILE, PL_KEY_DIR). Small reads only: check hooks
 * must not block. In a check without files (host->check_files() 0) they
 * open nothing and report nothing.
 */
#ifndef PL_INPUTCHECK_H
#define PL_INPUTCHECK_H

#include "pipeline/plugin.h"

/* The base directory named by key: its config.json parses and is an
 * architecture convert supports (Gemma 3). Nothing when key is not set
 * to a path (an upstream artifact). */
void	plc_check_base(const struct pl_host *host, pl_job *job, const char *key);
/* The corpus named by key: its first nlines lines are JSON objects with
 * a "messages" array of at least two turns. */
void	plc_check_corpus(const struct pl_host *host, pl_job *job, const char *key,
	    int nlines);

#endif
