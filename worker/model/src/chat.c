/*
 * chat.c - finding and recognising a model's chat template (see chat.h).
 *
 * A template is known by the FNV-1a hash and length of its text with leading
 * and trailing whitespace trimmed; the table holds the templates as the
 * models' files spell them (model/fixtures/chat_templates.py has the texts,
 * and the fixture script checks them against transformers). A hash was
 * chosen over embedding the texts (4 KB each) since only equality matters.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/model/chat.h"
#include "file_util.h"

const areal_chat_template areal_chat_chatml = {AREAL_CHAT_CHATML, "chatml"};

static const struct known {
    uint64_t hash;
    size_t len;
    areal_chat_kind kind;
    const char *name;
} known[] = {
    {0xe642ce246d7f2e3dull, 2506, AREAL_CHAT_QWEN25, "qwen2.5"},
    {0x2bfdb7aa9754484eull, 4116, AREAL_CHAT_QWEN3, "qwen3"},
    {0xa41d6bae9b9141bcull, 199, AREAL_CHAT_CHATML, "chatml"},
};

static uint64_t fnv1a(const char *s, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)s[i]) * 0x100000001b3ull;
    return h;
}

static bool space(char c) {
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

int areal_chat_template_parse(const char *text, size_t len, const char *source,
                              areal_chat_template *t, areal_error *err) {
    while (len > 0 && space(text[0]))
        text++, len--;
    while (len > 0 && space(text[len - 1]))
        len--;
    uint64_t h = fnv1a(text, len);
    for (size_t i = 0; i < sizeof known / sizeof *known; i++)
        if (known[i].hash == h && known[i].len == len) {
            t->kind = known[i].kind;
            t->name = known[i].name;
            return AREAL_OK;
        }
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "%s: the chat template (%zu bytes) is not one this runtime renders "
                           "natively (Qwen2.5, Qwen3, ChatML, as their model files spell them); "
                           "give --chat-template FILE with one of those, or send token ids",
                           source, len);
}

/* The "chat_template" of a JSON document: a string or the "default" of a list. */
static int from_json(json_t *doc, const char *source, areal_chat_template *t, bool *found,
                     areal_error *err) {
    *found = true;
    json_t *ct = json_object_get(doc, "chat_template");
    if (json_is_array(ct)) {
        size_t i;
        json_t *v;
        json_t *def = NULL;
        json_array_foreach(ct, i, v) {
            const char *name = json_string_value(json_object_get(v, "name"));
            if (name != NULL && strcmp(name, "default") == 0)
                def = json_object_get(v, "template");
        }
        ct = def;
    }
    if (ct == NULL || json_is_null(ct)) {
        *found = false;
        return AREAL_OK;
    }
    if (!json_is_string(ct))
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s: field \"chat_template\" must be a string or a list of "
                               "{name, template}",
                               source);
    return areal_chat_template_parse(json_string_value(ct), json_string_length(ct), source, t, err);
}

static int from_text_file(const char *path, bool json, areal_chat_template *t, bool *found,
                          areal_error *err) {
    *found = true;
    char *text;
    size_t len;
    int rc = areal_read_file(path, AREAL_MODEL_JSON_MAX, &text, &len, err);
    if (rc != AREAL_OK)
        return rc;
    if (!json) {
        rc = areal_chat_template_parse(text, len, path, t, err);
        free(text);
        return rc;
    }
    json_t *doc = areal_json_parse(text, len, path, err);
    free(text);
    if (doc == NULL)
        return AREAL_EINVAL;
    rc = from_json(doc, path, t, found, err);
    json_decref(doc);
    return rc;
}

int areal_chat_template_load(const char *dir, areal_chat_template *t, bool *found,
                             areal_error *err) {
    char path[4096];
    struct stat st;
    *found = false;
    snprintf(path, sizeof path, "%s/chat_template.jinja", dir);
    if (stat(path, &st) == 0)
        return from_text_file(path, false, t, found, err);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (stat(path, &st) == 0)
        return from_text_file(path, true, t, found, err);
    return AREAL_OK;
}

int areal_chat_template_file(const char *path, areal_chat_template *t, areal_error *err) {
    char *text;
    size_t len;
    int rc = areal_read_file(path, AREAL_MODEL_JSON_MAX, &text, &len, err);
    if (rc != AREAL_OK)
        return rc;
    size_t i = 0;
    while (i < len && space(text[i]))
        i++;
    bool json = i < len && text[i] == '{' && strstr(text, "\"chat_template\"") != NULL;
    free(text);
    bool found;
    rc = from_text_file(path, json, t, &found, err);
    if (rc == AREAL_OK && !found)
        rc = areal_error_set(err, AREAL_EINVAL, -1, "%s: holds no chat_template", path);
    return rc;
}
