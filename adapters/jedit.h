/* SPDX-License-Identifier: MIT */
/*
 * jedit: read and change one value of a JSON document, byte-exactly.
 * Strict JSON, and the JSON-with-comments dialect found in training
 * configs: // and / * * / comments and trailing commas.  See cedit.h for
 * the shared rules (status codes, how values are spelled, verification).
 *
 * A tokenizer tracks key paths and the byte span of every value; text
 * inside comments and strings is never matched as a key.  Everything but
 * the target value stays byte-identical, escaped slashes ("tcp:\/\/...")
 * included.  A key duplicated at the target's level is ambiguous; other
 * duplicates elsewhere in the file do not matter.
 *
 * KEY is a dotted path; a whole-number component indexes an array.
 *
 * Insertion: a missing key whose parent object exists is added as the
 * object's last member with its siblings' indentation and separator
 * style (a comma after the previous member's value; when the object ends
 * with a trailing comma, the new member gets one too).
 *
 * In detail:
 *
 * Dialect.  RFC 8259 JSON (any value at the top level, a UTF-8 byte order
 * mark allowed and kept), plus // comments (to the end of the line),
 * / * ... * / comments and one trailing comma before '}' or ']'.  No
 * other JSON5 extensions (single quotes, bare keys, NaN, hex).  Strings
 * may not hold raw control characters; bytes above 0x7f are not checked.
 *
 * Key paths.  Components are split at every '.', so a key that itself
 * holds a dot cannot be named.  In an object a component is a member name
 * (compared after decoding escapes: "a\u0062" is "ab"); in an array it
 * must be a whole number below the array's length.  A component that
 * occurs twice in its object, at any step of the path, is CEDIT_AMBIGUOUS.
 * An empty path or component ("", "a..b", ".a") is CEDIT_BAD_KEY.  A
 * missing component, an index past the end, or a step into a scalar is
 * CEDIT_NOT_FOUND; an object or array at the end of the path is
 * CEDIT_NOT_SCALAR.
 *
 * Errors.  CEDIT_MALFORMED messages start "line L, column C: " (1-based;
 * the column counts UTF-8 characters, a tab as one); for an unclosed
 * object or array they point at the end of the input and name where the
 * bracket was opened.  Every message is one lowercase line.
 *
 * Spelling (cedit.h, as it applies to JSON).  VALUE is a boolean when it
 * is true/false in any case, written true/false; a number when it is a
 * JSON number literal (-?digits[.digits][e[+-]digits], written as given;
 * +5, .5, 5. and 0x10 are not JSON numbers and become strings); null when
 * it is exactly "null"; a string otherwise, always double-quoted with the
 * minimal JSON escapes (\" \\ \b \f \n \r \t, \u00XX for other control
 * characters; '/' and non-ASCII are written as they are).  When the old
 * value is a string whose text already reads as the new kind (a number
 * such as "4", a boolean word such as "True", the word "null"), the new
 * value stays a quoted string ("16", "False" in the old case pattern);
 * any other old string ("auto") is replaced by the bare literal.  A VALUE
 * that is not valid UTF-8 is refused with CEDIT_VERIFY.
 *
 * Insertion, exactly.  Into an object with members, where M is the last
 * member:
 *   - when M's key is the first thing on its line (block style): a comma
 *     goes right after M's value (before any comment on that line) unless
 *     M already has a trailing comma; then a new line, with the line break
 *     the file uses there (LF, CRLF), M's indentation copied byte for byte
 *     (tabs stay tabs), the key, the separator M uses between key and
 *     value when it is only blanks around ':' ("key" : v, "key":v; else
 *     ": "), and the value; plus a trailing comma when M had one.  The new
 *     line goes after M's line, before its line break, so blank lines,
 *     comment lines and the closing brace below stay where they are;
 *   - otherwise (M shares its line with an earlier member, as in
 *     {"a": 1, "b": 2}): `, "key": value` right after M's value (or
 *     ` "key": value,` after M's trailing comma), with the blanks that
 *     followed the previous comma.
 * An empty object gets `"key": value` right after its '{': {} becomes
 * {"key": value}.  A missing array index is never created.
 *
 * Verification.  Before returning, the new bytes are tokenized and parsed
 * again: every token outside the edited bytes (keys, values, punctuation
 * and comments) must equal the old one, in order, byte for byte; the
 * bytes removed must be exactly the old value's token; the bytes inserted
 * must be exactly the expected tokens with only whitespace between them;
 * and the key must hold the new value.  When the original is strict JSON (no comments, no
 * trailing commas) and jansson accepts it, jansson must also accept the
 * result, read the new value at the key, and find the rest of the
 * document equal to the original.  (jansson refuses some JSON: integers
 * beyond 64 bits, lone surrogate escapes, invalid UTF-8; for such a
 * document the jansson check is skipped, and a VALUE jansson cannot hold,
 * such as a 30-digit integer, makes a strict file's edit fail with
 * CEDIT_VERIFY.)  Any difference is CEDIT_VERIFY.
 */
#ifndef AB_JEDIT_H
#define AB_JEDIT_H

#include <stddef.h>

#include "cedit.h"

/**
 * Get the scalar at key: *value malloc'd, strings unescaped, others as
 * written (a number's digits, true, false, null).  A string that holds
 * \u0000 reads, as a C string, only up to it.  On failure *value is NULL
 * and err (when errlen > 0) says why in one line; on success err is "".
 */
enum cedit_status jedit_get(const char *doc, size_t len, const char *key, char **value,
                            char *err, size_t errlen);

/**
 * Set the value at key, or insert the key when only it is missing and its
 * parent is an object; *out and *outlen malloc'd on success.  On any failure
 * *out is NULL, *outlen 0, and err says why in one line.  doc is never
 * modified; the caller frees *out.
 */
enum cedit_status jedit_set(const char *doc, size_t len, const char *key, const char *value,
                            char **out, size_t *outlen, char *err, size_t errlen);

#endif
