/* SPDX-License-Identifier: MIT */
/*
 * summary: what autobatch says when the search is over.  With a choice:
 * "best: ..." (or "best so far:" when the run did not finish), its
 * margin over the runner-up, what --headroom excluded, and whether the
 * effective batch changes, on say (stdout, or stderr when stdout carries
 * --json -).  Without one: why, and what to do, on stderr.
 */
#ifndef AB_SUMMARY_H
#define AB_SUMMARY_H

#include <stdio.h>

struct session;
struct tune_run;

/** s after session_answer, run after tune_loop, status the exit status. */
void summary_say(FILE *say, const struct session *s, const struct tune_run *run, int status);

#endif
