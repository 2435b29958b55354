/* SPDX-License-Identifier: MIT */
/*
 * yedit: read and change one scalar of a YAML document, byte-exactly.
 * See cedit.h for the shared rules (status codes, how values are spelled,
 * verification).  Works on libyaml's parser events and their marks.
 *
 * KEY is a dotted path: "datasets.batch_size_per_gpu"; a component that
 * is a whole number indexes a sequence ("a.0.b").  A key matches by its
 * value, whatever its quoting ('bs', "bs" and bs are the same key).  Only
 * the first document of a multi-document stream is addressed; the others
 * must parse and are left as they are.
 *
 * Preserved: every byte outside the value (comments, inline comments,
 * alignment padding where the new value fits, CRLF line endings, a BOM,
 * document markers and directives, tags such as !new: and !ref, anchors,
 * flow mappings).  Only the value's own text is replaced: a tag or anchor
 * before it stays ("!ref <a>" -> "!ref <b>", "&x 1" -> "&x 2").
 *
 * Column-aligned comments: when the inline comment after the value starts
 * in the same column as a comment on the line above or below (ESPnet's
 * "accum_grad: 1             # gradient accumulation"), the padding
 * absorbs the width change: a value k characters wider takes k spaces
 * from the padding (keeping at least one), a narrower one gives them
 * back.  A comment that lines up with nothing keeps its padding as it is
 * ("x: 1  # note" -> "x: 16  # note"), so that setting the old value
 * again restores the file byte for byte.  Widths count characters.
 *
 * Value spelling (cedit.h), with these YAML details:
 *   - strings become double-quoted when a plain scalar would not read back
 *     as the same string (": ", " #", a leading indicator, anything YAML
 *     1.1 or 1.2 could read as a null, boolean or number, flow indicators
 *     inside a flow collection); a single-quoted string stays
 *     single-quoted unless it needs an escape;
 *   - "null", "Null", "NULL" and "~" are written bare (a null);
 *   - a new boolean where there was none takes the case (true, True,
 *     TRUE) most used by the file's true/false booleans;
 *   - a block scalar (| or >) target is rewritten as a flow scalar.
 *
 * Insertion: a missing key whose parent mapping exists is added as the
 * parent's last entry.  Block mappings: a new line "<indent>key: value"
 * (the indentation of the parent's first key, the file's line break)
 * right after the line where the last entry's value ends, so before any
 * comment or blank lines that follow it; at the end of a file without a
 * final newline the line break goes before the entry and the file still
 * ends without one.  Flow mappings: ", key: value" after the last value
 * ("key: value" into "{}").
 *
 * Refused (status, err says why in one lowercase line, no output):
 *   - CEDIT_ALIAS: the target is an alias (*bs); the path goes through an
 *     alias or an alias key; the target, or a mapping or list on the
 *     path, carries an anchor that an alias uses (editing it would change
 *     the aliased copies); the key is missing from a mapping that merges
 *     others with "<<" (it may be inherited);
 *   - CEDIT_AMBIGUOUS: a component occurs more than once in its mapping
 *     (duplicates elsewhere in the file do not matter);
 *   - CEDIT_NOT_FOUND: a parent is missing, empty, a scalar, or a list
 *     index is out of range (lists never grow); the document is empty;
 *   - CEDIT_NOT_SCALAR: the target is a mapping or a list;
 *   - CEDIT_MALFORMED: the stream does not parse ("... at line L, column
 *     C: ...", both 1-based), or is UTF-16, or nests mappings and lists
 *     deeper than YEDIT_MAX_DEPTH ("nested deeper than 1000 levels at
 *     line L, column C"): reading stops there, so that a hostile file
 *     (`a: [[[[...`) costs linear time, not libyaml's quadratic time;
 *   - CEDIT_BAD_KEY: an empty key or an empty component ("a..b", ".a");
 *   - CEDIT_VERIFY: the edited bytes did not re-parse with exactly the
 *     intended change (every other event's value, style, tag, anchor and
 *     structure compared), or the value is not valid UTF-8.
 */
#ifndef AB_YEDIT_H
#define AB_YEDIT_H

#include <stddef.h>

#include "cedit.h"

/** The deepest nesting of mappings and lists a document may have. */
#define YEDIT_MAX_DEPTH 1000

/**
 * Get the scalar at key: *value is malloc'd, its text with quotes removed
 * and escapes decoded (the caller frees it).  A target that is an alias
 * of a scalar reads as that scalar.  On failure *value is NULL and err
 * says why.
 */
enum cedit_status yedit_get(const char *doc, size_t len, const char *key, char **value,
                            char *err, size_t errlen);

/**
 * Set the scalar at key to value (inserting the key if only it is
 * missing).  doc is not modified.  On success *out (malloc'd, the caller
 * frees it; NUL-terminated for convenience) and *outlen hold the new
 * document; on failure they are NULL/0 and err says why in one line.
 */
enum cedit_status yedit_set(const char *doc, size_t len, const char *key, const char *value,
                            char **out, size_t *outlen, char *err, size_t errlen);

#endif
