/*
 * fuzz_shm_ring.c - libFuzzer target for the shared-memory rings
 * (worker/src/shm.h): the input is a program of put / get / reduce-get
 * steps between two members of a fresh segment, checked against a model.
 *
 * Invariants: a put takes exactly min(n, free room) bytes and a get exactly
 * min(n, bytes waiting) (a reduce-get rounded down to whole elements); the
 * bytes come out in order, unchanged; a reduce-get equals a plain reduce of
 * the same bytes, aligned or not; nothing is read or written outside the
 * caller's buffers (ASan). Each step is 3 input bytes: kind and type, then
 * a 16-bit length.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../src/shm.h"

#define K 16 /* local members: the smallest ring, so inputs wrap it often */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t stream_at(uint64_t i) {
    return (uint8_t)((i * 2654435761u) >> 11);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    int loc[K];
    for (int j = 0; j < K; j++)
        loc[j] = j;
    size_t len = areal_shm_segment_bytes(K), cap = areal_shm_ring_cap(K);
    int fd = memfd_create("areal-comm-fuzz", MFD_CLOEXEC);
    if (fd < 0 || ftruncate(fd, (off_t)len) != 0)
        abort();
    areal_shm *a = areal_shm_map(fd, len, K, 0, loc, K, 1);
    areal_shm *b = areal_shm_map(fd, len, K, 1, loc, K, 0);
    close(fd);
    uint8_t *buf = malloc(2 * cap + 16), *ref = malloc(2 * cap + 16), *src = malloc(2 * cap + 16);
    if (a == NULL || b == NULL || buf == NULL || ref == NULL || src == NULL)
        abort();
    uint64_t sent = 0, got = 0;
    static const areal_dtype types[] = {AREAL_DT_F32, AREAL_DT_I32, AREAL_DT_I64};
    for (size_t p = 0; p + 3 <= size; p += 3) {
        int kind = data[p] % 3;
        areal_dtype t = types[data[p] / 3 % 3];
        areal_redop op = data[p] / 9 % 2 ? AREAL_MAX : AREAL_SUM;
        size_t n = ((size_t)data[p + 1] | (size_t)data[p + 2] << 8) * 2 % (2 * cap) + 1;
        size_t waiting = (size_t)(sent - got);
        if (kind == 0) {
            for (size_t i = 0; i < n; i++)
                src[i] = stream_at(sent + i);
            size_t k = areal_shm_put(a, 1, src, n);
            if (k != (n < cap - waiting ? n : cap - waiting))
                abort();
            sent += k;
        } else if (kind == 1) {
            size_t k = areal_shm_get(b, 0, buf, n);
            if (k != (n < waiting ? n : waiting))
                abort();
            for (size_t i = 0; i < k; i++)
                if (buf[i] != stream_at(got + i))
                    abort();
            got += k;
        } else {
            size_t es = areal_dtype_size(t), want = n < waiting ? n : waiting;
            want -= want % es;
            n -= n % es;
            if (n == 0)
                continue;
            /* an aligned destination (a typed array), with a pattern to reduce into */
            for (size_t i = 0; i < n; i++)
                buf[i] = ref[i] = (uint8_t)(i * 7 + p);
            for (size_t i = 0; i < want; i++)
                src[i] = stream_at(got + i);
            areal_reduce(ref, src, want / es, t, op);
            size_t k = areal_shm_get_reduce(b, 0, buf, n, t, op);
            if (k != want || memcmp(buf, ref, n) != 0)
                abort();
            got += k;
        }
    }
    free(buf);
    free(ref);
    free(src);
    areal_shm_close(a);
    areal_shm_close(b);
    return 0;
}
