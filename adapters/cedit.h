/* SPDX-License-Identifier: MIT */
/*
 * cedit: what the two format-preserving config editors (yedit for YAML,
 * jedit for JSON and JSON with comments) have in common: status codes and
 * how a new value is spelled.
 *
 * Both editors change only the bytes of the one value they set (or insert
 * one key with its siblings' indentation), re-parse the result, and check
 * that the key now holds the new value and every other value is unchanged
 * before handing the new bytes back.  They never touch files: callers
 * read the bytes, and write them back with afile_write().
 *
 * Spelling a new value (both editors): the VALUE text a user gives is a
 * boolean when it is true/false in any case (also yes/no/on/off for YAML
 * targets that already hold a YAML 1.1 boolean), a number when it is an
 * integer or decimal/exponent literal, and a string otherwise.
 *   - A boolean keeps the file's spelling: False -> True, false -> true,
 *     FALSE -> TRUE, no -> yes.  For an inserted key, or a target that was
 *     not a boolean, the spelling most used by the file's other booleans
 *     (lowercase when there are none).
 *   - A number replaces a number as it is; a quoted number ("4") stays
 *     quoted ("16") in the same quote style; a number replacing a
 *     non-numeric string (DeepSpeed's "auto") is written bare.
 *   - A string keeps the old quote style (YAML: plain if still safe as a
 *     plain scalar, else double-quoted; JSON: always double-quoted, with
 *     JSON escapes).
 */
#ifndef AB_CEDIT_H
#define AB_CEDIT_H

enum cedit_status {
    CEDIT_OK = 0,
    CEDIT_NOT_FOUND,   /**< neither the key nor (for set) its parent exists */
    CEDIT_AMBIGUOUS,   /**< the key occurs twice in one mapping/object */
    CEDIT_ALIAS,       /**< YAML: the key or a step of its path is an alias (*x), or an anchored value used elsewhere */
    CEDIT_NOT_SCALAR,  /**< the target is a mapping or a list */
    CEDIT_MALFORMED,   /**< the document does not parse (err has line and column) */
    CEDIT_BAD_KEY,     /**< the key path is empty or malformed */
    CEDIT_VERIFY,      /**< the edited bytes did not re-parse as intended */
    CEDIT_NOMEM,
};

#endif
