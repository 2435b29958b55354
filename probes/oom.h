/* SPDX-License-Identifier: MIT */
/*
 * oom: recognise out-of-memory reports in a trial's output.
 *
 * The signatures live in configs/oom-signatures.tsv (data, compiled into the
 * binary by CMakeLists.txt as `ab_oom_signatures`).  Each row names one
 * message as a framework prints it; rows are POSIX extended regular
 * expressions matched against one line of output at a time, so a rank
 * prefix such as "[rank1]: " in front of the message does not matter.
 *
 * Life cycle:
 *   1. struct oom_table t = OOM_TABLE_INIT;
 *   2. oom_table_load(&t, text, err, sizeof err) with the embedded table
 *      (oom_table_load_default) or a user's own file's text;
 *   3. oom_table_match(&t, line, len, &m) for each line;
 *   4. oom_table_release(&t).
 * The module never prints and never exits.
 */
#ifndef AB_OOM_H
#define AB_OOM_H

#include <stddef.h>
#include <stdint.h>

struct oom_signature;

struct oom_table {
    /** compiled signatures, in table order */
    struct oom_signature *sigs;
    size_t nr;
    /** the rows' required literals, for skipping lines that cannot match
     *  (owned; NULL: every line is tried against every row) */
    struct oom_prefilter *pf;
    /** set by oom_table_prefilter(t, 0) */
    int pf_off;
};
#define OOM_TABLE_INIT { NULL, 0, NULL, 0 }

/** What a matching line was recognised as. Strings belong to the table. */
struct oom_match {
    const char *name;      /**< signature id, e.g. "torch-cuda-current" */
    const char *framework; /**< e.g. "pytorch", "nccl", "xla" */
};

/**
 * Parse a signature table (TSV: name, framework, regex; '#' comments and
 * blank lines ignored).  Returns 0, or -1 with a one-line reason naming the
 * row in err.  On error the table is left empty.
 *
 * *t must be empty (OOM_TABLE_INIT or released).  Rows are compiled with
 * regcomp(REG_EXTENDED | REG_NOSUB); a CR before the newline is ignored.
 * A row without exactly three non-empty columns, a regex that does not
 * compile, a duplicate name, and a table without rows are errors, reported
 * as e.g. "line 7: bad regex for 'x': Unmatched ( or \(".
 */
int oom_table_load(struct oom_table *t, const char *text, char *err, size_t errlen);

/** Load the table compiled in from configs/oom-signatures.tsv. */
int oom_table_load_default(struct oom_table *t, char *err, size_t errlen);

/**
 * Return 1 and fill *m (may be NULL) when line[0..len) is an OOM report,
 * else 0.  The line need not be NUL-terminated and has no line ending.
 * The first row that matches wins.  Only the first 64 KiB of a longer line
 * are examined; NUL bytes in the line are read as spaces.
 *
 * Every output line of a trial comes here, so a line that cannot match
 * costs about one pass over its bytes: oom_table_load derives from each
 * row a literal that every matching line contains (oom_required_literal),
 * and only rows whose literal is in the line run their regex.  A row
 * without one is tried on every line.  The answer is the same as trying
 * every row.
 */
int oom_table_match(const struct oom_table *t, const char *line, size_t len,
                    struct oom_match *m);

/**
 * For tests and the log-throughput bench: on = 0 makes oom_table_match try
 * every row's regex on every line, as before the prefilter; on = 1 (the
 * state after loading) uses it again.
 */
void oom_table_prefilter(struct oom_table *t, int on);

/**
 * The longest run of bytes that every line matching the POSIX extended
 * regular expression re must contain (the first of equal ones), written
 * to out NUL-terminated and cut to outlen - 1 bytes (a cut run is still
 * required).  Returns the length written; 0 when nothing can be proven:
 * an alternation outside parentheses, a pattern of classes and wildcards.
 * Conservative by design: a group, a bracket expression, an anchor, '.',
 * an escape other than of an ERE special character (glibc's \w, \<, \1),
 * a byte >= 0x80 and any atom under '*', '?' or an interval end a run;
 * an atom under '+' is the last byte of its run.
 */
size_t oom_required_literal(const char *re, char *out, size_t outlen);

void oom_table_release(struct oom_table *t);

/**
 * Numbers from a PyTorch allocator message, in bytes; -1 where the line
 * does not give them.  Understands the three generations of the message
 * ("(GPU 0; 6.00 GiB total capacity; ... 3.03 GiB free; ...)", the 2.1
 * "total capacty" typo, and "GPU 0 has a total capacity of T of which F is
 * free") with units B/KiB/MiB/GiB/TiB.
 */
struct oom_numbers {
    int64_t tried;  /**< "Tried to allocate X" */
    int64_t total;  /**< device capacity */
    int64_t free;   /**< free on the device when it failed */
    int gpu;        /**< device index, -1 if not given */
};
/**
 * Returns 1 when at least "Tried to allocate X" was found with a size it
 * could read, else 0.  out (may be NULL) is always filled, with -1 for
 * every number the line does not give.  Sizes are rounded to the byte:
 * "2.26 GiB" is 2426656522.  PyTorch writes sizes up to 1 KiB as "N bytes".
 */
int oom_parse_numbers(const char *line, size_t len, struct oom_numbers *out);

#endif
