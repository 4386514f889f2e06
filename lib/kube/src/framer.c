/*
 * framer.c - newline framing of a watch stream and decoding of one event.
 *
 * How: `buf` holds the unfinished tail of the current line; each fed chunk is
 * searched with memchr from its start only, so every byte is looked at once
 * (linear in the stream, whatever the chunking). A line wholly inside a chunk
 * while `buf` is empty is passed straight from the chunk, without a copy.
 * The buffer never exceeds max_line: a longer line is an error (an event that
 * big is a broken or hostile server), not a reason to grow without end.
 */
#include "areal/kube/watch.h"

#include <stdlib.h>
#include <string.h>

#include "kbuf.h"

struct kube_framer {
    kbuf buf;
    size_t max_line;
};

kube_framer *kube_framer_new(size_t max_line) {
    kube_framer *f = calloc(1, sizeof *f);
    if (f == NULL)
        return NULL;
    f->max_line = max_line ? max_line : 1;
    kbuf_init(&f->buf, f->max_line);
    return f;
}

void kube_framer_free(kube_framer *f) {
    if (f == NULL)
        return;
    kbuf_free(&f->buf);
    free(f);
}

void kube_framer_reset(kube_framer *f) {
    f->buf.len = 0;
    if (f->buf.data)
        f->buf.data[0] = '\0';
}

size_t kube_framer_pending(const kube_framer *f) {
    return f->buf.len;
}

static int emit(const char *line, size_t len, kube_line_fn fn, void *ud) {
    if (len > 0 && line[len - 1] == '\r')
        len--;
    if (len == 0)
        return 0;
    return fn(ud, line, len);
}

static int too_big(kube_framer *f, kube_error *err) {
    kube_framer_reset(f);
    return kube_error_set(err, KUBE_ETOOBIG,
                          "a watch event is longer than max_line (%zu bytes); raise max_line or "
                          "watch fewer objects",
                          f->max_line);
}

int kube_framer_feed(kube_framer *f, const char *data, size_t len, kube_line_fn fn, void *ud,
                     kube_error *err) {
    while (len > 0) {
        const char *nl = memchr(data, '\n', len);
        size_t seg = nl ? (size_t)(nl - data) : len;
        if (nl && f->buf.len == 0) {
            if (seg > f->max_line)
                return too_big(f, err);
            int rc = emit(data, seg, fn, ud);
            if (rc != 0)
                return rc;
        } else {
            int rc = kbuf_append(&f->buf, data, seg);
            if (rc == -1)
                return too_big(f, err);
            if (rc != 0)
                return kube_error_set(err, KUBE_ENOMEM, "out of memory buffering a watch event");
            if (nl) {
                rc = emit(f->buf.data, f->buf.len, fn, ud);
                kube_framer_reset(f);
                if (rc != 0)
                    return rc;
            }
        }
        if (!nl)
            break;
        data += seg + 1;
        len -= seg + 1;
    }
    return KUBE_OK;
}

static const char *const type_names[] = {"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"};

const char *kube_event_type_name(kube_event_type t) {
    return (unsigned)t < sizeof type_names / sizeof type_names[0] ? type_names[t] : "UNKNOWN";
}

void kube_event_clear(kube_event *ev) {
    json_decref(ev->object);
    ev->object = NULL;
    ev->resource_version = NULL;
    ev->type = KUBE_EVENT_ERROR;
}

int kube_event_decode(const char *line, size_t len, kube_event *ev, kube_error *err) {
    ev->object = NULL;
    ev->resource_version = NULL;
    ev->type = KUBE_EVENT_ERROR;
    json_error_t je;
    json_t *root = json_loadb(line, len, 0, &je);
    if (root == NULL)
        return kube_error_set(err, KUBE_EDECODE,
                              "a watch event is not valid JSON (column %d: %s); the server or a "
                              "proxy corrupted the stream",
                              je.column, je.text);
    int rc = KUBE_OK;
    const char *type = json_string_value(json_object_get(root, "type"));
    json_t *obj = json_object_get(root, "object");
    int t = -1;
    for (int i = 0; type && i < (int)(sizeof type_names / sizeof type_names[0]); i++)
        if (strcmp(type, type_names[i]) == 0)
            t = i;
    if (type == NULL)
        rc = kube_error_set(err, KUBE_EDECODE, "a watch event has no \"type\" string");
    else if (t < 0)
        rc = kube_error_set(err, KUBE_EDECODE, "a watch event has unknown type \"%.64s\"", type);
    else if (!json_is_object(obj))
        rc = kube_error_set(err, KUBE_EDECODE, "a %s watch event has no \"object\" object", type);
    if (rc == KUBE_OK) {
        ev->type = (kube_event_type)t;
        ev->object = json_incref(obj);
        ev->resource_version =
            json_string_value(json_object_get(json_object_get(obj, "metadata"), "resourceVersion"));
    }
    json_decref(root);
    return rc;
}
