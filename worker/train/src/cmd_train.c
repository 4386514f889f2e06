/*
 * cmd_train.c - `areal-worker tiny` and `areal-worker train` (see cmd.h).
 *
 * The hyperparameters of the demo are the defaults here (measured in
 * worker/train/README.md): G 8, 32 prompts a step, eta 1, AdamW lr 3e-4
 * constant, eps_clip 0.2, GRPO group normalisation, decoupled loss with the
 * recomputed proximal policy. An AReaL YAML (--config) is read through
 * rl-core's areal_rl_config_load once that lands; until then the flags set
 * the keys the loop uses.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/escape.h"
#include "areal/model/tokenizer.h"
#include "areal/train/cmd.h"
#include "areal/train/hf_save.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/warmup.h"
#include "areal/version.h"

bool areal_cmd_is_train(const char *name) {
    return name != NULL && (strcmp(name, "train") == 0 || strcmp(name, "tiny") == 0);
}

static bool num(const char *s, double lo, double hi, double *out) {
    char *end = NULL;
    double x = strtod(s, &end);
    if (end == s || *end != '\0' || !(x >= lo && x <= hi))
        return false;
    *out = x;
    return true;
}

/* Reads "--flag VALUE" numbers into *out; 1 = consumed, 0 = not this flag, -1 = bad. */
static int num_flag(int argc, char **argv, int *i, const char *flag, double lo, double hi,
                    double *out, FILE *err) {
    if (strcmp(argv[*i], flag) != 0)
        return 0;
    if (*i + 1 >= argc || !num(argv[*i + 1], lo, hi, out)) {
        areal_print_line(err, "areal-worker %s: %s needs a number in [%g, %g], not '%s'", argv[0],
                         flag, lo, hi, *i + 1 < argc ? argv[*i + 1] : "");
        return -1;
    }
    (*i)++;
    return 1;
}

static const char tiny_help[] =
    "usage: areal-worker tiny --out DIR [--warmup-steps N] [--seed S] [--max-operand M]\n"
    "Writes the demo's tiny model (HF config.json, tokenizer.json, safetensors) to DIR and\n"
    "warms it up on the synthetic a+b task (worker/train/README.md).\n"
    "  --out DIR           the model directory to write\n"
    "  --warmup-steps N    supervised steps before RL (default 300)\n"
    "  --seed S            initialisation and data seed (default 1)\n"
    "  --max-operand M     operands in 0..M (default 49)\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

static const char train_help[] =
    "usage: areal-worker train --model DIR --job-dir DIR --servers HOST:PORT[,...] [--resume]\n"
    "           [--quiet] [--steps N] [--batch B] [--group G] [--eta E] [--lr LR]\n"
    "           [--eval-every N] [--eval-n N] [--ckpt-every N] [--seed S] [--max-operand M]\n"
    "           [--rollout-workers N] [--weight-update-mode disk|xccl] [--weight-bucket-mb MB]\n"
    "           [--xccl-host ADDR] [--max-concurrent N]\n"
    "The trainer role: asynchronous GRPO against SGLang-API rollout servers, checkpoints and\n"
    "a progress JSONL line per step. Weights reach the servers through the job directory\n"
    "(disk, the default here) or broadcast in buckets over a comm-runtime group (xccl, with\n"
    "the trainer at ADDR, default $POD_IP, else 127.0.0.1; buckets of MB, default 1024).\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

/* --help / --version of a subcommand: 1 when argv[i] was one of them (answered on out). */
static int help_or_version(const char *arg, const char *help, const char *prog, FILE *out) {
    if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
        fputs(help, out);
        return 1;
    }
    if (strcmp(arg, "--version") == 0) {
        areal_print_version(out, prog);
        return 1;
    }
    return 0;
}

static int cmd_tiny(int argc, char **argv, FILE *out, FILE *err) {
    const char *dir = NULL;
    double steps = 300, seed = 1, maxop = 49;
    for (int i = 1; i < argc; i++) {
        if (help_or_version(argv[i], tiny_help, "areal-worker tiny", out))
            return AREAL_EXIT_OK;
        int r;
        if (strcmp(argv[i], "--out") == 0 && i + 1 < argc) {
            dir = argv[++i];
        } else if ((r = num_flag(argc, argv, &i, "--warmup-steps", 0, 1e6, &steps, err)) ||
                   (r = num_flag(argc, argv, &i, "--seed", 0, 1e15, &seed, err)) ||
                   (r = num_flag(argc, argv, &i, "--max-operand", 1, 9999, &maxop, err))) {
            if (r < 0)
                return 2;
        } else {
            areal_print_line(
                err, "areal-worker tiny: unknown argument '%s'; see areal-worker tiny --help",
                argv[i]);
            return 2;
        }
    }
    if (dir == NULL) {
        fprintf(err, "areal-worker tiny: --out DIR is required\n");
        return 2;
    }
    mkdir(dir, 0755);
    areal_tiny_cfg tc = areal_tiny_default();
    tc.seed = (uint64_t)seed;
    areal_error e;
    areal_model m;
    areal_tokenizer *tok = NULL;
    areal_synth_split sp = {0};
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    areal_synth_cfg task = {(int)maxop, "+", 0.2, 7};
    int rc = areal_tiny_create(dir, &tc, &e);
    if (rc == 0 && (rc = areal_model_load(&m, dir, NULL, &e)) == 0) {
        areal_warmup_cfg wc = {(int)steps, 32, 3e-3, 12345};
        double loss = 0, acc = 0;
        if ((rc = areal_tokenizer_load(path, &tok, &e)) == 0 &&
            (rc = areal_synth_make(&task, &sp, &e)) == 0 &&
            (rc = areal_warmup_run(&m, tok, sp.train, sp.n_train, &wc, &loss, &e)) == 0 &&
            (rc = areal_hf_save_weights(&m, dir, &e)) == 0 &&
            (rc = areal_synth_accuracy(&m, tok, sp.test, sp.n_test, &acc, &e)) == 0)
            fprintf(out,
                    "tiny model in %s: %zu parameters, %d warm-up steps (loss %.3f), held-out "
                    "accuracy %.3f on %zu problems\n",
                    dir, m.n_params, (int)steps, loss, acc, sp.n_test);
        areal_model_free(&m);
    }
    areal_synth_free(&sp);
    areal_tokenizer_free(tok);
    if (rc != 0) {
        areal_print_line(err, "areal-worker tiny: %s", e.msg);
        return rc == AREAL_EINVAL ? 2 : 1;
    }
    return 0;
}

static volatile sig_atomic_t stop_flag;

static void on_signal(int sig) {
    (void)sig;
    stop_flag = 1;
}

typedef struct io {
    FILE *out, *err;
    bool quiet;
} io;

static void log_line(void *ctx, const char *line) {
    io *x = ctx;
    fprintf(x->err, "areal-worker train: %s\n", line);
    fflush(x->err);
}

static void progress_line(void *ctx, const char *line) {
    io *x = ctx;
    if (!x->quiet) {
        fprintf(x->out, "%s\n", line);
        fflush(x->out);
    }
}

/* The demo's configuration (AReaL key names in the comments). */
static void defaults(areal_rl_config *c) {
    memset(c, 0, sizeof *c);
    c->seed = 1;
    areal_actor_config *a = &c->actor;
    snprintf(a->optimizer.type, sizeof a->optimizer.type, "adam");
    a->optimizer.lr = 3e-4; /* actor.optimizer.lr */
    a->optimizer.beta1 = 0.9;
    a->optimizer.beta2 = 0.999;
    a->optimizer.eps = 1e-8;
    a->optimizer.gradient_clipping = 1.0;
    a->ppo_n_minibatches = 1;
    a->eps_clip = 0.2;
    a->reward_scaling = 1.0;
    a->reward_clip = 20.0;
    a->reward_norm.enabled = true; /* actor.reward_norm: group mean/std */
    a->reward_norm.mean_level = AREAL_NORM_GROUP;
    a->reward_norm.std_level = AREAL_NORM_GROUP;
    a->reward_norm.std_unbiased = true;
    a->reward_norm.eps = 1e-5;
    a->discount = 1.0;
    a->gae_lambda = 1.0;
    a->recompute_logprob = true;
    a->use_decoupled_loss = true;
    a->temperature = 1.0;
    c->gconfig.max_new_tokens = 6;
    c->gconfig.temperature = 1.0;
    c->gconfig.top_p = 1.0;
    c->rollout.request_timeout = 120;
}

static int cmd_train(int argc, char **argv, FILE *out, FILE *err) {
    const char *model = NULL, *job_dir = NULL, *servers = NULL;
    double steps = 300, B = 32, G = 8, eta = 1, lr = 3e-4, eval_every = 25, eval_n = 0,
           ckpt_every = 50, seed = 1, maxop = 49, workers = 4, bucket_mb = 1024, max_conc = 0;
    bool resume = false, quiet = false;
    const char *wmode = "disk", *xhost = NULL;
    for (int i = 1; i < argc; i++) {
        if (help_or_version(argv[i], train_help, "areal-worker train", out))
            return AREAL_EXIT_OK;
        int r;
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc)
            model = argv[++i];
        else if (strcmp(argv[i], "--job-dir") == 0 && i + 1 < argc)
            job_dir = argv[++i];
        else if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc)
            servers = argv[++i];
        else if (strcmp(argv[i], "--resume") == 0)
            resume = true;
        else if (strcmp(argv[i], "--xccl-host") == 0 && i + 1 < argc)
            xhost = argv[++i];
        else if (strcmp(argv[i], "--weight-update-mode") == 0) {
            if (i + 1 >= argc ||
                (strcmp(argv[i + 1], "disk") != 0 && strcmp(argv[i + 1], "xccl") != 0)) {
                areal_print_line(err,
                                 "areal-worker train: --weight-update-mode takes disk or xccl, "
                                 "not '%s'",
                                 i + 1 < argc ? argv[i + 1] : "");
                return 2;
            }
            wmode = argv[++i];
        } else if (strcmp(argv[i], "--quiet") == 0)
            quiet = true;
        else if ((r = num_flag(argc, argv, &i, "--steps", 1, 1e7, &steps, err)) ||
                 (r = num_flag(argc, argv, &i, "--batch", 1, 4096, &B, err)) ||
                 (r = num_flag(argc, argv, &i, "--group", 1, 256, &G, err)) ||
                 (r = num_flag(argc, argv, &i, "--eta", 0, 1e6, &eta, err)) ||
                 (r = num_flag(argc, argv, &i, "--lr", 1e-12, 10, &lr, err)) ||
                 (r = num_flag(argc, argv, &i, "--eval-every", 0, 1e7, &eval_every, err)) ||
                 (r = num_flag(argc, argv, &i, "--eval-n", 0, 1e7, &eval_n, err)) ||
                 (r = num_flag(argc, argv, &i, "--ckpt-every", 0, 1e7, &ckpt_every, err)) ||
                 (r = num_flag(argc, argv, &i, "--seed", 0, 1e15, &seed, err)) ||
                 (r = num_flag(argc, argv, &i, "--max-operand", 1, 9999, &maxop, err)) ||
                 (r = num_flag(argc, argv, &i, "--rollout-workers", 1, 1024, &workers, err)) ||
                 (r = num_flag(argc, argv, &i, "--max-concurrent", 1, 1e6, &max_conc, err)) ||
                 (r = num_flag(argc, argv, &i, "--weight-bucket-mb", 1e-6, 1e6, &bucket_mb, err))) {
            if (r < 0)
                return 2;
        } else {
            areal_print_line(
                err, "areal-worker train: unknown argument '%s'; see areal-worker train --help",
                argv[i]);
            return 2;
        }
    }
    if (model == NULL || job_dir == NULL || servers == NULL) {
        fprintf(err, "areal-worker train: --model DIR, --job-dir DIR and --servers HOST:PORT[,...] "
                     "are required\n");
        return 2;
    }
    char *list = strdup(servers);
    const char *addrs[64];
    int n = 0;
    for (char *save = NULL, *tokn = strtok_r(list, ",", &save); tokn && n < 64;
         tokn = strtok_r(NULL, ",", &save))
        addrs[n++] = tokn;
    areal_rl_config cfg;
    defaults(&cfg);
    cfg.seed = (long)seed;
    cfg.actor.optimizer.lr = lr;
    cfg.actor.group_size = (int)G;
    cfg.actor.reward_norm.group_size = (int)G;
    cfg.gconfig.n_samples = (int)G;
    cfg.rollout.max_head_offpolicyness = (long)eta;
    cfg.rollout.consumer_batch_size = (long)B;
    /* rollout.max_concurrent_rollouts: prompts in flight (default 2 batches) */
    cfg.rollout.max_concurrent_rollouts = max_conc > 0 ? (long)max_conc : 2 * (long)B;
    snprintf(cfg.rollout.weight_update_mode, sizeof cfg.rollout.weight_update_mode, "%s", wmode);
    io x = {out, err, quiet};
    areal_train_job job;
    memset(&job, 0, sizeof job);
    job.model_dir = model;
    job.job_dir = job_dir;
    job.servers = addrs;
    job.n_servers = n;
    job.cfg = &cfg;
    job.total_steps = (long)steps;
    job.task = (areal_synth_cfg){(int)maxop, "+", 0.2, 7};
    job.eval_every = (int)eval_every;
    job.eval_n = (int)eval_n;
    job.ckpt_every = (int)ckpt_every;
    job.resume = resume;
    job.rollout_workers = (int)workers;
    /* the address servers reach this trainer at: the pod's IP in a job */
    job.xccl.host = xhost ? xhost : getenv("POD_IP");
    job.xccl.bucket_bytes = (size_t)(bucket_mb * 1048576.0);
    if (job.xccl.bucket_bytes == 0)
        job.xccl.bucket_bytes = 1;
    job.threads = 1;
    job.stop = &stop_flag;
    job.log = log_line;
    job.progress = progress_line;
    job.ctx = &x;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    areal_train_result res;
    areal_error e;
    int rc = areal_train_run(&job, &res, &e);
    free(list);
    if (rc != AREAL_OK) {
        areal_print_line(err, "areal-worker train: %s", e.msg);
        return rc == AREAL_EINVAL ? 2 : 1;
    }
    fprintf(err,
            "areal-worker train: %s after %ld steps in %.1f s: held-out accuracy %.3f -> %.3f\n",
            res.stopped ? "stopped with a checkpoint" : "done", res.steps_done, res.wall_s,
            res.acc_start, res.acc_end);
    return 0;
}

int areal_cmd_train_run(int argc, char **argv, FILE *out, FILE *err) {
    if (argc < 1 || !areal_cmd_is_train(argv[0])) {
        fprintf(err, "areal-worker: unknown command\n");
        return 2;
    }
    return strcmp(argv[0], "tiny") == 0 ? cmd_tiny(argc, argv, out, err)
                                        : cmd_train(argc, argv, out, err);
}
