/*
 * cmd_generate.c - `areal-worker generate`: batched generation on the CPU
 * model (areal_generate: KV cache, seeded greedy/temperature/top-k/top-p
 * sampling) from a text prompt or a JSONL file of requests.
 *
 * --prompt TEXT is encoded with the model directory's tokenizer.json (--chat
 * wraps it as one user message with the assistant generation prompt, in the
 * model's chat template or --chat-template FILE, ChatML when it has none;
 * --no-thinking passes enable_thinking=false); the output is the decoded new text, or with --json
 * one line {"text", "ids", "logprobs", "finish_reason"} (finish_reason "stop" or "length" as SGLang
 * names them). --input FILE runs all its requests as one batch and prints one such JSON line per
 * request, in order. Each logprob is the token's under the distribution it was drawn from
 * (areal_sample), the behaviour logprob the trainer needs. With --prompt and no --stop, the
 * tokenizer's <|im_end|> and <|endoftext|> (where it has them) end a
 * sequence, as an inference server would; with --input the stop set is only
 * what --stop gives, so ids-only requests stay exact token budgets.
 */
#include <stdlib.h>
#include <string.h>

#include "areal/model/cmd.h"
#include "areal/model/gen_config.h"
#include "areal/model/generate.h"
#include "cmd_internal.h"

#define MAX_STOP 64

typedef struct gen_opts {
    const char *model, *input, *prompt, *chat_template;
    int threads, max_new_tokens, top_k, chat, json, greedy, sampled, sample_padding, no_thinking;
    float temperature, top_p;
    uint64_t seed;
    int32_t stop[MAX_STOP];
    int n_stop, have_stop;
} gen_opts;

/* One line: what is wrong, then the usage. Returns 2. */
static int usage(FILE *err, const char *why, const char *arg) {
    fprintf(
        err,
        "%s generate: %s%s; usage: generate --model DIR (--prompt TEXT [--chat [--chat-template "
        "FILE] [--no-thinking]] | --input "
        "FILE.jsonl) [--max-new-tokens N] [--greedy | --temperature T --top-p P --top-k K "
        "--seed S] [--stop ID,...] [--sample-padding] [--threads N] [--json]\n",
        CMD_PROG, why, arg);
    return 2;
}

static int parse_stop(const char *s, gen_opts *o) {
    o->have_stop = 1;
    while (*s != '\0') {
        char *end;
        long v = strtol(s, &end, 10);
        if (end == s || v < 0 || v > INT32_MAX || o->n_stop == MAX_STOP ||
            (*end != ',' && *end != '\0'))
            return -1;
        o->stop[o->n_stop++] = (int32_t)v;
        s = *end == ',' ? end + 1 : end;
    }
    return 0;
}

static int value_opt(gen_opts *o, const char *a, const char *v) {
    double d;
    if (strcmp(a, "--model") == 0)
        o->model = v;
    else if (strcmp(a, "--input") == 0)
        o->input = v;
    else if (strcmp(a, "--prompt") == 0)
        o->prompt = v;
    else if (strcmp(a, "--chat-template") == 0)
        o->chat_template = v;
    else if (strcmp(a, "--threads") == 0 && cmd_num(v, 1, 256, &d) == 0)
        o->threads = (int)d;
    else if (strcmp(a, "--temperature") == 0 && cmd_num(v, 0, 1e6, &d) == 0)
        o->temperature = (float)d, o->sampled = 1;
    else if (strcmp(a, "--top-k") == 0 && cmd_num(v, 0, 1e9, &d) == 0)
        o->top_k = (int)d, o->sampled = 1;
    else if (strcmp(a, "--top-p") == 0 && cmd_num(v, 1e-9, 1, &d) == 0)
        o->top_p = (float)d, o->sampled = 1;
    else if (strcmp(a, "--seed") == 0 && cmd_num(v, 0, 1.8e19, &d) == 0)
        o->seed = (uint64_t)d;
    else if (strcmp(a, "--max-new-tokens") == 0 && cmd_num(v, 0, 1e6, &d) == 0)
        o->max_new_tokens = (int)d;
    else if (strcmp(a, "--stop") == 0 && parse_stop(v, o) == 0)
        ;
    else
        return -1;
    return 0;
}

static int parse(int argc, char **argv, gen_opts *o, FILE *err) {
    memset(o, 0, sizeof *o);
    o->threads = 1;
    o->top_p = 1.0f;
    o->max_new_tokens = 16;
    static const char *const valued[] = {
        "--model", "--input", "--prompt",         "--threads", "--temperature",  "--top-k",
        "--top-p", "--seed",  "--max-new-tokens", "--stop",    "--chat-template"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--sample-padding") == 0 || strcmp(a, "--no-thinking") == 0) {
            *(a[2] == 's' ? &o->sample_padding : &o->no_thinking) = 1;
            continue;
        }
        if (strcmp(a, "--chat") == 0 || strcmp(a, "--json") == 0 || strcmp(a, "--greedy") == 0) {
            *(a[2] == 'c' ? &o->chat : a[2] == 'j' ? &o->json : &o->greedy) = 1;
            continue;
        }
        int known = 0;
        for (size_t k = 0; k < sizeof valued / sizeof *valued; k++)
            known |= strcmp(a, valued[k]) == 0;
        if (!known) {
            return usage(err, "unknown option ", a);
        }
        if (i + 1 == argc) {
            return usage(err, "a value is missing after ", a);
        }
        if (value_opt(o, a, argv[++i]) != 0)
            return usage(err, "bad value for ", a);
    }
    const char *why = NULL;
    if (o->model == NULL)
        why = "--model is required";
    else if ((o->prompt == NULL) == (o->input == NULL))
        why = "give exactly one of --prompt and --input";
    else if (o->chat && o->prompt == NULL)
        why = "--chat applies to --prompt only";
    else if ((o->chat_template != NULL || o->no_thinking) && !o->chat)
        why = "--chat-template and --no-thinking apply to --chat only";
    else if (o->greedy && o->sampled)
        why = "--greedy excludes --temperature, --top-p and --top-k";
    else if (o->sampled && o->temperature == 0.0f && (o->top_k != 0 || o->top_p < 1.0f))
        why = "--top-k and --top-p need --temperature > 0";
    if (why != NULL)
        return usage(err, why, "");
    return 0;
}

/* The prompt request: --prompt encoded (chat-wrapped with --chat). */
static int prompt_request(const gen_opts *o, const areal_tokenizer *tok, int vocab, cmd_request *r,
                          FILE *err) {
    areal_error e;
    const char *text = o->prompt;
    char *rendered = NULL;
    size_t len = strlen(text), n = 0;
    int rc;
    if (o->chat) {
        areal_chat_template tmpl;
        if ((rc = cmd_chat_template("generate", o->model, o->chat_template, &tmpl, err)) != 0)
            return rc;
        areal_chat_msg msg = {"user", text, NULL};
        if ((rc = areal_chat_render(&tmpl, &msg, 1, true, !o->no_thinking, &rendered, &len, &e)) !=
            AREAL_OK) {
            fprintf(err, "%s generate: --chat: %s\n", CMD_PROG, e.msg);
            return cmd_code(rc);
        }
        text = rendered;
    }
    rc = areal_tokenizer_encode(tok, text, len, &r->ids, &n, &e);
    free(rendered);
    if (rc != AREAL_OK) {
        fprintf(err, "%s generate: --prompt: %s\n", CMD_PROG, e.msg);
        return cmd_code(rc);
    }
    r->n = (int)n;
    if (n == 0) {
        fprintf(err, "%s generate: --prompt encodes to no tokens; give some text\n", CMD_PROG);
        return 2;
    }
    for (size_t i = 0; i < n; i++)
        if (r->ids[i] >= vocab) {
            fprintf(err,
                    "%s generate: --prompt encodes to token %d, outside the model's vocabulary "
                    "of %d (tokenizer.json does not belong to this model)\n",
                    CMD_PROG, (int)r->ids[i], vocab);
            return 2;
        }
    return 0;
}

static int print_result(const gen_opts *o, const areal_tokenizer *tok, const areal_gen_out *g,
                        FILE *out, FILE *err) {
    char *text = NULL;
    size_t tl = 0;
    areal_error e;
    int r = tok != NULL ? areal_tokenizer_decode(tok, g->tokens, (size_t)g->n, true, &text, &tl, &e)
                        : AREAL_OK;
    if (r != AREAL_OK) {
        fprintf(err, "%s generate: decoding the output: %s\n", CMD_PROG, e.msg);
        return cmd_code(r);
    }
    int rc = 0;
    if (o->prompt != NULL && !o->json) {
        size_t rl;
        char *clean = areal_utf8_replace(text, tl, &rl);
        if (clean == NULL) {
            free(text);
            return 1;
        }
        fwrite(clean, 1, rl, out);
        fputc('\n', out);
        free(clean);
    } else {
        json_t *line = json_object();
        if (text != NULL)
            json_object_set_new(line, "text", cmd_text(text, tl));
        json_object_set_new(line, "ids", cmd_ints(g->tokens, g->n));
        json_object_set_new(line, "logprobs", cmd_floats(g->logprobs, g->n));
        json_object_set_new(line, "finish_reason", json_string(g->stopped ? "stop" : "length"));
        if (cmd_print(out, line) != 0) {
            fprintf(err, "%s generate: out of memory printing a result\n", CMD_PROG);
            rc = 1;
        }
    }
    free(text);
    return rc;
}

/*
 * The request's defaults from generation_config.json: its eos ids stop every
 * sequence unless --stop was given (without the file, --prompt stops at the
 * tokenizer's <|im_end|> and <|endoftext|>), and its sampling settings apply
 * unless --greedy or a sampling flag was given.
 */
static int apply_defaults(gen_opts *o, const areal_model *m, const areal_tokenizer *tok,
                          FILE *err) {
    areal_gen_config g;
    areal_error e;
    int r = areal_gen_config_load(o->model, &g, &e);
    if (r != AREAL_OK) {
        fprintf(err, "%s generate: %s\n", CMD_PROG, e.msg);
        return cmd_code(r);
    }
    if (!o->have_stop && g.n_eos > 0) {
        for (int k = 0; k < g.n_eos && o->n_stop < MAX_STOP; k++)
            o->stop[o->n_stop++] = g.eos[k];
    } else if (!o->have_stop && o->prompt != NULL) {
        const char *names[] = {"<|im_end|>", "<|endoftext|>"};
        for (int k = 0; k < 2; k++) {
            int32_t id = areal_tokenizer_token_id(tok, names[k]);
            if (id >= 0 && id < m->cfg.vocab_size)
                o->stop[o->n_stop++] = id;
        }
    }
    if (!o->greedy && !o->sampled && g.do_sample) {
        o->temperature = g.temperature;
        o->top_p = g.top_p;
        o->top_k = g.top_k;
        if (g.repetition_penalty != 1.0f)
            fprintf(err,
                    "%s generate: note: generation_config.json's repetition_penalty %g is not "
                    "applied (not implemented)\n",
                    CMD_PROG, (double)g.repetition_penalty);
    }
    return 0;
}

static int run(areal_model *m, const areal_tokenizer *tok, gen_opts *o, const cmd_request *reqs,
               int n, FILE *out, FILE *err) {
    const int32_t **prompts = calloc((size_t)n, sizeof *prompts);
    int *lens = calloc((size_t)n, sizeof *lens);
    areal_gen_out *res = calloc((size_t)n, sizeof *res);
    int rc = 1, ns = 0, bad = 0;
    if (prompts == NULL || lens == NULL || res == NULL) {
        fprintf(err, "%s generate: out of memory for %d requests\n", CMD_PROG, n);
        goto done;
    }
    for (int i = 0; i < n; i++) {
        if (reqs[i].error != NULL)
            continue;
        prompts[ns] = reqs[i].ids;
        lens[ns++] = reqs[i].n;
    }
    if ((rc = apply_defaults(o, m, tok, err)) != 0)
        goto done;
    /* ids past the tokenizer are padding rows: never drawn unless asked */
    size_t tn = tok != NULL ? areal_tokenizer_size(tok) : 0;
    areal_sampling s = {.temperature = o->temperature,
                        .top_k = o->top_k,
                        .top_p = o->top_p,
                        .seed = o->seed,
                        .max_new_tokens = o->max_new_tokens,
                        .stop = o->stop,
                        .n_stop = o->n_stop,
                        .vocab_limit =
                            !o->sample_padding && tn > 0 && tn < (size_t)m->cfg.vocab_size ? (int)tn
                                                                                           : 0};
    areal_error e;
    int r = ns > 0 ? areal_generate(m, prompts, lens, ns, &s, res, &e) : AREAL_OK;
    if (r != AREAL_OK) {
        fprintf(err, "%s generate: %s\n", CMD_PROG, e.msg);
        rc = cmd_code(r);
        goto done;
    }
    rc = 0;
    for (int i = 0, k = 0; i < n; i++) {
        if (reqs[i].error != NULL) {
            bad = 1;
            if (rc == 0)
                rc = cmd_print_error(out, reqs[i].error);
            continue;
        }
        if (rc == 0)
            rc = print_result(o, tok, &res[k], out, err);
        areal_gen_out_free(&res[k++]);
    }
    if (rc == 0 && bad)
        rc = 2;
done:
    free(prompts);
    free(lens);
    free(res);
    return rc;
}

int areal_cmd_generate(int argc, char **argv, FILE *out, FILE *err) {
    gen_opts o;
    if (parse(argc, argv, &o, err) != 0)
        return 2;
    areal_tokenizer *tok = NULL;
    areal_pool *pool = NULL;
    areal_model m;
    cmd_request *reqs = NULL;
    int n = 0;
    int rc = cmd_model("generate", o.model, o.threads, &m, &pool, err);
    if (rc != 0)
        return rc;
    rc = cmd_tokenizer("generate", o.model, o.prompt != NULL, &tok, err);
    if (rc == 0 && o.prompt != NULL) {
        reqs = calloc(1, sizeof *reqs);
        rc = reqs == NULL ? 1 : prompt_request(&o, tok, m.cfg.vocab_size, reqs, err);
        n = reqs != NULL ? 1 : 0;
    } else if (rc == 0) {
        rc = cmd_read_requests("generate", o.input, tok, m.cfg.vocab_size, &reqs, &n, err);
    }
    if (rc == 0)
        rc = run(&m, tok, &o, reqs, n, out, err);
    cmd_requests_free(reqs, n);
    areal_tokenizer_free(tok);
    areal_model_free(&m);
    areal_pool_destroy(pool);
    return rc;
}
