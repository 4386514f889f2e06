/*
 * test_chat.c - the native chat templates against transformers'
 * apply_chat_template: every conversation of hf/chat/cases.jsonl (system
 * prompts, multi-turn, empty messages, unicode, thinking blocks, tool
 * responses; with and without the generation prompt and enable_thinking),
 * rendered by make_hf_fixtures.py from the template text in
 * hf/chat/tokenizer_config-<name>.json, must come out byte for byte. Also:
 * the template transformers 5 saved as chat_template.jinja is found, an
 * unknown template is refused by name, and the --chat-template override.
 */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "areal/model/chat.h"
#include "areal/model/cmd.h"
#include "model_test_util.h"

static void renders_like_transformers(void **state) {
    (void)state;
    FILE *f = fopen(FIX "hf/chat/cases.jsonl", "r");
    assert_non_null(f);
    char *line = NULL;
    size_t cap = 0;
    int per[3] = {0}, convs = 0;
    while (getline(&line, &cap, f) > 0) {
        json_t *d = json_loads(line, 0, NULL);
        const char *name = json_string_value(json_object_get(d, "template"));
        char path[256];
        snprintf(path, sizeof path, FIX "hf/chat/tokenizer_config-%s.json", name);
        areal_chat_template t;
        areal_error err;
        if (areal_chat_template_file(path, &t, &err) != AREAL_OK)
            fail_msg("%s", err.msg);
        assert_string_equal(t.name, name);
        json_t *msgs = json_object_get(d, "messages");
        size_t n = json_array_size(msgs);
        areal_chat_msg m[8];
        assert_true(n <= 8);
        for (size_t i = 0; i < n; i++) {
            json_t *o = json_array_get(msgs, i);
            m[i].role = json_string_value(json_object_get(o, "role"));
            m[i].content = json_string_value(json_object_get(o, "content"));
            m[i].reasoning_content = json_string_value(json_object_get(o, "reasoning_content"));
        }
        bool agp = json_is_true(json_object_get(d, "add_generation_prompt"));
        bool think = !json_is_false(json_object_get(d, "enable_thinking"));
        char *text;
        size_t len;
        assert_int_equal(areal_chat_render(&t, m, n, agp, think, &text, &len, &err), AREAL_OK);
        const char *want = json_string_value(json_object_get(d, "text"));
        if (strcmp(text, want) != 0 || len != strlen(want))
            fail_msg("%s case %d:\n--- got\n%s\n--- transformers\n%s", name, convs, text, want);
        per[t.kind]++;
        convs++;
        free(text);
        json_decref(d);
    }
    free(line);
    fclose(f);
    /* >= 20 conversations per template, each in several modes */
    assert_true(per[AREAL_CHAT_QWEN25] >= 40 && per[AREAL_CHAT_QWEN3] >= 120 &&
                per[AREAL_CHAT_CHATML] >= 40);
}

static void templates_are_found_or_refused(void **state) {
    (void)state;
    areal_chat_template t;
    areal_error err;
    bool found;
    /* transformers 5 saves the template as chat_template.jinja */
    assert_int_equal(areal_chat_template_load(FIX "hf/qwen2", &t, &found, &err), AREAL_OK);
    assert_true(found && t.kind == AREAL_CHAT_QWEN3);
    assert_int_equal(areal_chat_template_load(FIX "qwen2", &t, &found, &err), AREAL_OK);
    assert_false(found);
    const char *odd = "{% for m in messages %}{{ m.content }}{% endfor %}";
    assert_int_equal(
        areal_chat_template_parse(odd, strlen(odd), "x/tokenizer_config.json", &t, &err),
        AREAL_EINVAL);
    assert_non_null(strstr(err.msg, "x/tokenizer_config.json"));
    assert_non_null(strstr(err.msg, "--chat-template"));
    areal_chat_msg none[1];
    char *text;
    size_t len;
    t.kind = AREAL_CHAT_QWEN25;
    t.name = "qwen2.5";
    assert_int_equal(areal_chat_render(&t, none, 0, true, true, &text, &len, &err), AREAL_EINVAL);
}

/* tokenize --chat renders with the model's template; --chat-template overrides it. */
static void chat_template_override(void **state) {
    (void)state;
    char dir[256], p[512];
    mt_tmpdir(dir, sizeof dir);
    snprintf(p, sizeof p, "%s/odd.jinja", dir);
    const char *odd = "{% for m in messages %}{{ m.content }}{% endfor %}";
    assert_int_equal(mt_write(p, odd, strlen(odd)), 0);
    char *out_text = NULL;
    size_t out_len = 0;
    FILE *out = open_memstream(&out_text, &out_len), *err = tmpfile();
    char *bad[] = {"tokenize", "--model", FIX "hf/qwen2",    "--chat", "user",
                   "--text",   "hi",      "--chat-template", p};
    assert_int_equal(areal_cmd_run(9, bad, out, err), 2);
    char *good[] = {"tokenize",
                    "--model",
                    FIX "hf/qwen2",
                    "--chat",
                    "user",
                    "--text",
                    "hi",
                    "--chat-template",
                    FIX "hf/chat/tokenizer_config-qwen2.5.json"};
    assert_int_equal(areal_cmd_run(9, good, out, err), 0);
    char *mine[] = {"tokenize", "--model", FIX "hf/qwen2", "--chat", "user", "--text", "hi"};
    assert_int_equal(areal_cmd_run(7, mine, out, err), 0);
    fclose(out);
    fclose(err);
    /* qwen2.5 adds its default system prompt, qwen3 (the model's) does not */
    char *nl = strchr(out_text, '\n');
    assert_non_null(nl);
    assert_true((size_t)(nl - out_text) > strlen(nl + 1) - 1);
    free(out_text);
    mt_rmdir(dir);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(renders_like_transformers),
        cmocka_unit_test(templates_are_found_or_refused),
        cmocka_unit_test(chat_template_override),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
