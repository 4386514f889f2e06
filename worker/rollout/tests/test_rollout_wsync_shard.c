/*
 * test_rollout_wsync_shard.c - the sharded weight update
 * (areal/train/wsync_shard.h) from a two-rank trainer to two servers: rank 0
 * is this process (it posts the control messages and roots its own
 * buckets), rank 1 a forked process that loads only its own shard and
 * roots its buckets. For a t2 layout (tensor-parallel row/column slices) and
 * a p2 layout (pipeline stages' layers), and an e2 layout of a MoE model
 * (experts split over the ranks, compared with a server started on the new
 * weights too), with buckets smaller than one
 * slice and larger than all: the greedy outputs then equal the reference
 * model's on the new weights and weight_version is the new one. A sender
 * rank that dies mid-update leaves the old version serving, with the reason;
 * a bucket with only part of the slice fields, overlapping slices, a full
 * shape that is not the model's or a slice past the tensor's end are
 * refused naming the field, the old version serving.
 * The plan itself: every tensor covered once, replicas (tp norms, dp copies)
 * sent by the lowest rank, one root per bucket.
 */
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/train/wsync_shard.h"
#include "rollout_http_util.h"

static char dir[128], dir_new[128], moe[128], moe_new[128];
static areal_model_config cfg, cfg_moe;

/* As rt_model_dir, for the Qwen2-MoE fixture (4 experts, a shared expert). */
static void moe_dir(char *d, size_t cap, float scale) {
    snprintf(d, cap, "/tmp/areal-rt-XXXXXX");
    assert_non_null(mkdtemp(d));
    char src[512], dst[600];
    rt_copy(rt_fixture(src, sizeof src, "ref-qwen2-moe/config.json"),
            (snprintf(dst, sizeof dst, "%s/config.json", d), dst));
    rt_copy(rt_fixture(src, sizeof src, "tok/tokenizer.json"),
            (snprintf(dst, sizeof dst, "%s/tokenizer.json", d), dst));
    areal_model m;
    areal_error e;
    if (areal_model_load(&m, rt_fixture(src, sizeof src, "ref-qwen2-moe"), NULL, &e) != 0)
        fail_msg("%s", e.msg);
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] *= scale;
    areal_st_out *t = calloc(m.n_specs, sizeof *t);
    int *shard = calloc(m.n_specs, sizeof *shard);
    for (size_t i = 0; i < m.n_specs; i++)
        t[i] = (areal_st_out){.name = m.specs[i].name,
                              .dtype = AREAL_DT_F32,
                              .ndim = m.specs[i].ndim,
                              .shape = m.specs[i].shape,
                              .data = m.params + m.offset[i]};
    if (areal_checkpoint_write(d, t, m.n_specs, shard, 1, &e) != 0)
        fail_msg("%s", e.msg);
    free(t);
    free(shard);
    areal_model_free(&m);
}

static int setup(void **state) {
    (void)state;
    rt_setup_dirs(dir, dir_new, sizeof dir);
    moe_dir(moe, sizeof moe, 1.0f);
    moe_dir(moe_new, sizeof moe_new, 1.5f);
    char p[300];
    areal_error e;
    snprintf(p, sizeof p, "%s/config.json", dir);
    if (areal_model_config_load(p, &cfg, &e) != 0)
        fail_msg("%s", e.msg);
    snprintf(p, sizeof p, "%s/config.json", moe);
    if (areal_model_config_load(p, &cfg_moe, &e) != 0)
        fail_msg("%s", e.msg);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rt_rmdir(moe);
    rt_rmdir(moe_new);
    rt_teardown_dirs(dir, dir_new);
    return 0;
}

typedef enum { T2, P2, E2 } layout; /* E2: the MoE model's experts split over 2 ranks */

static const areal_model_config *cfg_of(layout l) {
    return l == E2 ? &cfg_moe : &cfg;
}

static areal_model_shard shard_of(layout l, int rank) {
    areal_model_shard s = areal_model_shard_whole(cfg_of(l));
    if (l == T2) {
        s.tp = 2;
        s.tp_rank = rank;
    } else if (l == E2) {
        s.ep = 2;
        s.ep_rank = rank;
    } else {
        areal_error e;
        if (areal_model_shard_stage(&cfg, rank, 2, &s, &e) != 0)
            fail_msg("%s", e.msg);
    }
    return s;
}

/* One rank's slices, loaded from the model directory d. */
typedef struct rank_data {
    areal_model m;
    const void **local;
} rank_data;

static int rank_load(rank_data *r, const char *d, const areal_model_shard *s, areal_error *e) {
    int rc = areal_model_load_shard(&r->m, d, s, NULL, e);
    if (rc != 0)
        return rc;
    r->local = calloc(r->m.n_specs, sizeof *r->local);
    for (size_t i = 0; i < r->m.n_specs; i++)
        r->local[i] = r->m.params + r->m.offset[i];
    return 0;
}

static void rank_free(rank_data *r) {
    free(r->local);
    areal_model_free(&r->m);
}

/*
 * The forked rank 1: joins, roots its buckets and exits 0; with die_after
 * >= 0 it roots only that many of them and then exits (dies) before the
 * next, whose control message is out. Never returns.
 */
static void rank1_main(int port, const char *d, layout l, size_t bucket, int die_after) {
    areal_error e;
    areal_model_shard sh[2] = {shard_of(l, 0), shard_of(l, 1)};
    areal_wsync_plan *p = NULL;
    rank_data r;
    areal_wsync *w = NULL;
    if (areal_wsync_plan_build(cfg_of(l), sh, 2, AREAL_DT_F32, bucket, &p, &e) != 0 ||
        rank_load(&r, d, &sh[1], &e) != 0 || areal_wsync_attach("127.0.0.1", port, NULL, &w, &e) ||
        areal_wsync_join_rank(w, 1, 4, "update_weight_group", 30000, &e) != 0) {
        fprintf(stderr, "rank 1: %s\n", e.msg);
        _exit(2);
    }
    if (die_after >= 0) { /* cut the plan after this rank's die_after-th bucket */
        int mine = 0;
        for (size_t b = 0; b < p->n_buckets; b++)
            if (p->buckets[b].root == 1 && mine++ == die_after) {
                p->n_buckets = b;
                break;
            }
    }
    int rc = areal_wsync_send_sharded(w, p, r.local, NULL, &e);
    if (rc != 0)
        fprintf(stderr, "rank 1: %s\n", e.msg);
    _exit(rc == 0 ? 0 : 3);
}

/*
 * Rank 1 as a fresh process: fork, then at once exec this binary with
 * --rank1 (main below runs rank1_main). Why not fork alone: the servers'
 * threads are running here, and a child forked from a threaded process
 * inherits whatever lock another thread held at that moment; under ASan the
 * child hung in its first malloc on the allocator's mutex (seen in CI
 * rehearsals, the parent then failing with "rank 1 never published its
 * address"). Between fork and exec the child calls only execv and _exit.
 */
static pid_t spawn_rank1(int port, const char *d, layout l, size_t bucket, int die_after) {
    char a[5][300];
    snprintf(a[0], sizeof a[0], "%d", port);
    snprintf(a[1], sizeof a[1], "%s", d);
    snprintf(a[2], sizeof a[2], "%d", (int)l);
    snprintf(a[3], sizeof a[3], "%zu", bucket);
    snprintf(a[4], sizeof a[4], "%d", die_after);
    char *argv[] = {"test_rollout_wsync_shard", "--rank1", a[0], a[1], a[2], a[3], a[4], NULL};
    pid_t pid = fork();
    if (pid == 0) {
        execv("/proc/self/exe", argv);
        _exit(127);
    }
    return pid;
}

/* The exec'd rank 1: the configuration its layout needs, from d, then rank1_main. */
static int rank1_exec_main(char **argv) {
    int port = atoi(argv[2]), l = atoi(argv[4]), die_after = atoi(argv[6]);
    size_t bucket = (size_t)strtoull(argv[5], NULL, 10);
    const char *d = argv[3];
    char p[400];
    areal_error e;
    snprintf(p, sizeof p, "%s/config.json", d);
    if (areal_model_config_load(p, l == E2 ? &cfg_moe : &cfg, &e) != 0) {
        fprintf(stderr, "rank 1: %s\n", e.msg);
        return 2;
    }
    rank1_main(port, d, (layout)l, bucket, die_after); /* exits */
    return 2;
}

/*
 * One update of the weights in d under `version` in layout l, through the
 * trainer's call (areal_wsync_join_servers, areal_wsync_update_sharded).
 * Returns its result; msg gets the error.
 */
static int update(const int ports[2], const char *d, layout l, size_t bucket, const char *version,
                  int die_after, char *msg, size_t cap) {
    areal_error e;
    areal_model_shard sh[2] = {shard_of(l, 0), shard_of(l, 1)};
    areal_wsync_plan *p = NULL;
    if (areal_wsync_plan_build(cfg_of(l), sh, 2, AREAL_DT_F32, bucket, &p, &e) != 0)
        fail_msg("%s", e.msg);
    areal_wsync *w = NULL;
    assert_int_equal(areal_wsync_listen("127.0.0.1", 0, &w, &e), 0);
    pid_t pid = spawn_rank1(areal_wsync_port(w), d, l, bucket, die_after);
    assert_true(pid >= 0);
    char addr[2][64];
    const char *addrs[2] = {addr[0], addr[1]};
    for (int i = 0; i < 2; i++)
        snprintf(addr[i], sizeof addr[i], "127.0.0.1:%d", ports[i]);
    areal_wsync_target t = {.addrs = addrs, .n = 2, .version = version, .abort_all = true};
    if (areal_wsync_join_servers(w, 2, &t, 30000, &e) != 0)
        fail_msg("%s", e.msg);
    rank_data r0;
    if (rank_load(&r0, d, &sh[0], &e) != 0)
        fail_msg("%s", e.msg);
    size_t sent = 0;
    int rc = areal_wsync_update_sharded(w, p, r0.local, &t, &sent, &e);
    snprintf(msg, cap, "%s", rc == 0 ? "" : e.msg);
    int st = 0;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    if (die_after < 0) {
        if (rc != 0)
            fail_msg("rank 0: %s", e.msg);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), 0);
        /* rank 0 sent its own buckets only, less than the model */
        size_t mine = 0;
        for (size_t b = 0; b < p->n_buckets; b++)
            mine += p->buckets[b].root == 0 ? p->buckets[b].bytes : 0;
        assert_int_equal(sent, mine);
        assert_true(sent < p->bytes);
    }
    rank_free(&r0);
    areal_wsync_close(w);
    areal_wsync_plan_free(p);
    return rc;
}

static void plan_covers_once_with_one_root_per_bucket(void **state) {
    (void)state;
    areal_error e;
    /* t2 x d2: ranks 2 and 3 hold rank 0's and 1's slices again */
    areal_model_shard sh[4] = {shard_of(T2, 0), shard_of(T2, 1), shard_of(T2, 0), shard_of(T2, 1)};
    areal_wsync_plan *p = NULL;
    assert_int_equal(areal_wsync_plan_build(&cfg, sh, 4, AREAL_DT_F32, 1, &p, &e), 0);
    areal_tensor_spec *specs;
    size_t n;
    assert_int_equal(areal_model_expected_tensors(&cfg, &specs, &n, &e), 0);
    size_t model_bytes = 0;
    for (size_t k = 0; k < n; k++) {
        size_t numel =
            (size_t)specs[k].shape[0] * (size_t)(specs[k].ndim > 1 ? specs[k].shape[1] : 1);
        model_bytes += numel * 4;
        /* the pieces of tensor k cover it exactly once (by elements) */
        size_t got = 0;
        for (size_t i = 0; i < p->n_pieces; i++)
            if (strcmp(p->pieces[i].name, specs[k].name) == 0) {
                got += (size_t)p->pieces[i].local[0] *
                       (size_t)(p->pieces[i].ndim > 1 ? p->pieces[i].local[1] : 1);
                assert_true(p->pieces[i].owner < 2); /* the dp-rank-0 copies */
                if (p->pieces[i].dim < 0)
                    assert_int_equal(p->pieces[i].owner, 0); /* replicated: tp rank 0 */
            }
        assert_int_equal(got, numel);
    }
    assert_int_equal(p->bytes, model_bytes);
    /* buckets of 1 byte: one piece each, its owner the root */
    assert_int_equal(p->n_buckets, p->n_pieces);
    for (size_t b = 0; b < p->n_buckets; b++)
        assert_int_equal(p->buckets[b].root, p->pieces[p->buckets[b].first].owner);
    areal_wsync_plan_free(p);
    /* one huge bucket per owner */
    assert_int_equal(areal_wsync_plan_build(&cfg, sh, 4, AREAL_DT_F32, (size_t)1 << 30, &p, &e), 0);
    assert_int_equal(p->n_buckets, 2);
    for (size_t b = 0; b < p->n_buckets; b++)
        for (size_t i = p->buckets[b].first; i < p->buckets[b].first + p->buckets[b].n; i++)
            assert_int_equal(p->pieces[i].owner, p->buckets[b].root);
    areal_wsync_plan_free(p);
    /* a layout that leaves half the model out is refused, naming the tensor */
    assert_int_not_equal(areal_wsync_plan_build(&cfg, sh, 1, AREAL_DT_F32, 0, &p, &e), 0);
    assert_non_null(strstr(e.msg, "do not cover tensor"));
    free(specs);
}

static void t2_and_p2_trainers_update_two_servers(void **state) {
    (void)state;
    areal_rollout_server *a = rt_server(dir, "0"), *b = rt_server(dir, "0");
    int ports[2] = {areal_rollout_server_port(a), areal_rollout_server_port(b)};
    char msg[1024] = "";
    /* t2, buckets smaller than one slice: one slice per bucket */
    update(ports, dir_new, T2, 1, "t2-small", -1, msg, sizeof msg);
    rt_outputs_are(ports[0], dir_new, "t2-small");
    rt_outputs_are(ports[1], dir_new, "t2-small");
    /* p2, buckets larger than all: one per stage; back to the old weights */
    update(ports, dir, P2, (size_t)1 << 30, "p2-big", -1, msg, sizeof msg);
    rt_outputs_are(ports[0], dir, "p2-big");
    rt_outputs_are(ports[1], dir, "p2-big");
    /* t2, rank 1 dies after its first bucket (its second one announced): the update is
     * dropped, p2-big serves, and the trainer's error says which bucket of which root */
    assert_int_not_equal(update(ports, dir_new, T2, 512, "t2-dead", 1, msg, sizeof msg), 0);
    if (strstr(msg, "receiving the bucket failed") == NULL)
        fail_msg("%s", msg);
    if (strstr(msg, "bucket") == NULL || strstr(msg, "(root 1)") == NULL)
        fail_msg("the error names the bucket and its root: %s", msg);
    rt_outputs_are(ports[0], dir, "p2-big");
    rt_outputs_are(ports[1], dir, "p2-big");
    /* and a whole update works again after the failure: p2, mid-sized buckets */
    update(ports, dir_new, P2, 4096, "p2-mid", -1, msg, sizeof msg);
    rt_outputs_are(ports[0], dir_new, "p2-mid");
    rt_outputs_are(ports[1], dir_new, "p2-mid");

    /* a bucket naming src_rank but not the slices is refused, naming the field */
    rt_resp r = rt_post(ports[0], "/update_weights_from_distributed",
                        "{\"names\":[\"model.norm.weight\"],\"dtypes\":[\"float32\"],"
                        "\"shapes\":[[48]],\"group_name\":\"update_weight_group\","
                        "\"src_rank\":1,\"n_senders\":2}");
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.body, "slice_dims is missing"));
    assert_non_null(strstr(r.body, "version p2-mid keeps serving"));
    rt_free(&r);
    rt_outputs_are(ports[0], dir_new, "p2-mid");
    areal_rollout_server_stop(a);
    areal_rollout_server_stop(b);
}

static void e2_trainer_updates_moe_servers(void **state) {
    (void)state;
    areal_error e;
    /* the plan: each rank's experts come from it, the replicated rest from rank 0 */
    areal_model_shard sh[2] = {shard_of(E2, 0), shard_of(E2, 1)};
    areal_wsync_plan *p = NULL;
    assert_int_equal(areal_wsync_plan_build(&cfg_moe, sh, 2, AREAL_DT_F32, 0, &p, &e), 0);
    int experts[2] = {0, 0};
    for (size_t i = 0; i < p->n_pieces; i++) {
        const char *x = strstr(p->pieces[i].name, ".experts.");
        if (x == NULL) {
            assert_int_equal(p->pieces[i].owner, 0);
            continue;
        }
        int id = atoi(x + 9);
        assert_int_equal(p->pieces[i].owner, id < cfg_moe.num_experts / 2 ? 0 : 1);
        experts[p->pieces[i].owner]++;
    }
    assert_true(experts[0] > 0 && experts[0] == experts[1]);
    areal_wsync_plan_free(p);

    areal_rollout_server *a = rt_server(moe, "0"), *b = rt_server(moe, "0");
    int ports[2] = {areal_rollout_server_port(a), areal_rollout_server_port(b)};
    char msg[1024] = "";
    int32_t before[64], after[64], fresh[64];
    int nb = rt_greedy(ports[0], before, 64, NULL, 0);
    assert_int_equal(update(ports, moe_new, E2, 256, "e2", -1, msg, sizeof msg), 0);
    rt_outputs_are(ports[0], moe_new, "e2");
    rt_outputs_are(ports[1], moe_new, "e2");
    /* and equal to a server started on the new weights (which differ from the old) */
    areal_rollout_server *c = rt_server(moe_new, "x");
    int na = rt_greedy(ports[1], after, 64, NULL, 0),
        nf = rt_greedy(areal_rollout_server_port(c), fresh, 64, NULL, 0);
    assert_int_equal(na, nf);
    assert_memory_equal(after, fresh, (size_t)na * 4);
    assert_true(na != nb || memcmp(after, before, (size_t)na * 4) != 0);
    areal_rollout_server_stop(c);
    areal_rollout_server_stop(a);
    areal_rollout_server_stop(b);
}

/*
 * A hand-made sharded bucket from a one-sender world (src_rank 0 of 1, over
 * the group itself): two slices of one tensor, sent as two tensors' bytes.
 * Returns the server's answer (caller frees).
 */
static rt_resp hand_bucket(areal_wsync *w, int port, const areal_tensor_spec *sp, int64_t off2,
                           int64_t full0) {
    int64_t rows = 2, cols = sp->shape[1];
    float *data = calloc((size_t)(rows * cols), sizeof *data);
    int64_t shape[2] = {rows, cols};
    areal_wsync_tensor t[2] = {
        {.name = sp->name, .dtype = AREAL_DT_F32, .ndim = 2, .shape = shape, .data = data},
        {.name = sp->name, .dtype = AREAL_DT_F32, .ndim = 2, .shape = shape, .data = data}};
    char *body = NULL;
    assert_true(asprintf(&body,
                         "{\"names\":[\"%s\",\"%s\"],\"dtypes\":[\"float32\",\"float32\"],"
                         "\"shapes\":[[2,%lld],[2,%lld]],\"group_name\":\"update_weight_group\","
                         "\"src_rank\":0,\"n_senders\":1,\"slice_dims\":[0,0],"
                         "\"slice_offsets\":[0,%lld],\"full_shapes\":[[%lld,%lld],[%lld,%lld]]}",
                         sp->name, sp->name, (long long)cols, (long long)cols, (long long)off2,
                         (long long)full0, (long long)cols, (long long)full0, (long long)cols) > 0);
    rt_async bp;
    rt_async_start(&bp, port, "/update_weights_from_distributed", body);
    areal_error e;
    assert_int_equal(areal_wsync_send(w, t, 2, &e), 0);
    rt_async_wait(&bp);
    free(body);
    free(data);
    return bp.r;
}

static void bad_slices_are_refused_naming_the_field(void **state) {
    (void)state;
    areal_rollout_server *a = rt_server(dir, "7");
    int port = areal_rollout_server_port(a);
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", port);
    const char *addrs[1] = {addr};
    areal_wsync_target t = {.addrs = addrs, .n = 1};
    areal_wsync *w = NULL;
    areal_error e;
    assert_int_equal(areal_wsync_listen("127.0.0.1", 0, &w, &e), 0);
    if (areal_wsync_join_servers(w, 1, &t, 30000, &e) != 0)
        fail_msg("%s", e.msg);
    areal_tensor_spec *specs;
    size_t n;
    assert_int_equal(areal_model_expected_tensors(&cfg, &specs, &n, &e), 0);
    const areal_tensor_spec *sp = NULL;
    for (size_t k = 0; k < n && sp == NULL; k++)
        if (specs[k].ndim == 2 && specs[k].shape[0] >= 4)
            sp = &specs[k];
    assert_non_null(sp);
    /* rows [0, 2) and [1, 3): the second overlaps the first */
    rt_resp r = hand_bucket(w, port, sp, 1, sp->shape[0]);
    assert_int_equal(r.code, 400);
    if (strstr(r.body, "overlaps one already received") == NULL ||
        strstr(r.body, "version 7 keeps serving") == NULL)
        fail_msg("%s", r.body);
    rt_free(&r);
    /* a full shape that is not the model's (the group stayed in step: received, refused) */
    r = hand_bucket(w, port, sp, 2, sp->shape[0] + 1);
    assert_int_equal(r.code, 400);
    if (strstr(r.body, "full_shapes[0]") == NULL || strstr(r.body, sp->name) == NULL)
        fail_msg("%s", r.body);
    rt_free(&r);
    /* a slice past the end of the tensor */
    r = hand_bucket(w, port, sp, sp->shape[0] - 1, sp->shape[0]);
    assert_int_equal(r.code, 400);
    if (strstr(r.body, "does not fit inside full shape") == NULL)
        fail_msg("%s", r.body);
    rt_free(&r);
    rt_outputs_are(port, dir, "7");
    free(specs);
    areal_wsync_close(w);
    areal_rollout_server_stop(a);
}

int main(int argc, char **argv) {
    signal(SIGPIPE, SIG_IGN);
    if (argc == 7 && strcmp(argv[1], "--rank1") == 0)
        return rank1_exec_main(argv);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(plan_covers_once_with_one_root_per_bucket),
        cmocka_unit_test(t2_and_p2_trainers_update_two_servers),
        cmocka_unit_test(e2_trainer_updates_moe_servers),
        cmocka_unit_test(bad_slices_are_refused_naming_the_field),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
