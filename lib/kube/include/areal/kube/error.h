/*
 * error.h - the one error type of the Kubernetes client.
 *
 * What: every fallible kube_* function returns KUBE_OK (0) or a negative
 * KUBE_E* code and, when the caller passes a `kube_error *` (may be NULL),
 * fills it. The three sources of failure are kept apart, because callers act
 * on them differently:
 *   - transport (KUBE_ETRANSPORT): libcurl failed (refused, TLS, timeout,
 *     reset); `curl_code` holds the CURLcode, `http_status` is 0;
 *   - the API server answered with a non-2xx status: `http_status`, and the
 *     Kubernetes Status object's `reason` and `message` (when the body was one);
 *     409 is KUBE_ECONFLICT (re-read and retry), 404 KUBE_ENOTFOUND, 410
 *     KUBE_EGONE (relist), the rest KUBE_EHTTP;
 *   - local problems: bad arguments or configuration, memory, files, bodies
 *     over their bound, malformed JSON from the server.
 * How: codes share the numbers of areal/error.h where they mean the same
 * (EINVAL, ENOMEM, EIO) and are only ever appended. The message is a full
 * sentence naming the request (verb and path) or the config field, and a fix.
 * Rejected: reusing `areal_error` alone - it has no room for the HTTP status
 * and the Status reason, and squeezing them into the text would force callers
 * to parse messages to tell a conflict from a dropped connection.
 */
#ifndef AREAL_KUBE_ERROR_H
#define AREAL_KUBE_ERROR_H

#include "areal/error.h"

enum {
    KUBE_OK = 0,
    KUBE_EINVAL = AREAL_EINVAL, /* bad argument or configuration */
    KUBE_ENOMEM = AREAL_ENOMEM, /* an allocation failed */
    KUBE_EIO = AREAL_EIO,       /* a local file could not be read */
    KUBE_ETRANSPORT = -20,      /* libcurl failed; see curl_code */
    KUBE_EHTTP = -21,           /* the server answered non-2xx; see http_status */
    KUBE_ECONFLICT = -22,       /* 409 Conflict: re-read the object and retry */
    KUBE_ENOTFOUND = -23,       /* 404 Not Found */
    KUBE_EGONE = -24,           /* 410 Gone: resourceVersion too old, relist */
    KUBE_EDECODE = -25,         /* the server's JSON was malformed or of the wrong shape */
    KUBE_ETOOBIG = -26,         /* a body or watch line exceeded its configured bound */
    KUBE_ESTOPPED = -27,        /* a watch was stopped with kube_watch_stop */
};

#define KUBE_REASON_MAX    64
#define KUBE_ERROR_MSG_MAX 512

typedef struct kube_error {
    int code;                     /* KUBE_E*, KUBE_OK when unset */
    int http_status;              /* HTTP status of the answer, 0 when none came */
    int curl_code;                /* CURLcode of a transport failure, else 0 */
    char reason[KUBE_REASON_MAX]; /* Status.reason ("Conflict", "Expired", ...) or "" */
    char msg[KUBE_ERROR_MSG_MAX]; /* a full sentence, no trailing newline */
} kube_error;

/* Resets `err` (if not NULL) to "no error". */
void kube_error_clear(kube_error *err);

/*
 * Records a local error (no HTTP status, no curl code) in `err` (if not NULL)
 * and returns `code`.
 */
int kube_error_set(kube_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A short name for a KUBE_E* code; never NULL. */
const char *kube_strerror(int code);

/* The KUBE_E* code for a non-2xx HTTP status (409, 404, 410 or KUBE_EHTTP). */
int kube_code_for_status(long http_status);

#endif
