/*
 * worker_env.c - reading areal-worker's integer environment variables (see
 * worker_env.h), apart from main so the launcher and the rank halves do not
 * call back into the file that holds main.
 */
#include <errno.h>
#include <stdlib.h>

#include "worker_env.h"

int worker_env_int(const char *name, int def, int lo, int hi, int *out, areal_error *err) {
    const char *v = getenv(name);
    if (v == NULL || v[0] == '\0') {
        if (def < lo)
            return areal_error_set(err, AREAL_EINVAL, -1, "%s is not set", name);
        *out = def;
        return AREAL_OK;
    }
    char *end = NULL;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno != 0 || *end != '\0' || end == v || x < lo || x > hi)
        return areal_error_set(err, AREAL_EINVAL, -1, "%s='%s' is not an integer in %d..%d", name,
                               v, lo, hi);
    *out = (int)x;
    return AREAL_OK;
}
