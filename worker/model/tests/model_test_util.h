/*
 * model_test_util.h - helpers shared by the model component's tests (header
 * only, since each test is one C file): fixture paths, whole-file reads,
 * scratch directories under $TMPDIR and file writes into them.
 */
#ifndef MODEL_TEST_UTIL_H
#define MODEL_TEST_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FIX "worker/model/tests/fixtures/"

/* Reads a whole file into a new NUL-terminated buffer; NULL if it cannot. */
static inline char *mt_read(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf != NULL && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf != NULL) {
        buf[n] = '\0';
        if (len)
            *len = (size_t)n;
    }
    return buf;
}

static inline int mt_write(const char *path, const void *data, size_t len) {
    FILE *f = fopen(path, "wb");
    if (f == NULL)
        return -1;
    size_t w = fwrite(data, 1, len, f);
    return fclose(f) == 0 && w == len ? 0 : -1;
}

/* A new scratch directory; path written into buf (cap >= 64). */
static inline int mt_tmpdir(char *buf, size_t cap) {
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, cap, "%s/areal-model-XXXXXX", t);
    return mkdtemp(buf) ? 0 : -1;
}

/* Removes the plain files of a scratch directory and the directory. */
static inline void mt_rmdir(const char *dir) {
    char cmd[512];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
}

/* dir/name into buf. */
static inline const char *mt_path(char *buf, size_t cap, const char *dir, const char *name) {
    snprintf(buf, cap, "%s/%s", dir, name);
    return buf;
}

#endif
