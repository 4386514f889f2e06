/*
 * test_controller_loop.c - the whole controller (informers, caches, work
 * queue, reconciles, API writes) against the in-memory API server of
 * operator/tests/util/fake_api.h, through many watch events, relists after
 * 410 Gone and reconciles: a job is placed, created and bound as one gang; its
 * pods start running and the job follows; a second job is created and deleted
 * again each round (finalizer, pod deletion) while every watch is expired.
 *
 * Leaks: the sanitized build's LeakSanitizer checks the loop; the release
 * build runs the loop once more in a child process under valgrind
 * --leak-check=full --error-exitcode=1 (skipped, saying so, when valgrind is
 * not installed) and requires a clean exit and "definitely lost: 0".
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/clock.h"
#include "areal/kube/client.h"
#include "areal/operator/controller.h"
#include "util/fake_api.h"

#define ROUNDS 3

/* Rounds of the loop: fewer under valgrind, where each costs ~20 times more. */
static int rounds(void) {
    return getenv("AREAL_LOOP_CHILD") ? 2 : ROUNDS;
}

static void nap(void) {
    struct timespec ts = {0, 5 * 1000000L};
    nanosleep(&ts, NULL);
}

/* Generous: under valgrind everything runs 20-50 times slower. */
static double limit_s(void) {
    return getenv("AREAL_LOOP_CHILD") ? 120.0 : 20.0;
}

static void put_node(fake_api *f, int i, const char *leaf) {
    char name[16];
    snprintf(name, sizeof name, "n%d", i);
    json_t *n = json_pack("{s:{s:s,s:{s:s,s:s}},s:{s:{s:s,s:s,s:s},s:[{s:s,s:s}]}}", "metadata",
                          "name", name, "labels", "kubernetes.io/hostname", name,
                          "network.topology.nvidia.com/leaf", leaf, "status", "allocatable",
                          "nvidia.com/gpu", "8", "cpu", "96", "memory", "512Gi", "conditions",
                          "type", "Ready", "status", "True");
    fake_api_put(f, "nodes", n);
    json_decref(n);
}

static void put_job(fake_api *f, const char *name) {
    json_t *j =
        json_pack("{s:s,s:s,s:{s:s,s:s,s:i},s:{s:s,s:s}}", "apiVersion", "areal.io/v1alpha1",
                  "kind", "AReaLJob", "metadata", "name", name, "namespace", "team", "generation",
                  1, "spec", "allocation", "sglang:d2+megatron:d2t4", "image", "img");
    fake_api_put(f, "arealjobs", j);
    json_decref(j);
}

/* sglang:d2+megatron:d2t4 on 8-GPU nodes: two one-GPU rollout pods and one
 * 8-GPU trainer pod. (Small, so the run under valgrind stays short.) */
#define GANG 3

static void pod_key(const char *job, int i, char *key, size_t cap) {
    if (i < GANG - 1)
        snprintf(key, cap, "team/%s-rollout-%d", job, i);
    else
        snprintf(key, cap, "team/%s-trainer-0", job);
}

/* True when every pod of job `name` exists and is bound. */
static bool gang_bound(fake_api *f, const char *name) {
    for (int i = 0; i < GANG; i++) {
        char key[128];
        pod_key(name, i, key, sizeof key);
        json_t *p = fake_api_get(f, "pods", key);
        bool bound = json_string_value(json_object_get(json_object_get(p, "spec"), "nodeName"));
        json_decref(p);
        if (!bound)
            return false;
    }
    return true;
}

static void run_pods(fake_api *f, const char *name) {
    for (int i = 0; i < GANG; i++) {
        char key[128];
        pod_key(name, i, key, sizeof key);
        json_t *p = fake_api_get(f, "pods", key);
        assert_non_null(p);
        json_object_set_new(p, "status",
                            json_pack("{s:s,s:[{s:s,s:s}]}", "phase", "Running", "conditions",
                                      "type", "Ready", "status", "True"));
        fake_api_put(f, "pods", p);
        json_decref(p);
    }
}

static const char *job_phase(fake_api *f, const char *name, char *buf, size_t cap) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", name);
    json_t *j = fake_api_get(f, "arealjobs", key);
    const char *ph = json_string_value(json_object_get(json_object_get(j, "status"), "phase"));
    snprintf(buf, cap, "%s", ph ? ph : "");
    json_decref(j);
    return buf;
}

static bool job_gone(fake_api *f, const char *name) {
    char key[128];
    snprintf(key, sizeof key, "team/%s", name);
    json_t *j = fake_api_get(f, "arealjobs", key);
    json_decref(j);
    return j == NULL;
}

#define WAIT_FOR(cond, what)                                                                       \
    do {                                                                                           \
        double t0_ = areal_mono_s();                                                               \
        while (!(cond) && areal_mono_s() - t0_ < limit_s())                                        \
            nap();                                                                                 \
        if (!(cond))                                                                               \
            fail_msg("timed out waiting for %s", what);                                            \
    } while (0)

static void *run_ctl(void *arg) {
    controller_run(arg);
    return NULL;
}

static void loop_converges(void **state) {
    (void)state;
    fake_api *f = fake_api_start();
    assert_non_null(f);
    for (int i = 0; i < 4; i++)
        put_node(f, i, i < 2 ? "leaf-0" : "leaf-1");
    kube_config cfg;
    kube_config_init(&cfg);
    cfg.server = strdup(fake_api_url(f));
    cfg.allow_insecure = 1;
    cfg.qps = 0;
    cfg.backoff_base_ms = 5;
    cfg.backoff_max_ms = 50;
    kube_client *kc = kube_client_new(&cfg, NULL);
    kube_config_free(&cfg);
    assert_non_null(kc);
    controller_config cc = {.workers = 2};
    controller *ctl;
    areal_error err;
    assert_int_equal(controller_new(kc, &cc, NULL, &ctl, &err), AREAL_OK);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, run_ctl, ctl), 0);
    WAIT_FOR(controller_synced(ctl), "the first lists");

    char phase[32];
    put_job(f, "j1");
    WAIT_FOR(gang_bound(f, "j1"), "j1's gang to be bound");
    run_pods(f, "j1");
    WAIT_FOR(strcmp(job_phase(f, "j1", phase, sizeof phase), "Running") == 0, "j1 Running");

    int n_rounds = rounds();
    for (int round = 0; round < n_rounds; round++) {
        put_job(f, "j2");
        fake_api_expire(f, "pods");
        WAIT_FOR(gang_bound(f, "j2"), "j2's gang to be bound");
        fake_api_expire(f, "nodes");
        fake_api_expire(f, "arealjobs");
        put_node(f, round % 4, round % 2 ? "leaf-0" : "leaf-1"); /* a node changes */
        run_pods(f, "j2");
        WAIT_FOR(strcmp(job_phase(f, "j2", phase, sizeof phase), "Running") == 0, "j2 Running");
        fake_api_delete(f, "arealjobs", "team/j2");
        WAIT_FOR(job_gone(f, "j2") && fake_api_len(f, "pods") == GANG, "j2 and its pods to go");
    }
    size_t jobs, pods, nodes;
    WAIT_FOR((controller_cache_sizes(ctl, &jobs, &pods, &nodes), jobs == 1 && pods == GANG),
             "the caches to follow");
    assert_int_equal(nodes, 4);
    assert_string_equal(job_phase(f, "j1", phase, sizeof phase), "Running");
    /* j1 and every j2 were bound pod by pod; three kinds of watch were expired per round */
    assert_true(fake_api_count(f, "bind") >= GANG * (n_rounds + 1));
    /* no bind ever named a pod the server did not have */
    assert_int_equal(fake_api_count(f, "bind-missing"), 0);
    assert_true(fake_api_count(f, "gone") >= 3 * n_rounds);
    assert_true(fake_api_count(f, "list") >= 3 + 3 * n_rounds);
    assert_true(fake_api_count(f, "delete") >= GANG * n_rounds);
    assert_true(fake_api_count(f, "watch") > 3 * n_rounds);
    controller_stop(ctl);
    pthread_join(th, NULL);
    controller_free(ctl);
    kube_client_free(kc);
    fake_api_stop(f);
}

static void loop_has_no_leaks_under_valgrind(void **state) {
    (void)state;
#if defined(__SANITIZE_ADDRESS__)
    skip(); /* LeakSanitizer checks this build; valgrind cannot run ASan binaries */
#else
    if (system("valgrind --version >/dev/null 2>&1") != 0) {
        fprintf(stderr, "valgrind is not installed: the leak check of the loop is skipped\n");
        skip();
    }
    char log[] = "/tmp/areal-loop-valgrind-XXXXXX";
    int fd = mkstemp(log);
    assert_true(fd >= 0);
    close(fd);
    char logopt[64], self[4096];
    snprintf(logopt, sizeof logopt, "--log-file=%s", log);
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    assert_true(n > 0);
    self[n] = '\0'; /* resolved now: in the child, /proc/self/exe would be valgrind */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        setenv("AREAL_LOOP_CHILD", "1", 1);
        execlp("valgrind", "valgrind", "--leak-check=full", "--error-exitcode=1",
               "--errors-for-leak-kinds=definite,indirect", logopt, self, (char *)NULL);
        _exit(127);
    }
    int st = 0;
    assert_int_equal(waitpid(child, &st, 0), child);
    FILE *f = fopen(log, "r");
    char line[512];
    bool clean = false;
    while (f && fgets(line, sizeof line, f))
        if (strstr(line, "definitely lost: 0 bytes") || strstr(line, "no leaks are possible"))
            clean = true;
    if (f && (!clean || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
        rewind(f); /* show valgrind's report */
        while (fgets(line, sizeof line, f))
            fputs(line, stderr);
    }
    if (f)
        fclose(f);
    unlink(log);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_true(clean);
#endif
}

int main(void) {
    if (getenv("AREAL_LOOP_CHILD") != NULL) { /* the run under valgrind: the loop only */
        const struct CMUnitTest only[] = {cmocka_unit_test(loop_converges)};
        return cmocka_run_group_tests(only, NULL, NULL);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(loop_converges),
        cmocka_unit_test(loop_has_no_leaks_under_valgrind),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
