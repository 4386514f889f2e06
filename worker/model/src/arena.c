/*
 * arena.c - the big per-step buffers of training (the forward's activation
 * arena, the backward's scratch), kept for the next step instead of being
 * handed back to the kernel.
 *
 * Why: the bench model's activation arena is ~200 MB, allocated by each
 * forward and freed after the backward. malloc serves a block that large
 * straight from mmap and free unmaps it, so every step first-touched ~60,000
 * fresh 4 KiB pages: page faults and the kernel's zeroing were ~6% of the
 * training step (perf: exc_page_fault, clear_page_erms, do_anonymous_page,
 * unmap_page_range, ...). Here a freed block of 4 MiB or more waits in a
 * small cache (ARENA_SLOTS blocks, under a mutex: ranks may be threads) and
 * the next request of at most its size, and at least half of it, takes it.
 *
 * Rejected: transparent huge pages on the block (MADV_HUGEPAGE: on this
 * project's VM every fresh 2 MiB page was zeroed far slower than the 4 KiB
 * ones the kernel recycles, clear_page_erms 17% of the step); keeping the
 * block inside the model (an areal_acts may outlive the next forward, and
 * areal_acts_free has no model to hand it back to); mallopt (process-wide
 * malloc policy a library must not change). The cache is process state, but
 * only memory: areal_arena_trim (areal_model_free calls it) returns it.
 */
#include <pthread.h>
#include <stdlib.h>

#include "model_internal.h"

enum { ARENA_SLOTS = 8 };
#define ARENA_MIN ((size_t)4 << 20) /* smaller blocks: plain malloc / free */

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static struct {
    void *p;
    size_t bytes;
} slot[ARENA_SLOTS];

void *areal_arena_alloc(size_t bytes, size_t *got) {
    *got = bytes;
    if (bytes < ARENA_MIN)
        return malloc(bytes ? bytes : 1);
    void *p = NULL;
    pthread_mutex_lock(&mu);
    int best = -1;
    for (int i = 0; i < ARENA_SLOTS; i++) /* best fit, wasting at most half of the block */
        if (slot[i].p != NULL && slot[i].bytes >= bytes && slot[i].bytes / 2 <= bytes &&
            (best < 0 || slot[i].bytes < slot[best].bytes))
            best = i;
    if (best >= 0) {
        p = slot[best].p;
        *got = slot[best].bytes;
        slot[best].p = NULL;
    }
    pthread_mutex_unlock(&mu);
    return p != NULL ? p : malloc(bytes);
}

void areal_arena_free(void *p, size_t bytes) {
    if (p == NULL)
        return;
    if (bytes >= ARENA_MIN) {
        pthread_mutex_lock(&mu);
        int i = 0;
        while (i < ARENA_SLOTS && slot[i].p != NULL)
            i++;
        if (i < ARENA_SLOTS) {
            slot[i].p = p;
            slot[i].bytes = bytes;
            p = NULL;
        }
        pthread_mutex_unlock(&mu);
    }
    free(p); /* NULL when kept; a full cache frees the newcomer */
}

void areal_arena_trim(void) {
    pthread_mutex_lock(&mu);
    for (int i = 0; i < ARENA_SLOTS; i++) {
        free(slot[i].p);
        slot[i].p = NULL;
    }
    pthread_mutex_unlock(&mu);
}
