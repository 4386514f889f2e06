/*
 * error.h - the one error convention of the layout library.
 *
 * Every fallible function returns an int: AREAL_OK (0) on success or a negative
 * AREAL_E* code. Where the caller passes an `areal_error *` (which may be NULL),
 * the function also writes a human message there: what was wrong, where (a byte
 * position in the input when there is one) and how to fix it. Codes are only
 * ever appended, never renumbered, so tools may switch on them.
 */
#ifndef AREAL_ERROR_H
#define AREAL_ERROR_H

#include <stddef.h>

enum {
    AREAL_OK = 0,
    AREAL_EINVAL = -1, /* malformed input: syntax, bad value, broken file */
    AREAL_ENOMEM = -2, /* an allocation failed */
    AREAL_EIO = -3,    /* a file could not be read */
    AREAL_ENOFIT = -4, /* a valid job that the cluster cannot hold */
    AREAL_ERANGE = -5, /* a value outside its allowed range */
};

#define AREAL_ERROR_MSG_MAX 512

typedef struct areal_error {
    int code;                      /* the AREAL_E* code, AREAL_OK when unset */
    int pos;                       /* byte offset into the input, or -1 */
    char msg[AREAL_ERROR_MSG_MAX]; /* full sentence(s), no trailing newline */
} areal_error;

/* Resets `err` (if not NULL) to "no error". */
void areal_error_clear(areal_error *err);

/*
 * Records an error in `err` (if not NULL) and returns `code`, so that callers
 * can write `return areal_error_set(err, AREAL_EINVAL, pos, "...")`.
 */
int areal_error_set(areal_error *err, int code, int pos, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A short name for a code ("invalid input", ...); never NULL. */
const char *areal_strerror(int code);

#endif
