/*
 * test_collectives.c - every collective on every group kind, for random
 * parallel strategies of 1..16 ranks run as forked processes, through the
 * one collective interface (areal/comm/coll.h) and the library's role-group
 * builder.
 *
 * Each group runs the shared body coll_body.h, the same one the NCCL
 * backend's GPU test runs: expected values from the group's member list
 * (areal/groups.h, or the hand-written server-major order of an inference
 * role) and a closed-form input cb_v(rank, i), never from the operation
 * under test. A separate fp32 case uses fractional inputs and the bound
 * |got - exact| <= n * 2^-23 * sum|x| (fp32 rounding of n additions); the
 * CPU transport's own cases (async order, transports, concurrency) stay here.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include <cmocka.h>

#include "areal/alloc.h"
#include "areal/comm/comm.h"
#include "areal/comm/role_groups.h"
#include "areal/groups.h"
#include "coll_body.h"
#include "ranks.h"

#define SMALL CB_SMALL
#define LARGE CB_LARGE /* 160 KB of fp32: the ring path */

typedef struct job {
    areal_strategy s;
    int index; /* of the strategy, varies the checks */
} job;

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d group %s: check failed at line %d: %s\n", areal_comm_rank(c), \
                    areal_pg_name(g), __LINE__, #cond);                                            \
            return RANK_WRONG;                                                                     \
        }                                                                                          \
    } while (0)

#define COMM(call)                                                                                 \
    do {                                                                                           \
        if ((call) != AREAL_OK) {                                                                  \
            fprintf(stderr, "rank %d: %s\n", areal_comm_rank(c), e.msg);                           \
            return RANK_COMM_FAIL;                                                                 \
        }                                                                                          \
    } while (0)

/* The shared body's buffers for the CPU backend: host memory, copies are memcpy. */
static void *host_alloc(size_t bytes) {
    return malloc(bytes);
}
static int host_copy(void *dst, const void *src, size_t bytes) {
    memcpy(dst, src, bytes);
    return 0;
}
static const coll_mem host_mem = {
    .alloc = host_alloc, .release = free, .to_group = host_copy, .to_host = host_copy};

/* A check of all_kinds and role_kinds, naming the rank and the kind. */
#define KCHECK(cond)                                                                               \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "rank %d kind %s: check failed at line %d: %s\n", areal_comm_rank(c),  \
                    areal_group_kind_name((areal_group_kind)k), __LINE__, #cond);                  \
            rc = RANK_WRONG;                                                                       \
        }                                                                                          \
    } while (0)

/*
 * Every group of a training role, built by the library's role-group builder
 * over the CPU factory: each is the group the layout names (independently
 * computed by areal/groups.h), in its member order, and passes the shared body.
 */
static int all_kinds(areal_comm *c, void *arg) {
    job *jb = arg;
    areal_layout l;
    areal_role_plan role;
    areal_error e;
    if (areal_layout_init(&l, &jb->s, &e) != AREAL_OK ||
        areal_comm_role_of_strategy(&jb->s, &role, &e) != AREAL_OK)
        return RANK_WRONG;
    areal_coll *gs[AREAL_GROUP_KIND_COUNT];
    areal_coll_factory f = areal_comm_coll_factory(c);
    COMM(areal_comm_role_groups(&role, &f, gs, &e));
    coll_bufs bufs;
    int have = coll_bufs_init(&bufs, &host_mem) == 0, rc = have ? 0 : RANK_COMM_FAIL;
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT && rc == 0; k++) {
        areal_coll *g = gs[k];
        int gi = areal_group_index(&l, (areal_group_kind)k, areal_comm_rank(c));
        KCHECK((g == NULL) == (gi < 0));
        if (g == NULL || rc != 0)
            continue;
        KCHECK(areal_coll_mem(g) == AREAL_MEM_HOST && strcmp(areal_coll_backend(g), "cpu") == 0);
        KCHECK(areal_coll_size(g) == areal_group_size(&l, (areal_group_kind)k) ||
               k == AREAL_GROUP_EMBEDDING);
        for (int j = 0; j < areal_coll_size(g); j++)
            KCHECK(areal_coll_global_rank(g, j) ==
                   areal_group_member(&l, (areal_group_kind)k, gi, j));
        if (rc == 0)
            rc = coll_body_run(g, &bufs, areal_comm_rank(c), k + jb->index);
    }
    if (have)
        coll_bufs_free(&bufs);
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    return rc;
}

/*
 * An inference role (sglang:d2p2t2): its groups follow the plan's
 * server-major order, written out here by hand (server s holds ranks
 * 4s..4s+3, tp pairs inside a stage, pp across the stages of a server, dp
 * across servers), not from the library.
 */
static int role_kinds(areal_comm *c, void *arg) {
    (void)arg;
    areal_alloc *a = calloc(1, sizeof *a);
    areal_role_plan role;
    areal_error e;
    if (a == NULL || areal_alloc_parse("sglang:d2p2t2", a, &e) != AREAL_OK ||
        areal_comm_role_of(a, 0, &role, &e) != AREAL_OK) {
        free(a);
        return RANK_WRONG;
    }
    free(a);
    areal_coll *gs[AREAL_GROUP_KIND_COUNT];
    areal_coll_factory f = areal_comm_coll_factory(c);
    COMM(areal_comm_role_groups(&role, &f, gs, &e));
    coll_bufs bufs;
    if (coll_bufs_init(&bufs, &host_mem) != 0)
        return RANK_COMM_FAIL;
    int r = areal_comm_rank(c), rc = 0, present = 0;
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        areal_coll *g = gs[k];
        if (g == NULL)
            continue;
        present++;
        int want[2], n = 2;
        if (k == AREAL_GROUP_TP)
            want[0] = r & ~1, want[1] = r | 1;
        else if (k == AREAL_GROUP_PP)
            want[0] = (r & ~3) + (r & 1), want[1] = want[0] + 2;
        else if (k == AREAL_GROUP_DP)
            want[0] = r & 3, want[1] = (r & 3) + 4;
        else
            n = -1;
        KCHECK(n == 2 && areal_coll_size(g) == 2);
        for (int j = 0; rc == 0 && j < 2; j++)
            KCHECK(areal_coll_global_rank(g, j) == want[j]);
        if (rc == 0)
            rc = coll_body_run(g, &bufs, r, k);
    }
    coll_bufs_free(&bufs);
    int k = 0;
    KCHECK(present == 3);
    for (k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        areal_coll_destroy(gs[k]);
    return rc;
}

static void inference_role_groups_are_server_major(void **state) {
    (void)state;
    assert_int_equal(ranks_run_pods(8, 2, 20000, role_kinds, NULL), 0);
}

/* The builder refuses a role whose world is not the comm's, naming both. */
static void role_world_mismatch_is_refused(void **state) {
    (void)state;
    areal_strategy s = areal_strategy_single();
    s.dp = 4, s.edp = 0; /* edp 0: derived from dp */
    areal_role_plan role;
    areal_error e;
    assert_int_equal(areal_comm_role_of_strategy(&s, &role, &e), AREAL_OK);
    areal_coll *gs[AREAL_GROUP_KIND_COUNT];
    areal_coll_factory f = {.group = NULL, .ctx = NULL, .rank = 0, .world = 2};
    assert_int_equal(areal_comm_role_groups(&role, &f, gs, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "4 ranks"));
    assert_non_null(strstr(e.msg, "WORLD_SIZE is 2"));
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++)
        assert_null(gs[k]);
}

/* A random valid strategy of exactly `world` ranks (dense), with random expert sizes. */
static areal_strategy random_strategy(unsigned *seed, int world) {
    for (;;) {
        areal_strategy s = areal_strategy_single();
        int left = world;
        int *dims[] = {&s.tp, &s.cp, &s.pp};
        for (int d = 0; d < 3; d++) {
            int divs[16], nd = 0;
            for (int x = 1; x <= left; x++)
                if (left % x == 0)
                    divs[nd++] = x;
            *dims[d] = divs[rand_r(seed) % nd];
            left /= *dims[d];
        }
        s.dp = left;
        int rest = world / s.pp, divs[16], nd = 0;
        for (int x = 1; x <= rest; x++)
            if (rest % x == 0)
                divs[nd++] = x;
        s.ep = divs[rand_r(seed) % nd];
        s.etp = (rest / s.ep) % s.tp == 0 && rand_r(seed) % 2 ? s.tp : 1;
        s.edp = 0;
        areal_layout l;
        if (areal_layout_init(&l, &s, NULL) == AREAL_OK)
            return s;
    }
}

static void random_strategies(void **state) {
    (void)state;
    unsigned seed = 20261129;
    /* 50 strategies: mostly small worlds, a few large ones (2-core CI budget) */
    static const int worlds[] = {1, 2, 3, 4, 5, 6, 8, 12, 16};
    int count = 0;
    for (int i = 0; i < 50; i++) {
        int w = i < 4 ? worlds[i] : (i % 24 == 5 ? 16 : (i % 24 == 17 ? 12 : worlds[i % 7]));
        job jb = {.s = random_strategy(&seed, w), .index = i};
        /*
         * Every strategy with all ranks in one pod (shared memory between
         * every pair); every other one again, alternately in two pods
         * (shared memory inside each, TCP between them) or in none (TCP
         * only). 75 runs: what the 2-core CI budget allows.
         */
        int pods_of[2] = {1, i % 4 == 0 ? 2 : 0};
        for (int run = 0; run < (i % 2 ? 1 : 2); run++) {
            int64_t t0 = areal_now_ms();
            int pods = pods_of[run];
            int rc = ranks_run_pods(w, pods, 20000, all_kinds, &jb);
            if (getenv("COMM_TEST_VERBOSE"))
                fprintf(stderr, "world %d, %d pods: %lld ms\n", w, pods,
                        (long long)(areal_now_ms() - t0));
            if (rc != 0)
                fprintf(stderr,
                        "strategy d%d t%d p%d c%d e%d etp%d (world %d, %d pods): worst exit %d\n",
                        jb.s.dp, jb.s.tp, jb.s.pp, jb.s.cp, jb.s.ep, jb.s.etp, w, pods, rc);
            assert_int_equal(rc, 0);
            count++;
        }
    }
    assert_int_equal(count, 75);
}

/* fp32 with fractional inputs: within n * 2^-23 * sum|x| of the exact sum. */
static int fractional(areal_comm *c, void *arg) {
    (void)arg;
    areal_error e;
    int n = areal_comm_world(c), r = areal_comm_rank(c);
    int ranks[RANKS_MAX];
    for (int j = 0; j < n; j++)
        ranks[j] = j;
    areal_pg *g = NULL;
    COMM(areal_comm_group(c, "world", ranks, n, &g, &e));
    size_t cnt[] = {100, LARGE};
    int rc = 0;
    float *x = malloc(sizeof *x * LARGE);
    for (int k = 0; k < 2 && rc == 0; k++) {
        for (size_t i = 0; i < cnt[k]; i++)
            x[i] = (float)sin((double)(r * 1000 + (int)i)) * 3.7f;
        COMM(areal_pg_all_reduce(g, x, cnt[k], AREAL_DT_F32, AREAL_SUM, &e));
        for (size_t i = 0; i < cnt[k]; i++) {
            double exact = 0, mag = 0;
            for (int j = 0; j < n; j++) {
                double xj = (float)sin((double)(j * 1000 + (int)i)) * 3.7f;
                exact += xj;
                mag += fabs(xj);
            }
            CHECK(fabs(x[i] - exact) <= n * ldexp(1.0, -23) * mag);
        }
    }
    free(x);
    areal_pg_destroy(g);
    return rc;
}

static void fp32_within_bound(void **state) {
    (void)state;
    assert_int_equal(ranks_run(7, 20000, fractional, NULL), 0);
    assert_int_equal(ranks_run_pods(7, 1, 20000, fractional, NULL), 0);
}

/* Every group kind at once, one thread each, many rounds: no group sees another's data. */
typedef struct conc_arg {
    areal_comm *c;
    areal_coll *g;
    int rc;
} conc_arg;

static void *conc_thread(void *p) {
    conc_arg *ca = p;
    areal_coll *g = ca->g;
    areal_comm *c = ca->c;
    int n = areal_coll_size(g), m[RANKS_MAX];
    for (int j = 0; j < n; j++)
        m[j] = areal_coll_global_rank(g, j);
    int64_t *buf = malloc(sizeof *buf * 20000);
    ca->rc = 0;
    for (int round = 0; round < 6 && ca->rc == 0; round++) {
        size_t cnt = round % 2 ? 20000 : 50;
        for (size_t i = 0; i < cnt; i++)
            buf[i] = cb_v(areal_comm_rank(c), i) + round;
        areal_error e;
        if (areal_coll_all_reduce(g, buf, cnt, AREAL_DT_I64, AREAL_SUM, &e) != AREAL_OK) {
            fprintf(stderr, "%s\n", e.msg);
            ca->rc = RANK_COMM_FAIL;
            break;
        }
        for (size_t i = 0; i < cnt; i++)
            if (buf[i] !=
                (int64_t)cb_expect(m, n, i, AREAL_SUM, AREAL_DT_I64) + (int64_t)n * round) {
                fprintf(stderr, "group %s round %d: element %zu is %lld\n", areal_coll_name(g),
                        round, i, (long long)buf[i]);
                ca->rc = RANK_WRONG;
                break;
            }
    }
    free(buf);
    return NULL;
}

static int concurrent(areal_comm *c, void *arg) {
    job *jb = arg;
    areal_role_plan role;
    areal_error e;
    areal_coll *gs[AREAL_GROUP_KIND_COUNT];
    if (areal_comm_role_of_strategy(&jb->s, &role, &e) != AREAL_OK) {
        fprintf(stderr, "layout: %s\n", e.msg);
        return RANK_WRONG;
    }
    areal_coll_factory f = areal_comm_coll_factory(c);
    if (areal_comm_role_groups(&role, &f, gs, &e) != AREAL_OK) {
        fprintf(stderr, "%s\n", e.msg);
        return RANK_COMM_FAIL;
    }
    pthread_t th[AREAL_GROUP_KIND_COUNT];
    conc_arg ca[AREAL_GROUP_KIND_COUNT];
    int rc = 0;
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        ca[k] = (conc_arg){.c = c, .g = gs[k]};
        if (gs[k] != NULL)
            pthread_create(&th[k], NULL, conc_thread, &ca[k]);
    }
    for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
        if (gs[k] != NULL) {
            pthread_join(th[k], NULL);
            rc = ca[k].rc > rc ? ca[k].rc : rc;
        }
        areal_coll_destroy(gs[k]);
    }
    return rc;
}

static void concurrent_groups_do_not_interfere(void **state) {
    (void)state;
    job jb = {.s = areal_strategy_single()};
    jb.s.dp = 2, jb.s.tp = 2, jb.s.pp = 2, jb.s.ep = 2, jb.s.edp = 0;
    assert_int_equal(ranks_run(8, 20000, concurrent, &jb), 0);
    /* two pods: shared memory inside each, TCP between them, in the same groups */
    assert_int_equal(ranks_run_pods(8, 2, 20000, concurrent, &jb), 0);
}

static void bad_arguments_are_refused(void **state) {
    (void)state;
    areal_store_server *srv = NULL;
    int port = 0;
    areal_error e;
    assert_int_equal(areal_store_server_start("127.0.0.1", 0, &srv, &port, &e), AREAL_OK);
    areal_comm_config cfg = rank_config(0, 1, port, 1000);
    areal_comm *c = NULL;
    assert_int_equal(areal_comm_init(&cfg, &c, &e), AREAL_OK);
    int r0 = 0, bad[] = {0, 0};
    areal_pg *g = NULL;
    assert_int_equal(areal_comm_group(c, "big", bad, 2, &g, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "size 2"));
    int other = 1;
    assert_int_equal(areal_comm_group(c, "x", &other, 1, &g, &e), AREAL_EINVAL);
    assert_int_equal(areal_comm_group(c, "solo", &r0, 1, &g, &e), AREAL_OK);
    float f = 2;
    assert_int_equal(areal_pg_broadcast(g, &f, 1, AREAL_DT_F32, 1, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "solo"));
    assert_int_equal(areal_pg_all_reduce(g, &f, 1, AREAL_DT_U8, AREAL_SUM, &e), AREAL_EINVAL);
    assert_int_equal(areal_pg_all_reduce(g, &f, 1, (areal_dtype)99, AREAL_SUM, &e), AREAL_EINVAL);
    assert_int_equal(areal_pg_send(g, &f, 1, AREAL_DT_F32, 0, &e), AREAL_EINVAL);
    /* still usable after refused calls; size 1 is the identity */
    assert_int_equal(areal_pg_all_reduce(g, &f, 1, AREAL_DT_F32, AREAL_AVG, &e), AREAL_OK);
    assert_true(f == 2.0f);
    areal_pg_destroy(g);
    areal_comm_destroy(c);
    cfg.world = 0;
    assert_int_equal(areal_comm_init(&cfg, &c, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "WORLD_SIZE"));
    areal_store_server_stop(srv);
}

static void half_conversions_round_to_nearest_even(void **state) {
    (void)state;
    assert_int_equal(areal_f32_to_bf16(1.0f), 0x3f80);
    assert_int_equal(areal_f32_to_f16(1.0f), 0x3c00);
    assert_int_equal(areal_f32_to_f16(65504.0f), 0x7bff);
    assert_int_equal(areal_f32_to_f16(65520.0f), 0x7c00);
    assert_int_equal(areal_f32_to_f16(ldexpf(1.0f, -24)), 0x0001);
    assert_int_equal(areal_f32_to_f16(-2.0f), 0xc000);
    /* 1 + 2^-8 is halfway between two bf16 values: rounds to the even one (1.0) */
    assert_int_equal(areal_f32_to_bf16(1.0f + ldexpf(1.0f, -8)), 0x3f80);
    assert_int_equal(areal_f32_to_bf16(1.0f + 3 * ldexpf(1.0f, -8)), 0x3f82);
    for (int i = 0; i < 65536; i++) {
        uint16_t h = (uint16_t)i;
        float f = areal_f16_to_f32(h);
        if (!isnan(f))
            assert_int_equal(areal_f32_to_f16(f), h);
        f = areal_bf16_to_f32(h);
        if (!isnan(f))
            assert_int_equal(areal_f32_to_bf16(f), h);
    }
}

/* Async operations run in issue order, interleaved with a blocking one, with correct results. */
static int async_ops(areal_comm *c, void *arg) {
    (void)arg;
    areal_error e;
    areal_pg *g = NULL;
    int n = areal_comm_world(c), r = areal_comm_rank(c), m[RANKS_MAX];
    for (int j = 0; j < n; j++)
        m[j] = j;
    COMM(areal_comm_group(c, "world", m, n, &g, &e));
    int64_t *a = malloc(sizeof *a * LARGE), *ag = malloc(sizeof *ag * (size_t)n * SMALL);
    float *bc = malloc(sizeof *bc * LARGE);
    int32_t x[SMALL];
    for (size_t i = 0; i < LARGE; i++) {
        a[i] = cb_v(r, i);
        bc[i] = r == 1 ? (float)cb_v(r, i) : 0.0f;
    }
    for (size_t i = 0; i < SMALL; i++)
        x[i] = cb_v(r, i);
    areal_work *w1, *w2, *w3;
    COMM(areal_pg_all_reduce_async(g, a, LARGE, AREAL_DT_I64, AREAL_SUM, &w1, &e));
    COMM(areal_pg_all_gather_async(g, a, ag, SMALL, AREAL_DT_I64, &w2, &e));
    COMM(areal_pg_broadcast_async(g, bc, LARGE, AREAL_DT_F32, 1, &w3, &e));
    /* blocking: runs after the three queued ones */
    COMM(areal_pg_all_reduce(g, x, SMALL, AREAL_DT_I32, AREAL_MAX, &e));
    int done = 0;
    areal_work_test(w1, &done);
    CHECK(done == 1);
    COMM(areal_work_wait(w1, &e));
    COMM(areal_work_wait(w2, &e));
    COMM(areal_work_wait(w3, &e));
    for (size_t i = 0; i < LARGE; i++) {
        CHECK(a[i] == (int64_t)cb_expect(m, n, i, AREAL_SUM, AREAL_DT_I64));
        CHECK(bc[i] == (float)cb_v(1, i));
    }
    /* the gather ran after the all-reduce: it saw the reduced values */
    for (int j = 0; j < n; j++)
        for (size_t i = 0; i < SMALL; i++)
            CHECK(ag[(size_t)j * SMALL + i] ==
                  (int64_t)cb_expect(m, n, i, AREAL_SUM, AREAL_DT_I64));
    for (size_t i = 0; i < SMALL; i++)
        CHECK(x[i] == (int32_t)cb_expect(m, n, i, AREAL_MAX, AREAL_DT_I32));
    /* an argument error surfaces at wait, and the group stays usable */
    COMM(areal_pg_broadcast_async(g, bc, 1, AREAL_DT_F32, n + 3, &w1, &e));
    CHECK(areal_work_wait(w1, &e) == AREAL_EINVAL);
    COMM(areal_pg_barrier(g, &e));
    free(a);
    free(ag);
    free(bc);
    areal_pg_destroy(g);
    return 0;
}

static void async_operations_keep_issue_order(void **state) {
    (void)state;
    assert_int_equal(ranks_run(3, 20000, async_ops, NULL), 0);
    assert_int_equal(ranks_run_pods(3, 1, 20000, async_ops, NULL), 0);
}

/* Lines of /proc/self/<file> that contain `what` (maps: mappings; for fd, link targets). */
static int count_self(const char *file, const char *what) {
    int count = 0;
    if (strcmp(file, "fd") == 0) {
        char path[64], target[256];
        for (int fd = 0; fd < 1024; fd++) {
            snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
            ssize_t k = readlink(path, target, sizeof target - 1);
            if (k > 0) {
                target[k] = '\0';
                count += strstr(target, what) != NULL;
            }
        }
        return count;
    }
    char line[512];
    FILE *f = fopen("/proc/self/maps", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL)
        count += strstr(line, what) != NULL;
    if (f != NULL)
        fclose(f);
    return count;
}

/* Entries of /dev/shm whose name contains "areal" (a leaked named segment would show there). */
static int dev_shm_areal(void) {
    FILE *p = popen("ls /dev/shm 2>/dev/null | grep -c areal", "r");
    int n = 0;
    if (p == NULL || fscanf(p, "%d", &n) != 1)
        n = 0;
    if (p != NULL)
        pclose(p);
    return n;
}

/*
 * Ranks of one pod connect through the Unix-domain listener, others never
 * open one; with shared memory on, a pod's pair maps one anonymous segment
 * (no descriptor kept open), gone once the group is destroyed.
 */
static int transport_check(areal_comm *c, void *arg) {
    const int *want = arg; /* {unix sockets, shared memory} */
    int want_unix = want[0], ranks[] = {0, 1};
    areal_error e;
    areal_pg *g = NULL;
    COMM(areal_comm_group(c, "pair", ranks, 2, &g, &e));
    int rc = 0;
    if (areal_comm_rank(c) == 0) {
        /* the listener and the connection it accepted carry the name @areal-comm-<pid>-... */
        char name[64], line[512];
        snprintf(name, sizeof name, "@areal-comm-%d-", (int)getpid());
        FILE *f = fopen("/proc/net/unix", "r");
        int count = 0;
        while (f != NULL && fgets(line, sizeof line, f) != NULL) {
            if (strstr(line, name) != NULL)
                count++;
        }
        if (f != NULL)
            fclose(f);
        if (want_unix ? count < 2 : count != 0) {
            fprintf(stderr, "%d sockets named %s, want %s\n", count, name,
                    want_unix ? ">= 2" : "0");
            rc = RANK_WRONG;
        }
    }
    int maps = count_self("maps", "memfd:areal-comm"), fds = count_self("fd", "memfd:");
    if (maps != want[1] || fds != 0) {
        fprintf(stderr, "rank %d: %d shared-memory mappings (want %d), %d memfd descriptors open\n",
                areal_comm_rank(c), maps, want[1], fds);
        rc = RANK_WRONG;
    }
    /* data still moves: 300 KB through the ring (wraps it), checked element by element */
    size_t cnt = 75000;
    float *buf = malloc(cnt * sizeof *buf);
    if (buf == NULL)
        return RANK_WRONG;
    for (size_t i = 0; i < cnt; i++)
        buf[i] = (float)((i + (size_t)areal_comm_rank(c)) % 7);
    if (areal_pg_all_reduce(g, buf, cnt, AREAL_DT_F32, AREAL_SUM, &e) != AREAL_OK)
        rc = RANK_COMM_FAIL;
    for (size_t i = 0; i < cnt && rc == 0; i++)
        if (buf[i] != (float)(i % 7 + (i + 1) % 7))
            rc = RANK_WRONG;
    free(buf);
    if (areal_pg_barrier(g, &e) != AREAL_OK)
        rc = RANK_COMM_FAIL;
    areal_pg_destroy(g);
    if (count_self("maps", "memfd:areal-comm") != 0 || dev_shm_areal() != 0) {
        fprintf(stderr, "rank %d: shared memory left after the group was destroyed\n",
                areal_comm_rank(c));
        rc = RANK_WRONG;
    }
    return rc;
}

static void pods_use_shared_memory_or_unix_sockets(void **state) {
    (void)state;
    int shm[] = {1, 1}, sock[] = {1, 0}, tcp[] = {0, 0};
    assert_int_equal(ranks_run_opts(2, 1, 0, 5000, transport_check, shm), 0);
    /* shared memory off on one side is enough: both fall back to the sockets */
    assert_int_equal(ranks_run_opts(2, 1, 0x2, 5000, transport_check, sock), 0);
    assert_int_equal(ranks_run_opts(2, 1, 0x3, 5000, transport_check, sock), 0);
    assert_int_equal(ranks_run_opts(2, 0, 0, 5000, transport_check, tcp), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(half_conversions_round_to_nearest_even),
        cmocka_unit_test(random_strategies),
        cmocka_unit_test(inference_role_groups_are_server_major),
        cmocka_unit_test(role_world_mismatch_is_refused),
        cmocka_unit_test(bad_arguments_are_refused),
        cmocka_unit_test(pods_use_shared_memory_or_unix_sockets),

        cmocka_unit_test(fp32_within_bound),
        cmocka_unit_test(concurrent_groups_do_not_interfere),
        cmocka_unit_test(async_operations_keep_issue_order),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
