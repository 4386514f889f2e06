/*
 * test_shm_ring.c - the shared-memory rings and doorbells (worker/src/shm.h)
 * in one process: one segment mapped twice, as two local members.
 *
 * Byte streams of random-sized pieces (odd sizes, many wrap-arounds) must
 * arrive exactly; reduce-from-ring must equal a plain reduce also when an
 * odd-sized earlier message left the ring misaligned; a producer and a
 * consumer thread that sleep on their doorbells move 8 MiB intact; a broken
 * mark wakes a sleeper at once; a slot counter published by one member
 * wakes the other sleeping past its polling budget, and the slots of the
 * two members and parities do not overlap, and the `reduced` counter is a
 * third one; a segment without a valid header is refused. The data paths'
 * copy (src/copy.h) equals memcpy at every relative alignment and at sizes
 * around its loop's block and threshold, touching no byte outside.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../src/copy.h"
#include "../src/shm.h"
#include "areal/comm/net.h"

typedef struct pair {
    int fd;
    areal_shm *a, *b; /* member 0 and member 1 */
} pair;

static void pair_open(pair *p, int k) {
    size_t len = areal_shm_segment_bytes(k);
    int loc[AREAL_SHM_MAX_LOCAL];
    for (int j = 0; j < k; j++)
        loc[j] = j;
    p->fd = memfd_create("areal-comm-test", MFD_CLOEXEC);
    assert_true(p->fd >= 0);
    assert_int_equal(ftruncate(p->fd, (off_t)len), 0);
    p->a = areal_shm_map(p->fd, len, k, 0, loc, k, 1);
    p->b = areal_shm_map(p->fd, len, k, 1, loc, k, 0);
    assert_non_null(p->a);
    assert_non_null(p->b);
    close(p->fd);
}

static void pair_close(pair *p) {
    areal_shm_close(p->a);
    areal_shm_close(p->b);
}

static uint8_t byte_at(size_t i) {
    return (uint8_t)(i * 2654435761u >> 13);
}

static void byte_stream_arrives_exactly(void **state) {
    (void)state;
    pair p;
    pair_open(&p, 3);
    size_t cap = areal_shm_ring_cap(3), total = 6 * cap + 12345, sent = 0, got = 0;
    assert_true(cap >= 4096 && (cap & (cap - 1)) == 0);
    uint8_t *in = malloc(total), *out = malloc(total);
    assert_non_null(in);
    assert_non_null(out);
    for (size_t i = 0; i < total; i++)
        in[i] = byte_at(i);
    unsigned seed = 7;
    while (got < total) {
        size_t want = (size_t)rand_r(&seed) % (cap / 3) + 1;
        size_t k = areal_shm_put(p.a, 1, in + sent, sent + want > total ? total - sent : want);
        sent += k;
        /* the ring never takes more than its capacity ahead of the consumer */
        assert_true(sent - got <= cap);
        want = (size_t)rand_r(&seed) % (cap / 2) + 1;
        got += areal_shm_get(p.b, 0, out + got, got + want > total ? total - got : want);
        assert_true(got <= sent);
    }
    assert_memory_equal(in, out, total);
    /* nothing else is in flight, and the other direction stayed empty */
    assert_int_equal(areal_shm_get(p.b, 0, out, 1), 0);
    assert_int_equal(areal_shm_get(p.a, 1, out, 1), 0);
    free(in);
    free(out);
    pair_close(&p);
}

static void reduce_from_ring_matches_plain_reduce(void **state) {
    (void)state;
    pair p;
    pair_open(&p, 2);
    size_t cap = areal_shm_ring_cap(2);
    static const areal_dtype types[] = {AREAL_DT_F32, AREAL_DT_I32, AREAL_DT_I64};
    for (int skew = 0; skew < 3; skew++) {
        for (int ti = 0; ti < 3; ti++) {
            areal_dtype t = types[ti];
            size_t es = areal_dtype_size(t), n = (cap / es) * 3 / 2 + 7; /* wraps the ring */
            /* an odd-sized message first leaves the next one misaligned */
            uint8_t odd[5] = {1, 2, 3, 4, 5}, sink[5];
            if (skew) {
                assert_int_equal(areal_shm_put(p.a, 1, odd, (size_t)skew * 2 + 1),
                                 (size_t)skew * 2 + 1);
                assert_int_equal(areal_shm_get(p.b, 0, sink, (size_t)skew * 2 + 1),
                                 (size_t)skew * 2 + 1);
            }
            uint8_t *src = malloc(n * es), *dst = malloc(n * es), *ref = malloc(n * es);
            assert_non_null(src);
            assert_non_null(dst);
            assert_non_null(ref);
            for (size_t i = 0; i < n; i++) {
                if (t == AREAL_DT_F32) {
                    ((float *)src)[i] = (float)(i % 13) * 0.25f;
                    ((float *)dst)[i] = (float)(i % 5) - 2.0f;
                } else if (t == AREAL_DT_I32) {
                    ((int32_t *)src)[i] = (int32_t)(i % 1000) - 500;
                    ((int32_t *)dst)[i] = (int32_t)(i * 7 % 333);
                } else {
                    ((int64_t *)src)[i] = (int64_t)i << 33;
                    ((int64_t *)dst)[i] = -(int64_t)i;
                }
            }
            memcpy(ref, dst, n * es);
            areal_redop op = (areal_redop)((skew + ti) % 2 ? AREAL_MAX : AREAL_SUM);
            areal_reduce(ref, src, n, t, op);
            size_t sent = 0, got = 0, bytes = n * es;
            while (got < bytes) {
                sent += areal_shm_put(p.a, 1, src + sent, bytes - sent);
                /* odd request sizes: only whole elements may be taken */
                size_t k = areal_shm_get_reduce(p.b, 0, dst + got, (bytes - got) / 3 + es, t, op);
                assert_int_equal(k % es, 0);
                got += k;
            }
            assert_memory_equal(dst, ref, bytes);
            free(src);
            free(dst);
            free(ref);
        }
    }
    pair_close(&p);
}

typedef struct flow {
    areal_shm *s;
    uint8_t *buf;
    size_t n;
    int sleeps;
} flow;

static void *producer(void *arg) {
    flow *f = arg;
    size_t done = 0;
    while (done < f->n) {
        uint32_t seen = areal_shm_bell(f->s);
        size_t k = areal_shm_put(f->s, 1, f->buf + done, f->n - done);
        done += k;
        if (k == 0)
            f->sleeps += areal_shm_wait(f->s, seen, 5000) == 0;
    }
    return NULL;
}

static void threads_move_data_through_doorbells(void **state) {
    (void)state;
    pair p;
    pair_open(&p, 2);
    size_t n = 8u << 20;
    uint8_t *in = malloc(n), *out = malloc(n);
    assert_non_null(in);
    assert_non_null(out);
    for (size_t i = 0; i < n; i++)
        in[i] = byte_at(i * 3);
    flow f = {.s = p.a, .buf = in, .n = n};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, producer, &f), 0);
    size_t got = 0;
    int64_t t0 = areal_now_ms();
    while (got < n) {
        uint32_t seen = areal_shm_bell(p.b);
        size_t k = areal_shm_get(p.b, 0, out + got, 100000);
        got += k;
        if (k == 0)
            assert_int_equal(areal_shm_wait(p.b, seen, 5000), 0); /* woken, never timed out */
    }
    pthread_join(th, NULL);
    assert_memory_equal(in, out, n);
    assert_true(areal_now_ms() - t0 < 10000);
    free(in);
    free(out);
    pair_close(&p);
}

static void *breaker(void *arg) {
    areal_shm *s = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L};
    nanosleep(&ts, NULL);
    areal_shm_break(s, 4);
    return NULL;
}

static void broken_mark_wakes_sleepers(void **state) {
    (void)state;
    pair p;
    pair_open(&p, 2);
    assert_int_equal(areal_shm_broken_by(p.b), -1);
    pthread_t th;
    uint32_t seen = areal_shm_bell(p.b);
    int64_t t0 = areal_now_ms();
    assert_int_equal(pthread_create(&th, NULL, breaker, p.a), 0);
    while (areal_shm_broken_by(p.b) < 0 && areal_now_ms() - t0 < 3000)
        areal_shm_wait(p.b, seen, 3000);
    pthread_join(th, NULL);
    assert_true(areal_now_ms() - t0 < 2000);
    assert_int_equal(areal_shm_broken_by(p.b), 4);
    /* the first breaker wins */
    areal_shm_break(p.b, 1);
    assert_int_equal(areal_shm_broken_by(p.a), 4);
    /* a waiter with nothing to wake it times out */
    assert_int_equal(areal_shm_wait(p.a, areal_shm_bell(p.a), 20), 1);
    pair_close(&p);
}

typedef struct {
    areal_shm *s;
    uint64_t seq;
} slot_pub;

static void *publisher(void *arg) {
    slot_pub *p = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 50000000L}; /* far past the polling */
    nanosleep(&ts, NULL);
    areal_shm_slot_publish(p->s, p->seq, 0);
    return NULL;
}

static int arrived_at_1(void *arg) {
    return areal_shm_slot_seq(arg, 0, 0) >= 1;
}

static int finished_1(void *arg) {
    return areal_shm_slot_seq(arg, 1, 1) >= 1;
}

static void slot_counters_wake_sleepers(void **state) {
    (void)state;
    pair p;
    pair_open(&p, 2);
    assert_int_equal(areal_shm_slot_next(p.a), 1);
    assert_int_equal(areal_shm_slot_seq(p.b, 0, 0), 0);
    /* two members x two parities: four disjoint slots */
    size_t cap = areal_shm_slot_cap(p.a);
    assert_int_equal(cap, areal_shm_slot_bytes(2));
    uint8_t *sl[4] = {areal_shm_slot(p.a, 0, 1), areal_shm_slot(p.a, 0, 2),
                      areal_shm_slot(p.a, 1, 1), areal_shm_slot(p.a, 1, 2)};
    for (int i = 0; i < 4; i++)
        memset(sl[i], 'a' + i, cap);
    for (int i = 0; i < 4; i++)
        for (size_t j = 0; j < cap; j += 997)
            assert_int_equal(sl[i][j], 'a' + i);
    /* the other mapping sees the same bytes */
    assert_int_equal(areal_shm_slot(p.b, 1, 3)[cap - 1], 'c');
    slot_pub pub = {p.a, 1};
    pthread_t th;
    int64_t t0 = areal_now_ms();
    assert_int_equal(pthread_create(&th, NULL, publisher, &pub), 0);
    int timed_out = 0;
    while (!arrived_at_1(p.b) && areal_now_ms() - t0 < 3000)
        timed_out += areal_shm_wait_until(p.b, arrived_at_1, p.b, 3000, 200000);
    pthread_join(th, NULL);
    assert_int_equal(timed_out, 0);
    assert_true(areal_now_ms() - t0 < 2000);
    assert_int_equal(areal_shm_slot_next(p.a), 2);
    /* nothing published: the wait times out */
    t0 = areal_now_ms();
    assert_int_equal(areal_shm_wait_until(p.a, finished_1, p.a, 30, 200000), 1);
    assert_true(areal_now_ms() - t0 >= 29);
    /* `reduced` is a counter of its own */
    areal_shm_slot_publish(p.a, 7, AREAL_SHM_REDUCED);
    assert_int_equal(areal_shm_slot_seq(p.b, 0, AREAL_SHM_REDUCED), 7);
    assert_int_equal(areal_shm_slot_seq(p.b, 0, AREAL_SHM_ARRIVED), 1);
    assert_int_equal(areal_shm_slot_seq(p.b, 0, AREAL_SHM_FINISHED), 0);
    pair_close(&p);
}

static void bad_segments_are_refused(void **state) {
    (void)state;
    int loc[2] = {0, 1};
    size_t len = areal_shm_segment_bytes(2);
    int fd = memfd_create("areal-comm-test", MFD_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, (off_t)len), 0);
    /* no header written yet, a wrong length, a wrong member count */
    assert_null(areal_shm_map(fd, len, 2, 1, loc, 2, 0));
    assert_null(areal_shm_map(fd, len - 4096, 2, 0, loc, 2, 1));
    assert_null(areal_shm_map(fd, len, 1, 0, loc, 2, 1));
    assert_null(areal_shm_map(fd, len, 2, 2, loc, 2, 1));
    areal_shm *s = areal_shm_map(fd, len, 2, 0, loc, 2, 1);
    assert_non_null(s);
    assert_int_equal(areal_shm_local(s, 1), 1);
    assert_int_equal(areal_shm_local(s, 2), -1);
    assert_int_equal(areal_shm_local(NULL, 0), -1);
    areal_shm_close(s);
    close(fd);
}

static void copy_equals_memcpy(void **state) {
    (void)state;
    static const size_t sizes[] = {0, 1, 63, 127, 128, 129, 1023, 1024, 1025, 4096 + 17, 200000};
    size_t cap = 200000 + 256;
    uint8_t *src = malloc(cap), *dst = malloc(cap), *want = malloc(cap);
    assert_non_null(src);
    assert_non_null(dst);
    assert_non_null(want);
    for (size_t i = 0; i < cap; i++)
        src[i] = (uint8_t)(i * 131 + 7);
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t so = 0; so < 64; so += 8) {
            for (size_t d = 0; d < 64; d++) {
                size_t n = sizes[si];
                memset(dst, 0xa5, cap);
                memset(want, 0xa5, cap);
                areal_comm_copy(dst + d + 64, src + so, n);
                memcpy(want + d + 64, src + so, n);
                assert_memory_equal(dst, want, cap);
            }
        }
    }
    free(src);
    free(dst);
    free(want);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(byte_stream_arrives_exactly),
        cmocka_unit_test(reduce_from_ring_matches_plain_reduce),
        cmocka_unit_test(threads_move_data_through_doorbells),
        cmocka_unit_test(broken_mark_wakes_sleepers),
        cmocka_unit_test(slot_counters_wake_sleepers),
        cmocka_unit_test(bad_segments_are_refused),
        cmocka_unit_test(copy_equals_memcpy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
