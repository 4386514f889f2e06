/*
 * areal-e2e-logcheck.c - the e2e suite's check that a program's log is
 * structured: every line of every FILE is one JSON object with a string
 * "level" (debug, info, warn or error) and a string "msg" (areal/log.h).
 *
 *   areal-e2e-logcheck FILE...
 *
 * Prints nothing and exits 0 when every line is a record; else one line per
 * bad line, "FILE:LINE: why: the line (escaped)", and exits 1; 2 on bad
 * usage or an unreadable file. e2e/run runs it over the operator logs of each
 * scenario. Rejected: jq -R (it replaces invalid UTF-8 by U+FFFD while
 * reading, so a line that no strict parser accepts would pass); jansson, like
 * the consumers of these logs, rejects it.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/escape.h"
#include "areal/version.h"

static const char usage_text[] =
    "usage: areal-e2e-logcheck FILE...\n"
    "Checks that every line of every FILE is one structured log record: a JSON\n"
    "object with a string \"level\" (debug|info|warn|error) and a string \"msg\".\n"
    "Prints FILE:LINE: why: LINE for each line that is not.\n"
    "  --help, --version\n" AREAL_EXIT_HELP
    "(0: every line a record; 1: a line that is not; 2 also for an unreadable FILE)\n";

/* NULL when `line` (len bytes, no newline) is a record, else why not. */
static const char *check_line(const char *line, size_t len, char *why, size_t cap) {
    json_error_t je;
    json_t *j = json_loadb(line, len, 0, &je);
    const char *bad = NULL;
    if (j == NULL) {
        snprintf(why, cap, "not JSON (%s, at byte %d)", je.text, je.position);
        return why;
    }
    const char *level = json_string_value(json_object_get(j, "level"));
    if (!json_is_object(j))
        bad = "not a JSON object";
    else if (level == NULL)
        bad = "no string \"level\"";
    else if (strcmp(level, "debug") && strcmp(level, "info") && strcmp(level, "warn") &&
             strcmp(level, "error"))
        bad = "\"level\" is not debug, info, warn or error";
    else if (!json_is_string(json_object_get(j, "msg")))
        bad = "no string \"msg\"";
    json_decref(j);
    if (bad != NULL)
        snprintf(why, cap, "%s", bad);
    return bad != NULL ? why : NULL;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        areal_print_line(stderr, "areal-e2e-logcheck: give at least one FILE; see --help");
        return AREAL_EXIT_USAGE;
    }
    if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0) {
        fputs(usage_text, stdout);
        return AREAL_EXIT_OK;
    }
    if (strcmp(argv[1], "--version") == 0)
        return areal_print_version(stdout, "areal-e2e-logcheck");
    int rc = AREAL_EXIT_OK;
    for (int i = 1; i < argc; i++) {
        FILE *f = fopen(argv[i], "rb");
        if (f == NULL) {
            areal_print_line(stderr, "areal-e2e-logcheck: cannot read '%s'", argv[i]);
            return AREAL_EXIT_USAGE;
        }
        char *line = NULL, why[256];
        size_t cap = 0;
        ssize_t n;
        for (long no = 1; (n = getline(&line, &cap, f)) > 0; no++) {
            size_t len = (size_t)n;
            if (line[len - 1] == '\n')
                len--;
            if (check_line(line, len, why, sizeof why) == NULL)
                continue;
            char esc[1024];
            areal_escape(esc, sizeof esc, line, len);
            printf("%s:%ld: %s: %s\n", argv[i], no, why, esc);
            rc = AREAL_EXIT_FAILURE;
        }
        free(line);
        fclose(f);
    }
    return rc;
}
