/*
 * test_rollout_tp.c - tensor-parallel rollout servers (t = 2) on forked
 * ranks: rank 0 serves HTTP on its shard, rank 1 follows
 * (areal_rollout_follow); checked against a t = 1 server on the same model
 * started in rank 0's process.
 *
 * Greedy /generate answers must carry exactly the t = 1 server's tokens, and
 * logprobs within 1e-4: tensor parallelism splits every o_proj and down_proj
 * product into two partial sums added by the all-reduce, which reassociates
 * the float sums (measured differences are ~1e-6; a wrong split, a missing
 * reduction or a follower running another step gives O(1) errors and other
 * tokens). Cases: several prompts one by one, concurrent requests (the
 * follower replays batches of several sequences), n > 1 (prefix sharing: the
 * siblings' tables share the leader's blocks), update_weights_from_disk to
 * other weights (then equal to a t = 1 server started on them) and to a bad
 * directory (every rank keeps the old weights), and at the engine level a
 * load that only the follower fails (the vote: no rank switches alone; a
 * request aborted in the same scheduler pass still gets its on_done). Failures: a killed follower
 * makes requests end and /health fail within the group deadline; a killed
 * leader makes the follower return an error within it. t = 4 over 2
 * key/value heads is refused with a message naming the heads (the training
 * shard requires whole heads per rank). The program: `areal-worker serve
 * --tp 2` (it forks its follower) answers as the t = 1 server, exits 0 on
 * SIGTERM, and exits 1 when its follower is killed.
 *
 * The children never call cmocka (a failed assertion would longjmp into the
 * parent's copy of the runner): they print and exit with a code.
 */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sys/time.h>

#include "../../comm/tests/ranks.h"
#include "areal/comm/coll.h"
#include "areal/comm/net.h"
#include "areal/rollout/engine.h"
#include "rollout_http_util.h"

#define TP_TIMEOUT_MS 3000
#define TP_TOL        1e-4
#define N_PROMPTS     5
#define MAX_NEW       12

typedef struct tp_case {
    const char *fixture; /* model directory (under the fixtures) */
    const char *dir_new; /* other weights for update_weights_from_disk, or NULL */
    int kill;            /* 1: rank 0 kills the follower; 2: rank 0 dies abruptly */
    int vote;            /* rank 0 drives the engine: a load only the follower fails */
} tp_case;

static int g_fail;
#define CHECK(c, ...)                                                                              \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "rank 0: %s:%d: ", __FILE__, __LINE__);                                \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            g_fail = 1;                                                                            \
        }                                                                                          \
    } while (0)

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void prompt(int i, int32_t *ids, int *n) {
    *n = 3 + 4 * i;
    for (int k = 0; k < *n; k++)
        ids[k] = (int32_t)((7 * i + 13 * k + 1) % 90);
}

static char *gen_body(int i, int n_samples) {
    int32_t ids[64];
    int n = 0;
    prompt(i, ids, &n);
    char *js = rt_ids_json(ids, n), *body = NULL;
    if (asprintf(&body,
                 "{\"input_ids\":%s,\"sampling_params\":{\"max_new_tokens\":%d,\"temperature\":0,"
                 "\"ignore_eos\":true,\"n\":%d},\"return_logprob\":true}",
                 js, MAX_NEW, n_samples) < 0)
        body = NULL;
    free(js);
    return body;
}

/* One answer's samples (an object, or an array of them for n > 1) compared with ref's. */
static void same_answer(json_t *a, json_t *ref, const char *what) {
    CHECK(a != NULL && ref != NULL, "%s: no JSON answer", what);
    if (a == NULL || ref == NULL)
        return;
    size_t n = json_is_array(a) ? json_array_size(a) : 1;
    CHECK(n == (json_is_array(ref) ? json_array_size(ref) : 1), "%s: sample counts differ", what);
    for (size_t s = 0; s < n && !g_fail; s++) {
        json_t *x = json_is_array(a) ? json_array_get(a, s) : a;
        json_t *y = json_is_array(ref) ? json_array_get(ref, s) : ref;
        json_t *xi = json_object_get(x, "output_ids"), *yi = json_object_get(y, "output_ids");
        CHECK(json_is_array(xi) && json_array_size(xi) == MAX_NEW && json_equal(xi, yi),
              "%s sample %zu: tokens differ from the t = 1 server's", what, s);
        json_t *xl = json_object_get(json_object_get(x, "meta_info"), "output_token_logprobs");
        json_t *yl = json_object_get(json_object_get(y, "meta_info"), "output_token_logprobs");
        CHECK(json_array_size(xl) == MAX_NEW && json_array_size(yl) == MAX_NEW,
              "%s sample %zu: logprob lists missing", what, s);
        for (size_t k = 0; k < json_array_size(xl) && k < json_array_size(yl); k++) {
            double lx = json_number_value(json_array_get(json_array_get(xl, k), 0));
            double ly = json_number_value(json_array_get(json_array_get(yl, k), 0));
            CHECK(fabs(lx - ly) <= TP_TOL, "%s sample %zu token %zu: logprob %.9g vs %.9g", what, s,
                  k, lx, ly);
        }
    }
}

typedef struct conc {
    int port, i;
    rt_resp r;
} conc;

static void *conc_main(void *arg) {
    conc *c = arg;
    char *body = gen_body(c->i, 1 + c->i % 2);
    c->r = rt_req(NULL, c->port, "/generate", body);
    free(body);
    return NULL;
}

/* Every check of one weight set: sequential, concurrent, n > 1, against ref_port. */
static void compare_servers(int port, int ref_port, const char *label) {
    char what[96];
    for (int i = 0; i < N_PROMPTS; i++) {
        char *body = gen_body(i, 1);
        rt_resp a = rt_req(NULL, port, "/generate", body),
                b = rt_req(NULL, ref_port, "/generate", body);
        snprintf(what, sizeof what, "%s prompt %d", label, i);
        CHECK(a.code == 200 && b.code == 200, "%s: HTTP %ld / %ld: %s", what, a.code, b.code,
              a.body);
        same_answer(a.json, b.json, what);
        rt_free(&a), rt_free(&b);
        free(body);
    }
    conc cs[6];
    pthread_t th[6];
    for (int i = 0; i < 6; i++) {
        cs[i] = (conc){.port = port, .i = i % N_PROMPTS + 1};
        pthread_create(&th[i], NULL, conc_main, &cs[i]);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < 6; i++) {
        char *body = gen_body(cs[i].i, 1 + cs[i].i % 2);
        rt_resp b = rt_req(NULL, ref_port, "/generate", body);
        snprintf(what, sizeof what, "%s concurrent %d", label, i);
        CHECK(cs[i].r.code == 200 && b.code == 200, "%s: HTTP %ld: %s", what, cs[i].r.code,
              cs[i].r.body);
        same_answer(cs[i].r.json, b.json, what);
        rt_free(&cs[i].r), rt_free(&b);
        free(body);
    }
    char *body = gen_body(2, 4); /* n = 4: the siblings share the prompt's blocks */
    rt_resp a = rt_req(NULL, port, "/generate", body),
            b = rt_req(NULL, ref_port, "/generate", body);
    snprintf(what, sizeof what, "%s n=4", label);
    CHECK(a.code == 200 && b.code == 200, "%s: HTTP %ld", what, a.code);
    same_answer(a.json, b.json, what);
    rt_free(&a), rt_free(&b);
    free(body);
}

static areal_rollout_server *start(const char *dir, int tp, areal_coll *g) {
    areal_rollout_server_config cfg = {.model_dir = dir,
                                       .kv_bytes = 4u << 20,
                                       .max_body = 1 << 20,
                                       .tensor_parallel = tp,
                                       .tp_group = g};
    areal_rollout_server *s = NULL;
    areal_error e;
    if (areal_rollout_server_start(&cfg, &s, &e) != AREAL_OK) {
        fprintf(stderr, "rank 0: start %s t%d: %s\n", dir, tp, e.msg);
        return NULL;
    }
    return s;
}

static int make_group(areal_comm *c, areal_coll **out) {
    int ranks[2] = {0, 1};
    areal_pg *pg = NULL;
    areal_error e;
    if (areal_comm_group(c, "rollout-tp", ranks, 2, &pg, &e) != AREAL_OK ||
        areal_coll_from_pg(pg, out, &e) != AREAL_OK) {
        fprintf(stderr, "rank %d: group: %s\n", areal_comm_rank(c), e.msg);
        return RANK_COMM_FAIL;
    }
    return 0;
}

/* ---- the engine directly: the load vote */

typedef struct waiter {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    areal_engine_result *res;
} waiter;

static void on_done(void *user, areal_engine_result *res) {
    waiter *w = user;
    pthread_mutex_lock(&w->mu);
    w->res = res;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

/* Greedy tokens of prompt 3 into out[MAX_NEW]; 0 or -1. */
static int engine_greedy(areal_engine *e, int32_t *out) {
    int32_t ids[64];
    int n = 0;
    prompt(3, ids, &n);
    waiter w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    areal_engine_request r = {.input_ids = ids, .n_input = n, .on_done = on_done, .user = &w};
    areal_engine_params_default(&r.params);
    r.params.max_new_tokens = MAX_NEW;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    areal_error e2;
    if (areal_engine_submit(e, &r, &e2) != AREAL_OK)
        return -1;
    pthread_mutex_lock(&w.mu);
    while (w.res == NULL)
        pthread_cond_wait(&w.cv, &w.mu);
    pthread_mutex_unlock(&w.mu);
    int ok = w.res->n == 1 && w.res->samples[0].n_output == MAX_NEW;
    if (ok)
        memcpy(out, w.res->samples[0].output_ids, sizeof(int32_t) * MAX_NEW);
    areal_engine_result_free(w.res);
    return ok ? 0 : -1;
}

static int load_shard0(const char *dir, areal_model *m) {
    areal_model_config mc;
    char path[600];
    areal_error e;
    snprintf(path, sizeof path, "%s/config.json", dir);
    if (areal_model_config_load(path, &mc, &e) != AREAL_OK)
        return -1;
    areal_model_shard sh = areal_model_shard_whole(&mc);
    sh.tp = 2;
    return areal_model_load_shard(m, dir, &sh, NULL, &e) == AREAL_OK ? 0 : -1;
}

/*
 * A request aborted in the very scheduler pass that serves a swap the
 * follower cannot load still gets its on_done (ABORT). The failed-load path
 * once went back to the top of the loop with that pass's finished requests
 * undelivered: never answered, never freed. To land both in one pass, the
 * request's on_token (on the scheduler thread, inside the step) aborts its own
 * request, lets this thread start the swap, and holds the step 300 ms, so the
 * swap is pending when the pass that serves the abort begins.
 */
typedef struct abort_swap {
    areal_engine *e;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool go;
    areal_engine_result *res;
} abort_swap;

static int as_on_token(void *user, const areal_engine_token *t) {
    abort_swap *a = user;
    if (t->position != 1)
        return 0;
    areal_engine_abort(a->e, "abort-beside-swap");
    pthread_mutex_lock(&a->mu);
    a->go = true;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
    struct timespec hold = {0, 300 * 1000000L};
    nanosleep(&hold, NULL);
    return 0;
}

static void as_on_done(void *user, areal_engine_result *res) {
    abort_swap *a = user;
    pthread_mutex_lock(&a->mu);
    a->res = res;
    pthread_cond_broadcast(&a->cv);
    pthread_mutex_unlock(&a->mu);
}

/* Waits up to 10 s for *flag (a bool) or *ptr (non-NULL), whichever is given. */
static void as_wait(abort_swap *a, const bool *flag, areal_engine_result *const *ptr) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += 10;
    pthread_mutex_lock(&a->mu);
    while (!(flag ? *flag : *ptr != NULL) && pthread_cond_timedwait(&a->cv, &a->mu, &dl) == 0) {
    }
    pthread_mutex_unlock(&a->mu);
}

static void aborted_beside_a_failed_swap(areal_engine *e, areal_model *next) {
    abort_swap a = {.e = e, .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};
    int32_t ids[64];
    int n = 0;
    prompt(3, ids, &n);
    areal_engine_request r = {.input_ids = ids,
                              .n_input = n,
                              .rid = "abort-beside-swap",
                              .on_done = as_on_done,
                              .on_token = as_on_token,
                              .user = &a};
    areal_engine_params_default(&r.params);
    r.params.max_new_tokens = MAX_NEW;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    areal_error err;
    CHECK(areal_engine_submit(e, &r, &err) == AREAL_OK, "submit: %s", err.msg);
    as_wait(&a, &a.go, NULL);
    CHECK(a.go, "the request's second token never came");
    int rc = areal_engine_swap_model_dir(e, next, "/nonexistent-tp-dir", "bad", false, &err);
    CHECK(rc == AREAL_EINVAL, "the swap the follower cannot load: %d %s", rc, err.msg);
    as_wait(&a, NULL, &a.res);
    CHECK(a.res != NULL, "the request aborted beside the failed swap never got its on_done");
    if (a.res != NULL)
        CHECK(a.res->samples[0].finish == AREAL_FINISH_ABORT, "finish %d, want ABORT",
              a.res->samples[0].finish);
    areal_engine_result_free(a.res);
}

/* A swap whose directory rank 0 never reads (its model comes from elsewhere) and the
 * follower cannot load: the vote keeps every rank on the old weights. */
static int vote_leader(areal_coll *g, const tp_case *tc) {
    char dir[512];
    rt_fixture(dir, sizeof dir, tc->fixture);
    areal_model m, next;
    if (load_shard0(dir, &m) != 0 || load_shard0(tc->dir_new, &next) != 0)
        return RANK_WRONG;
    areal_engine_config ec = {.kv_bytes = 4u << 20, .tensor_parallel = 2, .tp_group = g};
    areal_engine *e = NULL;
    areal_error err;
    if (areal_engine_create(&m, &ec, &e, &err) != AREAL_OK) {
        fprintf(stderr, "rank 0: engine: %s\n", err.msg);
        return RANK_WRONG;
    }
    int32_t before[MAX_NEW], after[MAX_NEW], fresh[MAX_NEW];
    CHECK(engine_greedy(e, before) == 0, "greedy before");
    aborted_beside_a_failed_swap(e, &next);
    int rc = areal_engine_swap_model_dir(e, &next, "/nonexistent-tp-dir", "bad", false, &err);
    CHECK(rc == AREAL_EINVAL && strstr(err.msg, "tp rank 1") != NULL,
          "a load only the follower failed: %d %s", rc, err.msg);
    CHECK(engine_greedy(e, after) == 0 && memcmp(before, after, sizeof before) == 0,
          "after the failed vote the served tokens changed (a rank switched alone)");
    rc = areal_engine_swap_model_dir(e, &next, tc->dir_new, "v2", false, &err);
    CHECK(rc == AREAL_OK, "the good swap: %s", err.msg);
    CHECK(engine_greedy(e, fresh) == 0 && memcmp(before, fresh, sizeof before) != 0,
          "the new weights give the old tokens");
    if (rc != AREAL_OK)
        areal_model_free(&next);
    areal_engine_destroy(e); /* the follower's loop returns 0 */
    return g_fail ? RANK_WRONG : 0;
}

static int leader(areal_comm *c, areal_coll *g, const tp_case *tc) {
    if (tc->vote)
        return vote_leader(g, tc);
    char dir[512];
    rt_fixture(dir, sizeof dir, tc->fixture);
    areal_rollout_server *s = start(dir, 2, g);
    if (s == NULL)
        return RANK_WRONG;
    int port = areal_rollout_server_port(s);
    if (tc->kill) {
        rt_resp h = rt_req(NULL, port, "/health", NULL);
        CHECK(h.code == 200, "health before the kill: %ld", h.code);
        rt_free(&h);
        char *body = gen_body(1, 1);
        rt_resp a = rt_req(NULL, port, "/generate", body);
        CHECK(a.code == 200, "a request before the kill: %ld", a.code);
        rt_free(&a);
        if (tc->kill == 2) { /* the leader dies: the follower must notice */
            fflush(NULL);
            _exit(0);
        }
        char pidbuf[32] = {0};
        size_t plen = 0;
        areal_error e;
        if (areal_store_get(areal_comm_store(c), "test/follower-pid", TP_TIMEOUT_MS, pidbuf,
                            sizeof pidbuf - 1, &plen, &e) != AREAL_OK)
            pidbuf[0] = '\0';
        CHECK(atoi(pidbuf) > 0, "no follower pid in the store");
        if (atoi(pidbuf) > 0)
            kill((pid_t)atoi(pidbuf), SIGKILL);
        double t0 = now_s();
        a = rt_req(NULL, port, "/generate", body);
        double dt = now_s() - t0;
        const char *fin = a.json ? rt_finish(a.json) : NULL;
        CHECK(a.code != 200 || (fin && strcmp(fin, "abort") == 0),
              "a request after the kill answered %ld finish %s", a.code, fin ? fin : "?");
        CHECK(dt < 3.0 * TP_TIMEOUT_MS / 1000.0, "the request took %.1f s", dt);
        rt_free(&a);
        free(body);
        for (int i = 0; i < 50 && !areal_rollout_server_failed(s, NULL, 0); i++)
            usleep(100 * 1000);
        h = rt_req(NULL, port, "/health", NULL);
        CHECK(h.code == 503 && strstr(h.body, "tensor-parallel") != NULL,
              "health after the kill: %ld %s", h.code, h.body);
        rt_free(&h);
        areal_rollout_server_stop(s);
        return g_fail ? RANK_WRONG : 0;
    }
    rt_resp info = rt_req(NULL, port, "/get_server_info", NULL);
    CHECK(info.json && json_integer_value(json_object_get(info.json, "tp_size")) == 2,
          "get_server_info: %s", info.body);
    rt_free(&info);
    areal_rollout_server *ref = start(dir, 1, NULL);
    if (ref == NULL) {
        areal_rollout_server_stop(s);
        return RANK_WRONG;
    }
    compare_servers(port, areal_rollout_server_port(ref), tc->fixture);
    areal_rollout_server_stop(ref);
    if (tc->dir_new != NULL && !g_fail) {
        rt_resp r = rt_post(port, "/update_weights_from_disk",
                            "{\"model_path\":\"/nonexistent-tp\",\"weight_version\":\"bad\"}");
        CHECK(r.code == 400, "a bad directory answered %ld", r.code);
        rt_free(&r);
        ref = start(dir, 1, NULL); /* the old weights still serve, on both ranks */
        if (ref != NULL)
            compare_servers(port, areal_rollout_server_port(ref), "after a bad update");
        areal_rollout_server_stop(ref);
        r = rt_post(port, "/update_weights_from_disk",
                    "{\"model_path\":\"%s\",\"weight_version\":\"v2\"}", tc->dir_new);
        CHECK(r.code == 200 && strstr(r.body, "v2") != NULL, "update: %ld %s", r.code, r.body);
        rt_free(&r);
        ref = start(tc->dir_new, 1, NULL);
        if (ref != NULL)
            compare_servers(port, areal_rollout_server_port(ref), "new weights");
        areal_rollout_server_stop(ref);
        /* distributed / peer updates are refused at t > 1, with the reason */
        r = rt_post(port, "/update_weights_from_peer", "{\"url\":\"http://127.0.0.1:1\"}");
        CHECK(r.code == 400 && strstr(r.body, "tensor-parallel") != NULL, "peer: %ld", r.code);
        rt_free(&r);
    }
    areal_rollout_server_stop(s); /* the follower's loop returns 0 */
    return g_fail ? RANK_WRONG : 0;
}

static int rank_main(areal_comm *c, void *arg) {
    const tp_case *tc = arg;
    areal_coll *g = NULL;
    int rc = make_group(c, &g);
    if (rc != 0)
        return rc;
    areal_coll_set_timeout(g, TP_TIMEOUT_MS);
    if (areal_comm_rank(c) == 0) {
        curl_global_init(CURL_GLOBAL_DEFAULT);
        rc = leader(c, g, tc);
        curl_global_cleanup();
    } else {
        char dir[512], pid[32];
        rt_fixture(dir, sizeof dir, tc->fixture);
        areal_error e;
        snprintf(pid, sizeof pid, "%d", (int)getpid());
        areal_store_set(areal_comm_store(c), "test/follower-pid", pid, strlen(pid), &e);
        double t0 = now_s();
        rc = areal_rollout_follow(dir, g, 1, &e);
        double dt = now_s() - t0;
        if (tc->kill == 2) { /* the leader died: an error within the deadline, no hang */
            rc = rc != AREAL_OK && dt < 30 ? 0 : RANK_WRONG;
            if (rc != 0)
                fprintf(stderr, "rank 1: follow returned %d after %.1f s\n", rc, dt);
        } else if (rc != AREAL_OK) {
            fprintf(stderr, "rank 1: %s\n", e.msg);
            rc = RANK_COMM_FAIL;
        }
    }
    areal_coll_destroy(g);
    return rc;
}

static void run_case(tp_case *tc) {
    assert_int_equal(ranks_run(2, TP_TIMEOUT_MS, rank_main, tc), 0);
}

static void t2_qwen2_and_update(void **state) {
    (void)state;
    char dir_new[256];
    rt_model_dir(dir_new, sizeof dir_new, 0.9f); /* ref-qwen2's weights x 0.9 */
    tp_case tc = {.fixture = "ref-qwen2", .dir_new = dir_new};
    run_case(&tc);
    rt_rmdir(dir_new);
}

static void t2_qwen3(void **state) { /* qk-norm, tied embedding */
    (void)state;
    tp_case tc = {.fixture = "ref-qwen3"};
    run_case(&tc);
}

static void t2_qwen3_moe(void **state) { /* experts replicated over tp, dense parts split */
    (void)state;
    tp_case tc = {.fixture = "ref-qwen3-moe"};
    run_case(&tc);
}

static void load_vote(void **state) {
    (void)state;
    char dir_new[256];
    rt_model_dir(dir_new, sizeof dir_new, 0.9f);
    tp_case tc = {.fixture = "ref-qwen2", .dir_new = dir_new, .vote = 1};
    run_case(&tc);
    rt_rmdir(dir_new);
}

static void follower_killed(void **state) {
    (void)state;
    tp_case tc = {.fixture = "ref-qwen2", .kill = 1};
    /* the killed follower exits by signal 9: 109 is the expected worst code */
    pid_t pids[2];
    ranks_store st;
    assert_int_equal(ranks_start(&st, 2, TP_TIMEOUT_MS, rank_main, &tc, pids), 0);
    int s0 = 0, s1 = 0;
    waitpid(pids[0], &s0, 0);
    waitpid(pids[1], &s1, 0);
    ranks_store_stop(&st);
    assert_true(WIFEXITED(s0));
    assert_int_equal(WEXITSTATUS(s0), 0);
    assert_true(WIFSIGNALED(s1) && WTERMSIG(s1) == SIGKILL);
}

static void leader_died(void **state) {
    (void)state;
    tp_case tc = {.fixture = "ref-qwen2", .kill = 2};
    assert_int_equal(ranks_run(2, TP_TIMEOUT_MS, rank_main, &tc), 0);
}

/* ---- `areal-worker serve --tp 2` by hand (the program forks its follower) */

static pid_t spawn_serve(int port) {
    char bin[512], dir[512], port_s[16];
    const char *b = getenv("AREAL_BIN");
    snprintf(bin, sizeof bin, "%s/areal-worker", b && b[0] ? b : "build/rel");
    snprintf(port_s, sizeof port_s, "%d", port);
    rt_fixture(dir, sizeof dir, "ref-qwen2");
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* exec at once: this process may have threads (no malloc here) */
        execl(bin, bin, "serve", "--tp", "2", "--model", dir, "--host", "127.0.0.1", "--port",
              port_s, "--grace-ms", "200", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid, int ms) {
    int st = 0;
    for (int i = 0; i < ms / 50; i++) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + WTERMSIG(st);
        usleep(50 * 1000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    return -1; /* it hung */
}

static int health_wait(int port) {
    for (int i = 0; i < 300; i++) {
        rt_resp h = rt_req(NULL, port, "/health", NULL);
        long code = h.code;
        rt_free(&h);
        if (code == 200)
            return 0;
        usleep(50 * 1000);
    }
    return -1;
}

/* The follower process of a serving leader (its only child). */
static pid_t child_of(pid_t parent) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", (int)parent, (int)parent);
    FILE *f = fopen(path, "r");
    long c = -1;
    if (f != NULL) {
        if (fscanf(f, "%ld", &c) != 1)
            c = -1;
        fclose(f);
    }
    return (pid_t)c;
}

static void serve_tp_by_hand(void **state) {
    (void)state;
    setenv("AREAL_COMM_TIMEOUT_MS", "3000", 1); /* the group deadline of the program's ranks */
    int port = 0;
    {
        int fd = -1;
        areal_error e;
        assert_int_equal(areal_net_listen("127.0.0.1", 0, &fd, &port, &e), AREAL_OK);
        close(fd);
    }
    pid_t pid = spawn_serve(port);
    assert_true(pid > 0);
    if (health_wait(port) != 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("serve --tp 2 never became healthy");
    }
    char dir[512];
    areal_rollout_server *ref = rt_server(rt_fixture(dir, sizeof dir, "ref-qwen2"), NULL);
    g_fail = 0;
    compare_servers(port, areal_rollout_server_port(ref), "serve --tp 2");
    areal_rollout_server_stop(ref);
    assert_int_equal(g_fail, 0);
    kill(pid, SIGTERM); /* drains, stops the follower, exits 0 */
    assert_int_equal(wait_exit(pid, 20000), 0);

    pid = spawn_serve(port); /* again, and kill its follower: the server exits 1 */
    assert_true(pid > 0);
    assert_int_equal(health_wait(port), 0);
    pid_t f = child_of(pid);
    assert_true(f > 0);
    kill(f, SIGKILL);
    assert_int_equal(wait_exit(pid, 4 * TP_TIMEOUT_MS), 1);
}

/* t 4 over 2 key/value heads: refused at start, naming the heads (no rank runs). */
static void t4_refused(void **state) {
    (void)state;
    char dir[512];
    areal_rollout_server_config cfg = {.model_dir = rt_fixture(dir, sizeof dir, "ref-qwen2"),
                                       .kv_bytes = 4u << 20,
                                       .tensor_parallel = 4};
    areal_rollout_server *s = NULL;
    areal_error e;
    assert_int_not_equal(areal_rollout_server_start(&cfg, &s, &e), AREAL_OK);
    assert_null(s);
    assert_non_null(strstr(e.msg, "num_key_value_heads"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(t4_refused),      cmocka_unit_test(t2_qwen2_and_update),
        cmocka_unit_test(t2_qwen3),        cmocka_unit_test(t2_qwen3_moe),
        cmocka_unit_test(follower_killed), cmocka_unit_test(leader_died),
        cmocka_unit_test(load_vote),       cmocka_unit_test(serve_tp_by_hand),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
