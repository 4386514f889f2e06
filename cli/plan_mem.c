/*
 * plan_mem.c - `arealctl plan --model`: the memory of each trainer rank
 * (parameters, gradients, optimizer state, peak activations of the worst
 * pipeline stage) from lib/layout's memory plan (areal/memplan.h, the
 * worker's own arithmetic) and the model's config.json (read by
 * worker/model's config reader), and the refusal of a layout that does not
 * fit --gpu-memory, naming the dimension to grow.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/memplan.h"
#include "areal/model/config.h"
#include "cli.h"

/* cfg as plan numbers: the layer kinds as the config reader decided them. */
static areal_mem_model mem_model(const areal_model_config *c) {
    areal_mem_model m = {.vocab = c->vocab_size,
                         .hidden = c->hidden_size,
                         .inter = c->intermediate_size,
                         .layers = c->num_layers,
                         .heads = c->num_heads,
                         .kv_heads = c->num_kv_heads,
                         .head_dim = c->head_dim,
                         .tied = c->tie_word_embeddings,
                         .qkv_bias = c->qkv_bias,
                         .o_bias = c->o_bias,
                         .mlp_bias = c->mlp_bias,
                         .qk_norm = c->qk_norm,
                         .experts = c->num_experts,
                         .experts_per_tok = c->num_experts_per_tok,
                         .moe_inter = c->moe_intermediate_size,
                         .shared_inter = c->shared_expert_intermediate_size,
                         .moe_step = c->num_experts > 0 ? 1 : 0};
    for (int l = 0; l < c->num_layers && l < 64; l++)
        if (c->num_experts > 0 && !c->moe_layer[l])
            m.dense_mask |= 1ull << l;
    return m;
}

static void gib(char *buf, size_t cap, int64_t b) {
    snprintf(buf, cap, "%.2f GiB", (double)b / (double)(1LL << 30));
}

int plan_memory(FILE *out, const areal_plan *plan, const plan_mem_args *a) {
    char path[4096];
    struct stat st;
    if (stat(a->model, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(path, sizeof path, "%s/config.json", a->model);
    else
        snprintf(path, sizeof path, "%s", a->model);
    areal_model_config cfg;
    areal_error err;
    if (areal_model_config_load(path, &cfg, &err) != AREAL_OK)
        return cli_bad_input("--model '%s': %s", a->model, err.msg);
    areal_mem_model m = mem_model(&cfg);
    fprintf(out,
            "\nMEMORY per trainer rank: fp32 as the worker trains, the worst pipeline stage, %ld "
            "tokens a micro-batch (sequences of %ld), %ld micro-batches\n",
            a->mb_tokens, a->seq_len, a->n_mb);
    /* GATHERED: fsdp's whole units live at a step's peak (0 for the other backends) */
    fprintf(out, "%-12s %5s %6s %12s %12s %12s %12s %12s %12s\n", "ROLE", "STAGE", "LAYERS",
            "PARAMS", "GRADS", "OPTIMIZER", "ACTIVATIONS", "GATHERED", "TOTAL");
    int rc = CLI_OK;
    for (int r = 0; r < plan->n_roles && rc == CLI_OK; r++) {
        const areal_role_plan *role = &plan->roles[r];
        if (role->inference)
            continue;
        /* megatron: the distributed optimizer (ZeRO-1); fsdp: everything sharded (fsdp.h) */
        areal_dp_sharding sharding = areal_backend_dp_sharding(role->backend);
        areal_mem_opts o = {.mb_tokens = a->mb_tokens,
                            .seq_len = a->seq_len,
                            .n_mb = a->n_mb,
                            .zero1 = sharding != AREAL_DP_REPLICATED,
                            .fsdp = sharding == AREAL_DP_FULLY_SHARDED};
        areal_mem_rank w;
        if (areal_mem_worst(&m, &role->strategy, &o, &w, &err) != AREAL_OK)
            return cli_bad_input("role %s: %s", role->name, err.msg);
        char c[6][32];
        gib(c[0], sizeof c[0], w.params);
        gib(c[1], sizeof c[1], w.grads);
        gib(c[2], sizeof c[2], w.optim);
        gib(c[3], sizeof c[3], w.acts);
        gib(c[4], sizeof c[4], w.gathered);
        gib(c[5], sizeof c[5], w.total);
        fprintf(out, "%-12s %5d %6ld %12s %12s %12s %12s %12s %12s\n", role->name, w.stage,
                w.layers, c[0], c[1], c[2], c[3], c[4], c[5]);
        if (a->gpu_bytes > 0 &&
            areal_mem_fit(&w, &role->strategy, &o, a->gpu_bytes, &err) != AREAL_OK)
            rc = cli_bad_input("role %s does not fit --gpu-memory: %s", role->name, err.msg);
    }
    return rc;
}
