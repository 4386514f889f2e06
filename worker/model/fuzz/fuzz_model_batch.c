/*
 * fuzz_model_batch.c - libFuzzer target for the CPU model's batch handling.
 *
 * A tiny Qwen3-MoE (q/k norm, one MoE and one dense layer, GQA) with fixed
 * weights runs whatever packed batch the input describes: byte 0 picks the
 * number of sequences (1..4), the next bytes their lengths (1..12) and then
 * the token ids, raw (so ids outside the vocabulary and a short input reach
 * the validation). A valid batch must give finite logits and a finite loss,
 * a backward, and a generation from the same sequences as prompts with
 * sampling settings taken from the last bytes; its logprobs must be <= 0.
 * An invalid one must be refused with a message. ASan sees every kernel's
 * indexing over odd sequence lengths.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/generate.h"
#include "areal/model/heads.h"
#include "areal/model/model.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char CONFIG[] =
    "{\"model_type\": \"qwen3_moe\", \"architectures\": [\"Qwen3MoeForCausalLM\"],"
    " \"vocab_size\": 20, \"hidden_size\": 8, \"intermediate_size\": 12,"
    " \"num_hidden_layers\": 2, \"num_attention_heads\": 4, \"num_key_value_heads\": 2,"
    " \"head_dim\": 4, \"max_position_embeddings\": 64, \"rms_norm_eps\": 1e-6,"
    " \"rope_theta\": 10000.0, \"hidden_act\": \"silu\", \"tie_word_embeddings\": false,"
    " \"num_experts\": 3, \"num_experts_per_tok\": 2, \"moe_intermediate_size\": 6,"
    " \"norm_topk_prob\": true, \"decoder_sparse_step\": 1, \"mlp_only_layers\": [1]}";

static void die_unless(int ok) {
    if (!ok)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2)
        return 0;
    areal_model_config cfg;
    areal_model m;
    areal_error err;
    die_unless(areal_model_config_parse(CONFIG, sizeof CONFIG - 1, "fuzz/config.json", &cfg,
                                        &err) == AREAL_OK);
    die_unless(areal_model_init(&m, &cfg, NULL, &err) == AREAL_OK);
    for (size_t i = 0; i < m.n_params; i++)
        m.params[i] = 0.3f * sinf((float)i * 0.7f);
    int ns = 1 + data[0] % 4, T = 0;
    int32_t cu[5] = {0}, tok[48];
    size_t at = 1;
    for (int s = 0; s < ns; s++) {
        int len = at < size ? 1 + data[at++] % 12 : 1;
        cu[s + 1] = cu[s] + len;
    }
    T = cu[ns];
    for (int t = 0; t < T; t++)
        tok[t] = at < size ? (int32_t)data[at++] - 2 : 0; /* -2..253: some out of range */
    areal_batch b = {tok, cu, T, ns};
    areal_acts a;
    int rc = areal_model_forward(&m, &b, &a, &err);
    if (rc != AREAL_OK) {
        die_unless(rc == AREAL_EINVAL && err.msg[0] != '\0');
        areal_model_free(&m);
        return 0;
    }
    int V = cfg.vocab_size;
    for (size_t i = 0; i < (size_t)T * V; i++)
        die_unless(isfinite(a.logits[i]));
    int32_t tgt[48];
    for (int s = 0; s < ns; s++)
        for (int t = cu[s]; t < cu[s + 1]; t++)
            tgt[t] = t + 1 < cu[s + 1] ? tok[t + 1] : -1;
    float *dl = malloc(sizeof(float) * (size_t)T * V);
    double loss;
    die_unless(dl != NULL);
    die_unless(areal_cross_entropy(NULL, a.logits, T, V, tgt, &loss, dl, &err) == AREAL_OK);
    die_unless(isfinite(loss) && loss >= 0);
    die_unless(areal_model_backward(&m, &a, dl, &err) == AREAL_OK);
    for (size_t i = 0; i < m.n_params; i++)
        die_unless(isfinite(m.grads[i]));
    free(dl);
    areal_acts_free(&a);
    const int32_t *prompts[4];
    int lens[4];
    for (int s = 0; s < ns; s++) {
        prompts[s] = tok + cu[s];
        lens[s] = cu[s + 1] - cu[s];
    }
    uint8_t k = data[size - 1];
    int32_t stop = k % 20;
    areal_sampling sp = {.temperature = (float)(k % 4) * 0.5f,
                         .top_k = (k >> 2) % 5,
                         .top_p = (k & 0x40) ? 0.6f : 1.0f,
                         .seed = k,
                         .max_new_tokens = 1 + (k >> 4) % 5,
                         .stop = &stop,
                         .n_stop = (k & 0x80) ? 1 : 0};
    areal_gen_out out[4];
    die_unless(areal_generate(&m, prompts, lens, ns, &sp, out, &err) == AREAL_OK);
    for (int s = 0; s < ns; s++) {
        die_unless(out[s].n >= 1 && out[s].n <= sp.max_new_tokens);
        for (int j = 0; j < out[s].n; j++)
            die_unless(out[s].tokens[j] >= 0 && out[s].tokens[j] < V &&
                       out[s].logprobs[j] <= 1e-6f && isfinite(out[s].logprobs[j]));
        areal_gen_out_free(&out[s]);
    }
    areal_model_free(&m);
    return 0;
}
