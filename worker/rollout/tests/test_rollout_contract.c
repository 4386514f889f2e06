/*
 * test_rollout_contract.c - the server driven exactly as AReaL's remote
 * SGLang client drives it (areal/engine/sglang_remote.py and
 * remote_inf_engine.py; reference areal.md 5.3, rl-systems-2026.md 1.2):
 *
 *   POST /generate {"input_ids": prompt + accumulated output,
 *     "sampling_params": {"top_p": 1.0, "top_k": 100000000, "max_new_tokens":
 *     max_new - accumulated, "temperature": 0.0, "stop_token_ids": [eos],
 *     "ignore_eos": false, "skip_special_tokens": true,
 *     "frequency_penalty": 0.0}, "return_logprob": true, "stream": false}
 *   read meta_info.output_token_logprobs ([logprob, id, ...]) and
 *   meta_info.finish_reason.type; resubmit while the type is "abort" and the
 *   budget is not spent, waiting while the trainer has paused.
 *
 * The trainer side pauses with two POSTs ({} then {"mode": "in_place"}) and
 * continues with /continue_generation, at several points while requests
 * run. Greedy outputs must equal the uninterrupted reference token for
 * token; with a weight update during the pause, the resumed tokens and their
 * logprobs are those of the new weights and carry the new version.
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "rollout_http_util.h"

static char dir[128], dir_new[128];
static const int32_t eos = 95; /* ref-qwen2's eos_token_id */

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

#define MAX_NEW 200

typedef struct client {
    int port;
    atomic_bool *paused;
    int32_t prompt[24];
    int n_prompt;
    int32_t out[MAX_NEW + 8];
    float lps[MAX_NEW + 8];
    char version[MAX_NEW + 8][16]; /* the client's per-token version tags */
    int n_out, requests, aborts;
    char last_finish[16];
} client;

/* AReaL's agenerate loop against one server. */
static void *areal_client(void *arg) {
    client *c = arg;
    CURL *h = curl_easy_init();
    char finish[16] = "";
    while (strcmp(finish, "stop") != 0 && strcmp(finish, "length") != 0 && c->n_out < MAX_NEW) {
        while (atomic_load(c->paused)) {
            struct timespec ts = {0, 2 * 1000000L}; /* AReaL polls every 0.5 s */
            nanosleep(&ts, NULL);
        }
        int32_t ids[24 + MAX_NEW];
        memcpy(ids, c->prompt, (size_t)c->n_prompt * 4);
        memcpy(ids + c->n_prompt, c->out, (size_t)c->n_out * 4);
        char *ij = rt_ids_json(ids, c->n_prompt + c->n_out);
        char *body = NULL;
        assert_true(asprintf(&body,
                             "{\"input_ids\":%s,\"sampling_params\":{\"top_p\":1.0,\"top_k\":"
                             "100000000,\"max_new_tokens\":%d,\"temperature\":0.0,"
                             "\"stop_token_ids\":[%d],\"ignore_eos\":false,"
                             "\"skip_special_tokens\":true,\"frequency_penalty\":0.0},"
                             "\"return_logprob\":true,\"stream\":false}",
                             ij, MAX_NEW - c->n_out, eos) > 0);
        free(ij);
        rt_resp r = rt_req(h, c->port, "/generate", body);
        free(body);
        assert_int_equal(r.code, 200);
        c->requests++;
        json_t *meta = json_object_get(r.json, "meta_info");
        json_t *olp = json_object_get(meta, "output_token_logprobs");
        const char *version = json_string_value(json_object_get(meta, "weight_version"));
        for (size_t k = 0; k < json_array_size(olp); k++) {
            json_t *e = json_array_get(olp, k);
            c->lps[c->n_out] = (float)json_real_value(json_array_get(e, 0));
            c->out[c->n_out] = (int32_t)json_integer_value(json_array_get(e, 1));
            snprintf(c->version[c->n_out], sizeof c->version[0], "%s", version);
            c->n_out++;
        }
        snprintf(finish, sizeof finish, "%s", rt_finish(r.json));
        c->aborts += strcmp(finish, "abort") == 0;
        rt_free(&r);
    }
    snprintf(c->last_finish, sizeof c->last_finish, "%s", finish);
    curl_easy_cleanup(h);
    return NULL;
}

static int running(int port) {
    rt_resp r = rt_req(NULL, port, "/get_server_info", NULL);
    json_t *st = json_array_get(json_object_get(r.json, "internal_states"), 0);
    int n = (int)json_integer_value(json_object_get(st, "num_running_reqs"));
    rt_free(&r);
    return n;
}

/* The trainer's pause: two POSTs, as AReaL's newest client sends them. */
static void trainer_pause(int port, atomic_bool *paused) {
    atomic_store(paused, true);
    rt_resp r = rt_post(port, "/pause_generation", "{}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
    r = rt_post(port, "/pause_generation", "{\"mode\":\"in_place\"}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
}

static void trainer_continue(int port, atomic_bool *paused) {
    rt_resp r = rt_post(port, "/continue_generation", "{}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
    atomic_store(paused, false);
}

#define N_CLIENTS 12

static void abort_and_resubmit_gives_the_uninterrupted_output(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, NULL);
    int port = areal_rollout_server_port(s);
    atomic_bool paused = false;
    client *cs = calloc(N_CLIENTS, sizeof *cs);
    pthread_t t[N_CLIENTS];
    for (int i = 0; i < N_CLIENTS; i++) {
        cs[i].port = port;
        cs[i].paused = &paused;
        cs[i].n_prompt = 4 + i;
        for (int k = 0; k < cs[i].n_prompt; k++)
            cs[i].prompt[k] = (int32_t)((i * 31 + k * 7 + 3) % 90);
        assert_int_equal(pthread_create(&t[i], NULL, areal_client, &cs[i]), 0);
    }
    /* pause at several points while requests run, until every client is done */
    int cycles = 0;
    for (int round = 0; round < 200; round++) {
        int busy = 0;
        for (int wait = 0; wait < 200 && (busy = running(port)) == 0; wait++) {
            struct timespec ts = {0, 1000000L};
            nanosleep(&ts, NULL);
        }
        if (busy == 0)
            break; /* nothing left to interrupt */
        trainer_pause(port, &paused);
        cycles++;
        struct timespec ts = {0, 3 * 1000000L};
        nanosleep(&ts, NULL);
        trainer_continue(port, &paused);
        ts.tv_nsec = (long)(1 + round % 7) * 1000000L;
        nanosleep(&ts, NULL);
    }
    int aborts = 0;
    for (int i = 0; i < N_CLIENTS; i++) {
        pthread_join(t[i], NULL);
        aborts += cs[i].aborts;
        int32_t want[MAX_NEW + 8];
        int nw = rt_reference_stop(dir, cs[i].prompt, cs[i].n_prompt, MAX_NEW, &eos, 1, want, NULL);
        if (cs[i].n_out != nw || memcmp(cs[i].out, want, (size_t)nw * 4) != 0)
            fail_msg("client %d: %d tokens after %d requests, the reference has %d", i, cs[i].n_out,
                     cs[i].requests, nw);
        assert_true(strcmp(cs[i].last_finish, "stop") == 0 ||
                    strcmp(cs[i].last_finish, "length") == 0);
    }
    fprintf(stderr, "contract: %d pause cycles, %d aborted requests resubmitted\n", cycles, aborts);
    assert_true(cycles > 0);
    assert_true(aborts > 0); /* the loop really resumed interrupted requests */
    free(cs);
    areal_rollout_server_stop(s);
}

static void a_weight_update_in_the_pause_serves_the_new_weights(void **state) {
    (void)state;
    /* the update must land mid-generation: when the request finished before the
     * pause got in (a fast engine, a slow poll), run the scenario again afresh */
    areal_rollout_server *s = NULL;
    client *c = NULL;
    for (int attempt = 0; attempt < 10 && (c == NULL || c->aborts == 0); attempt++) {
        if (s != NULL) {
            areal_rollout_server_stop(s);
            free(c);
        }
        s = rt_server(dir, "0");
        int port = areal_rollout_server_port(s);
        atomic_bool paused = false;
        c = calloc(1, sizeof *c);
        c->port = port;
        c->paused = &paused;
        c->n_prompt = 5;
        for (int k = 0; k < 5; k++)
            c->prompt[k] = (int32_t)(10 + 3 * k);
        /* hold the engine so that the request is mid-generation when the update comes */
        rt_resp r = rt_post(port, "/pause_generation", "{\"mode\":\"in_place\"}");
        rt_free(&r);
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, areal_client, c), 0);
        /* let it queue, run a few steps, then the trainer's update */
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        trainer_continue(port, &paused);
        for (int i = 0; i < 2000 && running(port) == 0; i++) {
            struct timespec w = {0, 100000L};
            nanosleep(&w, NULL);
        }
        trainer_pause(port, &paused);
        r = rt_post(port, "/update_weights_from_disk",
                    "{\"model_path\":\"%s\",\"abort_all_requests\":true}", dir_new);
        assert_int_equal(r.code, 200);
        rt_free(&r);
        trainer_continue(port, &paused);
        pthread_join(t, NULL);
    }
    /* split at the first token tagged with the new version */
    int k = 0;
    while (k < c->n_out && strcmp(c->version[k], "0") == 0)
        k++;
    assert_true(c->aborts >= 1);
    int32_t old_ref[MAX_NEW + 8], new_ref[MAX_NEW + 8], prefix[24 + MAX_NEW];
    float new_lps[MAX_NEW + 8];
    int no = rt_reference_stop(dir, c->prompt, c->n_prompt, MAX_NEW, &eos, 1, old_ref, NULL);
    assert_true(k <= no);
    assert_memory_equal(c->out, old_ref, (size_t)k * 4); /* before the update: old weights */
    memcpy(prefix, c->prompt, (size_t)c->n_prompt * 4);
    memcpy(prefix + c->n_prompt, c->out, (size_t)k * 4);
    int nn =
        rt_reference_stop(dir_new, prefix, c->n_prompt + k, MAX_NEW - k, &eos, 1, new_ref, new_lps);
    assert_int_equal(c->n_out - k, nn); /* after: the new weights on prompt + partial */
    assert_memory_equal(c->out + k, new_ref, (size_t)nn * 4);
    for (int i = 0; i < nn; i++) {
        assert_true(fabsf(c->lps[k + i] - new_lps[i]) < 1e-4f);
        assert_string_equal(c->version[k + i], "1");
    }
    fprintf(stderr, "contract: %d tokens on version 0, %d on version 1 after the update\n", k, nn);
    free(c);
    areal_rollout_server_stop(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(abort_and_resubmit_gives_the_uninterrupted_output),
        cmocka_unit_test(a_weight_update_in_the_pause_serves_the_new_weights),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
