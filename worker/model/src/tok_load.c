/*
 * tok_load.c - building a tokenizer from tokenizer.json.
 *
 * The file is parsed with jansson and checked piece by piece; anything the
 * encoder would not reproduce exactly (dropout, byte fallback, lstrip on an
 * added token, an unknown normalizer or pre-tokenizer) is refused with the
 * JSON path of the field, rather than silently encoding differently from
 * `tokenizers`. Merges are accepted in both spellings and an empty merge
 * list is an error: a BPE model without merges silently produces one token
 * per byte, the classic failure of hand-written loaders.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "file_util.h"
#include "tok_internal.h"

/* Qwen2's tokenizer.json spells the same regex; GPT-2's is implied by ByteLevel use_regex. */
static const char gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

typedef struct loader {
    const char *file;
    areal_error *err;
    areal_tokenizer *tok;
} loader;

static int fail(const loader *l, const char *field, const char *what) {
    return areal_error_set(l->err, AREAL_EINVAL, -1, "%s: field \"%s\" %s", l->file, field, what);
}

static int nomem(const loader *l) {
    return areal_error_set(l->err, AREAL_ENOMEM, -1, "%s: out of memory", l->file);
}

void areal_tokenizer_free(areal_tokenizer *tok) {
    if (tok == NULL)
        return;
    for (size_t i = 0; i < tok->n_ids; i++)
        free(tok->id_str[i]);
    free(tok->id_str);
    free(tok->id_len);
    free(tok->id_added);
    for (size_t i = 0; i < tok->n_added; i++)
        free(tok->added[i].content);
    free(tok->added);
    tok_strmap_free(&tok->vocab);
    tok_pairmap_free(&tok->merges);
    for (int i = 0; i < tok->n_stages; i++)
        pcre2_code_free(tok->stages[i]);
    free(tok);
}

static bool is_null_or(json_t *v, bool (*ok)(json_t *)) {
    return v == NULL || json_is_null(v) || ok(v);
}

static bool is_false(json_t *v) {
    return json_is_false(v);
}

static bool is_empty_str(json_t *v) {
    return json_is_string(v) && json_string_length(v) == 0;
}

static int check_model(const loader *l, json_t *model) {
    if (!json_is_object(model))
        return fail(l, "model", "must be an object");
    json_t *type = json_object_get(model, "type");
    if (type != NULL && (!json_is_string(type) || strcmp(json_string_value(type), "BPE") != 0))
        return fail(l, "model.type", "must be \"BPE\" (only byte-level BPE is supported)");
    json_t *dropout = json_object_get(model, "dropout");
    if (dropout != NULL && !json_is_null(dropout) &&
        !(json_is_number(dropout) && json_number_value(dropout) == 0.0))
        return fail(l, "model.dropout", "must be null (BPE dropout is not reproducible)");
    if (!is_null_or(json_object_get(model, "continuing_subword_prefix"), is_empty_str))
        return fail(l, "model.continuing_subword_prefix", "must be null");
    if (!is_null_or(json_object_get(model, "end_of_word_suffix"), is_empty_str))
        return fail(l, "model.end_of_word_suffix", "must be null");
    if (!is_null_or(json_object_get(model, "byte_fallback"), is_false))
        return fail(l, "model.byte_fallback", "must be false (byte-level BPE needs no fallback)");
    json_t *im = json_object_get(model, "ignore_merges");
    if (im != NULL && !json_is_null(im) && !json_is_boolean(im))
        return fail(l, "model.ignore_merges", "must be true or false");
    l->tok->ignore_merges = json_is_true(im);
    return AREAL_OK;
}

static int set_id(const loader *l, int32_t id, const char *s, size_t len, uint8_t added,
                  const char *field) {
    areal_tokenizer *t = l->tok;
    if (t->id_str[id] != NULL) {
        if (t->id_len[id] == len && memcmp(t->id_str[id], s, len) == 0 && added) {
            t->id_added[id] = added;
            return AREAL_OK;
        }
        return areal_error_set(l->err, AREAL_EINVAL, -1,
                               "%s: field \"%s\": id %d is given to \"%.40s\" and to \"%.40s\"",
                               l->file, field, (int)id, t->id_str[id], s);
    }
    char *copy = malloc(len + 1);
    if (copy == NULL)
        return nomem(l);
    memcpy(copy, s, len);
    copy[len] = '\0';
    t->id_str[id] = copy;
    t->id_len[id] = len;
    t->id_added[id] = added;
    if (tok_strmap_put(&t->vocab, copy, len, id) != 0)
        return nomem(l);
    return AREAL_OK;
}

static int get_id(const loader *l, json_t *v, const char *field, int32_t *id) {
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= TOK_MAX_ID) {
        char msg[80];
        snprintf(msg, sizeof msg, "holds an id that is not an integer in [0, %d)", TOK_MAX_ID);
        return fail(l, field, msg);
    }
    *id = (int32_t)json_integer_value(v);
    return AREAL_OK;
}

static int load_vocab(const loader *l, json_t *vocab, json_t *added) {
    areal_tokenizer *t = l->tok;
    if (!json_is_object(vocab) || json_object_size(vocab) == 0)
        return fail(l, "model.vocab", "must be a non-empty object of token -> id");
    if (added != NULL && !json_is_null(added) && !json_is_array(added))
        return fail(l, "added_tokens", "must be a list");
    if (json_array_size(added) > TOK_MAX_ADDED)
        return fail(l, "added_tokens", "holds too many tokens");
    int32_t max_id = -1, id;
    const char *key;
    json_t *v;
    json_object_foreach(vocab, key, v) {
        if (get_id(l, v, "model.vocab", &id) != AREAL_OK)
            return AREAL_EINVAL;
        max_id = id > max_id ? id : max_id;
    }
    size_t i;
    json_array_foreach(added, i, v) {
        if (get_id(l, json_object_get(v, "id"), "added_tokens[].id", &id) != AREAL_OK)
            return AREAL_EINVAL;
        max_id = id > max_id ? id : max_id;
    }
    t->n_ids = (size_t)max_id + 1;
    t->id_str = calloc(t->n_ids, sizeof *t->id_str);
    t->id_len = calloc(t->n_ids, sizeof *t->id_len);
    t->id_added = calloc(t->n_ids, 1);
    if (t->id_str == NULL || t->id_len == NULL || t->id_added == NULL ||
        tok_strmap_init(&t->vocab, json_object_size(vocab) + json_array_size(added)) != 0)
        return nomem(l);
    json_object_foreach(vocab, key, v) {
        int rc = set_id(l, (int32_t)json_integer_value(v), key, strlen(key), 0, "model.vocab");
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

static int cmp_added(const void *a, const void *b) {
    const tok_added *x = a, *y = b;
    if (x->len != y->len)
        return x->len > y->len ? -1 : 1;
    return x->id - y->id;
}

static int load_added(const loader *l, json_t *added) {
    areal_tokenizer *t = l->tok;
    size_t n = json_array_size(added);
    t->added = calloc(n + 1, sizeof *t->added);
    if (t->added == NULL)
        return nomem(l);
    size_t i;
    json_t *v;
    json_array_foreach(added, i, v) {
        json_t *content = json_object_get(v, "content");
        if (!json_is_string(content) || json_string_length(content) == 0)
            return fail(l, "added_tokens[].content", "must be a non-empty string");
        const char *flags[] = {"lstrip", "rstrip", "single_word"};
        for (size_t k = 0; k < 3; k++) {
            json_t *f = json_object_get(v, flags[k]);
            if (f != NULL && !json_is_null(f) && !json_is_false(f)) {
                char field[64];
                snprintf(field, sizeof field, "added_tokens[%zu].%s", i, flags[k]);
                return fail(l, field,
                            "must be false (whitespace-absorbing added tokens are not "
                            "supported)");
            }
        }
        json_t *special = json_object_get(v, "special");
        if (special != NULL && !json_is_boolean(special))
            return fail(l, "added_tokens[].special", "must be true or false");
        int32_t id = (int32_t)json_integer_value(json_object_get(v, "id"));
        const char *s = json_string_value(content);
        size_t len = json_string_length(content);
        if (strlen(s) != len)
            return fail(l, "added_tokens[].content", "must not contain NUL");
        int rc = set_id(l, id, s, len, json_is_true(special) ? 2 : 1, "added_tokens");
        if (rc != AREAL_OK)
            return rc;
        tok_added *a = &t->added[t->n_added++];
        a->content = malloc(len + 1);
        if (a->content == NULL)
            return nomem(l);
        memcpy(a->content, s, len + 1);
        a->len = len;
        a->id = id;
        a->special = json_is_true(special);
        json_t *norm = json_object_get(v, "normalized");
        if (norm != NULL && !json_is_null(norm) && !json_is_boolean(norm))
            return fail(l, "added_tokens[].normalized", "must be true or false");
        a->normalized = json_is_true(norm);
        t->added_first[(uint8_t)s[0]] = true;
    }
    qsort(t->added, t->n_added, sizeof *t->added, cmp_added);
    return AREAL_OK;
}

/* Splits merge i into its two sides, either spelling. */
static int merge_sides(const loader *l, json_t *m, size_t i, const char **a, size_t *alen,
                       const char **b, size_t *blen) {
    char field[48];
    snprintf(field, sizeof field, "model.merges[%zu]", i);
    if (json_is_string(m)) {
        const char *s = json_string_value(m);
        const char *sp = strchr(s, ' ');
        if (sp == NULL || strchr(sp + 1, ' ') != NULL || sp == s || sp[1] == '\0')
            return fail(l, field, "must be \"left right\" with exactly one space");
        *a = s;
        *alen = (size_t)(sp - s);
        *b = sp + 1;
        *blen = strlen(sp + 1);
        return AREAL_OK;
    }
    if (json_is_array(m) && json_array_size(m) == 2 && json_is_string(json_array_get(m, 0)) &&
        json_is_string(json_array_get(m, 1))) {
        *a = json_string_value(json_array_get(m, 0));
        *alen = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *blen = json_string_length(json_array_get(m, 1));
        return AREAL_OK;
    }
    return fail(l, field, "must be a \"left right\" string or a [left, right] pair");
}

static int load_merges(const loader *l, json_t *merges) {
    areal_tokenizer *t = l->tok;
    if (!json_is_array(merges) || json_array_size(merges) == 0)
        return fail(l, "model.merges", "is missing or empty: a BPE model needs its merge list");
    if (json_array_size(merges) >= TOK_MAX_ID)
        return fail(l, "model.merges", "is too long");
    if (tok_pairmap_init(&t->merges, json_array_size(merges)) != 0)
        return nomem(l);
    size_t i;
    json_t *m;
    char buf[1024];
    json_array_foreach(merges, i, m) {
        const char *a = "", *b = "";
        size_t alen = 0, blen = 0;
        int rc = merge_sides(l, m, i, &a, &alen, &b, &blen);
        if (rc != AREAL_OK)
            return rc;
        int32_t ia = tok_strmap_get(&t->vocab, a, alen);
        int32_t ib = tok_strmap_get(&t->vocab, b, blen);
        if (alen + blen >= sizeof buf)
            return areal_error_set(l->err, AREAL_EINVAL, -1, "%s: model.merges[%zu] is too long",
                                   l->file, i);
        memcpy(buf, a, alen);
        memcpy(buf + alen, b, blen);
        int32_t im = tok_strmap_get(&t->vocab, buf, alen + blen);
        if (ia < 0 || ib < 0 || im < 0)
            return areal_error_set(l->err, AREAL_EINVAL, -1,
                                   "%s: model.merges[%zu] (\"%.*s\" + \"%.*s\") uses a token "
                                   "missing from model.vocab",
                                   l->file, i, (int)(alen > 40 ? 40 : alen), a,
                                   (int)(blen > 40 ? 40 : blen), b);
        if (tok_pairmap_put(&t->merges, ia, ib, (int32_t)i, im) != 0)
            return nomem(l);
    }
    t->n_merges = json_array_size(merges);
    return AREAL_OK;
}

static int load_normalizer(const loader *l, json_t *n) {
    if (n == NULL || json_is_null(n))
        return AREAL_OK;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (type != NULL && strcmp(type, "NFC") == 0) {
        l->tok->nfc = true;
        return AREAL_OK;
    }
    if (type != NULL && strcmp(type, "Sequence") == 0) {
        json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return fail(l, "normalizer.normalizers", "must be a list");
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v) {
            const char *t = json_string_value(json_object_get(v, "type"));
            if (t == NULL || strcmp(t, "NFC") != 0)
                return fail(l, "normalizer.normalizers[].type",
                            "must be \"NFC\" (the only "
                            "normalizer supported)");
            l->tok->nfc = true;
        }
        return AREAL_OK;
    }
    return fail(l, "normalizer.type", "must be null, \"NFC\" or a Sequence of NFC");
}

static int add_stage(const loader *l, const char *pattern, size_t len, const char *field) {
    areal_tokenizer *t = l->tok;
    if (t->n_stages == TOK_MAX_STAGES)
        return fail(l, field, "adds one regex stage too many");
    int code;
    PCRE2_SIZE off;
    pcre2_code *re =
        pcre2_compile((PCRE2_SPTR)pattern, len, PCRE2_UTF | PCRE2_UCP, &code, &off, NULL);
    if (re == NULL) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        return areal_error_set(l->err, AREAL_EINVAL, -1,
                               "%s: field \"%s\": regex does not compile at offset %zu: %s",
                               l->file, field, (size_t)off, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    t->stages[t->n_stages++] = re;
    return AREAL_OK;
}

/* A ByteLevel pre-tokenizer: its prefix-space flag and, with use_regex, the GPT-2 split. */
static int byte_level(const loader *l, json_t *p, bool regex_default) {
    json_t *aps = json_object_get(p, "add_prefix_space");
    json_t *ur = json_object_get(p, "use_regex");
    if ((aps != NULL && !json_is_boolean(aps)) || (ur != NULL && !json_is_boolean(ur)))
        return fail(l, "pre_tokenizer (ByteLevel)", "flags must be true or false");
    l->tok->add_prefix_space = json_is_true(aps);
    bool use_regex = ur == NULL ? regex_default : json_is_true(ur);
    return use_regex ? add_stage(l, gpt2_regex, sizeof gpt2_regex - 1, "pre_tokenizer.use_regex")
                     : AREAL_OK;
}

static int split_stage(const loader *l, json_t *p) {
    json_t *pat = json_object_get(p, "pattern");
    json_t *re = json_object_get(pat, "Regex");
    if (!json_is_string(re))
        return fail(l, "pre_tokenizer Split.pattern", "must be {\"Regex\": \"...\"}");
    const char *beh = json_string_value(json_object_get(p, "behavior"));
    if (beh == NULL || strcmp(beh, "Isolated") != 0)
        return fail(l, "pre_tokenizer Split.behavior", "must be \"Isolated\"");
    if (!is_null_or(json_object_get(p, "invert"), is_false))
        return fail(l, "pre_tokenizer Split.invert", "must be false");
    return add_stage(l, json_string_value(re), json_string_length(re),
                     "pre_tokenizer Split.pattern.Regex");
}

static int load_pre_tokenizer(const loader *l, json_t *p) {
    const char *type = json_string_value(json_object_get(p, "type"));
    if (type != NULL && strcmp(type, "ByteLevel") == 0)
        return byte_level(l, p, true);
    if (type == NULL || strcmp(type, "Sequence") != 0)
        return fail(l, "pre_tokenizer.type",
                    "must be \"ByteLevel\" or a \"Sequence\" of Split "
                    "stages ending in ByteLevel");
    json_t *list = json_object_get(p, "pretokenizers");
    size_t n = json_array_size(list);
    if (n == 0)
        return fail(l, "pre_tokenizer.pretokenizers", "must be a non-empty list");
    for (size_t i = 0; i < n; i++) {
        json_t *s = json_array_get(list, i);
        const char *t = json_string_value(json_object_get(s, "type"));
        int rc;
        if (t != NULL && strcmp(t, "Split") == 0 && i + 1 < n)
            rc = split_stage(l, s);
        else if (t != NULL && strcmp(t, "ByteLevel") == 0 && i + 1 == n)
            rc = byte_level(l, s, true);
        else
            rc = fail(l, "pre_tokenizer.pretokenizers[].type",
                      "must be Split (Regex, Isolated) stages followed by one ByteLevel");
        if (rc != AREAL_OK)
            return rc;
    }
    return AREAL_OK;
}

/*
 * The TemplateProcessing transformers 5 writes when nothing is added:
 * single [$A], pair [$A, $B] (or absent), no special tokens. It is the
 * identity, so it is accepted; one that adds a token (Llama's BOS) is not.
 */
static bool identity_template(json_t *post) {
    json_t *single = json_object_get(post, "single"), *pair = json_object_get(post, "pair");
    json_t *sp = json_object_get(post, "special_tokens");
    json_t *a = json_object_get(json_array_get(single, 0), "Sequence");
    if (json_array_size(single) != 1 || a == NULL ||
        strcmp(json_string_value(json_object_get(a, "id"))
                   ? json_string_value(json_object_get(a, "id"))
                   : "",
               "A") != 0)
        return false;
    if (sp != NULL && !json_is_null(sp) && !(json_is_object(sp) && json_object_size(sp) == 0))
        return false;
    size_t i;
    json_t *v;
    json_array_foreach(pair, i, v) {
        if (json_object_get(v, "Sequence") == NULL)
            return false; /* a special token between or around the pair */
    }
    return true;
}

static int check_rest(const loader *l, json_t *doc) {
    json_t *dec = json_object_get(doc, "decoder");
    const char *dt = json_string_value(json_object_get(dec, "type"));
    if (dt == NULL || strcmp(dt, "ByteLevel") != 0)
        return fail(l, "decoder.type", "must be \"ByteLevel\"");
    json_t *post = json_object_get(doc, "post_processor");
    const char *pt = json_string_value(json_object_get(post, "type"));
    if (post != NULL && !json_is_null(post) && (pt == NULL || strcmp(pt, "ByteLevel") != 0) &&
        !(pt != NULL && strcmp(pt, "TemplateProcessing") == 0 && identity_template(post)))
        return fail(l, "post_processor.type",
                    "must be null or \"ByteLevel\" (templates that add "
                    "tokens are not supported)");
    json_t *unk = json_object_get(json_object_get(doc, "model"), "unk_token");
    l->tok->unk_id = -1;
    if (unk != NULL && !json_is_null(unk)) {
        if (!json_is_string(unk))
            return fail(l, "model.unk_token", "must be a string or null");
        l->tok->unk_id =
            tok_strmap_get(&l->tok->vocab, json_string_value(unk), json_string_length(unk));
        if (l->tok->unk_id < 0)
            return fail(l, "model.unk_token", "names a token missing from model.vocab");
    }
    return AREAL_OK;
}

/*
 * An added token with normalized: true is matched by `tokenizers` in the
 * normalised text, after the tokens with normalized: false are cut out. With
 * no normalizer the two are the same thing, so it is honoured as is; under
 * NFC the match could differ for text that is not already NFC, and rather
 * than encode differently from HF such a token is refused by name.
 */
static int check_normalized(const loader *l) {
    const areal_tokenizer *t = l->tok;
    for (size_t i = 0; i < t->n_added && t->nfc; i++)
        if (t->added[i].normalized)
            return areal_error_set(l->err, AREAL_EINVAL, -1,
                                   "%s: added token \"%.60s\" (id %d) has normalized: true "
                                   "under the NFC normalizer, which is not supported; set it to "
                                   "false if the token must match the raw text",
                                   l->file, t->added[i].content, (int)t->added[i].id);
    return AREAL_OK;
}

static int build(const loader *l, json_t *doc) {
    if (!json_is_object(doc))
        return areal_error_set(l->err, AREAL_EINVAL, -1, "%s: must hold a JSON object", l->file);
    json_t *model = json_object_get(doc, "model");
    json_t *added = json_object_get(doc, "added_tokens");
    int rc;
    if ((rc = check_model(l, model)) ||
        (rc = load_vocab(l, json_object_get(model, "vocab"), added)) ||
        (rc = load_added(l, added)) || (rc = load_merges(l, json_object_get(model, "merges"))) ||
        (rc = load_normalizer(l, json_object_get(doc, "normalizer"))) ||
        (rc = load_pre_tokenizer(l, json_object_get(doc, "pre_tokenizer"))) ||
        (rc = check_rest(l, doc)) || (rc = check_normalized(l)))
        return rc;
    for (int b = 0; b < 256; b++) {
        char sp[2];
        size_t n = tok_byte_spell((uint8_t)b, sp);
        l->tok->byte_id[b] = tok_strmap_get(&l->tok->vocab, sp, n);
    }
    return AREAL_OK;
}

int areal_tokenizer_parse(const char *json, size_t len, const char *name, areal_tokenizer **out,
                          areal_error *err) {
    *out = NULL;
    json_t *doc = areal_json_parse(json, len, name, err);
    if (doc == NULL)
        return AREAL_EINVAL;
    areal_tokenizer *tok = calloc(1, sizeof *tok);
    loader l = {name, err, tok};
    int rc = tok ? build(&l, doc) : areal_error_set(err, AREAL_ENOMEM, -1, "out of memory");
    json_decref(doc);
    if (rc != AREAL_OK) {
        areal_tokenizer_free(tok);
        return rc;
    }
    *out = tok;
    return AREAL_OK;
}

int areal_tokenizer_load(const char *path, areal_tokenizer **out, areal_error *err) {
    char *text;
    size_t len;
    *out = NULL;
    int rc = areal_read_file(path, AREAL_MODEL_JSON_MAX, &text, &len, err);
    if (rc != AREAL_OK)
        return rc;
    rc = areal_tokenizer_parse(text, len, path, out, err);
    free(text);
    return rc;
}

size_t areal_tokenizer_size(const areal_tokenizer *tok) {
    return tok->n_ids;
}

size_t areal_tokenizer_merges(const areal_tokenizer *tok) {
    return tok->n_merges;
}

int32_t areal_tokenizer_token_id(const areal_tokenizer *tok, const char *token) {
    return tok_strmap_get(&tok->vocab, token, strlen(token));
}
