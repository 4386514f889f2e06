/*
 * pool.h - a small pthread pool for the element-wise kernels of the CPU model.
 *
 * areal_pool_for splits [0, n) into chunks of at least `grain` items and runs
 * fn(ctx, begin, end) on them from the pool's threads and the caller; it
 * returns when every chunk is done. Chunks never overlap, so a kernel that
 * writes only rows [begin, end) needs no locks. A NULL pool runs everything
 * on the caller, which is the reference (and the single-thread) path.
 *
 * Chosen over OpenMP because it needs no compiler flag (the build has one
 * CFLAGS line for every component and clang's fuzz build would need libomp),
 * it is plain pthreads under ASan/UBSan, and a pool is an explicit object the
 * caller owns instead of a hidden process-wide runtime. One pool must not be
 * used by two threads at once (the model that holds it is single-caller).
 */
#ifndef AREAL_MODEL_POOL_H
#define AREAL_MODEL_POOL_H

#include <stddef.h>

#include "areal/error.h"

typedef struct areal_pool areal_pool;

typedef void (*areal_pool_fn)(void *ctx, size_t begin, size_t end);

/*
 * Starts n_threads - 1 worker threads (the caller is the n-th). n_threads
 * must be 1..256. Returns 0, AREAL_EINVAL or AREAL_ENOMEM (also when a thread
 * cannot start); on failure *out is NULL.
 */
int areal_pool_create(int n_threads, areal_pool **out, areal_error *err);

/* Stops and joins the workers and frees the pool; NULL is a no-op. */
void areal_pool_destroy(areal_pool *p);

/* Threads of the pool (1 for NULL). */
int areal_pool_threads(const areal_pool *p);

/* Runs fn over [0, n) as described above; n == 0 returns at once. fn must not
 * call areal_pool_for on the same pool (the pool runs one job at a time). */
void areal_pool_for(areal_pool *p, size_t n, size_t grain, areal_pool_fn fn, void *ctx);

#endif
