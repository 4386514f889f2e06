/*
 * dataset.c - GSM8K-style JSONL prompt datasets (dataset.h): one JSON
 * object a line, bad lines counted and skipped with their line numbers,
 * the gold answer after "####", the prompt from a template.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "areal/rl/dataset.h"

int areal_rl_gsm8k_gold(const char *answer, size_t len, char *out, size_t cap) {
    if (answer == NULL || cap == 0)
        return -1;
    const char *s = answer;
    size_t n = len;
    /* the text after the last "####" */
    for (size_t i = len; i >= 4; i--) {
        if (memcmp(answer + i - 4, "####", 4) == 0) {
            s = answer + i;
            n = len - i;
            break;
        }
    }
    while (n > 0 && isspace((unsigned char)s[0]))
        s++, n--;
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        /* thousands separators: a comma between digits */
        if (s[i] == ',' && i > 0 && i + 1 < n && isdigit((unsigned char)s[i - 1]) &&
            isdigit((unsigned char)s[i + 1]))
            continue;
        if (k + 1 >= cap)
            return -1;
        out[k++] = s[i];
    }
    out[k] = '\0';
    return k == 0 ? -1 : (int)k;
}

static char *dup_n(const char *s, size_t n) {
    char *d = malloc(n + 1);
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

/* The template with every "{question}" replaced by q; NULL when out of memory. */
static char *render(const char *tmpl, const char *q) {
    static const char key[] = "{question}";
    size_t kl = sizeof key - 1, ql = strlen(q), n = 0;
    for (const char *p = tmpl; (p = strstr(p, key)) != NULL; p += kl)
        n++;
    size_t len = strlen(tmpl) + n * ql - n * kl;
    char *out = malloc(len + 1), *o = out;
    if (out == NULL)
        return NULL;
    for (const char *p = tmpl; *p;) {
        if (strncmp(p, key, kl) == 0) {
            memcpy(o, q, ql);
            o += ql;
            p += kl;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

static void sample_free(areal_rl_sample *s) {
    free(s->question);
    free(s->answer);
    free(s->gold);
    free(s->prompt);
}

void areal_rl_dataset_free(areal_rl_dataset *d) {
    if (d == NULL)
        return;
    for (size_t i = 0; i < d->n; i++)
        sample_free(&d->items[i]);
    free(d->items);
    free(d);
}

static void bad(areal_rl_dataset *d, long line, const char *why) {
    if (d->n_bad < AREAL_RL_BAD_LINES_MAX)
        d->bad_lines[d->n_bad] = line;
    if (d->n_bad == 0)
        snprintf(d->bad_first_reason, sizeof d->bad_first_reason, "%s", why);
    d->n_bad++;
}

/* Parses one line into s; returns 1 good, 0 bad (why set), -1 out of memory. */
static int parse_line(const char *line, size_t len, const char *tmpl, areal_rl_sample *s, char *why,
                      size_t why_cap) {
    json_error_t e;
    json_t *j = json_loadb(line, len, 0, &e);
    if (j == NULL) {
        snprintf(why, why_cap, "not JSON: %s", e.text);
        return 0;
    }
    int rc = 0;
    if (!json_is_object(j)) {
        snprintf(why, why_cap, "not a JSON object");
        goto out;
    }
    json_t *q = json_object_get(j, "question"), *a = json_object_get(j, "answer");
    if (!json_is_string(q) || json_string_length(q) == 0) {
        snprintf(why, why_cap, "no \"question\" string");
        goto out;
    }
    char num[64];
    const char *as;
    size_t al;
    if (json_is_string(a)) {
        as = json_string_value(a);
        al = json_string_length(a);
    } else if (json_is_integer(a)) {
        snprintf(num, sizeof num, "%lld", (long long)json_integer_value(a));
        as = num;
        al = strlen(num);
    } else {
        snprintf(why, why_cap, "no \"answer\" string");
        goto out;
    }
    char gold[256];
    if (areal_rl_gsm8k_gold(as, al, gold, sizeof gold) < 0) {
        snprintf(why, why_cap, "the answer has no gold value after \"####\"");
        goto out;
    }
    if (memchr(json_string_value(q), '\0', json_string_length(q)) != NULL) {
        snprintf(why, why_cap, "the question holds a NUL character");
        goto out;
    }
    s->question = dup_n(json_string_value(q), json_string_length(q));
    s->answer = dup_n(as, al);
    s->gold = dup_n(gold, strlen(gold));
    s->prompt = s->question ? render(tmpl, s->question) : NULL;
    if (!s->question || !s->answer || !s->gold || !s->prompt) {
        sample_free(s);
        rc = -1;
        goto out;
    }
    rc = 1;
out:
    json_decref(j);
    return rc;
}

int areal_rl_dataset_parse(const char *text, size_t len, const char *source,
                           const char *prompt_template, areal_rl_dataset **out, areal_error *err) {
    *out = NULL;
    const char *tmpl = prompt_template ? prompt_template : AREAL_RL_GSM8K_TEMPLATE;
    if (strstr(tmpl, "{question}") == NULL)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "the prompt template of %s has no {question} placeholder; add it "
                               "where the question goes",
                               source);
    areal_rl_dataset *d = calloc(1, sizeof *d);
    if (d == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    size_t cap = 0;
    long line = 0;
    size_t i = 0;
    while (i < len) {
        const char *p = text + i;
        const char *nl = memchr(p, '\n', len - i);
        size_t n = nl ? (size_t)(nl - p) : len - i;
        i += n + (nl ? 1 : 0);
        line++;
        size_t k = 0;
        while (k < n && isspace((unsigned char)p[k]))
            k++;
        if (k == n)
            continue;
        if (d->n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            areal_rl_sample *ni = realloc(d->items, nc * sizeof *ni);
            if (ni == NULL)
                goto oom;
            d->items = ni;
            cap = nc;
        }
        char why[200];
        areal_rl_sample s = {0};
        int r = parse_line(p, n, tmpl, &s, why, sizeof why);
        if (r < 0)
            goto oom;
        if (r == 0) {
            char msg[256];
            snprintf(msg, sizeof msg, "line %ld: %s", line, why);
            bad(d, line, msg);
            continue;
        }
        s.line = line;
        d->items[d->n++] = s;
    }
    if (d->n == 0) {
        int rc = areal_error_set(err, AREAL_EINVAL, -1,
                                 "%s has no usable line (%zu bad%s%s); each line must be a JSON "
                                 "object with \"question\" and \"answer\" (\"... #### N\")",
                                 source, d->n_bad, d->n_bad ? ", first: " : "",
                                 d->n_bad ? d->bad_first_reason : "");
        areal_rl_dataset_free(d);
        return rc;
    }
    *out = d;
    return AREAL_OK;
oom:
    areal_rl_dataset_free(d);
    return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory reading %s", source);
}

int areal_rl_dataset_load(const char *path, const char *prompt_template, areal_rl_dataset **out,
                          areal_error *err) {
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return areal_error_set(err, AREAL_EIO, -1, "cannot open dataset %s: %s", path,
                               strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            size_t nc = cap ? cap * 2 : 1 << 16;
            char *nb = realloc(buf, nc);
            if (nb == NULL) {
                free(buf);
                fclose(f);
                return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory reading %s", path);
            }
            buf = nb;
            cap = nc;
        }
        size_t r = fread(buf + len, 1, cap - len, f);
        len += r;
        if (r == 0)
            break;
    }
    int bad_read = ferror(f);
    fclose(f);
    if (bad_read) {
        free(buf);
        return areal_error_set(err, AREAL_EIO, -1, "cannot read dataset %s", path);
    }
    int rc = areal_rl_dataset_parse(buf, len, path, prompt_template, out, err);
    free(buf);
    return rc;
}

void areal_rl_dataset_report(const areal_rl_dataset *d, const char *source, char *buf, size_t cap) {
    if (cap == 0)
        return;
    buf[0] = '\0';
    if (d == NULL || d->n_bad == 0)
        return;
    size_t k = (size_t)snprintf(buf, cap, "%zu bad line%s skipped in %s: ", d->n_bad,
                                d->n_bad == 1 ? "" : "s", source);
    size_t shown = d->n_bad < AREAL_RL_BAD_LINES_MAX ? d->n_bad : AREAL_RL_BAD_LINES_MAX;
    for (size_t i = 0; i < shown && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%ld", i ? ", " : "", d->bad_lines[i]);
    if (k < cap && shown < d->n_bad)
        k += (size_t)snprintf(buf + k, cap - k, ", ...");
    if (k < cap)
        snprintf(buf + k, cap - k, " (%s)", d->bad_first_reason);
}

/* ---- the loader ------------------------------------------------------- */

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fill_perm(areal_rl_loader *l) {
    for (size_t i = 0; i < l->n; i++)
        l->perm[i] = i;
    if (!l->shuffle)
        return;
    uint64_t st = l->seed ^ ((uint64_t)l->epoch * 0xD1B54A32D192ED03ull);
    (void)splitmix64(&st);
    for (size_t i = l->n; i > 1; i--) {
        /* unbiased index in [0, i): the high half of a 64x64 product */
        size_t j = (size_t)(((unsigned __int128)splitmix64(&st) * i) >> 64);
        size_t t = l->perm[i - 1];
        l->perm[i - 1] = l->perm[j];
        l->perm[j] = t;
    }
}

int areal_rl_loader_init(areal_rl_loader *l, size_t n, size_t batch_size, uint64_t seed,
                         bool shuffle, areal_error *err) {
    memset(l, 0, sizeof *l);
    if (batch_size == 0 || batch_size > n)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "train_dataset.batch_size %zu must be between 1 and the dataset "
                               "size %zu",
                               batch_size, n);
    l->perm = malloc(sizeof(size_t) * n);
    if (l->perm == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for the loader");
    l->n = n;
    l->batch_size = batch_size;
    l->seed = seed;
    l->shuffle = shuffle;
    fill_perm(l);
    return AREAL_OK;
}

size_t areal_rl_loader_steps_per_epoch(const areal_rl_loader *l) {
    return l->batch_size ? l->n / l->batch_size : 0;
}

void areal_rl_loader_next(areal_rl_loader *l, size_t *out, long *epoch_out, size_t *index_out) {
    if (l->index >= areal_rl_loader_steps_per_epoch(l)) {
        l->epoch++;
        l->index = 0;
        fill_perm(l);
    }
    if (epoch_out)
        *epoch_out = l->epoch;
    if (index_out)
        *index_out = l->index;
    const size_t *p = l->perm + l->index * l->batch_size;
    memcpy(out, p, sizeof(size_t) * l->batch_size);
    l->index++;
}

int areal_rl_loader_seek(areal_rl_loader *l, long epoch, size_t index, areal_error *err) {
    if (epoch < 0 || index > areal_rl_loader_steps_per_epoch(l))
        return areal_error_set(err, AREAL_ERANGE, -1,
                               "loader position (epoch %ld, index %zu) is outside the dataset "
                               "(%zu batches an epoch)",
                               epoch, index, areal_rl_loader_steps_per_epoch(l));
    l->epoch = epoch;
    l->index = index;
    fill_perm(l);
    return AREAL_OK;
}

void areal_rl_loader_free(areal_rl_loader *l) {
    free(l->perm);
    l->perm = NULL;
}
