/*
 * oom.h - the allocation-failure torture of `make test-oom` (curl's torture
 * mode, SQLite's OOM tests): a body runs once with allocation 1 failing, once
 * with allocation 2 failing, and so on, until a run makes fewer allocations
 * than the one it was told to fail, so every allocation site on the body's
 * path has failed once. Each run must return cleanly (0, or the body's
 * out-of-memory code), never crash (ASan+UBSan), and leave nothing allocated
 * (LeakSanitizer's recoverable check after every run).
 *
 * What counts: allocations of the calling thread only (the counter is
 * thread-local, so a test server's threads are never failed), made by the
 * project's code - malloc, calloc, realloc, strdup and strndup in every object
 * of the test binary, redirected at link time (-Wl,--wrap=..., see the
 * Makefile's test-oom rule) - and by jansson (json_set_alloc_funcs). Not
 * counted: allocations inside other shared libraries (libyaml, libcurl,
 * libc's own getline/asprintf), which fail the way those libraries decide.
 * Rejected: converting every allocation call of the tree to areal_malloc
 * first (a diff across every component's files while six other branches edit
 * them; the link-time wrap covers the same calls with no source change, and
 * areal/mem.h is there for new code to say it explicitly).
 */
#ifndef AREAL_OOM_H
#define AREAL_OOM_H

#include <stdbool.h>

/*
 * A body: runs the code under test on fresh state and returns 0 (done), or
 * a negative code. `ud` is the test's. It must free what it made itself.
 */
typedef int (*oom_body)(void *ud);

typedef struct oom_stats {
    long runs;        /* runs with an injected failure */
    long allocs;      /* allocations of a run that fails none */
    long errors;      /* runs that returned the out-of-memory code */
    long misreported; /* runs whose failure was jansson's, reported as another error */
    long absorbed;    /* runs that succeeded although an allocation failed */
} oom_stats;

/*
 * Runs `body` first without failures (it must return 0), then with the n-th
 * allocation failing for every n. A run that returns neither 0 nor `enomem`,
 * crashes, or leaks fails the test (cmocka), naming `name` and n. One
 * exception, counted apart: when the failed allocation was jansson's, any
 * error is accepted, because jansson 2.14's decoder reports an allocation
 * failure as a syntax error ("string or '}' expected") or with an empty
 * message, so no caller can tell; the project maps the empty-message case
 * to out of memory (cluster_parse.c, lib/kube http.c, framer.c).
 */
oom_stats oom_torture(const char *name, oom_body body, void *ud, int enomem);

/* Inside a body: stop / resume counting (and failing) this thread's
 * allocations, for set-up that is not under test (starting a test server). */
void oom_pause(void);
void oom_resume(void);

/* Installs the counting allocator as jansson's; call once at the start of main. */
void oom_setup(void);

#endif
