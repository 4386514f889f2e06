/*
 * test_rollout_http.c - the rollout server over loopback with libcurl, on
 * the real engine: every endpoint (generate by ids and text, streaming, n,
 * logprobs and prompt scoring, stop strings; pause / continue / abort;
 * health, info, metrics, flush; weight updates from disk and from a peer;
 * the OpenAI endpoints), greedy outputs against areal_generate, bad input
 * (each a 4xx naming the field, the scheduler still serving afterwards), and
 * 64 concurrent clients x 4 requests of mixed lengths against the reference.
 */
#include <pthread.h>
#include <stdatomic.h>

#include "areal/model/chat.h"
#include "areal/model/config.h"
#include "areal/model/tokenizer.h"

#include "rollout_http_util.h"

static char dir[128], dir_new[128];

static int setup(void **state) {
    (void)state;
    rt_setup_dirs(dir, dir_new, sizeof dir);
    return 0;
}

static int teardown(void **state) {
    (void)state;
    rt_teardown_dirs(dir, dir_new);
    return 0;
}

static const int32_t prompt[] = {5, 17, 42, 8, 77, 3, 61};
#define NP ((int)(sizeof prompt / sizeof prompt[0]))

/* /generate greedy of prompt on port; returns the ids count. */
static int greedy(int port, const int32_t *p, int n, int max_new, int32_t *out, char *version_out) {
    char *ids = rt_ids_json(p, n);
    rt_resp r = rt_post(port, "/generate",
                        "{\"input_ids\":%s,\"sampling_params\":{\"max_new_tokens\":%d,"
                        "\"temperature\":0,\"ignore_eos\":true}}",
                        ids, max_new);
    free(ids);
    assert_int_equal(r.code, 200);
    int k = rt_output_ids(r.json, out, 512);
    if (version_out)
        snprintf(version_out, 64, "%s",
                 json_string_value(
                     json_object_get(json_object_get(r.json, "meta_info"), "weight_version")));
    rt_free(&r);
    return k;
}

static void generate_matches_the_reference(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, "7");
    int port = areal_rollout_server_port(s);
    int32_t want[64], got[512];
    int nw = rt_reference(dir, prompt, NP, 20, want);
    char version[64];
    int ng = greedy(port, prompt, NP, 20, got, version);
    assert_int_equal(ng, nw);
    assert_memory_equal(got, want, (size_t)nw * sizeof *got);
    assert_string_equal(version, "7");

    /* text prompt, logprobs, prompt scoring and the response shape */
    rt_resp r = rt_post(port, "/generate",
                        "{\"text\":\"12+34=\",\"sampling_params\":{\"max_new_tokens\":3,"
                        "\"temperature\":0,\"ignore_eos\":true},\"return_logprob\":true,"
                        "\"logprob_start_len\":0,\"top_logprobs_num\":2,\"rid\":\"abc\"}");
    assert_int_equal(r.code, 200);
    json_t *meta = json_object_get(r.json, "meta_info");
    assert_string_equal(json_string_value(json_object_get(meta, "id")), "abc");
    assert_int_equal(json_integer_value(json_object_get(meta, "prompt_tokens")), 6);
    assert_int_equal(json_integer_value(json_object_get(meta, "completion_tokens")), 3);
    assert_string_equal(rt_finish(r.json), "length");
    json_t *olp = json_object_get(meta, "output_token_logprobs");
    assert_int_equal(json_array_size(olp), 3);
    json_t *e0 = json_array_get(olp, 0);
    assert_int_equal(json_array_size(e0), 3); /* [logprob, id, null] */
    assert_true(json_real_value(json_array_get(e0, 0)) < 0);
    assert_int_equal(json_integer_value(json_array_get(e0, 1)),
                     json_integer_value(json_array_get(json_object_get(r.json, "output_ids"), 0)));
    assert_true(json_is_null(json_array_get(e0, 2)));
    json_t *ilp = json_object_get(meta, "input_token_logprobs");
    assert_int_equal(json_array_size(ilp), 6);
    assert_true(json_is_null(json_array_get(json_array_get(ilp, 0), 0))); /* position 0 */
    assert_true(json_real_value(json_array_get(json_array_get(ilp, 1), 0)) < 0);
    assert_int_equal(json_array_size(json_object_get(meta, "output_top_logprobs")), 3);
    assert_true(json_is_string(json_object_get(r.json, "text")));
    rt_free(&r);

    /* n = 3 answers a list; stop_token_ids end a sample with matched */
    r = rt_post(port, "/generate",
                "{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":4,"
                "\"temperature\":1.0,\"n\":3,\"sampling_seed\":11}}");
    assert_int_equal(r.code, 200);
    assert_true(json_is_array(r.json));
    assert_int_equal(json_array_size(r.json), 3);
    rt_free(&r);
    r = rt_post(port, "/generate",
                "{\"input_ids\":%s,\"sampling_params\":{\"max_new_tokens\":20,"
                "\"temperature\":0,\"stop_token_ids\":[%d]}}",
                "[5,17,42,8,77,3,61]", want[2]);
    assert_int_equal(r.code, 200);
    assert_string_equal(rt_finish(r.json), "stop");
    json_t *fr = json_object_get(json_object_get(r.json, "meta_info"), "finish_reason");
    assert_int_equal(json_integer_value(json_object_get(fr, "matched")), want[2]);
    int32_t ids[64];
    int k = rt_output_ids(r.json, ids, 64);
    assert_true(k <= 3 && ids[k - 1] == want[2]);
    rt_free(&r);
    areal_rollout_server_stop(s);
}

static void streams_sglang_data_lines(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, NULL);
    int port = areal_rollout_server_port(s);
    int32_t want[64];
    int nw = rt_reference(dir, prompt, NP, 6, want);
    rt_resp r = rt_post(port, "/generate",
                        "{\"input_ids\":[5,17,42,8,77,3,61],\"sampling_params\":{"
                        "\"max_new_tokens\":6,\"temperature\":0,\"ignore_eos\":true},"
                        "\"stream\":true}");
    assert_int_equal(r.code, 200);
    /* one event per token plus the final one, then [DONE]; the last carries the finish */
    int events = 0;
    json_t *last = NULL;
    for (char *line = strstr(r.body, "data: "); line; line = strstr(line + 1, "data: ")) {
        if (strncmp(line, "data: [DONE]", 12) == 0)
            break;
        json_decref(last);
        last = json_loadb(line + 6, strcspn(line + 6, "\n"), 0, NULL);
        assert_non_null(last);
        events++;
    }
    assert_non_null(strstr(r.body, "data: [DONE]\n\n"));
    assert_int_equal(events, nw + 1);
    int32_t got[64];
    assert_int_equal(rt_output_ids(last, got, 64), nw);
    assert_memory_equal(got, want, (size_t)nw * sizeof *got);
    assert_string_equal(rt_finish(last), "length");
    json_decref(last);
    rt_free(&r);
    areal_rollout_server_stop(s);
}

static void control_info_and_metrics(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, "3");
    int port = areal_rollout_server_port(s);
    rt_resp r = rt_req(NULL, port, "/health", NULL);
    assert_int_equal(r.code, 200);
    rt_free(&r);
    r = rt_req(NULL, port, "/health_generate", NULL);
    assert_int_equal(r.code, 200);
    rt_free(&r);
    r = rt_req(NULL, port, "/get_model_info", NULL);
    assert_int_equal(r.code, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "weight_version")), "3");
    assert_true(json_is_true(json_object_get(r.json, "is_generation")));
    rt_free(&r);
    r = rt_req(NULL, port, "/get_server_info", NULL);
    assert_int_equal(r.code, 200);
    assert_true(json_integer_value(json_object_get(r.json, "max_total_num_tokens")) > 0);
    rt_free(&r);
    r = rt_post(port, "/flush_cache", "{}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
    /* a paused server queues; continue serves it */
    r = rt_post(port, "/pause_generation", "{\"mode\":\"in_place\"}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
    r = rt_req(NULL, port, "/get_server_info", NULL);
    json_t *st0 = json_array_get(json_object_get(r.json, "internal_states"), 0);
    assert_true(json_is_true(json_object_get(st0, "paused")));
    rt_free(&r);
    r = rt_post(port, "/continue_generation", "{}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
    r = rt_post(port, "/abort_request", "{\"rid\":\"nobody\"}");
    assert_int_equal(r.code, 200);
    assert_int_equal(json_integer_value(json_object_get(r.json, "aborted")), 0);
    rt_free(&r);
    r = rt_post(port, "/abort_request", "{\"abort_all\":true}");
    assert_int_equal(r.code, 200);
    rt_free(&r);
    int32_t got[64];
    greedy(port, prompt, NP, 5, got, NULL);
    r = rt_req(NULL, port, "/metrics", NULL);
    assert_int_equal(r.code, 200);
    assert_non_null(strstr(r.body, "\nareal_rollout_weight_version 3\n"));
    assert_non_null(strstr(r.body, "# TYPE sglang:num_running_reqs gauge"));
    assert_non_null(strstr(r.body, "sglang:generation_tokens_total "));
    assert_non_null(strstr(r.body, "sglang:e2e_request_latency_seconds_count "));
    rt_free(&r);
    areal_rollout_server_stop(s);
}

static void openai_endpoints(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, NULL);
    int port = areal_rollout_server_port(s);
    rt_resp r = rt_req(NULL, port, "/v1/models", NULL);
    assert_int_equal(r.code, 200);
    const char *name = json_string_value(
        json_object_get(json_array_get(json_object_get(r.json, "data"), 0), "id"));
    assert_non_null(name);
    assert_string_equal(name, strrchr(dir, '/') + 1);
    rt_free(&r);
    int32_t want[64];
    int nw = rt_reference(dir, prompt, NP, 5, want);
    r = rt_post(port, "/v1/completions",
                "{\"model\":\"%s\",\"prompt\":[5,17,42,8,77,3,61],\"max_tokens\":5,"
                "\"temperature\":0,\"ignore_eos\":true,\"logprobs\":1}",
                strrchr(dir, '/') + 1);
    assert_int_equal(r.code, 200);
    assert_string_equal(json_string_value(json_object_get(r.json, "object")), "text_completion");
    json_t *c0 = json_array_get(json_object_get(r.json, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "length");
    assert_int_equal(
        json_array_size(json_object_get(json_object_get(c0, "logprobs"), "token_logprobs")), nw);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(r.json, "usage"), "completion_tokens")),
        nw);
    rt_free(&r);
    r = rt_post(port, "/v1/completions",
                "{\"prompt\":\"12\",\"max_tokens\":2,\"stream\":true,\"ignore_eos\":true}");
    assert_int_equal(r.code, 200);
    assert_non_null(strstr(r.body, "\"finish_reason\":\"length\""));
    assert_non_null(strstr(r.body, "data: [DONE]"));
    rt_free(&r);
    r = rt_post(port, "/v1/completions", "{\"model\":\"other\",\"prompt\":\"1\"}");
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.body, "/v1/models"));
    rt_free(&r);
    /* the fixture tokenizer's chat markers lie outside the tiny model's vocabulary: the
     * template renders, and the mismatch is named instead of generating garbage */
    r = rt_post(port, "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"1+1\"}],\"max_tokens\":2}");
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.body, "vocabulary"));
    rt_free(&r);
    areal_rollout_server_stop(s);
}

/* A directory whose vocabulary holds the tokenizer's chat markers (zero weights). */
static void chat_model_dir(char *d, size_t cap) {
    snprintf(d, cap, "/tmp/areal-rt-chat-XXXXXX");
    assert_non_null(mkdtemp(d));
    char src[512], dst[600];
    json_t *cj = json_load_file(rt_fixture(src, sizeof src, "ref-qwen2/config.json"), 0, NULL);
    assert_non_null(cj);
    json_object_set_new(cj, "vocab_size", json_integer(1280));
    snprintf(dst, sizeof dst, "%s/config.json", d);
    assert_int_equal(json_dump_file(cj, dst, 0), 0);
    json_decref(cj);
    rt_copy(rt_fixture(src, sizeof src, "tok/tokenizer.json"),
            (snprintf(dst, sizeof dst, "%s/tokenizer.json", d), dst));
    areal_model_config mc;
    areal_model m;
    areal_error e;
    snprintf(dst, sizeof dst, "%s/config.json", d);
    if (areal_model_config_load(dst, &mc, &e) != 0 || areal_model_init(&m, &mc, NULL, &e) != 0)
        fail_msg("%s", e.msg);
    areal_st_out *t = calloc(m.n_specs, sizeof *t);
    int *shard = calloc(m.n_specs, sizeof *shard);
    for (size_t i = 0; i < m.n_specs; i++)
        t[i] = (areal_st_out){.name = m.specs[i].name,
                              .dtype = AREAL_DT_F32,
                              .ndim = m.specs[i].ndim,
                              .shape = m.specs[i].shape,
                              .data = m.params + m.offset[i]};
    if (areal_checkpoint_write(d, t, m.n_specs, shard, 1, &e) != 0)
        fail_msg("%s", e.msg);
    free(t);
    free(shard);
    areal_model_free(&m);
}

static void chat_completions_use_the_template(void **state) {
    (void)state;
    char cd[128];
    chat_model_dir(cd, sizeof cd);
    areal_rollout_server *s = rt_server(cd, NULL);
    int port = areal_rollout_server_port(s);
    rt_resp r = rt_post(port, "/v1/chat/completions",
                        "{\"messages\":[{\"role\":\"system\",\"content\":\"Be brief.\"},"
                        "{\"role\":\"user\",\"content\":\"1+1=\"}],\"max_tokens\":3,"
                        "\"temperature\":0,\"ignore_eos\":true}");
    if (r.code != 200)
        fail_msg("%s", r.body);
    assert_string_equal(json_string_value(json_object_get(r.json, "object")), "chat.completion");
    json_t *c0 = json_array_get(json_object_get(r.json, "choices"), 0);
    assert_string_equal(json_string_value(json_object_get(json_object_get(c0, "message"), "role")),
                        "assistant");
    assert_string_equal(json_string_value(json_object_get(c0, "finish_reason")), "length");
    /* the prompt is the ChatML rendering (no template in the directory), tokenized */
    areal_chat_msg msgs[2] = {{"system", "Be brief.", NULL}, {"user", "1+1=", NULL}};
    char *text = NULL, tp[600];
    size_t tl = 0, n = 0;
    int32_t *ids = NULL;
    areal_tokenizer *tok = NULL;
    snprintf(tp, sizeof tp, "%s/tokenizer.json", cd);
    assert_int_equal(areal_tokenizer_load(tp, &tok, NULL), 0);
    assert_int_equal(areal_chat_render(&areal_chat_chatml, msgs, 2, true, true, &text, &tl, NULL),
                     0);
    assert_non_null(strstr(text, "<|im_start|>assistant\n"));
    assert_int_equal(areal_tokenizer_encode(tok, text, tl, &ids, &n, NULL), 0);
    json_t *usage = json_object_get(r.json, "usage");
    assert_int_equal(json_integer_value(json_object_get(usage, "prompt_tokens")), (int)n);
    assert_int_equal(json_integer_value(json_object_get(usage, "completion_tokens")), 3);
    free(text);
    free(ids);
    areal_tokenizer_free(tok);
    rt_free(&r);
    r = rt_post(port, "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":1,"
                "\"chat_template_kwargs\":{\"enable_thinking\":false},\"stream\":true}");
    assert_int_equal(r.code, 200);
    assert_non_null(strstr(r.body, "chat.completion.chunk"));
    assert_non_null(strstr(r.body, "data: [DONE]"));
    rt_free(&r);
    r = rt_post(port, "/v1/chat/completions",
                "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                "\"chat_template_kwargs\":{\"tools\":1}}");
    assert_int_equal(r.code, 400);
    assert_non_null(strstr(r.body, "chat_template_kwargs"));
    rt_free(&r);
    areal_rollout_server_stop(s);
    rt_rmdir(cd);
}

static void weight_updates_from_disk_and_peer(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, "0"), *ref = rt_server(dir_new, "9");
    int port = areal_rollout_server_port(s), rport = areal_rollout_server_port(ref);
    int32_t before[64], after[64], want_new[64];
    int nb = greedy(port, prompt, NP, 12, before, NULL);
    int nn = greedy(rport, prompt, NP, 12, want_new, NULL);
    assert_false(nb == nn && memcmp(before, want_new, (size_t)nb * 4) == 0); /* they differ */
    /* a bad directory: old weights and version keep serving */
    rt_resp r = rt_post(port, "/update_weights_from_disk", "{\"model_path\":\"/nonexistent\"}");
    assert_int_equal(r.code, 400);
    assert_true(json_is_false(json_object_get(r.json, "success")));
    assert_non_null(strstr(json_string_value(json_object_get(r.json, "message")), "/nonexistent"));
    rt_free(&r);
    char other[512];
    r = rt_post(port, "/update_weights_from_disk", "{\"model_path\":\"%s\"}",
                rt_fixture(other, sizeof other, "qwen2"));
    assert_int_equal(r.code, 400); /* another architecture */
    rt_free(&r);
    char version[64];
    assert_int_equal(greedy(port, prompt, NP, 12, after, version), nb);
    assert_memory_equal(after, before, (size_t)nb * 4);
    assert_string_equal(version, "0");
    /* the new weights: outputs equal a server started on them; the version moves */
    r = rt_post(port, "/update_weights_from_disk",
                "{\"model_path\":\"%s\",\"abort_all_requests\":true}", dir_new);
    assert_int_equal(r.code, 200);
    assert_true(json_is_true(json_object_get(r.json, "success")));
    assert_string_equal(json_string_value(json_object_get(r.json, "weight_version")), "1");
    rt_free(&r);
    assert_int_equal(greedy(port, prompt, NP, 12, after, version), nn);
    assert_memory_equal(after, want_new, (size_t)nn * 4);
    assert_string_equal(version, "1");
    r = rt_post(port, "/update_weights_from_disk",
                "{\"model_path\":\"%s\",\"weight_version\":\"v-old\"}", dir);
    assert_int_equal(r.code, 200);
    rt_free(&r);
    assert_int_equal(greedy(port, prompt, NP, 12, after, version), nb);
    assert_memory_equal(after, before, (size_t)nb * 4);
    assert_string_equal(version, "v-old");
    /* from a peer: its directory and version */
    r = rt_post(port, "/update_weights_from_peer", "{\"url\":\"http://127.0.0.1:%d\"}", rport);
    assert_int_equal(r.code, 200);
    rt_free(&r);
    assert_int_equal(greedy(port, prompt, NP, 12, after, version), nn);
    assert_memory_equal(after, want_new, (size_t)nn * 4);
    assert_string_equal(version, "9");
    areal_rollout_server_stop(ref);
    areal_rollout_server_stop(s);
}

static double aborted_total(int port) {
    rt_resp r = rt_req(NULL, port, "/metrics", NULL);
    const char *k = strstr(r.body, "\nsglang:num_aborted_requests_total ");
    double v = k ? strtod(k + strlen("\nsglang:num_aborted_requests_total "), NULL) : 0;
    rt_free(&r);
    return v;
}

static size_t hang_up(char *p, size_t sz, size_t n, void *ud) {
    (void)p;
    (void)sz;
    (void)n;
    (void)ud;
    return 0; /* refuse the first bytes: curl closes the connection */
}

static void bad_input_is_a_4xx_naming_the_field(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, NULL);
    int port = areal_rollout_server_port(s);
    static const struct {
        const char *path, *body;
        long code;
        const char *needle;
    } cases[] = {
        {"/generate", "{\"input_ids\":[1,2", 400, "not valid JSON"},
        {"/generate", "[1,2]", 400, "JSON object"},
        {"/generate", "{}", 400, "no prompt"},
        {"/generate", "{\"input_ids\":\"12\"}", 400, "input_ids"},
        {"/generate", "{\"input_ids\":[1,96]}", 400, "input_ids[1] = 96"},
        {"/generate", "{\"input_ids\":[1,-1]}", 400, "input_ids[1]"},
        {"/generate", "{\"input_ids\":[1,2.5]}", 400, "input_ids[1]"},
        {"/generate", "{\"input_ids\":[]}", 400, "empty"},
        {"/generate", "{\"input_ids\":[1],\"bogus\":1}", 400, "bogus"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"temprature\":1}}", 400,
         "sampling_params.temprature"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"temperature\":\"hot\"}}", 400,
         "sampling_params.temperature"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"max_new_tokens\":256}}", 400,
         "context"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"max_new_tokens\":-1}}", 400,
         "max_new_tokens"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"top_p\":0}}", 400, "top_p"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"n\":0}}", 400, "n"},
        {"/generate", "{\"input_ids\":[1],\"sampling_params\":{\"frequency_penalty\":0.5}}", 400,
         "frequency_penalty"},
        {"/generate", "{\"input_ids\":[1],\"stream\":1}", 400, "stream"},
        {"/generate", "{\"input_ids\":[1],\"input_ids\":[2]}", 400, "JSON"},
        {"/generate", "{\"input_ids\":[[1],[2]]}", 400, "batch"},
        {"/generate", "{\"text\":\"a\",\"input_ids\":[1]}", 400, "either"},
        {"/pause_generation", "{\"mode\":\"later\"}", 400, "mode"},
        {"/abort_request", "{}", 400, "rid"},
        {"/update_weights_from_disk", "{}", 400, "model_path"},
        {"/update_weights_from_distributed", "{\"names\":[]}", 400, "init_weights_update_group"},
        {"/init_weights_update_group", "{\"master_address\":1}", 400, "master_address"},
        {"/v1/completions", "{\"prompt\":[1],\"max_tokens\":\"x\"}", 400, "max_tokens"},
        {"/v1/chat/completions", "{\"messages\":[]}", 400, "messages"},
        {"/nowhere", "{}", 404, "/generate"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        rt_resp r = rt_req(NULL, port, cases[i].path, cases[i].body);
        if (r.code != cases[i].code || !strstr(r.body, cases[i].needle))
            fail_msg("case %zu %s %s: got %ld %s", i, cases[i].path, cases[i].body, r.code, r.body);
        json_t *msg = json_object_get(json_object_get(r.json, "error"), "message");
        if (!json_is_string(msg) && !json_is_false(json_object_get(r.json, "success")))
            fail_msg("case %zu: no error message: %s", i, r.body);
        rt_free(&r);
    }
    /* a body past the limit is 413; the server still serves */
    char *big = malloc((1 << 20) + 64);
    memset(big, ' ', (1 << 20) + 63);
    big[(1 << 20) + 63] = '\0';
    big[0] = '{';
    big[(1 << 20) + 62] = '}';
    rt_resp r = rt_req(NULL, port, "/generate", big);
    assert_int_equal(r.code, 413);
    rt_free(&r);
    free(big);
    /* a client that vanishes mid-generation aborts its request, nothing sticks */
    CURL *c = curl_easy_init();
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 5L);
    rt_resp gone = rt_req(c, port, "/generate",
                          "{\"input_ids\":[1,2,3],\"sampling_params\":{\"max_new_tokens\":240,"
                          "\"ignore_eos\":true}}");
    curl_easy_cleanup(c);
    rt_free(&gone);
    /* a streaming client that hangs up after the first event: its request is aborted */
    double aborted0 = aborted_total(port);
    c = curl_easy_init();
    struct curl_slist *h = curl_slist_append(NULL, "Expect:");
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/generate", port);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS,
                     "{\"input_ids\":[4,5],\"rid\":\"hangup\",\"stream\":true,"
                     "\"sampling_params\":{\"max_new_tokens\":250,\"ignore_eos\":true}}");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, hang_up);
    assert_int_equal(curl_easy_perform(c), CURLE_WRITE_ERROR);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    int live = -1;
    for (int i = 0; i < 500 && live != 0; i++) {
        rt_resp q = rt_req(NULL, port, "/get_server_info", NULL);
        json_t *st = json_array_get(json_object_get(q.json, "internal_states"), 0);
        live = (int)json_integer_value(json_object_get(st, "live_requests"));
        rt_free(&q);
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(live, 0);
    assert_true(aborted_total(port) >= aborted0 + 1);
    int32_t got[64];
    greedy(port, prompt, NP, 4, got, NULL);
    areal_rollout_server_stop(s);
}

typedef struct queued {
    int port;
    rt_resp r;
} queued;

static void *queued_request(void *arg) {
    queued *q = arg;
    q->r = rt_post(q->port, "/generate",
                   "{\"input_ids\":[1,2],\"sampling_params\":{\"max_new_tokens\":2}}");
    return NULL;
}

static void a_full_queue_is_503_with_retry_after(void **state) {
    (void)state;
    areal_rollout_server_config cfg = {.model_dir = dir, .kv_bytes = 8u << 20, .max_queued = 2};
    areal_rollout_server *s = NULL;
    areal_error e;
    if (areal_rollout_server_start(&cfg, &s, &e) != 0)
        fail_msg("%s", e.msg);
    int port = areal_rollout_server_port(s);
    rt_resp r = rt_post(port, "/pause_generation", "{\"mode\":\"in_place\"}");
    rt_free(&r);
    queued q[2] = {{.port = port}, {.port = port}};
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        assert_int_equal(pthread_create(&t[i], NULL, queued_request, &q[i]), 0);
    for (int i = 0; i < 500; i++) { /* both wait in the paused engine's queue */
        r = rt_req(NULL, port, "/get_server_info", NULL);
        json_t *st = json_array_get(json_object_get(r.json, "internal_states"), 0);
        int n = (int)json_integer_value(json_object_get(st, "num_queue_reqs"));
        rt_free(&r);
        if (n == 2)
            break;
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    r = rt_post(port, "/generate",
                "{\"input_ids\":[3],\"sampling_params\":{\"max_new_tokens\":2}}");
    assert_int_equal(r.code, 503);
    assert_string_equal(r.retry_after, "1");
    assert_non_null(strstr(r.body, "queue is full"));
    rt_free(&r);
    r = rt_post(port, "/continue_generation", "{}");
    rt_free(&r);
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(q[i].r.code, 200);
        rt_free(&q[i].r);
    }
    areal_rollout_server_stop(s);
}

/* ---- --disable-prefix-cache reaches the engine ------------------------------------ */

/* cached_tokens of the second of two identical 40-token prompts. */
static int second_cached_tokens(bool disable) {
    areal_rollout_server_config cfg = {
        .model_dir = dir, .kv_bytes = 8u << 20, .disable_prefix_cache = disable};
    areal_rollout_server *s = NULL;
    areal_error e;
    if (areal_rollout_server_start(&cfg, &s, &e) != 0)
        fail_msg("%s", e.msg);
    int port = areal_rollout_server_port(s);
    int32_t ids[40];
    for (int i = 0; i < 40; i++)
        ids[i] = 1 + i % 7;
    char *j = rt_ids_json(ids, 40);
    int cached = -1;
    for (int k = 0; k < 2; k++) {
        rt_resp r = rt_post(port, "/generate",
                            "{\"input_ids\":%s,\"sampling_params\":{\"max_new_tokens\":2}}", j);
        assert_int_equal(r.code, 200);
        cached = (int)json_integer_value(
            json_object_get(json_object_get(r.json, "meta_info"), "cached_tokens"));
        rt_free(&r);
    }
    free(j);
    areal_rollout_server_stop(s);
    return cached;
}

static void disable_prefix_cache_shares_no_block(void **state) {
    (void)state;
    assert_int_equal(second_cached_tokens(false), 32); /* (40 - 1) / 16 full blocks */
    assert_int_equal(second_cached_tokens(true), 0);
}

/* ---- 64 clients x 4 requests -------------------------------------------------------- */

#define CLIENTS 64
#define PER     4

typedef struct job {
    int port;
    int32_t prompt[PER][48];
    int n[PER], max_new[PER];
    int32_t want[PER][64];
    int n_want[PER];
    int ok;
} job;

static void *client(void *arg) {
    job *j = arg;
    CURL *c = curl_easy_init();
    for (int q = 0; q < PER; q++) {
        char *ids = rt_ids_json(j->prompt[q], j->n[q]);
        char body[1024];
        snprintf(body, sizeof body,
                 "{\"input_ids\":%s,\"sampling_params\":{\"max_new_tokens\":%d,"
                 "\"temperature\":0,\"ignore_eos\":true}}",
                 ids, j->max_new[q]);
        free(ids);
        rt_resp r = rt_req(c, j->port, "/generate", body);
        int32_t got[512];
        if (r.code == 200 && r.json) {
            int k = rt_output_ids(r.json, got, 512);
            j->ok += k == j->n_want[q] && memcmp(got, j->want[q], (size_t)k * 4) == 0;
        }
        rt_free(&r);
    }
    curl_easy_cleanup(c);
    return NULL;
}

static void concurrent_clients_equal_the_reference(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, NULL);
    int port = areal_rollout_server_port(s);
    job *jobs = calloc(CLIENTS, sizeof *jobs);
    uint64_t x = 12345;
    int total_new = 0;
    for (int i = 0; i < CLIENTS; i++) {
        jobs[i].port = port;
        for (int q = 0; q < PER; q++) {
            x = x * 6364136223846793005ull + 1442695040888963407ull;
            jobs[i].n[q] = 1 + (int)((x >> 33) % 40);
            jobs[i].max_new[q] = 1 + (int)((x >> 20) % 24);
            for (int k = 0; k < jobs[i].n[q]; k++)
                jobs[i].prompt[q][k] = (int32_t)((x >> (k % 30)) % 96);
            jobs[i].n_want[q] = rt_reference(dir, jobs[i].prompt[q], jobs[i].n[q],
                                             jobs[i].max_new[q], jobs[i].want[q]);
            total_new += jobs[i].n_want[q];
        }
    }
    pthread_t t[CLIENTS];
    double t0 = rt_now();
    for (int i = 0; i < CLIENTS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, client, &jobs[i]), 0);
    int ok = 0;
    for (int i = 0; i < CLIENTS; i++) {
        pthread_join(t[i], NULL);
        ok += jobs[i].ok;
    }
    double dt = rt_now() - t0;
    assert_int_equal(ok, CLIENTS * PER);
    /* the measurement the README quotes */
    fprintf(stderr,
            "rollout http: %d clients x %d requests (%d new tokens) in %.2f s: %.0f req/s\n",
            CLIENTS, PER, total_new, dt, CLIENTS * PER / dt);
    CURL *c = curl_easy_init();
    t0 = rt_now();
    int n = 0;
    while (rt_now() - t0 < 1.0) {
        rt_resp r = rt_req(c, port, "/health", NULL);
        assert_int_equal(r.code, 200);
        rt_free(&r);
        n++;
    }
    fprintf(stderr, "rollout http: GET /health, one keep-alive client: %.0f req/s\n",
            n / (rt_now() - t0));
    curl_easy_cleanup(c);
    free(jobs);
    areal_rollout_server_stop(s);
}

/* ---- stop while clients keep posting ------------------------------------------------ */

typedef struct poster {
    int port;
    atomic_int *stop;
    int answers, bad; /* bad: a code other than 200, 503 or no answer at all */
    pthread_t t;
} poster;

static void *post_until_stopped(void *arg) {
    poster *p = arg;
    while (!atomic_load(p->stop)) {
        rt_resp r = rt_req(NULL, p->port, "/generate",
                           "{\"input_ids\":[3,1,4,1,5],\"sampling_params\":"
                           "{\"max_new_tokens\":8,\"temperature\":0}}");
        p->answers++;
        if (r.code != 200 && r.code != 503 && r.code != -1)
            p->bad++;
        rt_free(&r);
    }
    return NULL;
}

/* The server is stopped with /generate requests arriving all the while: every
 * answer is 200 or 503 (or the connection closes), the stop is bounded, and
 * nothing touches the engine after it is freed (ASan: a handler submitting to
 * a freed engine is a use-after-free; the stop used to free the engine before
 * stopping HTTP). */
static void stop_while_clients_post(void **state) {
    (void)state;
    areal_rollout_server *s = rt_server(dir, "v0");
    atomic_int stop = 0;
    enum { N = 4 };
    poster ps[N];
    for (int i = 0; i < N; i++) {
        ps[i] = (poster){.port = areal_rollout_server_port(s), .stop = &stop};
        assert_int_equal(pthread_create(&ps[i].t, NULL, post_until_stopped, &ps[i]), 0);
    }
    struct timespec ts = {0, 300 * 1000000L};
    nanosleep(&ts, NULL);
    double t0 = rt_now();
    areal_rollout_server_stop(s);
    double took = rt_now() - t0;
    atomic_store(&stop, 1);
    int answers = 0, bad = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(ps[i].t, NULL);
        answers += ps[i].answers;
        bad += ps[i].bad;
    }
    assert_true(answers > N);
    assert_int_equal(bad, 0);
    if (took > 10.0)
        fail_msg("the stop took %.1f s with clients posting (bound 10 s)", took);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(generate_matches_the_reference),
        cmocka_unit_test(streams_sglang_data_lines),
        cmocka_unit_test(control_info_and_metrics),
        cmocka_unit_test(openai_endpoints),
        cmocka_unit_test(chat_completions_use_the_template),
        cmocka_unit_test(weight_updates_from_disk_and_peer),
        cmocka_unit_test(bad_input_is_a_4xx_naming_the_field),
        cmocka_unit_test(a_full_queue_is_503_with_retry_after),
        cmocka_unit_test(disable_prefix_cache_shares_no_block),
        cmocka_unit_test(concurrent_clients_equal_the_reference),
        cmocka_unit_test(stop_while_clients_post),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
