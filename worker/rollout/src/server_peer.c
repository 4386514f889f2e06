/*
 * server_peer.c - a server's current weights, from one server to another:
 *
 *   GET /get_weights_safetensors
 *     streams the weights this server serves NOW (however they arrived: from
 *     disk or by update_weights_from_distributed, when they exist only in
 *     memory) as one HF safetensors file: every parameter as F32 under its
 *     HF name, "__metadata__" {"format": "pt", "weight_version": V}, chunked.
 *     The model is lent by the engine (areal_engine_hold_model), so a swap
 *     meanwhile neither tears the stream (the version and the bytes stay a
 *     pair) nor waits for it, and it is written a piece at a time with at
 *     most STREAM_WINDOW bytes queued, so the model is never buffered twice.
 *     One detached thread per stream: a slow reader holds nothing but its
 *     own thread and the lent model (not the control thread, which pauses
 *     and updates need).
 *   POST /update_weights_from_peer {url, abort_all_requests?}
 *     pulls url/get_weights_safetensors into a staging model, tensor bytes
 *     written straight from the socket into place as they arrive, and swaps
 *     it in under the peer's weight_version once every parameter is there.
 *     A peer that is unreachable, answers something else, holds another
 *     architecture or dies mid-transfer leaves the old weights serving and
 *     the answer (400, {success: false, message}) says which and how far it
 *     got.
 *
 * Reloading the peer's model_path from a shared volume (the first version)
 * was wrong as soon as the peer's weights came by the distributed path; the
 * group mechanism was the other way, but it needs the peer to act as a
 * group's rank 0 for each newcomer, while HTTP needs nothing but the URL.
 */
#include <curl/curl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "areal/model/safetensors.h"
#include "server_internal.h"

#define STREAM_PIECE  ((size_t)1 << 20) /* bytes per stream_write */
#define STREAM_WINDOW ((size_t)4 << 20) /* queued bytes before the writer waits */

/* ---- serving ------------------------------------------------------------------ */

/* The safetensors header of m: 8-byte little-endian length, then compact JSON
 * padded with spaces to a multiple of 8 (the package's layout). NULL on no memory. */
static char *st_header(const areal_model *m, const char *version, size_t *len) {
    json_t *doc = json_object(),
           *meta = json_pack("{s:s,s:s}", "format", "pt", "weight_version", version);
    if (doc == NULL || meta == NULL || json_object_set_new(doc, "__metadata__", meta) != 0) {
        json_decref(doc);
        return NULL;
    }
    size_t off = 0;
    for (size_t i = 0; i < m->n_specs; i++) {
        const areal_tensor_spec *sp = &m->specs[i];
        json_t *shape = json_array();
        size_t numel = 1;
        for (int d = 0; d < sp->ndim; d++) {
            json_array_append_new(shape, json_integer(sp->shape[d]));
            numel *= (size_t)sp->shape[d];
        }
        json_t *t = json_pack("{s:s,s:o,s:[I,I]}", "dtype", "F32", "shape", shape, "data_offsets",
                              (json_int_t)off, (json_int_t)(off + numel * 4));
        off += numel * 4;
        if (t == NULL || json_object_set_new(doc, sp->name, t) != 0) {
            json_decref(doc);
            return NULL;
        }
    }
    char *text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(doc);
    if (text == NULL)
        return NULL;
    size_t n = strlen(text), padded = (n + 7) / 8 * 8;
    char *out = malloc(8 + padded);
    if (out != NULL) {
        for (int i = 0; i < 8; i++)
            out[i] = (char)(((uint64_t)padded >> (8 * i)) & 0xff);
        memcpy(out + 8, text, n);
        memset(out + 8 + n, ' ', padded - n);
        *len = 8 + padded;
    }
    free(text);
    return out;
}

static bool streams_stopping(areal_rollout_server *s) {
    pthread_mutex_lock(&s->smu);
    bool stop = s->streams_stop;
    pthread_mutex_unlock(&s->smu);
    return stop;
}

/* Writes p[0..n) in pieces, waiting while the queue is over the window; false
 * when the client went or the server stops. */
static bool put_bytes(areal_rollout_server *s, areal_http_exchange *x, const char *p, size_t n) {
    while (n > 0) {
        while (areal_http_stream_queued(x) > STREAM_WINDOW) {
            if (areal_http_client_gone(x) || streams_stopping(s))
                return false;
            struct timespec ts = {0, 500000}; /* the socket drains ~1 MB per ms on loopback */
            nanosleep(&ts, NULL);
        }
        size_t k = n < STREAM_PIECE ? n : STREAM_PIECE;
        if (areal_http_stream_write(x, p, k) != AREAL_OK || streams_stopping(s))
            return false;
        p += k;
        n -= k;
    }
    return true;
}

typedef struct wstream {
    areal_rollout_server *s;
    areal_http_exchange *x;
} wstream;

static void *stream_main(void *arg) {
    wstream *w = arg;
    areal_rollout_server *s = w->s;
    areal_http_exchange *x = w->x;
    free(w);
    char version[AREAL_ENGINE_VERSION_MAX];
    const areal_model *m = areal_engine_hold_model(s->eng, version, sizeof version);
    size_t hlen = 0;
    char *hdr = m ? st_header(m, version, &hlen) : NULL;
    if (hdr == NULL) {
        areal_http_respond_error(x, 500, "out of memory for the weights' header");
    } else if (areal_http_stream_start(x, 200, "application/octet-stream") == AREAL_OK &&
               put_bytes(s, x, hdr, hlen)) {
        for (size_t i = 0; i < m->n_specs; i++) {
            size_t numel = 1;
            for (int d = 0; d < m->specs[i].ndim; d++)
                numel *= (size_t)m->specs[i].shape[d];
            if (!put_bytes(s, x, (const char *)(m->params + m->offset[i]), numel * 4))
                break; /* the reader sees a short body: it checks the length */
        }
        areal_http_stream_end(x);
    } else {
        areal_http_stream_end(x);
    }
    free(hdr);
    if (m != NULL)
        areal_engine_release_model(s->eng, m);
    pthread_mutex_lock(&s->smu);
    s->n_streams--;
    pthread_cond_broadcast(&s->scv);
    pthread_mutex_unlock(&s->smu);
    return NULL;
}

static void h_weights(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    (void)r;
    areal_rollout_server *s = ud;
    if (srv_tp_unsupported(s, x, "/get_weights_safetensors"))
        return;
    wstream *w = malloc(sizeof *w);
    pthread_mutex_lock(&s->smu);
    bool stop = s->streams_stop;
    if (!stop && w != NULL)
        s->n_streams++;
    pthread_mutex_unlock(&s->smu);
    if (stop || w == NULL) {
        free(w);
        areal_http_respond_error(x, stop ? 503 : 500,
                                 stop ? "the server is shutting down" : "out of memory");
        return;
    }
    *w = (wstream){s, x};
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    int rc = pthread_create(&t, &at, stream_main, w);
    pthread_attr_destroy(&at);
    if (rc != 0) {
        free(w);
        pthread_mutex_lock(&s->smu);
        s->n_streams--;
        pthread_cond_broadcast(&s->scv);
        pthread_mutex_unlock(&s->smu);
        areal_http_respond_error(x, 503, "cannot start a thread for the weights; retry");
    }
}

void srv_peer_stop(areal_rollout_server *s) {
    pthread_mutex_lock(&s->smu);
    s->streams_stop = true;
    while (s->n_streams > 0)
        pthread_cond_wait(&s->scv, &s->smu);
    pthread_mutex_unlock(&s->smu);
}

/* ---- pulling -------------------------------------------------------------------- */

typedef struct piece {
    uint64_t begin, end; /* in the peer's data section */
    float *dst;
} piece;

typedef struct pull {
    areal_rollout_server *s;
    uint64_t pos; /* bytes of the body received */
    unsigned char len8[8];
    uint64_t hlen;
    char *hdr;
    piece *pieces; /* by begin */
    size_t n_pieces, next;
    uint64_t data_len; /* the data section's size (the largest end) */
    areal_model staging;
    bool staged;
    char version[AREAL_ENGINE_VERSION_MAX];
    char why[600]; /* set when the write callback refused the stream */
} pull;

static void whyf(pull *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void whyf(pull *p, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->why, sizeof p->why, fmt, ap);
    va_end(ap);
}

static int by_begin(const void *a, const void *b) {
    const piece *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

/* The header names every parameter of the served model, F32, same shape:
 * maps each to its place in the staging model. */
static bool take_header(pull *p) {
    json_error_t je;
    json_t *doc = json_loadb(p->hdr, (size_t)p->hlen, 0, &je);
    json_t *ver = json_object_get(json_object_get(doc, "__metadata__"), "weight_version");
    if (!json_is_object(doc) || !json_is_string(ver) ||
        json_string_length(ver) >= sizeof p->version) {
        whyf(p, "its header is not a safetensors header with __metadata__.weight_version (%s)",
             doc ? "no weight_version" : je.text);
        json_decref(doc);
        return false;
    }
    snprintf(p->version, sizeof p->version, "%s", json_string_value(ver));
    areal_error e;
    if (areal_model_init(&p->staging, &p->s->mcfg, NULL, &e) != AREAL_OK) {
        whyf(p, "no memory for the staging model (%s)", e.msg);
        json_decref(doc);
        return false;
    }
    p->staged = true;
    areal_model *m = &p->staging;
    p->pieces = calloc(m->n_specs ? m->n_specs : 1, sizeof *p->pieces);
    if (p->pieces == NULL) {
        whyf(p, "out of memory");
        json_decref(doc);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; i < m->n_specs && ok; i++) {
        const areal_tensor_spec *sp = &m->specs[i];
        json_t *t = json_object_get(doc, sp->name), *sh = json_object_get(t, "shape"),
               *off = json_object_get(t, "data_offsets");
        size_t numel = 1;
        bool shape_ok = json_is_array(sh) && json_array_size(sh) == (size_t)sp->ndim;
        for (int d = 0; d < sp->ndim; d++) {
            numel *= (size_t)sp->shape[d];
            shape_ok =
                shape_ok && json_integer_value(json_array_get(sh, (size_t)d)) == sp->shape[d];
        }
        json_int_t b = json_integer_value(json_array_get(off, 0)),
                   en = json_integer_value(json_array_get(off, 1));
        if (t == NULL) {
            whyf(p, "the peer has no tensor %.100s (another architecture)", sp->name);
            ok = false;
        } else if (!shape_ok || strcmp(json_string_value(json_object_get(t, "dtype"))
                                           ? json_string_value(json_object_get(t, "dtype"))
                                           : "",
                                       "F32") != 0) {
            whyf(p, "the peer's tensor %.100s is not F32 of the served shape", sp->name);
            ok = false;
        } else if (!json_is_array(off) || b < 0 || en - b != (json_int_t)(numel * 4)) {
            whyf(p, "the peer's tensor %.100s has data_offsets that do not span its shape",
                 sp->name);
            ok = false;
        } else {
            p->pieces[i] = (piece){(uint64_t)b, (uint64_t)en, m->params + m->offset[i]};
            if ((uint64_t)en > p->data_len)
                p->data_len = (uint64_t)en;
        }
    }
    json_decref(doc);
    if (!ok)
        return false;
    p->n_pieces = m->n_specs;
    qsort(p->pieces, p->n_pieces, sizeof *p->pieces, by_begin);
    for (size_t i = 1; i < p->n_pieces; i++)
        if (p->pieces[i].begin < p->pieces[i - 1].end) {
            whyf(p, "the peer's tensors overlap in data_offsets");
            return false;
        }
    return true;
}

/* Data bytes [d, d + n) of the body: into the pieces they cover (gaps skipped). */
static void take_data(pull *p, uint64_t d, const char *src, size_t n) {
    uint64_t end = d + n;
    while (p->next < p->n_pieces && d < end) {
        piece *q = &p->pieces[p->next];
        if (q->end <= d) {
            p->next++;
            continue;
        }
        if (q->begin >= end)
            return;
        uint64_t a = d > q->begin ? d : q->begin, b = end < q->end ? end : q->end;
        memcpy((char *)q->dst + (a - q->begin), src + (a - d), (size_t)(b - a));
        d = b;
        if (b == q->end)
            p->next++;
    }
}

static size_t on_body(char *src, size_t sz, size_t nm, void *ud) {
    pull *p = ud;
    size_t n = sz * nm, used = 0;
    while (used < n) {
        if (p->pos < 8) {
            size_t k = 8 - p->pos < n - used ? 8 - p->pos : n - used;
            memcpy(p->len8 + p->pos, src + used, k);
            p->pos += k;
            used += k;
            if (p->pos == 8) {
                for (int i = 7; i >= 0; i--)
                    p->hlen = (p->hlen << 8) | p->len8[i];
                if (p->hlen < 2 || p->hlen > AREAL_ST_HEADER_MAX ||
                    (p->hdr = malloc((size_t)p->hlen + 1)) == NULL) {
                    whyf(p, "its header length %llu is not that of a safetensors header",
                         (unsigned long long)p->hlen);
                    return 0;
                }
            }
        } else if (p->pos < 8 + p->hlen) {
            uint64_t left = 8 + p->hlen - p->pos;
            size_t k = left < n - used ? (size_t)left : n - used;
            memcpy(p->hdr + (p->pos - 8), src + used, k);
            p->pos += k;
            used += k;
            if (p->pos == 8 + p->hlen && !take_header(p))
                return 0;
        } else {
            uint64_t d = p->pos - 8 - p->hlen;
            if (d + (n - used) > p->data_len) {
                whyf(p, "it sent more than the %llu data bytes its header announced",
                     (unsigned long long)p->data_len);
                return 0;
            }
            take_data(p, d, src + used, n - used);
            p->pos += n - used;
            used = n;
        }
    }
    return n;
}

static void pull_free(pull *p) {
    free(p->hdr);
    free(p->pieces);
    if (p->staged)
        areal_model_free(&p->staging);
}

static void fail(areal_http_exchange *x, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void fail(areal_http_exchange *x, const char *fmt, ...) {
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    for (char *c = msg; *c; c++) /* peer bytes may be quoted: keep the JSON valid */
        if ((unsigned char)*c >= 0x80 || (unsigned char)*c < 0x20)
            *c = '?';
    srv_json(x, 400, json_pack("{s:b,s:s}", "success", 0, "message", msg));
}

static void do_peer(areal_rollout_server *s, areal_http_exchange *x, const areal_http_request *r) {
    if (srv_tp_unsupported(s, x, "/update_weights_from_peer"))
        return;
    static const char *const known[] = {"url", "abort_all_requests", NULL};
    json_t *j = srv_body(x, r);
    if (j == NULL)
        return;
    if (!srv_known(x, j, "/update_weights_from_peer", known)) {
        json_decref(j);
        return;
    }
    json_t *url = json_object_get(j, "url"), *ab = json_object_get(j, "abort_all_requests");
    if (!json_is_string(url) || strncmp(json_string_value(url), "http://", 7) != 0 ||
        json_string_length(url) > 1000 || (ab && !json_is_boolean(ab))) {
        json_decref(j);
        fail(x, "url must be the peer's base URL, http://host:port; abort_all_requests true "
                "or false");
        return;
    }
    char full[1100], base[1010], cur[AREAL_ENGINE_VERSION_MAX];
    snprintf(base, sizeof base, "%s", json_string_value(url));
    snprintf(full, sizeof full, "%s/get_weights_safetensors", base);
    bool abort_live = json_is_true(ab);
    json_decref(j);
    areal_rollout_server_version(s, cur, sizeof cur);
    pull p = {.s = s};
    CURL *c = curl_easy_init();
    long code = 0;
    CURLcode cr = CURLE_FAILED_INIT;
    if (c) {
        curl_easy_setopt(c, CURLOPT_URL, full);
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, &p);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
        /* no total timeout (a large model takes what it takes); a stalled peer does not */
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1024L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 30L);
        curl_easy_setopt(c, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        cr = curl_easy_perform(c);
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        curl_easy_cleanup(c);
    }
    uint64_t want = 8 + p.hlen + p.data_len;
    if (p.why[0] != '\0') {
        fail(x, "the peer %s: %s; version %s keeps serving", base, p.why, cur);
    } else if (cr != CURLE_OK || code != 200 || p.pieces == NULL || p.pos != want) {
        fail(x,
             "the transfer from the peer %s broke after %llu of %s%llu bytes (%s, HTTP %ld); "
             "version %s keeps serving",
             base, (unsigned long long)p.pos, p.pieces ? "" : "at least ",
             (unsigned long long)(p.pieces ? want : 8 + p.hlen),
             cr != CURLE_OK ? curl_easy_strerror(cr) : "the body ended early", code, cur);
    } else {
        areal_error e;
        if (areal_engine_swap_model(s->eng, &p.staging, p.version, abort_live, &e) != AREAL_OK) {
            fail(x, "the peer %s's weights were refused: %s; version %s keeps serving", base, e.msg,
                 cur);
        } else {
            p.staged = false; /* the engine owns them */
            atomic_fetch_add(&s->version_seq, 1);
            srv_json(x, 200,
                     json_pack("{s:b,s:s,s:s,s:i}", "success", 1, "message",
                               "Succeeded to update model weights from the peer.", "weight_version",
                               p.version, "num_paused_requests", 0));
        }
    }
    pull_free(&p);
}

static void h_peer(areal_http_exchange *x, const areal_http_request *r, void *ud) {
    srv_ctl(ud, do_peer, x, r);
}

int srv_routes_peer(areal_rollout_server *s, areal_error *err) {
    int rc = areal_http_route(s->http, "GET", "/get_weights_safetensors", h_weights, s, err);
    if (rc == AREAL_OK)
        rc = areal_http_route(s->http, "POST", "/update_weights_from_peer", h_peer, s, err);
    return rc;
}
