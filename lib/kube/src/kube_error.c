/* kube_error.c - see areal/kube/error.h. */
#include "areal/kube/error.h"

#include <stdarg.h>
#include <stdio.h>

void kube_error_clear(kube_error *err) {
    if (err == NULL)
        return;
    err->code = KUBE_OK;
    err->http_status = 0;
    err->curl_code = 0;
    err->reason[0] = '\0';
    err->msg[0] = '\0';
}

int kube_error_set(kube_error *err, int code, const char *fmt, ...) {
    if (err != NULL) {
        va_list ap;
        kube_error_clear(err);
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

const char *kube_strerror(int code) {
    switch (code) {
    case KUBE_OK:
        return "ok";
    case KUBE_EINVAL:
        return "invalid argument or configuration";
    case KUBE_ENOMEM:
        return "out of memory";
    case KUBE_EIO:
        return "i/o error";
    case KUBE_ETRANSPORT:
        return "transport error";
    case KUBE_EHTTP:
        return "API server error";
    case KUBE_ECONFLICT:
        return "conflict";
    case KUBE_ENOTFOUND:
        return "not found";
    case KUBE_EGONE:
        return "gone (resourceVersion too old)";
    case KUBE_EDECODE:
        return "malformed response";
    case KUBE_ETOOBIG:
        return "response too large";
    case KUBE_ESTOPPED:
        return "stopped";
    default:
        return "unknown error";
    }
}

int kube_code_for_status(long http_status) {
    switch (http_status) {
    case 404:
        return KUBE_ENOTFOUND;
    case 409:
        return KUBE_ECONFLICT;
    case 410:
        return KUBE_EGONE;
    default:
        return KUBE_EHTTP;
    }
}
