/*
 * tiny.c - the project's own tiny model: tokenizer.json, config.json and
 * random-init weights (see tiny.h).
 *
 * The vocabulary is the byte-level spelling of every character the synthetic
 * task and short English prompts use: digits (each digit is its own
 * pre-tokenizer piece under Qwen's regex, so numbers are digit sequences),
 * + - * = ( ) . , : ? #, space ("Ġ") and newline ("Ċ"), a-z, and one merge
 * ("a n") because the tokenizer core rightly refuses a BPE without merges.
 * Bytes outside it are dropped by the encoder, as `tokenizers` does.
 * Special tokens come last, so ids of ordinary characters are stable.
 */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"
#include "areal/train/hf_save.h"
#include "areal/train/tiny.h"

static const char *const tiny_specials[] = {AREAL_TINY_EOS, "<|im_start|>", "<|im_end|>"};

areal_tiny_cfg areal_tiny_default(void) {
    areal_tiny_cfg t = {64, 256, 2, 4, 2, 1};
    return t;
}

/* The ordinary tokens in id order (byte-level spellings). */
static json_t *tiny_vocab(int *n) {
    json_t *v = json_object();
    int id = 0;
    const char *chars = "0123456789+-*=().,:?#";
    char s[4] = {0};
    for (const char *c = chars; *c; c++) {
        s[0] = *c;
        json_object_set_new(v, s, json_integer(id++));
    }
    json_object_set_new(v, "\xc4\xa0", json_integer(id++)); /* "Ġ" = space */
    json_object_set_new(v, "\xc4\x8a", json_integer(id++)); /* "Ċ" = newline */
    for (char c = 'a'; c <= 'z'; c++) {
        s[0] = c;
        json_object_set_new(v, s, json_integer(id++));
    }
    json_object_set_new(v, "an", json_integer(id++));
    *n = id;
    return v;
}

int areal_tiny_tokenizer_json(char **out, int *vocab, areal_error *err) {
    int n = 0;
    json_t *v = tiny_vocab(&n);
    json_t *added = json_array();
    for (size_t i = 0; i < sizeof tiny_specials / sizeof *tiny_specials; i++)
        json_array_append_new(added,
                              json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", n + (int)i,
                                        "content", tiny_specials[i], "single_word", 0, "lstrip", 0,
                                        "rstrip", 0, "normalized", 0, "special", 1));
    const char *regex = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
                        "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
    json_t *doc = json_pack(
        "{s:s,s:n,s:n,s:o,s:{s:s},s:{s:s,s:[{s:s,s:{s:s},s:s,s:b},{s:s,s:b,s:b,s:b}]},s:n,"
        "s:{s:s,s:b,s:b,s:b},s:{s:s,s:n,s:n,s:n,s:n,s:b,s:b,s:b,s:o,s:[s]}}",
        "version", "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
        "NFC", "pre_tokenizer", "type", "Sequence", "pretokenizers", "type", "Split", "pattern",
        "Regex", regex, "behavior", "Isolated", "invert", 0, "type", "ByteLevel",
        "add_prefix_space", 0, "trim_offsets", 0, "use_regex", 0, "post_processor", "decoder",
        "type", "ByteLevel", "add_prefix_space", 1, "trim_offsets", 1, "use_regex", 1, "model",
        "type", "BPE", "dropout", "unk_token", "continuing_subword_prefix", "end_of_word_suffix",
        "fuse_unk", 0, "byte_fallback", 0, "ignore_merges", 0, "vocab", v, "merges", "a n");
    char *text = doc ? json_dumps(doc, JSON_INDENT(2)) : NULL;
    json_decref(doc);
    *out = text;
    if (text == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for the tiny tokenizer");
    if (vocab)
        *vocab = n + (int)(sizeof tiny_specials / sizeof *tiny_specials);
    return AREAL_OK;
}

static int tiny_vocab_size(void) {
    int n = 0;
    json_decref(tiny_vocab(&n));
    return n + (int)(sizeof tiny_specials / sizeof *tiny_specials);
}

int areal_tiny_model_config(const areal_tiny_cfg *t, areal_model_config *c, areal_error *err) {
    if (t->hidden_size < 8 || t->num_heads < 1 || t->hidden_size % t->num_heads != 0 ||
        (t->hidden_size / t->num_heads) % 2 != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "tiny model: hidden_size %d must be >= 8 and split into num_heads "
                               "%d heads of an even size",
                               t->hidden_size, t->num_heads);
    if (t->num_kv_heads < 1 || t->num_heads % t->num_kv_heads != 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "tiny model: num_kv_heads %d must divide num_heads %d",
                               t->num_kv_heads, t->num_heads);
    if (t->num_layers < 1 || t->num_layers > 64 || t->intermediate_size < 1)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "tiny model: num_layers must be 1..64 and intermediate_size >= 1");
    memset(c, 0, sizeof *c);
    c->arch = AREAL_ARCH_QWEN2;
    snprintf(c->model_type, sizeof c->model_type, "qwen2");
    c->vocab_size = tiny_vocab_size();
    c->hidden_size = t->hidden_size;
    c->intermediate_size = t->intermediate_size;
    c->num_layers = t->num_layers;
    c->num_heads = t->num_heads;
    c->num_kv_heads = t->num_kv_heads;
    c->head_dim = t->hidden_size / t->num_heads;
    c->max_position_embeddings = 256;
    c->rms_norm_eps = 1e-6;
    c->rope_theta = 10000;
    c->tie_word_embeddings = true;
    c->qkv_bias = true;
    return AREAL_OK;
}

/* A standard normal draw (Box-Muller on the model core's seeded stream). */
static float normal(areal_rng *r) {
    double u1 = areal_rng_uniform(r), u2 = areal_rng_uniform(r);
    if (u1 < 1e-12)
        u1 = 1e-12;
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

static int ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

void areal_tiny_init_weights(areal_model *m, uint64_t seed) {
    areal_rng r;
    areal_rng_seed(&r, seed, 0);
    for (size_t i = 0; i < m->n_specs; i++) {
        const areal_tensor_spec *s = &m->specs[i];
        size_t n = (size_t)s->shape[0] * (size_t)(s->ndim == 2 ? s->shape[1] : 1);
        float *p = m->params + m->offset[i];
        int is_norm = ends_with(s->name, "norm.weight");
        for (size_t k = 0; k < n; k++)
            p[k] = s->ndim == 2 ? 0.02f * normal(&r) : (is_norm ? 1.0f : 0.0f);
    }
}

static int write_text(const char *dir, const char *name, const char *text, areal_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    int bad = f == NULL || fputs(text, f) == EOF;
    if (f != NULL && fclose(f) != 0)
        bad = 1;
    return bad ? areal_error_set(err, AREAL_EIO, -1, "%s: cannot write", path) : AREAL_OK;
}

static int write_config(const char *dir, const areal_model_config *c, areal_error *err) {
    json_t *doc = json_pack(
        "{s:[s],s:f,s:i,s:i,s:s,s:i,s:i,s:i,s:s,s:i,s:i,s:i,s:f,s:f,s:b,s:s,s:b,s:i}",
        "architectures", "Qwen2ForCausalLM", "attention_dropout", 0.0, "bos_token_id",
        c->vocab_size - 3, "eos_token_id", c->vocab_size - 3, "hidden_act", "silu", "hidden_size",
        c->hidden_size, "intermediate_size", c->intermediate_size, "max_position_embeddings",
        (int)c->max_position_embeddings, "model_type", "qwen2", "num_attention_heads", c->num_heads,
        "num_hidden_layers", c->num_layers, "num_key_value_heads", c->num_kv_heads, "rms_norm_eps",
        c->rms_norm_eps, "rope_theta", c->rope_theta, "tie_word_embeddings", 1, "torch_dtype",
        "float32", "use_sliding_window", 0, "vocab_size", c->vocab_size);
    char *text = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_SORT_KEYS) : NULL;
    json_decref(doc);
    if (text == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1, "no memory for config.json");
    int rc = write_text(dir, "config.json", text, err);
    free(text);
    return rc;
}

int areal_tiny_create(const char *dir, const areal_tiny_cfg *t, areal_error *err) {
    areal_model_config cfg;
    int rc = areal_tiny_model_config(t, &cfg, err);
    if (rc != AREAL_OK)
        return rc;
    char *tok = NULL;
    if ((rc = areal_tiny_tokenizer_json(&tok, NULL, err)) != AREAL_OK)
        return rc;
    rc = write_text(dir, "tokenizer.json", tok, err);
    free(tok);
    if (rc == AREAL_OK)
        rc = write_config(dir, &cfg, err);
    if (rc != AREAL_OK)
        return rc;
    areal_model m;
    if ((rc = areal_model_init(&m, &cfg, NULL, err)) != AREAL_OK)
        return rc;
    areal_tiny_init_weights(&m, t->seed);
    rc = areal_hf_save_weights(&m, dir, err);
    areal_model_free(&m);
    return rc;
}
