/* SPDX-License-Identifier: MIT */
/*
 * matrix: the results of one command on several machines, merged into
 * one table (`autobatch matrix R1.json R2.json ...`).
 *
 * One row per results file, in the order given; the row is named after
 * the machine: "Slurm target PARTITION[:TYPE]" for a run of
 * --slurm-targets, else the first GPU's model and memory ("NVIDIA H100
 * 80GB HBM3, 79.6 GiB", prefixed "2 x " when the host has two), or "no
 * GPU (HOST)" when the file lists none.  A run that found nothing because
 * Slurm kept its trial pending (--slurm-pending) says "PENDING (REASON)"
 * where the choice would be.  Columns: the machine, the file's name, the
 * chosen configuration, its samples/s and peak memory, then the largest
 * fitting micro-batch of every (grad_accum, checkpointing) cell searched
 * by any of the files (their union, sorted: checkpointing off before on,
 * then grad_accum ascending, so the order does not depend on the files'
 * order).  A cell's entry is its largest fit, ">= N" when the top of the
 * range fitted, "none" when nothing fitted, and "—" when that file did
 * not search the cell or does not know.  At most MATRIX_MAX_CELLS cell
 * columns are shown (the first in that order): a search has a few cells
 * (grad_accum values x checkpointing), so more than that is a hostile or
 * broken file, and a table of every file against every cell would grow
 * as files x cells; the Markdown then says how many more there were, and
 * the JSON's "cells_left_out" counts them (0 normally).
 *
 * Like the reports (report.h), the matrix is rendered from the parsed
 * documents alone, deterministically, and tolerates missing or null keys.
 * When the files are not all for the same command, the Markdown says so
 * under the table and the JSON's "same_command" is false.
 *
 * The JSON format:
 *
 *   {"schema": "autobatch.matrix/1", "same_command": bool,
 *    "cells": [{"grad_accum": 1, "checkpointing": false}, ...],
 *    "cells_left_out": 0,
 *    "rows": [{"name": NAME, "machine": "...", "hostname": ... or null,
 *              "gpu": {name, memory_total_bytes, count} or null,
 *              "command": [...] or null, "best": {...} or null,
 *              "samples_per_s": ... or null, "peak_mem_bytes": ... or null,
 *              "exit": ... or null, "slurm_target": ... or null,
              "slurm_pending": REASON or null,
 *              "max_fit": [one entry per "cells" entry: the file's max_fit
 *                          object for that cell, or null]}]}
 */
#ifndef AB_MATRIX_H
#define AB_MATRIX_H

#include <stddef.h>

#include <jansson.h>

enum matrix_format { MATRIX_MARKDOWN, MATRIX_JSON };

/** The most cell columns a matrix shows (see above). */
#define MATRIX_MAX_CELLS 64

/** "markdown" (or "md") or "json" into *f.  Returns 0, or -1 (f untouched). */
int matrix_format_parse(const char *s, enum matrix_format *f);

/**
 * Render n results documents (results[i], shown as names[i], usually the
 * file's path; names may be NULL: "results 1", ...) as f into a malloc'd,
 * NUL-terminated *out (length in *len when len is not NULL), which the
 * caller free()s.  Returns 0, or -1 with err filled: n is 0, a document
 * is not a results document (the message names it), out of memory.
 */
int matrix_render(json_t *const *results, const char *const *names, size_t n, enum matrix_format f,
                  char **out, size_t *len, char *err, size_t errlen);

#endif
