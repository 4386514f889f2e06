/*
 * trainer_http.c - /status, /metrics and /healthz of the trainer (see
 * trainer_http.h), on lib/http's server and Prometheus registry.
 *
 * The gauges are set when a snapshot is published, not when scraped, so a
 * scrape is one metrics_render; the histograms observe each step once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "areal/http/metrics.h"
#include "areal/http/server.h"
#include "areal/train/trainer_http.h"

struct areal_trainer_http {
    areal_http_server *srv;
    metrics_registry *reg;
    metrics_family *g_step, *g_version, *g_reward, *g_eval, *g_stale, *g_sps, *g_tps, *g_servers;
    metrics_family *h_sync, *h_wait, *h_train;
    pthread_mutex_t mu;
    areal_train_status st;
};

const char *areal_train_phase_name(areal_train_phase p) {
    switch (p) {
    case AREAL_PHASE_STARTING:
        return "starting";
    case AREAL_PHASE_WAITING_FOR_SERVERS:
        return "waiting_for_servers";
    case AREAL_PHASE_TRAINING:
        return "training";
    case AREAL_PHASE_CHECKPOINTING:
        return "checkpointing";
    case AREAL_PHASE_DONE:
        return "done";
    case AREAL_PHASE_FAILED:
        return "failed";
    }
    return "starting";
}

static json_t *num_or_null(bool has, double v) {
    return has ? json_real(v) : json_null();
}

char *areal_train_status_json(const areal_train_status *s) {
    json_t *stale = json_object();
    json_object_set_new(stale, "max",
                        s->has_staleness ? json_integer(s->staleness_max) : json_null());
    json_object_set_new(stale, "mean", num_or_null(s->has_staleness, s->staleness_mean));
    json_object_set_new(stale, "bound", json_integer(s->staleness_bound));
    json_t *o = json_object();
    json_object_set_new(o, "phase", json_string(areal_train_phase_name(s->phase)));
    json_object_set_new(o, "step", json_integer(s->step));
    json_object_set_new(o, "total_steps", json_integer(s->total_steps));
    json_object_set_new(o, "policy_version", json_integer(s->policy_version));
    json_object_set_new(o, "reward_mean", num_or_null(s->has_reward, s->reward_mean));
    json_object_set_new(o, "eval_accuracy", num_or_null(s->has_eval, s->eval_accuracy));
    json_object_set_new(o, "staleness", stale);
    json_object_set_new(o, "samples_per_second", json_real(s->samples_per_second));
    json_object_set_new(o, "tokens_per_second", json_real(s->tokens_per_second));
    json_object_set_new(o, "last_weight_sync_seconds",
                        num_or_null(s->has_sync, s->last_weight_sync_seconds));
    json_object_set_new(o, "rollout_wait_seconds", json_real(s->rollout_wait_seconds));
    json_object_set_new(o, "train_seconds", json_real(s->train_seconds));
    json_object_set_new(o, "servers", json_integer(s->servers));
    json_object_set_new(o, "waiting_for_samples", json_boolean(s->waiting_for_samples));
    json_object_set_new(o, "running_ahead", json_boolean(s->running_ahead));
    json_object_set_new(o, "checkpoint_step",
                        s->has_checkpoint ? json_integer(s->checkpoint_step) : json_null());
    char *text =
        json_dumps(o, JSON_COMPACT) /* full precision: the progress line's numbers exactly */;
    json_decref(o);
    return text;
}

int areal_train_status_write(const char *path, const areal_train_status *s, areal_error *err) {
    char *body = areal_train_status_json(s);
    if (body == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the final status");
    size_t len = strlen(body);
    if (len > AREAL_TERMINATION_MESSAGE_MAX) {
        free(body);
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "final status is %zu bytes, over the %d of a termination message",
                               len, AREAL_TERMINATION_MESSAGE_MAX);
    }
    /* "w", not a temporary and rename: the kubelet bind-mounts this very file (a
     * rename would replace the mount point's name in the container only) */
    FILE *f = fopen(path, "w");
    int rc = AREAL_OK;
    if (f == NULL)
        rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot write the final status (%s)", path,
                             strerror(errno));
    else {
        bool ok = fwrite(body, 1, len, f) == len;
        int e = ok ? 0 : errno;
        if (fclose(f) != 0 && ok) {
            ok = false;
            e = errno;
        }
        if (!ok)
            rc = areal_error_set(err, AREAL_EIO, -1, "%s: cannot write the final status (%s)", path,
                                 strerror(e));
    }
    free(body);
    return rc;
}

static void on_status(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_trainer_http *h = ud;
    areal_train_status s = areal_trainer_http_snapshot(h);
    char *body = areal_train_status_json(&s);
    if (body == NULL) {
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    areal_http_respond(x, 200, "application/json", NULL, body, strlen(body));
    free(body);
}

static void on_metrics(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_trainer_http *h = ud;
    size_t len = 0;
    char *body = metrics_render(h->reg, &len);
    if (body == NULL) {
        areal_http_respond_error(x, 500, "out of memory");
        return;
    }
    areal_http_respond(x, 200, "text/plain; version=0.0.4", NULL, body, len);
    free(body);
}

static void on_healthz(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    (void)ud;
    areal_http_respond(x, 200, "text/plain", NULL, "ok", 2);
}

static int register_metrics(areal_trainer_http *h) {
    metrics_registry *r = h->reg;
    static const double secs[] = {0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    int nb = (int)(sizeof secs / sizeof *secs);
#define G(name, help) metrics_register(r, METRIC_GAUGE, name, help, NULL, NULL, 0)
#define H(name, help) metrics_register(r, METRIC_HISTOGRAM, name, help, NULL, secs, nb)
    h->g_step = G("areal_trainer_step", "Training steps completed.");
    h->g_version = G("areal_trainer_policy_version", "Policy version (weight updates done).");
    h->g_reward = G("areal_trainer_reward_mean", "Mean reward of the last step's samples.");
    h->g_eval = G("areal_trainer_eval_accuracy", "Held-out accuracy of the last evaluation.");
    h->g_stale = G("areal_trainer_staleness_max", "Largest version lag of a trained token.");
    h->g_sps = G("areal_trainer_samples_per_second", "Samples trained per second (last step).");
    h->g_tps = G("areal_trainer_tokens_per_second", "Tokens trained per second (last step).");
    h->h_sync = H("areal_trainer_weight_sync_seconds", "Weight update time per step.");
    h->h_wait = H("areal_trainer_rollout_wait_seconds", "Time a step waited for rollouts.");
    h->h_train = H("areal_trainer_train_seconds", "Time of a training step.");
    h->g_servers = G("areal_trainer_servers", "Rollout servers the trainer drives.");
#undef G
#undef H
    return h->g_step && h->g_version && h->g_reward && h->g_eval && h->g_stale && h->g_sps &&
                   h->g_tps && h->h_sync && h->h_wait && h->h_train && h->g_servers
               ? 0
               : -1;
}

int areal_trainer_http_start(const char *host, int port, areal_trainer_http **out,
                             areal_error *err) {
    *out = NULL;
    areal_trainer_http *h = calloc(1, sizeof *h);
    if (h == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the trainer's HTTP");
    pthread_mutex_init(&h->mu, NULL);
    h->reg = metrics_registry_new();
    areal_http_config cfg = {0};
    cfg.host = host;
    cfg.port = port;
    cfg.max_body = 4096;
    int rc = h->reg && register_metrics(h) == 0 && (h->srv = areal_http_new(&cfg)) != NULL
                 ? AREAL_OK
                 : areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the trainer's HTTP");
    if (rc == AREAL_OK)
        rc = areal_http_route(h->srv, "GET", "/status", on_status, h, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(h->srv, "GET", "/metrics", on_metrics, h, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(h->srv, "GET", "/healthz", on_healthz, h, err);
    if (rc == AREAL_OK)
        rc = areal_http_start(h->srv, err);
    if (rc != AREAL_OK) {
        areal_trainer_http_stop(h);
        return rc;
    }
    *out = h;
    return AREAL_OK;
}

int areal_trainer_http_port(const areal_trainer_http *h) {
    return h ? areal_http_port(h->srv) : -1;
}

void areal_trainer_http_stop(areal_trainer_http *h) {
    if (h == NULL)
        return;
    areal_http_stop(h->srv); /* joins the service thread: no handler runs after this */
    metrics_registry_free(h->reg);
    pthread_mutex_destroy(&h->mu);
    free(h);
}

void areal_trainer_http_publish(areal_trainer_http *h, const areal_train_status *s,
                                bool observe_step) {
    if (h == NULL)
        return;
    pthread_mutex_lock(&h->mu);
    h->st = *s;
    pthread_mutex_unlock(&h->mu);
    metrics_gauge_set(h->g_step, NULL, (double)s->step);
    metrics_gauge_set(h->g_version, NULL, (double)s->policy_version);
    if (s->has_reward)
        metrics_gauge_set(h->g_reward, NULL, s->reward_mean);
    if (s->has_eval)
        metrics_gauge_set(h->g_eval, NULL, s->eval_accuracy);
    if (s->has_staleness)
        metrics_gauge_set(h->g_stale, NULL, (double)s->staleness_max);
    metrics_gauge_set(h->g_sps, NULL, s->samples_per_second);
    metrics_gauge_set(h->g_tps, NULL, s->tokens_per_second);
    metrics_gauge_set(h->g_servers, NULL, (double)s->servers);
    if (observe_step) {
        if (s->has_sync)
            metrics_histogram_observe(h->h_sync, NULL, s->last_weight_sync_seconds);
        metrics_histogram_observe(h->h_wait, NULL, s->rollout_wait_seconds);
        metrics_histogram_observe(h->h_train, NULL, s->train_seconds);
    }
}

areal_train_status areal_trainer_http_snapshot(areal_trainer_http *h) {
    areal_train_status s;
    memset(&s, 0, sizeof s);
    if (h == NULL)
        return s;
    pthread_mutex_lock(&h->mu);
    s = h->st;
    pthread_mutex_unlock(&h->mu);
    return s;
}
