/*
 * oom.c - see oom.h. The __wrap_* functions are the targets of the linker's
 * --wrap: every call of malloc (etc.) from the objects of a test-oom binary
 * lands here, and __real_malloc is the C library's (ASan's, under ASan).
 */
#include "oom.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <jansson.h>
#include <sanitizer/common_interface_defs.h>
#include <sanitizer/lsan_interface.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
char *__wrap_strdup(const char *s);
char *__wrap_strndup(const char *s, size_t n);

#define LEAK_EVERY 16

/* This thread's counter: armed while a body runs; fail_at 0 = count only. */
static _Thread_local struct {
    bool armed;
    long count, fail_at;
    bool failed, in_jansson; /* in_jansson: the failed allocation was jansson's */
    bool jansson_call;       /* set around jansson's allocations */
    bool trace;              /* print the stack of the failed allocation */
} oom;

/* True when this allocation is the one to fail. */
static bool fail_now(void) {
    if (!oom.armed)
        return false;
    oom.count++;
    if (oom.fail_at != 0 && oom.count == oom.fail_at) {
        oom.failed = true;
        oom.in_jansson = oom.jansson_call;
        if (oom.trace)
            __sanitizer_print_stack_trace();
        return true;
    }
    return false;
}

void *__wrap_malloc(size_t n) {
    return fail_now() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size) {
    return fail_now() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n) {
    return fail_now() ? NULL : __real_realloc(p, n);
}

char *__wrap_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = __wrap_malloc(n);
    return d != NULL ? memcpy(d, s, n) : NULL;
}

char *__wrap_strndup(const char *s, size_t n) {
    size_t len = strnlen(s, n);
    char *d = __wrap_malloc(len + 1);
    if (d != NULL) {
        memcpy(d, s, len);
        d[len] = '\0';
    }
    return d;
}

static void *json_malloc(size_t n) {
    oom.jansson_call = true;
    void *p = __wrap_malloc(n);
    oom.jansson_call = false;
    return p;
}

void oom_pause(void) {
    oom.armed = false;
}

void oom_resume(void) {
    oom.armed = true;
}

void oom_setup(void) {
    json_set_alloc_funcs(json_malloc, free);
}

static int run(oom_body body, void *ud, long fail_at) {
    oom.count = 0;
    oom.fail_at = fail_at;
    oom.failed = false;
    oom.in_jansson = false;
    oom.armed = true;
    int rc = body(ud);
    oom.armed = false;
    return rc;
}

oom_stats oom_torture(const char *name, oom_body body, void *ud, int enomem) {
    oom_stats st = {0};
    int rc = 0;
    /* twice: the first run may make one-time allocations (a library's lazy set-up) */
    for (int k = 0; k < 2 && rc == 0; k++)
        rc = run(body, ud, 0);
    if (rc != 0)
        fail_msg("%s: the run without failures returned %d", name, rc);
    if (__lsan_do_recoverable_leak_check() != 0)
        fail_msg("%s: the run without failures leaks (report above)", name);
    st.allocs = oom.count;
    for (long n = 1;; n++) {
        rc = run(body, ud, n);
        if (!oom.failed) {
            /* fewer than n allocations: past the clean runs' count, every one has
             * failed once; before it, the path varied (how a socket's bytes arrive
             * in chunks) and the next n are still tried */
            if (n > st.allocs)
                break;
            if (rc != 0)
                fail_msg("%s: a run without a failure returned %d", name, rc);
            continue;
        }
        st.runs++;
        if (rc == enomem)
            st.errors++;
        else if (rc == 0) {
            st.absorbed++;
            if (getenv("OOM_TRACE") != NULL && st.absorbed <= 5) {
                oom.trace = true; /* where the absorbed failure was */
                run(body, ud, n);
                oom.trace = false;
            }
        } else if (oom.in_jansson)
            st.misreported++; /* jansson's decoder reports its failure as bad syntax */
        else
            fail_msg("%s: allocation %ld of %ld failed and the run returned %d, not the "
                     "out-of-memory code %d",
                     name, n, st.allocs, rc, enomem);
        /* a leak stays until it is found, so checking every LEAK_EVERY runs (the
         * check scans the heap and costs more than most runs) misses none */
        if ((n % LEAK_EVERY == 0) && __lsan_do_recoverable_leak_check() != 0)
            fail_msg("%s: one of allocations %ld..%ld of %ld failed and that run leaked "
                     "(report above)",
                     name, n - LEAK_EVERY + 1, n, st.allocs);
    }
    if (__lsan_do_recoverable_leak_check() != 0)
        fail_msg("%s: one of the last runs leaked (report above)", name);
    printf("oom %-28s %5ld allocations, each failed once: %ld out-of-memory errors, %ld other "
           "errors (inside jansson), %ld absorbed\n",
           name, st.allocs, st.errors, st.misreported, st.absorbed);
    return st;
}
