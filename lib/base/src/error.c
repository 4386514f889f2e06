/* error.c - see areal/error.h. */
#include "areal/error.h"

#include <stdarg.h>
#include <stdio.h>

void areal_error_clear(areal_error *err) {
    if (err == NULL)
        return;
    err->code = AREAL_OK;
    err->pos = -1;
    err->msg[0] = '\0';
}

int areal_error_set(areal_error *err, int code, int pos, const char *fmt, ...) {
    if (err != NULL) {
        va_list ap;
        err->code = code;
        err->pos = pos;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *areal_strerror(int code) {
    switch (code) {
    case AREAL_OK:
        return "ok";
    case AREAL_EINVAL:
        return "invalid input";
    case AREAL_ENOMEM:
        return "out of memory";
    case AREAL_EIO:
        return "i/o error";
    case AREAL_ENOFIT:
        return "does not fit the cluster";
    case AREAL_ERANGE:
        return "value out of range";
    default:
        return "unknown error";
    }
}
