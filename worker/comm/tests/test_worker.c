/*
 * test_worker.c - areal-worker as the operator runs it: pods of local ranks
 * ($AREAL_BIN/areal-worker), the selftest over every group of a job split
 * across two pods, supervision (a killed rank stops its pod, which exits
 * non-zero naming the rank), SIGTERM forwarding, and clear errors for a bad
 * environment and a taken port. Two roles of one job share the trainer's store.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/comm/net.h"

typedef struct pod {
    pid_t pid;
    char out[64], err[64];
} pod;

static int free_port(void) {
    int fd, p = 0;
    assert_int_equal(areal_net_listen("127.0.0.1", 0, &fd, &p, NULL), AREAL_OK);
    close(fd);
    return p;
}

/* Starts a pod with the given environment (NULL-terminated "K=V" list) and arguments. */
static void pod_start(pod *p, char *const *env, const char *arg1, const char *arg2,
                      const char *arg3) {
    const char *dir = getenv("AREAL_BIN") ? getenv("AREAL_BIN") : "build/rel";
    char bin[512];
    snprintf(bin, sizeof bin, "%s/areal-worker", dir);
    snprintf(p->out, sizeof p->out, "/tmp/areal-pod-out-XXXXXX");
    snprintf(p->err, sizeof p->err, "/tmp/areal-pod-err-XXXXXX");
    int o = mkstemp(p->out), e = mkstemp(p->err);
    assert_true(o >= 0 && e >= 0);
    fflush(NULL);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        dup2(o, 1);
        dup2(e, 2);
        char *argv[] = {bin, (char *)arg1, (char *)arg2, (char *)arg3, NULL};
        execve(bin, argv, env);
        _exit(127);
    }
    close(o);
    close(e);
}

/* Waits for the pod (at most limit_ms, else kills it); returns its exit code or 128 + signal. */
static int pod_wait(pod *p, int limit_ms) {
    int64_t end = areal_now_ms() + limit_ms;
    int st = 0;
    while (waitpid(p->pid, &st, WNOHANG) == 0) {
        if (areal_now_ms() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            return 999;
        }
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static char text[1 << 16];

static const char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = '\0';
    if (f)
        fclose(f);
    unlink(path);
    return text;
}

static void env_of_role(char **env, char *store, int world, int first, int ranks, const char *alloc,
                        const char *role) {
    char w[32], f[32], r[32], a[256], ro[64];
    snprintf(ro, sizeof ro, "AREAL_ROLE=%s", role);
    snprintf(w, sizeof w, "WORLD_SIZE=%d", world);
    snprintf(f, sizeof f, "AREAL_POD_FIRST_RANK=%d", first);
    snprintf(r, sizeof r, "AREAL_POD_RANKS=%d", ranks);
    snprintf(a, sizeof a, "AREAL_ALLOCATION=%s", alloc);
    int i = 0;
    env[i++] = strdup(w);
    env[i++] = strdup(f);
    env[i++] = strdup(r);
    env[i++] = strdup(a);
    env[i++] = strdup(ro);
    env[i++] = store;
    env[i++] = "MASTER_ADDR=127.0.0.1";
    env[i++] = "POD_IP=127.0.0.1";
    env[i++] = "AREAL_COMM_TIMEOUT_MS=10000";
    env[i++] = "AREAL_CONNECT_TIMEOUT_MS=10000";
    env[i++] = "AREAL_GRACE_MS=2000";
    env[i++] = NULL;
}

static void env_of(char **env, char *store, int world, int first, int ranks, const char *alloc) {
    env_of_role(env, store, world, first, ranks, alloc, "trainer");
}

/* Appends one static "K=V" to an env_of_role list (its arrays have room for a few more). */
static void env_add(char **env, char *kv) {
    int n = 0;
    while (env[n] != NULL)
        n++;
    env[n] = kv;
    env[n + 1] = NULL;
}

static void free_env(char **env) {
    for (int i = 0; i < 5; i++)
        free(env[i]);
}

static void selftest_across_two_pods(void **state) {
    (void)state;
    char store[32];
    snprintf(store, sizeof store, "MASTER_PORT=%d", free_port());
    /*
     * The trainer (d2p2t2e2 = 8 ranks) in two pods of 4, the rollout role
     * (2 servers) in a third pod, all on one store hosted by trainer rank 0.
     */
    const char *alloc = "sglang:d2+megatron:d2p2t2e2";
    char *e0[16], *e1[16], *e2[16];
    env_of(e0, store, 8, 0, 4, alloc);
    env_of(e1, store, 8, 4, 4, alloc);
    env_of_role(e2, store, 2, 0, 2, alloc, "rollout");
    pod p0, p1, p2;
    pod_start(&p2, e2, "--selftest", NULL, NULL);
    pod_start(&p0, e0, "--selftest", NULL, NULL);
    pod_start(&p1, e1, "--selftest", NULL, NULL);
    int rc1 = pod_wait(&p1, 40000), rc0 = pod_wait(&p0, 40000), rc2 = pod_wait(&p2, 40000);
    const char *o2 = slurp(p2.out);
    int rollout_ok = strstr(o2, "selftest: 2 rank(s)") && strstr(o2, "all ok");
    slurp(p2.err);
    const char *o0 = slurp(p0.out);
    int all_ok = strstr(o0, "selftest: 8 rank(s)") != NULL && strstr(o0, "all ok") != NULL;
    int world_ok = strstr(o0, "selftest group world") != NULL;
    char *out0 = strdup(o0);
    const char *o1 = slurp(p1.out);
    /* every tp group is printed by its first member: tp/2 and tp/3 live on pod 1 */
    int tp_ok = strstr(o1, "selftest group tp/2") && strstr(o1, "selftest group tp/3") &&
                strstr(out0, "selftest group tp/0");
    fprintf(stderr, "pod0: %d, pod1: %d; %s", rc0, rc1, slurp(p0.err));
    fprintf(stderr, "%s", slurp(p1.err));
    free(out0);
    assert_int_equal(rc0, 0);
    assert_int_equal(rc1, 0);
    assert_int_equal(rc2, 0);
    assert_true(all_ok && world_ok && tp_ok && rollout_ok);
    free_env(e0);
    free_env(e1);
    free_env(e2);
}

/*
 * An inference role named with a suffix ("rollout2", as areal_role_names
 * names the second unnamed rollout) is accepted, and its groups follow the
 * plan's server-major order: with d2p2 server 0 is ranks 0-1 (its pp group)
 * and dp groups join the same stage across servers ([0,2], [1,3]), not
 * Megatron's pipeline-outermost order (pp [0,2], dp [0,1]). Each server is
 * one pod of 2 ranks (shared memory inside it).
 */
static void inference_role_groups_are_server_major(void **state) {
    (void)state;
    char store[32];
    snprintf(store, sizeof store, "MASTER_PORT=%d", free_port());
    const char *alloc = "sglang:d1+sglang:d2p2";
    char *e0[16], *e1[16], *e2[16];
    env_of_role(e0, store, 1, 0, 1, alloc, "rollout"); /* component 0 hosts the store */
    env_of_role(e1, store, 4, 0, 2, alloc, "rollout2");
    env_of_role(e2, store, 4, 2, 2, alloc, "rollout2");
    pod p0, p1, p2;
    pod_start(&p0, e0, "--selftest", NULL, NULL);
    pod_start(&p1, e1, "--selftest", NULL, NULL);
    pod_start(&p2, e2, "--selftest", NULL, NULL);
    int rc1 = pod_wait(&p1, 40000), rc2 = pod_wait(&p2, 40000), rc0 = pod_wait(&p0, 40000);
    slurp(p0.out);
    fprintf(stderr, "%s", slurp(p0.err));
    char *o1 = strdup(slurp(p1.out));
    fprintf(stderr, "%s", slurp(p1.err));
    const char *o2 = slurp(p2.out);
    int pp_ok = strstr(o1, "selftest group pp/0           size  2 ranks [0,1]: ok") &&
                strstr(o1, "selftest group dp/0           size  2 ranks [0,2]: ok") &&
                strstr(o1, "selftest group dp/1           size  2 ranks [1,3]: ok") &&
                strstr(o1, "selftest: 4 rank(s)") && strstr(o1, "all ok");
    int pp1_ok = strstr(o2, "selftest group pp/1           size  2 ranks [2,3]: ok") != NULL;
    if (!pp_ok || !pp1_ok)
        fprintf(stderr, "pod 1:\n%spod 2:\n%s", o1, o2);
    fprintf(stderr, "%s", slurp(p2.err));
    free(o1);
    assert_int_equal(rc0, 0);
    assert_int_equal(rc1, 0);
    assert_int_equal(rc2, 0);
    assert_true(pp_ok && pp1_ok);
    free_env(e0);
    free_env(e1);
    free_env(e2);
}

/*
 * Rollout servers placed alone (AREAL_SERVER_INDEX, as the operator's
 * separateServers pods) all report the same "done" key and the store host
 * leaves at the first: a server that finishes after it finds the store gone.
 * Its work is done (its world's barrier passed), so it exits 0 with a
 * warning; it exited 1, and restartScope Gang counted that as a failure of
 * the job (e2e f_kill_worker, BackoffLimitExceeded on "exit code 1").
 */
static void server_finishing_after_the_store_host_succeeds(void **state) {
    (void)state;
    char store[32];
    snprintf(store, sizeof store, "MASTER_PORT=%d", free_port());
    const char *alloc = "sglang:d1t2+megatron:d2t2";
    char *et[16], *es0[16], *es1[16];
    env_of(et, store, 4, 0, 4, alloc);
    env_of_role(es0, store, 2, 0, 2, alloc, "rollout");
    env_of_role(es1, store, 2, 0, 2, alloc, "rollout");
    env_add(es0, "AREAL_SERVER_INDEX=0");
    env_add(es1, "AREAL_SERVER_INDEX=1");
    pod t, s0, s1;
    pod_start(&t, et, "--selftest", "--hold-ms", "1500");
    pod_start(&s0, es0, "--selftest", NULL, NULL);
    pod_start(&s1, es1, "--selftest", "--hold-ms", "5000");
    int rct = pod_wait(&t, 40000), rc0 = pod_wait(&s0, 40000), rc1 = pod_wait(&s1, 40000);
    slurp(t.out);
    fprintf(stderr, "trainer: %d; %s", rct, slurp(t.err));
    slurp(s0.out);
    fprintf(stderr, "server 0: %d; %s", rc0, slurp(s0.err));
    const char *o1 = slurp(s1.out);
    int passed = strstr(o1, "selftest: 2 rank(s)") != NULL && strstr(o1, "all ok") != NULL;
    const char *e1 = slurp(s1.err);
    fprintf(stderr, "server 1: %d; %s", rc1, e1);
    assert_int_equal(rct, 0);
    assert_int_equal(rc0, 0);
    assert_true(passed);
    assert_non_null(strstr(e1, "the store host has left"));
    assert_int_equal(rc1, 0);
    free_env(et);
    free_env(es0);
    free_env(es1);
}

/* The pids of the pod's ranks, from /proc (children of the launcher). */
static int children_of(pid_t pid, pid_t *out, int cap) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task/%d/children", pid, pid);
    FILE *f = fopen(path, "r");
    int n = 0;
    if (f == NULL)
        return 0;
    while (n < cap && fscanf(f, "%d", &out[n]) == 1)
        n++;
    fclose(f);
    return n;
}

static void killed_rank_stops_the_pod(void **state) {
    (void)state;
    char store[32];
    snprintf(store, sizeof store, "MASTER_PORT=%d", free_port());
    char *env[16];
    env_of(env, store, 3, 0, 3, "megatron:d3");
    pod p;
    pod_start(&p, env, "--hold-ms", "20000", NULL);
    pid_t kids[8];
    int n = 0;
    for (int tries = 0; tries < 200 && n < 3; tries++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        n = children_of(p.pid, kids, 8);
    }
    assert_int_equal(n, 3);
    struct timespec ts = {0, 300000000L};
    nanosleep(&ts, NULL);
    kill(kids[1], SIGKILL);
    int64_t t0 = areal_now_ms();
    int rc = pod_wait(&p, 15000);
    int64_t took = areal_now_ms() - t0;
    const char *err = slurp(p.err);
    fprintf(stderr, "pod exit %d after %lld ms: %s", rc, (long long)took, err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, "rank 1 (local rank 1) was killed by signal 9"));
    assert_true(took < 5000);
    /* no rank outlives the pod */
    for (int i = 0; i < 3; i++)
        assert_true(kill(kids[i], 0) != 0 || waitpid(kids[i], NULL, WNOHANG) != 0);
    unlink(p.out);
    free_env(env);
}

static void sigterm_is_forwarded(void **state) {
    (void)state;
    char store[32];
    snprintf(store, sizeof store, "MASTER_PORT=%d", free_port());
    char *env[16];
    env_of(env, store, 2, 0, 2, "megatron:d2");
    pod p;
    pod_start(&p, env, "--hold-ms", "20000", NULL);
    pid_t kids[4];
    int n = 0;
    for (int tries = 0; tries < 200 && n < 2; tries++) {
        struct timespec ts = {0, 10000000L};
        nanosleep(&ts, NULL);
        n = children_of(p.pid, kids, 4);
    }
    assert_int_equal(n, 2);
    kill(p.pid, SIGTERM);
    int rc = pod_wait(&p, 10000);
    const char *err = slurp(p.err);
    assert_int_equal(rc, 128 + SIGTERM);
    assert_non_null(strstr(err, "SIGTERM received"));
    unlink(p.out);
    free_env(env);
}

static void bad_environment_and_taken_port(void **state) {
    (void)state;
    char *env[] = {"MASTER_ADDR=127.0.0.1", "MASTER_PORT=1", NULL};
    pod p;
    pod_start(&p, env, NULL, NULL, NULL);
    assert_int_equal(pod_wait(&p, 5000), 2);
    assert_non_null(strstr(slurp(p.err), "WORLD_SIZE is not set"));
    unlink(p.out);
    /* the store port is taken: rank 0 names it and the pod fails */
    int fd, port = 0;
    assert_int_equal(areal_net_listen("127.0.0.1", 0, &fd, &port, NULL), AREAL_OK);
    char store[32];
    snprintf(store, sizeof store, "MASTER_PORT=%d", port);
    char *e2[16];
    env_of(e2, store, 1, 0, 1, "megatron:d1");
    pod_start(&p, e2, "--selftest", NULL, NULL);
    int rc = pod_wait(&p, 10000);
    const char *err = slurp(p.err);
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d: port already in use", port);
    fprintf(stderr, "%s", err);
    assert_int_equal(rc, 1);
    assert_non_null(strstr(err, want));
    assert_non_null(strstr(err, "rank 0 (local rank 0) exited with status 1"));
    close(fd);
    unlink(p.out);
    free_env(e2);
    /* an allocation that does not match WORLD_SIZE is named */
    char *e3[16];
    snprintf(store, sizeof store, "MASTER_PORT=%d", free_port());
    env_of(e3, store, 2, 0, 2, "megatron:d4");
    pod_start(&p, e3, NULL, NULL, NULL);
    assert_int_equal(pod_wait(&p, 10000), 1);
    assert_non_null(strstr(slurp(p.err), "WORLD_SIZE is 2"));
    unlink(p.out);
    free_env(e3);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(selftest_across_two_pods),
        cmocka_unit_test(inference_role_groups_are_server_major),
        cmocka_unit_test(server_finishing_after_the_store_host_succeeds),
        cmocka_unit_test(killed_rank_stops_the_pod),
        cmocka_unit_test(sigterm_is_forwarded),
        cmocka_unit_test(bad_environment_and_taken_port),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
