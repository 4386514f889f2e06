/*
 * test_tokenizer.c - byte-level BPE against the ids HF `tokenizers` gave for
 * the fixture corpus (model/fixtures/make_fixtures.py), both merge spellings,
 * decoding, the chat format and every refusal of a bad tokenizer.json.
 */
#include <jansson.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/model/chat.h"
#include "areal/model/tokenizer.h"
#include "model_test_util.h"

static areal_tokenizer *load(const char *path) {
    areal_tokenizer *tok = NULL;
    areal_error err;
    int rc = areal_tokenizer_load(path, &tok, &err);
    if (rc != AREAL_OK)
        fail_msg("%s", err.msg);
    return tok;
}

/* Encodes every corpus line and compares with HF; returns the number of lines. */
static size_t check_corpus(const areal_tokenizer *tok, bool check_decode) {
    FILE *f = fopen(FIX "tok/corpus.jsonl", "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0, lines = 0;
    while (getline(&line, &cap, f) > 0) {
        json_error_t je;
        json_t *d = json_loads(line, 0, &je);
        assert_non_null(d);
        json_t *text = json_object_get(d, "text"), *want = json_object_get(d, "ids");
        int32_t *ids;
        size_t n;
        areal_error err;
        assert_int_equal(areal_tokenizer_encode(tok, json_string_value(text),
                                                json_string_length(text), &ids, &n, &err),
                         AREAL_OK);
        if (n != json_array_size(want))
            fail_msg("line %zu: %zu ids, HF gives %zu: %s", lines + 1, n, json_array_size(want),
                     json_string_value(text));
        for (size_t i = 0; i < n; i++) {
            if (ids[i] != json_integer_value(json_array_get(want, i)))
                fail_msg("line %zu id %zu: %d, HF gives %lld", lines + 1, i, ids[i],
                         (long long)json_integer_value(json_array_get(want, i)));
        }
        if (check_decode) {
            char *back;
            size_t blen;
            assert_int_equal(areal_tokenizer_decode(tok, ids, n, false, &back, &blen, &err),
                             AREAL_OK);
            json_t *dec = json_object_get(d, "decoded");
            assert_int_equal(blen, json_string_length(dec));
            assert_memory_equal(back, json_string_value(dec), blen);
            free(back);
        }
        free(ids);
        json_decref(d);
        lines++;
    }
    free(line);
    fclose(f);
    return lines;
}

static void corpus_ids_equal_hf(void **state) {
    (void)state;
    areal_tokenizer *tok = load(FIX "tok/tokenizer.json");
    assert_true(areal_tokenizer_merges(tok) > 0);
    assert_true(check_corpus(tok, true) >= 200);
    areal_tokenizer_free(tok);
}

static void legacy_merge_spelling_gives_same_ids(void **state) {
    (void)state;
    areal_tokenizer *a = load(FIX "tok/tokenizer.json");
    areal_tokenizer *b = load(FIX "tok/tokenizer-legacy.json");
    assert_int_equal(areal_tokenizer_merges(a), areal_tokenizer_merges(b));
    assert_true(check_corpus(b, false) >= 200);
    areal_tokenizer_free(a);
    areal_tokenizer_free(b);
}

static void special_tokens_split_and_skip(void **state) {
    (void)state;
    areal_tokenizer *tok = load(FIX "tok/tokenizer.json");
    int32_t end = areal_tokenizer_token_id(tok, "<|im_end|>");
    int32_t start = areal_tokenizer_token_id(tok, "<|im_start|>");
    assert_true(end >= 0 && start >= 0 && end != start);
    assert_int_equal(areal_tokenizer_token_id(tok, "<|no such token|>"), -1);
    const char *text = "a<|im_start|><|im_end|>b";
    int32_t *ids;
    size_t n;
    areal_error err;
    assert_int_equal(areal_tokenizer_encode(tok, text, strlen(text), &ids, &n, &err), AREAL_OK);
    assert_int_equal(n, 4);
    assert_int_equal(ids[1], start);
    assert_int_equal(ids[2], end);
    char *out;
    size_t len;
    assert_int_equal(areal_tokenizer_decode(tok, ids, n, true, &out, &len, &err), AREAL_OK);
    assert_string_equal(out, "ab");
    free(out);
    assert_int_equal(areal_tokenizer_decode(tok, ids, n, false, &out, &len, &err), AREAL_OK);
    assert_string_equal(out, text);
    free(out);
    free(ids);
    /* ids past the tokenizer (a padded vocabulary's padding rows) spell nothing, as in HF */
    int32_t pad[] = {(int32_t)areal_tokenizer_size(tok), start,
                     (int32_t)areal_tokenizer_size(tok) + 7};
    assert_int_equal(areal_tokenizer_decode(tok, pad, 3, false, &out, &len, &err), AREAL_OK);
    assert_string_equal(out, "<|im_start|>");
    free(out);
    int32_t bad[] = {0, -1};
    assert_int_equal(areal_tokenizer_decode(tok, bad, 2, false, &out, &len, &err), AREAL_ERANGE);
    assert_non_null(strstr(err.msg, "position 1"));
    assert_null(out);
    areal_tokenizer_free(tok);
}

static void empty_text_and_invalid_utf8(void **state) {
    (void)state;
    areal_tokenizer *tok = load(FIX "tok/tokenizer.json");
    int32_t *ids;
    size_t n;
    areal_error err;
    assert_int_equal(areal_tokenizer_encode(tok, "", 0, &ids, &n, &err), AREAL_OK);
    assert_int_equal(n, 0);
    assert_non_null(ids);
    free(ids);
    const char bad[] = "ok\xff\xfe";
    assert_int_equal(areal_tokenizer_encode(tok, bad, 4, &ids, &n, &err), AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "UTF-8 at byte 2"));
    assert_null(ids);
    areal_tokenizer_free(tok);
}

static void chat_format_matches_fixture(void **state) {
    (void)state;
    areal_tokenizer *tok = load(FIX "tok/tokenizer.json");
    FILE *f = fopen(FIX "tok/chat.jsonl", "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0, convs = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *d = json_loads(line, 0, NULL);
        json_t *msgs = json_object_get(d, "messages");
        areal_chat_msg m[8];
        size_t k = json_array_size(msgs);
        assert_true(k <= 8);
        for (size_t i = 0; i < k; i++) {
            m[i].role = json_string_value(json_object_get(json_array_get(msgs, i), "role"));
            m[i].content = json_string_value(json_object_get(json_array_get(msgs, i), "content"));
            m[i].reasoning_content = NULL;
        }
        char *text;
        size_t len;
        areal_error err;
        assert_int_equal(areal_chat_render(&areal_chat_chatml, m, k, true, true, &text, &len, &err),
                         AREAL_OK);
        assert_string_equal(text, json_string_value(json_object_get(d, "text")));
        int32_t *ids;
        size_t n;
        assert_int_equal(areal_tokenizer_encode(tok, text, len, &ids, &n, &err), AREAL_OK);
        json_t *want = json_object_get(d, "ids");
        assert_int_equal(n, json_array_size(want));
        for (size_t i = 0; i < n; i++)
            assert_int_equal(ids[i], json_integer_value(json_array_get(want, i)));
        free(ids);
        free(text);
        json_decref(d);
        convs++;
    }
    free(line);
    fclose(f);
    assert_int_equal(convs, 3);
    areal_chat_msg bad = {"user", NULL, NULL};
    char *text;
    size_t len;
    areal_error err;
    assert_int_equal(areal_chat_render(&areal_chat_chatml, &bad, 1, false, true, &text, &len, &err),
                     AREAL_EINVAL);
    assert_int_equal(areal_chat_render(&areal_chat_chatml, NULL, 0, false, true, &text, &len, &err),
                     AREAL_OK);
    assert_string_equal(text, "");
    free(text);
    areal_tokenizer_free(tok);
}

typedef struct job {
    const areal_tokenizer *tok;
    size_t lines;
} job;

static void *encode_thread(void *p) {
    job *j = p;
    j->lines = check_corpus(j->tok, false);
    return NULL;
}

static void concurrent_encoders_agree(void **state) {
    (void)state;
    areal_tokenizer *tok = load(FIX "tok/tokenizer.json");
    pthread_t th[2];
    job jobs[2] = {{tok, 0}, {tok, 0}};
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&th[i], NULL, encode_thread, &jobs[i]), 0);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    assert_true(jobs[0].lines >= 200 && jobs[1].lines == jobs[0].lines);
    areal_tokenizer_free(tok);
}

/* Loads the fixture, applies `edit` to its JSON and expects a refusal mentioning `needle`. */
static void expect_refusal(void (*edit)(json_t *), const char *needle) {
    json_t *doc = json_load_file(FIX "tok/tokenizer.json", 0, NULL);
    assert_non_null(doc);
    edit(doc);
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    areal_tokenizer *tok = (areal_tokenizer *)1;
    areal_error err;
    int rc = areal_tokenizer_parse(text, strlen(text), "edited.json", &tok, &err);
    free(text);
    assert_int_equal(rc, AREAL_EINVAL);
    assert_null(tok);
    if (strstr(err.msg, needle) == NULL || strstr(err.msg, "edited.json") == NULL)
        fail_msg("message lacks \"%s\" or the file name: %s", needle, err.msg);
}

static json_t *model_of(json_t *doc) {
    return json_object_get(doc, "model");
}
static void empty_merges(json_t *d) {
    json_object_set_new(model_of(d), "merges", json_array());
}
static void no_merges(json_t *d) {
    json_object_del(model_of(d), "merges");
}
static void merge_with_unknown_token(json_t *d) {
    json_array_set_new(json_object_get(model_of(d), "merges"), 3, json_string("zz\xc4\xa0 qq"));
}
static void merge_three_parts(json_t *d) {
    json_array_set_new(json_object_get(model_of(d), "merges"), 0, json_string("a b c"));
}
static void merge_bad_pair(json_t *d) {
    json_t *p = json_array();
    json_array_append_new(p, json_string("a"));
    json_array_set_new(json_object_get(model_of(d), "merges"), 0, p);
}
static void wordpiece_model(json_t *d) {
    json_object_set_new(model_of(d), "type", json_string("WordPiece"));
}
static void dropout(json_t *d) {
    json_object_set_new(model_of(d), "dropout", json_real(0.1));
}
static void byte_fallback(json_t *d) {
    json_object_set_new(model_of(d), "byte_fallback", json_true());
}
static void nfkc(json_t *d) {
    json_t *n = json_object();
    json_object_set_new(n, "type", json_string("NFKC"));
    json_object_set_new(d, "normalizer", n);
}
static void bad_regex(json_t *d) {
    json_t *split =
        json_array_get(json_object_get(json_object_get(d, "pre_tokenizer"), "pretokenizers"), 0);
    json_object_set_new(json_object_get(split, "pattern"), "Regex", json_string("(\\p{L}+"));
}
static void merged_behavior(json_t *d) {
    json_t *split =
        json_array_get(json_object_get(json_object_get(d, "pre_tokenizer"), "pretokenizers"), 0);
    json_object_set_new(split, "behavior", json_string("MergedWithPrevious"));
}
static void lstrip_added(json_t *d) {
    json_object_set_new(json_array_get(json_object_get(d, "added_tokens"), 0), "lstrip",
                        json_true());
}
static void wordpiece_decoder(json_t *d) {
    json_t *n = json_object();
    json_object_set_new(n, "type", json_string("WordPiece"));
    json_object_set_new(d, "decoder", n);
}
static void template_post(json_t *d) {
    json_t *n = json_object();
    json_object_set_new(n, "type", json_string("TemplateProcessing"));
    json_object_set_new(d, "post_processor", n);
}
static void negative_id(json_t *d) {
    json_object_set_new(json_object_get(model_of(d), "vocab"), "!", json_integer(-5));
}
static void clashing_added_id(json_t *d) {
    json_object_set_new(json_array_get(json_object_get(d, "added_tokens"), 0), "id",
                        json_integer(5));
}
static void unknown_unk(json_t *d) {
    json_object_set_new(model_of(d), "unk_token", json_string("<unk-missing>"));
}

static void bad_tokenizer_files_are_refused(void **state) {
    (void)state;
    expect_refusal(empty_merges, "model.merges");
    expect_refusal(no_merges, "model.merges");
    expect_refusal(merge_with_unknown_token, "model.merges[3]");
    expect_refusal(merge_three_parts, "model.merges[0]");
    expect_refusal(merge_bad_pair, "model.merges[0]");
    expect_refusal(wordpiece_model, "model.type");
    expect_refusal(dropout, "model.dropout");
    expect_refusal(byte_fallback, "model.byte_fallback");
    expect_refusal(nfkc, "normalizer");
    expect_refusal(bad_regex, "Regex");
    expect_refusal(merged_behavior, "behavior");
    expect_refusal(lstrip_added, "added_tokens[0].lstrip");
    expect_refusal(wordpiece_decoder, "decoder.type");
    expect_refusal(template_post, "post_processor");
    expect_refusal(negative_id, "model.vocab");
    expect_refusal(clashing_added_id, "id 5");
    expect_refusal(unknown_unk, "model.unk_token");
}

static void malformed_and_missing_files(void **state) {
    (void)state;
    areal_tokenizer *tok;
    areal_error err;
    const char *bad = "{\"model\": {\"vocab\": {\"a\": 0,}}";
    assert_int_equal(areal_tokenizer_parse(bad, strlen(bad), "broken.json", &tok, &err),
                     AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "broken.json"));
    assert_non_null(strstr(err.msg, "line 1"));
    const char *dup = "{\"model\": {\"vocab\": {\"a\": 0, \"a\": 1}}}";
    assert_int_equal(areal_tokenizer_parse(dup, strlen(dup), "dup.json", &tok, &err), AREAL_EINVAL);
    assert_int_equal(areal_tokenizer_load(FIX "tok/no-such-file.json", &tok, &err), AREAL_EIO);
    assert_non_null(strstr(err.msg, "no-such-file.json"));
    assert_null(tok);
}

/* A hand-written GPT-2 style tokenizer: ByteLevel with its own regex and prefix space. */
static void bytelevel_only_pre_tokenizer(void **state) {
    (void)state;
    json_t *doc = json_load_file(FIX "tok/tokenizer.json", 0, NULL);
    json_t *bl = json_object();
    json_object_set_new(bl, "type", json_string("ByteLevel"));
    json_object_set_new(bl, "add_prefix_space", json_true());
    json_object_set_new(bl, "use_regex", json_true());
    json_object_set_new(doc, "pre_tokenizer", bl);
    json_object_set_new(doc, "normalizer", json_null());
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    areal_tokenizer *tok;
    areal_error err;
    assert_int_equal(areal_tokenizer_parse(text, strlen(text), "gpt2.json", &tok, &err), AREAL_OK);
    free(text);
    int32_t *ids;
    size_t n;
    /* with the prefix space, "Hello" encodes like " Hello" */
    assert_int_equal(areal_tokenizer_encode(tok, "Hello", 5, &ids, &n, &err), AREAL_OK);
    int32_t *ids2;
    size_t n2;
    assert_int_equal(areal_tokenizer_encode(tok, " Hello", 6, &ids2, &n2, &err), AREAL_OK);
    assert_int_equal(n, n2);
    assert_memory_equal(ids, ids2, n * sizeof *ids);
    char *out;
    size_t len;
    assert_int_equal(areal_tokenizer_decode(tok, ids, n, false, &out, &len, &err), AREAL_OK);
    assert_string_equal(out, " Hello");
    free(out);
    free(ids);
    free(ids2);
    areal_tokenizer_free(tok);
}

/* One very long word: the BPE loop must stay fast and the ids must spell the text. */
static void long_word_round_trips(void **state) {
    (void)state;
    areal_tokenizer *tok = load(FIX "tok/tokenizer.json");
    size_t len = 200000;
    char *text = malloc(len + 1);
    for (size_t i = 0; i < len; i++)
        text[i] = "learning"[i % 8];
    text[len] = '\0';
    int32_t *ids;
    size_t n;
    areal_error err;
    assert_int_equal(areal_tokenizer_encode(tok, text, len, &ids, &n, &err), AREAL_OK);
    assert_true(n > 0 && n < len / 2); /* merges happened */
    char *back;
    size_t blen;
    assert_int_equal(areal_tokenizer_decode(tok, ids, n, false, &back, &blen, &err), AREAL_OK);
    assert_int_equal(blen, len);
    assert_memory_equal(back, text, len);
    free(back);
    free(ids);
    free(text);
    areal_tokenizer_free(tok);
}

/* areal_utf8_replace equals Python's bytes.decode("utf-8", errors="replace") (fixture). */
static void utf8_replacement_equals_python(void **state) {
    (void)state;
    json_t *cases = json_load_file(FIX "hf/utf8.json", 0, NULL);
    assert_true(json_array_size(cases) >= 20);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c) {
        const char *hex = json_string_value(json_array_get(c, 0));
        uint8_t raw[64];
        size_t n = strlen(hex) / 2;
        for (size_t k = 0; k < n; k++) {
            unsigned v;
            sscanf(hex + 2 * k, "%2x", &v);
            raw[k] = (uint8_t)v;
        }
        size_t len;
        char *got = areal_utf8_replace((const char *)raw, n, &len);
        const char *want = json_string_value(json_array_get(c, 1));
        if (strcmp(got, want) != 0 || len != strlen(want))
            fail_msg("%s: got %s, Python %s", hex, got, want);
        free(got);
    }
    json_decref(cases);
}

/* normalized: true under NFC is refused naming the token; without a normalizer it loads. */
static void normalized_added_tokens(void **state) {
    (void)state;
    json_t *doc = json_load_file(FIX "tok/tokenizer.json", 0, NULL);
    json_t *added = json_object_get(doc, "added_tokens");
    json_object_set_new(json_array_get(added, 2), "normalized", json_true());
    char *text = json_dumps(doc, 0);
    areal_tokenizer *tok;
    areal_error err;
    assert_int_equal(areal_tokenizer_parse(text, strlen(text), "t.json", &tok, &err), AREAL_EINVAL);
    assert_non_null(
        strstr(err.msg, json_string_value(json_object_get(json_array_get(added, 2), "content"))));
    assert_non_null(strstr(err.msg, "normalized"));
    free(text);
    json_object_set_new(doc, "normalizer", json_null());
    text = json_dumps(doc, 0);
    assert_int_equal(areal_tokenizer_parse(text, strlen(text), "t.json", &tok, &err), AREAL_OK);
    areal_tokenizer_free(tok);
    free(text);
    json_decref(doc);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(utf8_replacement_equals_python),
        cmocka_unit_test(normalized_added_tokens),
        cmocka_unit_test(corpus_ids_equal_hf),
        cmocka_unit_test(legacy_merge_spelling_gives_same_ids),
        cmocka_unit_test(special_tokens_split_and_skip),
        cmocka_unit_test(empty_text_and_invalid_utf8),
        cmocka_unit_test(chat_format_matches_fixture),
        cmocka_unit_test(concurrent_encoders_agree),
        cmocka_unit_test(bad_tokenizer_files_are_refused),
        cmocka_unit_test(malformed_and_missing_files),
        cmocka_unit_test(bytelevel_only_pre_tokenizer),
        cmocka_unit_test(long_word_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
