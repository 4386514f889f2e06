/*
 * serve_proc.h - test helper of the trainer's tests: real `areal-worker
 * serve` processes (the rollout component's server, run as a program so a
 * test can SIGKILL it as a crash would), a greedy /generate with logprobs,
 * and the tiny demo model. The binary is $AREAL_BIN/areal-worker, default
 * build/rel (make test builds it first). Header-only: each test binary
 * includes it once.
 */
#ifndef AREAL_TRAIN_TESTS_SERVE_PROC_H
#define AREAL_TRAIN_TESTS_SERVE_PROC_H

#include <arpa/inet.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "areal/model/tokenizer.h"
#include "areal/train/hf_save.h"
#include "areal/train/sgl_client.h"
#include "areal/train/tiny.h"
#include "areal/train/warmup.h"

extern char **environ;

typedef struct sp_server {
    pid_t pid;
    int port;
    char addr[64];
} sp_server;

static inline int sp_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t len = sizeof a;
    getsockname(fd, (struct sockaddr *)&a, &len);
    close(fd);
    return ntohs(a.sin_port);
}

static inline void sp_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline double sp_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline bool sp_healthy(const char *addr) {
    areal_sgl_client *c = NULL;
    bool ok = areal_sgl_client_create(addr, 2, &c, NULL) == 0 && areal_sgl_health(c, NULL) == 0;
    areal_sgl_client_free(c);
    return ok;
}

/* Starts `areal-worker serve --model dir` on port (0: a free one) and waits until it answers. */
static inline sp_server sp_start(const char *dir, int port) {
    sp_server s = {0};
    s.port = port ? port : sp_free_port();
    snprintf(s.addr, sizeof s.addr, "127.0.0.1:%d", s.port);
    char bin[512], port_s[16];
    const char *b = getenv("AREAL_BIN");
    snprintf(bin, sizeof bin, "%s/areal-worker", b && b[0] ? b : "build/rel");
    snprintf(port_s, sizeof port_s, "%d", s.port);
    char *argv[] = {bin,    "serve",      "--model", (char *)dir,   "--host", "127.0.0.1", "--port",
                    port_s, "--grace-ms", "100",     "--kv-memory", "8m",     NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    /* the server's access log would drown the test's output; errors still show */
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    if (posix_spawn(&s.pid, bin, &fa, NULL, argv, environ) != 0)
        fail_msg("cannot start %s", bin);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 600 && !sp_healthy(s.addr); i++) {
        int st;
        if (waitpid(s.pid, &st, WNOHANG) == s.pid)
            fail_msg("%s serve exited before answering (status %d)", bin, st);
        sp_sleep_ms(50);
    }
    if (!sp_healthy(s.addr))
        fail_msg("%s serve on %s never answered /health", bin, s.addr);
    return s;
}

static inline void sp_kill(sp_server *s, int sig) {
    if (s->pid <= 0)
        return;
    kill(s->pid, sig);
    waitpid(s->pid, NULL, 0);
    s->pid = 0;
}

/*
 * Greedy /generate of prompt with logprobs: the output ids and logprobs as
 * JSON text (identical weights give identical text) into out; the served
 * weight_version into version (nullable).
 */
static inline void sp_greedy(const char *addr, const int32_t *prompt, int n, char *out, size_t cap,
                             char *version, size_t vcap) {
    areal_sgl_client *c = NULL;
    areal_error e;
    assert_int_equal(areal_sgl_client_create(addr, 60, &c, &e), 0);
    json_t *ids = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(ids, json_integer(prompt[i]));
    json_t *body =
        json_pack("{s:o,s:{s:i,s:f,s:b},s:b}", "input_ids", ids, "sampling_params",
                  "max_new_tokens", 6, "temperature", 0.0, "ignore_eos", 1, "return_logprob", 1);
    json_t *ans = NULL;
    if (areal_sgl_post(c, "/generate", body, &ans, &e) != 0)
        fail_msg("%s", e.msg);
    json_t *meta = json_object_get(ans, "meta_info");
    json_t *pick = json_pack("{s:O,s:O}", "ids", json_object_get(ans, "output_ids"), "lp",
                             json_object_get(meta, "output_token_logprobs"));
    char *s = json_dumps(pick, JSON_COMPACT);
    snprintf(out, cap, "%s", s);
    if (version)
        snprintf(version, vcap, "%s",
                 json_string_value(json_object_get(meta, "weight_version"))
                     ? json_string_value(json_object_get(meta, "weight_version"))
                     : "?");
    free(s);
    json_decref(pick);
    json_decref(ans);
    json_decref(body);
    areal_sgl_client_free(c);
}

static inline void sp_tmpdir(char *buf, size_t cap, const char *tag) {
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(buf, cap, "%s/areal-%s-XXXXXX", t, tag);
    assert_non_null(mkdtemp(buf));
}

static inline void sp_rm_rf(const char *dir) {
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* The demo's tiny model after warmup_steps of supervised warm-up, in dir/model. */
static inline void sp_make_model(const char *dir, char *model, size_t cap,
                                 const areal_synth_cfg *task, int warmup_steps) {
    snprintf(model, cap, "%s/model", dir);
    assert_int_equal(mkdir(model, 0755), 0);
    areal_tiny_cfg tc = areal_tiny_default();
    areal_error err;
    assert_int_equal(areal_tiny_create(model, &tc, &err), AREAL_OK);
    areal_model m;
    assert_int_equal(areal_model_load(&m, model, NULL, &err), AREAL_OK);
    char path[512];
    snprintf(path, sizeof path, "%s/tokenizer.json", model);
    areal_tokenizer *tok = NULL;
    assert_int_equal(areal_tokenizer_load(path, &tok, &err), AREAL_OK);
    areal_synth_split sp;
    assert_int_equal(areal_synth_make(task, &sp, &err), AREAL_OK);
    areal_warmup_cfg wc = {warmup_steps, 32, 3e-3, 12345};
    if (warmup_steps > 0 && areal_warmup_run(&m, tok, sp.train, sp.n_train, &wc, NULL, &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(areal_hf_save_weights(&m, model, &err), AREAL_OK);
    areal_synth_free(&sp);
    areal_tokenizer_free(tok);
    areal_model_free(&m);
}

#endif
