/* SPDX-License-Identifier: MIT */
/*
 * which: PATH searched for an executable file (which.h), entry by entry,
 * on a copy of $PATH.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/which.h"

int which_found(const char *name)
{
    const char *path = getenv("PATH");
    struct stat st;
    int found = 0;
    char *copy = path ? strdup(path) : NULL, *save = NULL;
    for (char *dir = copy ? strtok_r(copy, ":", &save) : NULL; dir && !found;
         dir = strtok_r(NULL, ":", &save)) {
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", *dir ? dir : ".", name);
        found = !stat(full, &st) && !S_ISDIR(st.st_mode) && !access(full, X_OK);
    }
    free(copy);
    return found;
}
