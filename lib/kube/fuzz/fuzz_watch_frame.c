/*
 * fuzz_watch_frame.c - libFuzzer target for the watch-stream framer and the event decoder.
 *
 * Invariants checked: (1) the lines a stream frames into do not depend on how it is cut
 * into chunks (the input is fed whole to one framer and in pseudo-random chunks, chosen
 * by its first two bytes, to another; the line sequences must be equal); (2) a decoded
 * event has a known type and an object; (3) a framer with a small bound never holds more
 * than its bound and fails with KUBE_ETOOBIG, never anything else.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/kube/watch.h"

typedef struct acc {
    uint64_t hash;
    size_t lines;
} acc;

static int on_line(void *ud, const char *line, size_t len) {
    acc *a = ud;
    uint64_t h = a->hash ^ 0x9e3779b97f4a7c15ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)line[i]) * 0x100000001b3ull;
    a->hash = h * 31 + len;
    a->lines++;
    kube_event ev;
    if (kube_event_decode(line, len, &ev, NULL) == KUBE_OK) {
        if (ev.object == NULL || !json_is_object(ev.object) || ev.type > KUBE_EVENT_ERROR)
            abort();
        kube_event_clear(&ev);
    } else if (ev.object != NULL) {
        abort();
    }
    return 0;
}

static int count_only(void *ud, const char *line, size_t len) {
    (void)line;
    if (len > 64)
        abort(); /* the bound below */
    (*(size_t *)ud)++;
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    uint32_t seed = (uint32_t)data[0] << 8 | data[1];
    const char *s = (const char *)data + 2;
    size_t n = size - 2;

    kube_framer *whole = kube_framer_new(1 << 20), *chunked = kube_framer_new(1 << 20);
    kube_framer *small = kube_framer_new(64);
    if (!whole || !chunked || !small)
        abort();
    acc a = {0, 0}, b = {0, 0};
    if (kube_framer_feed(whole, s, n, on_line, &a, NULL) != KUBE_OK)
        abort();
    for (size_t off = 0; off < n;) {
        seed = seed * 1103515245u + 12345u;
        size_t k = 1 + (seed >> 16) % 17;
        if (k > n - off)
            k = n - off;
        if (kube_framer_feed(chunked, s + off, k, on_line, &b, NULL) != KUBE_OK)
            abort();
        off += k;
    }
    if (a.hash != b.hash || a.lines != b.lines ||
        kube_framer_pending(whole) != kube_framer_pending(chunked))
        abort();
    size_t count = 0;
    for (size_t off = 0; off < n; off += 7) {
        size_t k = n - off < 7 ? n - off : 7;
        int rc = kube_framer_feed(small, s + off, k, count_only, &count, NULL);
        if (rc != KUBE_OK && rc != KUBE_ETOOBIG)
            abort();
        if (kube_framer_pending(small) > 64)
            abort();
    }
    kube_framer_free(whole);
    kube_framer_free(chunked);
    kube_framer_free(small);
    return 0;
}
