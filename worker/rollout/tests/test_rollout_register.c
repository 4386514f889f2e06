/*
 * test_rollout_register.c - registration in the job's rendezvous store and
 * the SIGTERM drain:
 *   - a store that is not up yet: the server logs and retries with backoff,
 *     then registers rollout/servers/<name> = {"addr", "version"} once the
 *     store appears; a weight update rewrites the version; stopping deletes
 *     the key;
 *   - `areal-worker serve` in a job (MASTER_ADDR/MASTER_PORT, POD_NAME):
 *     registers, and on SIGTERM answers the running request, deregisters and
 *     exits 0.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "areal/comm/registry.h"
#include "areal/comm/store.h"
#include "rollout_http_util.h"

extern char **environ;

static char dir[128], dir_new[128];

static int setup(void **state) {
    (void)state;
    curl_global_init(CURL_GLOBAL_DEFAULT);
    rt_model_dir(dir, sizeof dir, 1.0f);
    rt_model_dir(dir_new, sizeof dir_new, 1.5f);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rt_rmdir(dir);
    rt_rmdir(dir_new);
    curl_global_cleanup();
    return 0;
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The registration value of key, waiting up to ms; NULL when absent. */
static json_t *registered(areal_store *st, const char *key, const char *version, int ms) {
    for (int waited = 0; waited <= ms; waited += 20) {
        int exists = 0;
        assert_int_equal(areal_store_check(st, key, &exists, NULL), 0);
        if (exists) {
            char buf[512];
            size_t n = 0;
            assert_int_equal(areal_store_get(st, key, 1000, buf, sizeof buf - 1, &n, NULL), 0);
            buf[n] = '\0';
            json_t *j = json_loads(buf, 0, NULL);
            if (version == NULL ||
                strcmp(json_string_value(json_object_get(j, "version")), version) == 0)
                return j;
            json_decref(j);
        }
        sleep_ms(20);
    }
    return NULL;
}

static void count_entry(void *ctx, const char *name, const char *value) {
    (void)value;
    assert_string_equal(name, "srv-a");
    (*(int *)ctx)++;
}

static void registers_once_the_store_is_up(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, "0");
    int port = free_port();
    char *log = NULL;
    size_t log_len = 0;
    FILE *lf = open_memstream(&log, &log_len);
    areal_rollout_reg *reg = NULL;
    char addr[64];
    snprintf(addr, sizeof addr, "127.0.0.1:%d", areal_rollout_server_port(s));
    assert_int_equal(
        areal_rollout_register_start(s, "127.0.0.1", port, "srv-a", addr, lf, &reg, NULL), 0);
    sleep_ms(3000); /* a connect attempt of 2 s, then a logged retry */
    areal_store_server *ss = NULL;
    int got_port = 0;
    assert_int_equal(areal_store_server_start("127.0.0.1", port, &ss, &got_port, NULL), 0);
    areal_store *st = NULL;
    assert_int_equal(areal_store_connect("127.0.0.1", port, 2000, 5000, &st, NULL), 0);
    json_t *j = registered(st, "rollout/servers/srv-a", "0", 40000);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "addr")), addr);
    json_decref(j);
    rt_resp r = rt_post(areal_rollout_server_port(s), "/update_weights_from_disk",
                        "{\"model_path\":\"%s\"}", dir_new);
    assert_int_equal(r.code, 200);
    rt_free(&r);
    j = registered(st, "rollout/servers/srv-a", "1", 5000);
    assert_non_null(j);
    json_decref(j);
    /* listed through the index, as the trainer reads it */
    areal_registry_reader rd = {0};
    int listed = 0;
    assert_int_equal(areal_registry_list(st, &rd, count_entry, &listed, NULL), 0);
    assert_int_equal(listed, 1);
    areal_registry_reader_free(&rd);
    /* the trainer restarts: a new, empty store on the same port; the server announces
     * itself there again (its version kept) without being told */
    areal_store_close(st);
    areal_store_server_stop(ss);
    assert_int_equal(areal_store_server_start("127.0.0.1", port, &ss, &got_port, NULL), 0);
    assert_int_equal(areal_store_connect("127.0.0.1", port, 2000, 5000, &st, NULL), 0);
    j = registered(st, "rollout/servers/srv-a", "1", 15000);
    assert_non_null(j);
    json_decref(j);
    listed = 0;
    assert_int_equal(areal_registry_list(st, &rd, count_entry, &listed, NULL), 0);
    assert_int_equal(listed, 1);
    areal_registry_reader_free(&rd);
    areal_rollout_register_stop(reg);
    int exists = 1;
    assert_int_equal(areal_store_check(st, "rollout/servers/srv-a", &exists, NULL), 0);
    assert_int_equal(exists, 0);
    fclose(lf);
    assert_non_null(strstr(log, "unreachable"));
    assert_non_null(strstr(log, "retrying registration in"));
    assert_non_null(strstr(log, "registered rollout/servers/srv-a"));
    free(log);
    areal_store_close(st);
    areal_store_server_stop(ss);
    areal_rollout_server_stop(s);
}

typedef struct longreq {
    int port;
    rt_resp r;
} longreq;

static void *long_request(void *arg) {
    longreq *l = arg;
    l->r = rt_post(l->port, "/generate",
                   "{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":240,"
                   "\"temperature\":0,\"ignore_eos\":true}}");
    return NULL;
}

static void serve_drains_on_sigterm(void **state) {
    (void)state;
    areal_store_server *ss = NULL;
    int sport = 0;
    assert_int_equal(areal_store_server_start("127.0.0.1", 0, &ss, &sport, NULL), 0);
    areal_store *st = NULL;
    assert_int_equal(areal_store_connect("127.0.0.1", sport, 2000, 5000, &st, NULL), 0);
    char bin[512], port_s[16], master_port[32], errpath[] = "/tmp/areal-rt-serve-XXXXXX";
    const char *b = getenv("AREAL_BIN");
    snprintf(bin, sizeof bin, "%s/areal-worker", b && b[0] ? b : "build/rel");
    int hport = free_port();
    snprintf(port_s, sizeof port_s, "%d", hport);
    snprintf(master_port, sizeof master_port, "MASTER_PORT=%d", sport);
    int efd = mkstemp(errpath);
    assert_true(efd >= 0);
    char *argv[] = {bin,      "serve", "--model",    dir,   "--host", "127.0.0.1",
                    "--port", port_s,  "--grace-ms", "200", NULL};
    char *envp[] = {"MASTER_ADDR=127.0.0.1", master_port, "POD_NAME=demo-rollout-0", NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, efd, 2);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, bin, &fa, NULL, argv, envp), 0);
    posix_spawn_file_actions_destroy(&fa);
    json_t *j = registered(st, "rollout/servers/demo-rollout-0", "0", 60000);
    if (j == NULL) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        fail_msg("the server never registered (see %s)", errpath);
    }
    char want[64];
    snprintf(want, sizeof want, "127.0.0.1:%d", hport);
    assert_string_equal(json_string_value(json_object_get(j, "addr")), want);
    json_decref(j);
    longreq l = {.port = hport};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, long_request, &l), 0);
    sleep_ms(30);
    kill(pid, SIGTERM);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    pthread_join(t, NULL);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    /* the running request was answered (finished or aborted with its partial output) */
    assert_int_equal(l.r.code, 200);
    const char *fin = rt_finish(l.r.json);
    assert_true(strcmp(fin, "length") == 0 || strcmp(fin, "abort") == 0);
    rt_free(&l.r);
    int exists = 1;
    assert_int_equal(areal_store_check(st, "rollout/servers/demo-rollout-0", &exists, NULL), 0);
    assert_int_equal(exists, 0);
    close(efd);
    unlink(errpath);
    areal_store_close(st);
    areal_store_server_stop(ss);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(registers_once_the_store_is_up),
        cmocka_unit_test(serve_drains_on_sigterm),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
