/*
 * tok_encode.c - text -> ids, the `tokenizers` pipeline for byte-level BPE.
 *
 * 1. Added tokens are cut out of the raw text, leftmost first and longest at a
 *    position (what `tokenizers` does with its Aho-Corasick automaton; a plain
 *    scan over the few added tokens, only at bytes one of them starts with,
 *    is as fast for Qwen's couple of dozen).
 * 2. Each other segment is NFC-normalised with libunistring when the file asks.
 * 3. Each regex stage splits every piece into matches and the gaps between
 *    them (the "Isolated" behaviour), with PCRE2 in UTF + UCP mode so \p{L},
 *    \p{N} and \s are Unicode classes.
 * 4. BPE over the piece's bytes: repeatedly merge the adjacent pair with the
 *    lowest rank, leftmost on ties, until no pair merges - the reference's
 *    (rank, position) order. A rescan of the piece per merge was rejected: it
 *    is O(n^2), and one long run of letters or spaces in a prompt would stall
 *    a worker; a heap of candidates keeps it O(n log n).
 */
#include <stdlib.h>
#include <string.h>
#include <unistr.h>
#include <uninorm.h>

#include "tok_internal.h"

typedef struct ids_buf {
    int32_t *v;
    size_t n, cap;
} ids_buf;

static int push(ids_buf *b, int32_t id) {
    if (b->n == b->cap) {
        size_t cap = b->cap ? 2 * b->cap : 64;
        int32_t *p = realloc(b->v, cap * sizeof *p);
        if (p == NULL)
            return -1;
        b->v = p;
        b->cap = cap;
    }
    b->v[b->n++] = id;
    return 0;
}

/* A candidate merge of the symbol at `pos` with its right neighbour. */
typedef struct cand {
    int32_t rank, pos, left, right, merged;
} cand;

typedef struct enc {
    const areal_tokenizer *tok;
    ids_buf out;
    int32_t *id, *next, *prev; /* symbols of the current piece, a linked list */
    cand *heap;
    size_t cap, n_heap;
    pcre2_match_data *md;
    areal_error *err;
} enc;

static bool before(const cand *a, const cand *b) {
    return a->rank < b->rank || (a->rank == b->rank && a->pos < b->pos);
}

static void heap_push(enc *e, cand c) {
    size_t i = e->n_heap++;
    while (i > 0 && before(&c, &e->heap[(i - 1) / 2])) {
        e->heap[i] = e->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    e->heap[i] = c;
}

static cand heap_pop(enc *e) {
    cand top = e->heap[0], last = e->heap[--e->n_heap];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->n_heap)
            break;
        if (c + 1 < e->n_heap && before(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!before(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->n_heap > 0)
        e->heap[i] = last;
    return top;
}

/* Queues the pair starting at symbol p, if it merges. */
static void offer(enc *e, int32_t p) {
    if (p < 0 || e->next[p] < 0)
        return;
    int32_t l = e->id[p], r = e->id[e->next[p]], merged;
    int32_t rank = tok_pairmap_get(&e->tok->merges, l, r, &merged);
    if (rank >= 0)
        heap_push(e, (cand){rank, p, l, r, merged});
}

static int grow(enc *e, size_t n) {
    if (n <= e->cap)
        return 0;
    size_t cap = e->cap ? e->cap : 64;
    while (cap < n)
        cap *= 2;
    int32_t *a = realloc(e->id, cap * sizeof *a);
    if (a != NULL)
        e->id = a;
    int32_t *b = realloc(e->next, cap * sizeof *b);
    if (b != NULL)
        e->next = b;
    int32_t *c = realloc(e->prev, cap * sizeof *c);
    if (c != NULL)
        e->prev = c;
    /* the heap holds at most (n - 1) initial pairs + one net entry per merge <= 2n */
    cand *h = realloc(e->heap, 2 * cap * sizeof *h);
    if (h != NULL)
        e->heap = h;
    if (a == NULL || b == NULL || c == NULL || h == NULL)
        return -1;
    e->cap = cap;
    return 0;
}

/*
 * BPE over one piece: merge the lowest-rank adjacent pair, leftmost first,
 * until none merges. A heap of (rank, position) candidates over a linked list
 * of symbols, O(n log n); a popped candidate is used only if its two symbols
 * are still adjacent with the ids it was queued with.
 */
static int bpe(enc *e, const uint8_t *s, size_t n) {
    const areal_tokenizer *t = e->tok;
    if (n == 0)
        return AREAL_OK;
    if (n > INT32_MAX / 2)
        return areal_error_set(e->err, AREAL_ERANGE, -1, "a %zu-byte piece is too long", n);
    if (t->ignore_merges && n <= 512) {
        char buf[1024];
        size_t k = 0;
        for (size_t i = 0; i < n; i++)
            k += tok_byte_spell(s[i], buf + k);
        int32_t id = tok_strmap_get(&t->vocab, buf, k);
        if (id >= 0 && !t->id_added[id])
            return push(&e->out, id) ? AREAL_ENOMEM : AREAL_OK;
    }
    if (grow(e, n))
        return AREAL_ENOMEM;
    int32_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_id[s[i]];
        if (id < 0)
            id = t->unk_id; /* no unk either: the byte is dropped, as in `tokenizers` */
        if (id >= 0)
            e->id[m++] = id;
    }
    for (int32_t i = 0; i < m; i++) {
        e->prev[i] = i - 1;
        e->next[i] = i + 1 < m ? i + 1 : -1;
    }
    e->n_heap = 0;
    for (int32_t i = 0; i + 1 < m; i++)
        offer(e, i);
    while (e->n_heap > 0) {
        cand c = heap_pop(e);
        int32_t r = e->next[c.pos];
        if (e->id[c.pos] != c.left || r < 0 || e->id[r] != c.right)
            continue; /* stale: one side was merged away since */
        e->id[c.pos] = c.merged;
        e->id[r] = -1;
        e->next[c.pos] = e->next[r];
        if (e->next[r] >= 0)
            e->prev[e->next[r]] = c.pos;
        offer(e, e->prev[c.pos]);
        offer(e, c.pos);
    }
    for (int32_t i = m > 0 ? 0 : -1; i >= 0; i = e->next[i]) {
        if (push(&e->out, e->id[i]))
            return AREAL_ENOMEM;
    }
    return AREAL_OK;
}

/* Splits s[0..n) with regex stage `stage` and passes every piece on. */
static int split(enc *e, int stage, const uint8_t *s, size_t n) {
    if (stage == e->tok->n_stages)
        return bpe(e, s, n);
    const pcre2_code *re = e->tok->stages[stage];
    size_t last = 0, from = 0;
    while (from <= n && last < n) {
        int rc = pcre2_match(re, s, n, from, PCRE2_NO_UTF_CHECK, e->md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0)
            return areal_error_set(e->err, AREAL_EINVAL, -1,
                                   "pre-tokenizer regex failed (PCRE2 error %d) on a %zu-byte "
                                   "piece",
                                   rc, n);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(e->md);
        size_t a = ov[0], b = ov[1];
        if (a > last) {
            int r = split(e, stage + 1, s + last, a - last);
            if (r != AREAL_OK)
                return r;
        }
        if (b > a) {
            int r = split(e, stage + 1, s + a, b - a);
            if (r != AREAL_OK)
                return r;
            last = from = b;
        } else { /* empty match: step over one character */
            from = b + 1;
            while (from < n && (s[from] & 0xc0) == 0x80)
                from++;
            if (a > last)
                last = a;
        }
    }
    if (last < n)
        return split(e, stage + 1, s + last, n - last);
    return AREAL_OK;
}

static int segment(enc *e, const uint8_t *s, size_t n) {
    const areal_tokenizer *t = e->tok;
    uint8_t *norm = NULL;
    size_t nlen = n;
    if (t->nfc && n > 0) {
        norm = u8_normalize(UNINORM_NFC, s, n, NULL, &nlen);
        if (norm == NULL)
            return areal_error_set(e->err, AREAL_ENOMEM, -1, "NFC normalisation failed");
        s = norm;
        n = nlen;
    }
    int rc;
    if (t->add_prefix_space && n > 0 && s[0] != ' ') {
        uint8_t *p = malloc(n + 1);
        if (p == NULL) {
            free(norm);
            return AREAL_ENOMEM;
        }
        p[0] = ' ';
        memcpy(p + 1, s, n);
        rc = split(e, 0, p, n + 1);
        free(p);
    } else {
        rc = split(e, 0, s, n);
    }
    free(norm);
    return rc;
}

/* The longest added token starting at s (within n bytes), or NULL. */
static const tok_added *added_at(const areal_tokenizer *t, const uint8_t *s, size_t n) {
    for (size_t k = 0; k < t->n_added; k++) { /* sorted longest first */
        const tok_added *a = &t->added[k];
        if (a->len <= n && s[0] == (uint8_t)a->content[0] && memcmp(s, a->content, a->len) == 0)
            return a;
    }
    return NULL;
}

int areal_tokenizer_encode(const areal_tokenizer *tok, const char *text, size_t len, int32_t **ids,
                           size_t *n, areal_error *err) {
    *ids = NULL;
    *n = 0;
    const uint8_t *s = (const uint8_t *)text;
    const uint8_t *bad = u8_check(s, len);
    if (bad != NULL)
        return areal_error_set(err, AREAL_EINVAL, (int)(bad - s),
                               "text is not valid UTF-8 at byte %zu", (size_t)(bad - s));
    enc e = {.tok = tok, .err = err};
    int rc = AREAL_OK;
    if (tok->n_stages > 0) {
        e.md = pcre2_match_data_create(1, NULL); /* only the whole match is read */
        if (e.md == NULL)
            rc = AREAL_ENOMEM;
    }
    size_t start = 0, i = 0;
    while (rc == AREAL_OK && i < len) {
        const tok_added *a = tok->added_first[s[i]] ? added_at(tok, s + i, len - i) : NULL;
        if (a == NULL) {
            i++;
            continue;
        }
        rc = segment(&e, s + start, i - start);
        if (rc == AREAL_OK && push(&e.out, a->id))
            rc = AREAL_ENOMEM;
        i += a->len;
        start = i;
    }
    if (rc == AREAL_OK)
        rc = segment(&e, s + start, len - start);
    pcre2_match_data_free(e.md);
    free(e.id);
    free(e.next);
    free(e.prev);
    free(e.heap);
    if (rc == AREAL_OK && e.out.v == NULL && (e.out.v = malloc(sizeof(int32_t))) == NULL)
        rc = AREAL_ENOMEM;
    if (rc != AREAL_OK) {
        free(e.out.v);
        if (rc == AREAL_ENOMEM)
            areal_error_set(err, rc, -1, "out of memory while encoding %zu bytes", len);
        return rc;
    }
    *ids = e.out.v;
    *n = e.out.n;
    return AREAL_OK;
}
