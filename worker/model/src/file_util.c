/* file_util.c - see file_util.h. */
#include "file_util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int areal_read_file(const char *path, size_t max, char **out, size_t *len, areal_error *err) {
    *out = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return areal_error_set(err, AREAL_EIO, -1, "%s: not a regular file", path);
    }
    if ((uint64_t)st.st_size > max) {
        fclose(f);
        return areal_error_set(err, AREAL_ERANGE, -1, "%s: %lld bytes, more than the %zu allowed",
                               path, (long long)st.st_size, max);
    }
    size_t n = (size_t)st.st_size;
    char *buf = malloc(n + 1);
    if (buf == NULL) {
        fclose(f);
        return areal_error_set(err, AREAL_ENOMEM, -1, "%s: no memory for %zu bytes", path, n);
    }
    size_t got = fread(buf, 1, n, f);
    int bad = ferror(f);
    fclose(f);
    if (got != n || bad) {
        free(buf);
        return areal_error_set(err, AREAL_EIO, -1, "%s: short read (%zu of %zu bytes)", path, got,
                               n);
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return AREAL_OK;
}

int areal_map_file(const char *path, uint8_t **map, size_t *size, areal_error *err) {
    *map = NULL;
    *size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot open: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return areal_error_set(err, AREAL_EIO, -1, "%s: not a regular file", path);
    }
    if (st.st_size == 0) { /* mmap refuses length 0; an empty file maps to nothing */
        close(fd);
        return AREAL_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED)
        return areal_error_set(err, AREAL_EIO, -1, "%s: cannot map: %s", path, strerror(e));
    *map = p;
    *size = (size_t)st.st_size;
    return AREAL_OK;
}

void areal_unmap_file(uint8_t *map, size_t size) {
    if (map != NULL && size > 0)
        munmap(map, size);
}

json_t *areal_json_parse(const char *text, size_t len, const char *name, areal_error *err) {
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (doc == NULL)
        areal_error_set(err, AREAL_EINVAL, je.position,
                        "%s: malformed JSON at line %d column %d: %s", name, je.line, je.column,
                        je.text);
    return doc;
}

json_t *areal_json_load(const char *path, areal_error *err) {
    char *text;
    size_t len;
    if (areal_read_file(path, AREAL_MODEL_JSON_MAX, &text, &len, err) != AREAL_OK)
        return NULL;
    json_t *doc = areal_json_parse(text, len, path, err);
    free(text);
    return doc;
}

char *areal_path_join(const char *dir, const char *file) {
    size_t a = strlen(dir), b = strlen(file);
    char *p = malloc(a + b + 2);
    if (p == NULL)
        return NULL;
    memcpy(p, dir, a);
    size_t n = a;
    if (a > 0 && dir[a - 1] != '/')
        p[n++] = '/';
    memcpy(p + n, file, b + 1);
    return p;
}
