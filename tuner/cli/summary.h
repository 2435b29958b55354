/* SPDX-License-Identifier: MIT */
/*
 * summary: what autobatch says when the search is over.  With a choice:
 * "best: ..." (or "best so far:" when the run did not finish), its
 * margin over the runner-up, the largest fit and smallest failure of
 * each cell searched ("largest fit: micro_batch=53 grad_accum=1
 * checkpointing=off; micro_batch=54 did not fit"), what --headroom
 * excluded, and whether the effective batch changes, on say (stdout, or
 * stderr when stdout carries --json -).  Without one: why, and what to
 * do, on stderr.  Each line starts "autobatch: "; on a terminal a long one
 * is wrapped at its width, elsewhere it stays one line.  Where the
 * outputs went and what to run next come last, from outputs_write
 * (outputs.h).
 */
#ifndef AB_SUMMARY_H
#define AB_SUMMARY_H

#include <stdio.h>

struct session;
struct tune_run;

/** s after session_answer, run after tune_loop, status the exit status. */
void summary_say(FILE *say, const struct session *s, const struct tune_run *run, int status);

#endif
