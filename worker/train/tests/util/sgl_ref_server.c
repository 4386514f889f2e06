/*
 * sgl_ref_server.c - the reference rollout server of the trainer tests (see
 * sgl_ref_server.h). A mutex serialises the model (areal_generate is
 * single-caller); weights are swapped by loading the new directory fully
 * before the old model is freed, so a failed load leaves the old weights.
 */
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"
#include "kube_test_server.h"
#include "sgl_ref_server.h"

struct sgl_ref {
    kts *srv;
    char addr[64];
    pthread_mutex_t mu;
    areal_model m;
    int paused, failing, n_gen, n_load;
};

static void answer(kts_answer *a, int status, json_t *doc) {
    a->status = status;
    a->body = json_dumps(doc, JSON_COMPACT);
    a->len = strlen(a->body);
    json_decref(doc);
}

static int gen(sgl_ref *s, json_t *req, kts_answer *a) {
    json_t *ids = json_object_get(req, "input_ids");
    json_t *sp = json_object_get(req, "sampling_params");
    size_t n = json_array_size(ids);
    if (n == 0) {
        answer(a, 400, json_pack("{s:s}", "error", "input_ids is empty"));
        return 1;
    }
    int32_t *in = malloc(n * sizeof *in);
    for (size_t i = 0; i < n; i++)
        in[i] = (int32_t)json_integer_value(json_array_get(ids, i));
    int32_t stop[16];
    int n_stop = 0;
    json_t *st = json_object_get(sp, "stop_token_ids");
    for (size_t i = 0; i < json_array_size(st) && n_stop < 16; i++)
        stop[n_stop++] = (int32_t)json_integer_value(json_array_get(st, i));
    areal_sampling smp = {0};
    smp.temperature = (float)json_number_value(json_object_get(sp, "temperature"));
    json_t *tp = json_object_get(sp, "top_p");
    smp.top_p = tp ? (float)json_number_value(tp) : 1.0f;
    long tk = (long)json_integer_value(json_object_get(sp, "top_k"));
    smp.top_k = tk > 0 ? (int)tk : 0;
    smp.seed = (uint64_t)json_integer_value(json_object_get(sp, "sampling_seed"));
    smp.max_new_tokens = (int)json_integer_value(json_object_get(sp, "max_new_tokens"));
    smp.stop = stop;
    smp.n_stop = n_stop;
    pthread_mutex_lock(&s->mu);
    s->n_gen++;
    if (s->failing) {
        pthread_mutex_unlock(&s->mu);
        free(in);
        a->status = 503;
        a->body = strdup("failing on purpose");
        a->len = strlen(a->body);
        return 1;
    }
    if (s->paused) {
        pthread_mutex_unlock(&s->mu);
        free(in);
        answer(a, 200,
               json_pack("{s:s,s:{s:{s:s,s:s},s:[]}}", "text", "", "meta_info", "finish_reason",
                         "type", "abort", "message", "Abort before prefill",
                         "output_token_logprobs"));
        return 1;
    }
    const int32_t *prompts[1] = {in};
    int lens[1] = {(int)n};
    areal_gen_out out;
    areal_error err;
    int rc = areal_generate(&s->m, prompts, lens, 1, &smp, &out, &err);
    pthread_mutex_unlock(&s->mu);
    free(in);
    if (rc != 0) {
        answer(a, 400, json_pack("{s:s}", "error", err.msg));
        return 1;
    }
    json_t *lp = json_array();
    for (int i = 0; i < out.n; i++)
        json_array_append_new(lp, json_pack("[f,i,n]", (double)out.logprobs[i], out.tokens[i]));
    answer(a, 200,
           json_pack("{s:s,s:{s:{s:s},s:o,s:i}}", "text", "", "meta_info", "finish_reason", "type",
                     out.stopped ? "stop" : "length", "output_token_logprobs", lp,
                     "completion_tokens", out.n));
    areal_gen_out_free(&out);
    return 1;
}

static int handler(void *ud, const kts_request *rq, kts_answer *a) {
    sgl_ref *s = ud;
    json_error_t je;
    json_t *req = rq->body && rq->body_len ? json_loads(rq->body, 0, &je) : json_object();
    int done = 1;
    if (strcmp(rq->target, "/generate") == 0) {
        gen(s, req, a);
    } else if (strcmp(rq->target, "/pause_generation") == 0 ||
               strcmp(rq->target, "/continue_generation") == 0) {
        pthread_mutex_lock(&s->mu);
        s->paused = rq->target[1] == 'p';
        pthread_mutex_unlock(&s->mu);
        answer(a, 200, json_object());
    } else if (strcmp(rq->target, "/update_weights_from_disk") == 0) {
        const char *dir = json_string_value(json_object_get(req, "model_path"));
        areal_model m2;
        areal_error err;
        if (dir == NULL || areal_model_load(&m2, dir, NULL, &err) != 0) {
            answer(
                a, 400,
                json_pack("{s:b,s:s}", "success", 0, "message", dir ? err.msg : "no model_path"));
        } else {
            pthread_mutex_lock(&s->mu);
            areal_model_free(&s->m);
            s->m = m2;
            s->n_load++;
            pthread_mutex_unlock(&s->mu);
            answer(a, 200, json_pack("{s:b,s:s}", "success", 1, "message", "ok"));
        }
    } else if (strcmp(rq->target, "/health") == 0) {
        answer(a, 200, json_object());
    } else {
        done = 0;
    }
    json_decref(req);
    return done;
}

sgl_ref *sgl_ref_start(const char *dir) {
    sgl_ref *s = calloc(1, sizeof *s);
    areal_error err;
    if (s == NULL || areal_model_load(&s->m, dir, NULL, &err) != 0) {
        free(s);
        return NULL;
    }
    pthread_mutex_init(&s->mu, NULL);
    s->srv = kts_start();
    if (s->srv == NULL) {
        areal_model_free(&s->m);
        free(s);
        return NULL;
    }
    kts_set_handler(s->srv, handler, s);
    snprintf(s->addr, sizeof s->addr, "%s", kts_url(s->srv) + strlen("http://"));
    return s;
}

void sgl_ref_stop(sgl_ref *s) {
    if (s == NULL)
        return;
    kts_stop(s->srv);
    areal_model_free(&s->m);
    pthread_mutex_destroy(&s->mu);
    free(s);
}

const char *sgl_ref_addr(sgl_ref *s) {
    return s->addr;
}

int sgl_ref_generates(sgl_ref *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_gen;
    pthread_mutex_unlock(&s->mu);
    return n;
}

int sgl_ref_weight_loads(sgl_ref *s) {
    pthread_mutex_lock(&s->mu);
    int n = s->n_load;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void sgl_ref_set_failing(sgl_ref *s, int failing) {
    pthread_mutex_lock(&s->mu);
    s->failing = failing;
    pthread_mutex_unlock(&s->mu);
}
