/*
 * cmd_train.c - `areal-worker tiny` and `areal-worker train` (see cmd.h).
 *
 * The hyperparameters of the demo are the defaults here (measured in
 * worker/train/README.md): G 8, 32 prompts a step, eta 1, AdamW lr 3e-4
 * constant, eps_clip 0.2, GRPO group normalisation, decoupled loss with the
 * recomputed proximal policy (areal_train_config_demo). A job config file
 * (--config FILE, else env AREAL_CONFIG: AReaL's experiment YAML, see
 * job_config.h) replaces them with AReaL's defaults and its own keys; flags
 * given on the command line override either.
 */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "areal/escape.h"
#include "areal/model/tokenizer.h"
#include "areal/placement.h"
#include "areal/podenv.h"
#include "areal/train/backend.h"
#include "areal/train/cmd.h"
#include "areal/train/discover.h"
#include "areal/train/dp.h"
#include "areal/train/hf_save.h"
#include "areal/train/job_config.h"
#include "areal/train/pod_rank.h"
#include "areal/train/tiny.h"
#include "areal/train/train_loop.h"
#include "areal/train/trainer_http.h"
#include "areal/train/trainer_par.h"
#include "areal/train/warmup.h"
#include "areal/version.h"

bool areal_cmd_is_train(const char *name) {
    return name != NULL && (strcmp(name, "train") == 0 || strcmp(name, "tiny") == 0);
}

bool areal_cmd_train_wants_ranks(int argc, char **argv) {
    static const char *const own[] = {"--rank",    "--dp-rank", "--world",
                                      "--dp-size", "--master",  "--dp-master",
                                      "--help",    "-h",        "--version"};
    if (argc < 1 || argv[0] == NULL || strcmp(argv[0], "train") != 0)
        return false;
    for (int i = 1; i < argc; i++)
        for (size_t k = 0; k < sizeof own / sizeof own[0]; k++)
            if (strcmp(argv[i], own[k]) == 0)
                return false;
    areal_train_pod_env env = areal_train_pod_env_read();
    if (env.rank != NULL && env.rank[0] != '\0')
        return false;
    if (env.world == NULL || env.world[0] == '\0' || env.pod_ranks == NULL)
        return false;
    char *end = NULL;
    long n = strtol(env.pod_ranks, &end, 10);
    return end != env.pod_ranks && *end == '\0' && n > 1;
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
    "usage: areal-worker train --job-dir DIR [--servers HOST:PORT[,...]] [--config FILE]\n"
    "           [--model DIR] [--resume] [--quiet] [--no-discover] [--steps N] [--batch B]\n"
    "           [--group G]\n"
    "           [--eta E] [--lr LR] [--eval-every N] [--eval-n N] [--ckpt-every N] [--seed S]\n"
    "           [--max-operand M] [--rollout-workers N] [--reward math|exact]\n"
    "           [--http-port P] [--http-host H] [--dp-rank R --dp-size N --dp-master HOST:PORT]\n"
    "           [--layout L [--no-overlap]] [--rank R --world N --master HOST:PORT]\n"
    "           [--weight-update-mode disk|xccl] [--weight-bucket-mb MB] [--xccl-host ADDR]\n"
    "           [--max-concurrent N]\n"
    "The trainer role: asynchronous GRPO against SGLang-API rollout servers, weights synced\n"
    "through the job directory, checkpoints and a progress JSONL line per step.\n"
    "  --config FILE   the job config: AReaL's experiment YAML (actor.*, gconfig.*, rollout.*,\n"
    "                  train_dataset.*, ...) or the CRD's short keys (rl.totalSteps, ...);\n"
    "                  default: env AREAL_CONFIG, else the demo's configuration\n"
    "  --model DIR     the initial policy (default: actor.path of the config)\n"
    "  --servers L     rollout servers to start with; in a job's master pod (POD_NAME is\n"
    "                  the first label of MASTER_ADDR) the trainer also hosts the job's store\n"
    "                  on POD_IP:MASTER_PORT and the servers registered there replace L once\n"
    "                  one registers (scaled servers join and leave; --no-discover: off)\n"
    "  --http-port P   /status, /metrics, /healthz (default env AREAL_TRAINER_HTTP_PORT,\n"
    "                  else 8090; 0: off); --http-host H: default 0.0.0.0 in a pod (POD_IP\n"
    "                  set), else 127.0.0.1\n"
    "  --dp-rank R, --dp-size N, --dp-master HOST:PORT   data-parallel trainer ranks: rank 0\n"
    "                  hosts the rendezvous at HOST:PORT and drives the rollouts (and HTTP),\n"
    "                  ranks > 0 train their share of each batch (no --servers needed)\n"
    "  --rank, --world, --master in a job's pod: from its environment when none is given\n"
    "                  (RANK, else AREAL_POD_FIRST_RANK of a one-rank pod; WORLD_SIZE;\n"
    "                  AREAL_TRAINER_ADDR:AREAL_TRAINER_PORT, hosted by rank 0); a pod of\n"
    "                  several ranks runs one process per rank (worker/train/README.md)\n"
    "  --layout L      split the model over the ranks by the trainer's strategy L\n"
    "                  (megatron:d1t2p2, fsdp:d2; default: the trainer component of env\n"
    "                  AREAL_ALLOCATION named by AREAL_ROLE, when both are set): each rank\n"
    "                  holds its shard and trains its data slice; N = d*t*p ranks, given as\n"
    "                  --rank R --world N --master HOST:PORT (the --dp-* flags' other names);\n"
    "                  without it N ranks replicate the model (data parallelism); a\n"
    "                  layout's recover checkpoints are per rank (each rank its shard and\n"
    "                  optimizer share) and resume in any other layout\n"
    "  --no-overlap    megatron dN: sum the gradients over dp after the backward instead of\n"
    "                  bucket by bucket during it (ZeRO-1's reduce-scatter; the default)\n"
    "  --weight-update-mode M   rollout.weight_update_mode: disk (HF safetensors under the job\n"
    "                  dir, /update_weights_from_disk) or xccl (buckets of --weight-bucket-mb MB,\n"
    "                  default 1024, broadcast over a comm-runtime group whose rank 0 is this\n"
    "                  trainer at --xccl-host ADDR, default $POD_IP, else 127.0.0.1)\n"
    "  --max-concurrent N   rollout.max_concurrent_rollouts (default 2 B)\n"
    "  --reward K      math (answer equivalence, the default with train_dataset.path) or\n"
    "                  exact (the answer's tokens then the end token: the synthetic task's)\n"
    "  --steps, --batch, --group, --eta, --lr, --eval-every, --ckpt-every, --seed override\n"
    "                  total_train_steps, train_dataset.batch_size (and consumer_batch_size;\n"
    "                  max_concurrent_rollouts = 2 B), gconfig.n_samples,\n"
    "                  rollout.max_head_offpolicyness, actor.optimizer.lr,\n"
    "                  evaluator.freq_steps, recover.freq_steps, seed\n"
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

/* The flags of `train`: numbers, with whether each was given (a given one overrides the
 * config file; without a file every flag's default applies over the demo's config). */
typedef struct nflag {
    const char *name;
    double lo, hi, val;
    bool set;
} nflag;

enum {
    F_STEPS,
    F_BATCH,
    F_GROUP,
    F_ETA,
    F_LR,
    F_EVAL_EVERY,
    F_EVAL_N,
    F_CKPT,
    F_SEED,
    F_MAXOP,
    F_WORKERS,
    F_DP_RANK,
    F_DP_SIZE,
    F_MAXCONC,
    F_BUCKET,
    F_N
};

static void override_flags(const nflag *f, bool from_file, areal_rl_config *c) {
#define GIVEN(i) (f[i].set || !from_file)
    if (GIVEN(F_STEPS))
        c->total_train_steps = (long)f[F_STEPS].val;
    if (GIVEN(F_BATCH)) {
        c->rollout.consumer_batch_size = (long)f[F_BATCH].val;
        c->train_dataset.batch_size = (long)f[F_BATCH].val;
        c->rollout.max_concurrent_rollouts = 2 * (long)f[F_BATCH].val;
    }
    if (GIVEN(F_GROUP)) {
        int G = (int)f[F_GROUP].val;
        c->gconfig.n_samples = G;
        c->actor.group_size = G;
        c->actor.reward_norm.group_size = G;
        c->actor.adv_norm.group_size = G;
    }
    if (GIVEN(F_ETA))
        c->rollout.max_head_offpolicyness = (long)f[F_ETA].val;
    if (GIVEN(F_LR))
        c->actor.optimizer.lr = f[F_LR].val;
    if (GIVEN(F_EVAL_EVERY))
        c->evaluator.freq_steps = (long)f[F_EVAL_EVERY].val;
    if (GIVEN(F_CKPT))
        c->recover.freq_steps = (long)f[F_CKPT].val;
    if (GIVEN(F_SEED))
        c->seed = (long)f[F_SEED].val;
    if (f[F_MAXCONC].set)
        c->rollout.max_concurrent_rollouts = (long)f[F_MAXCONC].val;
#undef GIVEN
}

/* A data-parallel rank (or a layout's, lay not NULL): joins the group; rank 0 runs the loop
 * (with HTTP), others follow. */
static int run_dp(areal_train_job *job, int rank, int size, const char *master,
                  areal_train_layout *lay, const char *http_host, int http_port, io *x,
                  areal_error *e) {
    char host[256];
    snprintf(host, sizeof host, "%s", master);
    char *colon = strrchr(host, ':');
    double port = 0;
    if (colon == NULL || !num(colon + 1, 1, 65535, &port))
        return areal_error_set(e, AREAL_EINVAL, -1, "--dp-master '%s': expected HOST:PORT", master);
    *colon = '\0';
    const char *pod_ip = getenv("POD_IP");
    bool local = strcmp(host, "127.0.0.1") == 0 || strcmp(host, "localhost") == 0;
    areal_comm *comm = NULL;
    areal_pg *dp = NULL;
    /* in a pod: listen on its IP only (pods of the e2e simulator share the host's
     * network, so every address would take the port from another job's trainer) */
    const char *ip = pod_ip && pod_ip[0] ? pod_ip : NULL;
    int rc = areal_train_dp_join(rank, size, host, (int)port, local ? "127.0.0.1" : ip,
                                 local ? "127.0.0.1" : ip, 600000, &comm, &dp, e);
    char what[160] = "DP";
    if (rc == AREAL_OK && lay != NULL) {
        lay->comm = comm;
        job->layout = lay;
        snprintf(what, sizeof what, "%s:d%dt%dp%d", areal_backend_name(lay->backend), lay->s.dp,
                 lay->s.tp, lay->s.pp);
        char line[256];
        snprintf(line, sizeof line, "rank %d of %d splits the model by %s (its shard only)", rank,
                 size, what);
        log_line(x, line);
        if (rank == 0 && lay->backend == AREAL_BACKEND_MEGATRON && lay->s.dp > 1) {
            snprintf(line, sizeof line,
                     lay->no_overlap
                         ? "data-parallel gradient sum after the backward (--no-overlap)"
                         : "data-parallel gradient sum overlapped with the backward (ZeRO-1 "
                           "reduce-scatter per bucket; --no-overlap turns it off)");
            log_line(x, line);
        }
    }
    areal_trainer_http *http = NULL;
    if (rc == AREAL_OK && rank == 0 && http_host != NULL)
        rc = areal_trainer_http_start(http_host, http_port, &http, e);
    if (rc == AREAL_OK && rank == 0) {
        job->dp = dp;
        job->http = http;
        areal_train_result res;
        rc = areal_train_run(job, &res, e);
        if (rc == AREAL_OK)
            fprintf(x->err,
                    "areal-worker train: %s after %ld steps on %d %s ranks in %.1f s: "
                    "held-out accuracy %.3f -> %.3f\n",
                    res.stopped ? "stopped with a checkpoint" : "done", res.steps_done, size, what,
                    res.wall_s, res.acc_start, res.acc_end);
    } else if (rc == AREAL_OK) {
        long steps = 0;
        rc = areal_train_follow(job, job->total_steps, dp, &steps, e);
        if (rc == AREAL_OK && lay != NULL)
            fprintf(x->err, "areal-worker train: rank %d of %d (%s): %ld steps\n", rank, size, what,
                    steps);
        else if (rc == AREAL_OK)
            fprintf(x->err, "areal-worker train: DP rank %d of %d: %ld steps\n", rank, size, steps);
    }
    areal_trainer_http_stop(http);
    areal_pg_destroy(dp);
    areal_comm_destroy(comm);
    return rc;
}

/* Whether this process runs in a job's master pod: POD_NAME is the first label of
 * MASTER_ADDR (the operator names the trainer's rank-0 pod there; arealctl run sets
 * 127.0.0.1, so a local job keeps its --servers). The store's port: MASTER_PORT. */
static bool master_pod(int *port) {
    const char *pod = getenv(AREAL_ENV_POD_NAME), *master = getenv(AREAL_ENV_MASTER_ADDR);
    const char *mp = getenv(AREAL_ENV_MASTER_PORT);
    if (pod == NULL || master == NULL || pod[0] == '\0')
        return false;
    size_t n = strlen(pod);
    if (strncmp(master, pod, n) != 0 || (master[n] != '\0' && master[n] != '.'))
        return false;
    double p = AREAL_DEFAULT_MASTER_PORT;
    if (mp != NULL && mp[0] != '\0' && !num(mp, 1, 65535, &p))
        return false;
    *port = (int)p;
    return true;
}

/* In a pod: the trainer component of env AREAL_ALLOCATION named by AREAL_ROLE (its
 * "backend:dNtNpN" text) into buf; false when either is unset or names no training role. */
static bool role_component(char *buf, size_t cap) {
    const char *alloc = getenv(AREAL_ENV_ALLOCATION), *role = getenv(AREAL_ENV_ROLE);
    static areal_alloc a; /* large; this runs once per process */
    static char names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX];
    if (alloc == NULL || role == NULL || alloc[0] == '\0' ||
        areal_alloc_parse(alloc, &a, NULL) != AREAL_OK)
        return false;
    areal_role_names(&a, names); /* the planner's names, as the operator sets AREAL_ROLE */
    for (int i = 0; i < a.n_components; i++) {
        const areal_component *c = &a.comp[i];
        if (strcmp(names[i], role) != 0 || areal_backend_is_inference(c->backend) || c->hybrid)
            continue;
        snprintf(buf, cap, "%s:d%dt%dp%dc%de%d", areal_backend_name(c->backend), c->strategy.dp,
                 c->strategy.tp, c->strategy.pp, c->strategy.cp, c->strategy.ep);
        return true;
    }
    return false;
}

static int cmd_train(int argc, char **argv, FILE *out, FILE *err) {
    const char *model = NULL, *job_dir = NULL, *servers = NULL, *config = NULL;
    areal_task_reward_kind reward = AREAL_TASK_REWARD_DEFAULT;
    const char *http_host = NULL, *http_port = getenv("AREAL_TRAINER_HTTP_PORT");
    const char *dp_master = NULL, *layout = NULL;
    bool no_overlap = false; /* --no-overlap: megatron dN's dp sum after the backward */
    nflag f[F_N] = {
        [F_STEPS] = {"--steps", 1, 1e7, 300, false},
        [F_BATCH] = {"--batch", 1, 4096, 32, false},
        [F_GROUP] = {"--group", 1, 256, 8, false},
        [F_ETA] = {"--eta", 0, 1e6, 1, false},
        [F_LR] = {"--lr", 1e-12, 10, 3e-4, false},
        [F_EVAL_EVERY] = {"--eval-every", 0, 1e7, 25, false},
        [F_EVAL_N] = {"--eval-n", 0, 1e7, 0, false},
        [F_CKPT] = {"--ckpt-every", 0, 1e7, 50, false},
        [F_SEED] = {"--seed", 0, 1e15, 1, false},
        [F_MAXOP] = {"--max-operand", 1, 9999, 49, false},
        [F_WORKERS] = {"--rollout-workers", 1, 1024, 4, false},
        [F_DP_RANK] = {"--dp-rank", 0, 4095, 0, false},
        [F_DP_SIZE] = {"--dp-size", 1, 4096, 1, false},
        [F_MAXCONC] = {"--max-concurrent", 1, 1e6, 0, false},
        [F_BUCKET] = {"--weight-bucket-mb", 1e-6, 1e6, 1024, false},
    };
    bool resume = false, quiet = false, discover = true;
    const char *wmode = NULL, *xhost = NULL;
    for (int i = 1; i < argc; i++) {
        if (help_or_version(argv[i], train_help, "areal-worker train", out))
            return AREAL_EXIT_OK;
        int r = 0;
        if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            model = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--job-dir") == 0 && i + 1 < argc) {
            job_dir = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--servers") == 0 && i + 1 < argc) {
            servers = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--config") == 0 && i + 1 < argc) {
            config = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--reward") == 0 && i + 1 < argc) {
            if ((reward = areal_task_reward_parse(argv[++i])) == AREAL_TASK_REWARD_DEFAULT) {
                areal_print_line(err, "areal-worker train: --reward '%s': expected math or exact",
                                 argv[i]);
                return 2;
            }
            continue;
        } else if ((strcmp(argv[i], "--dp-master") == 0 || strcmp(argv[i], "--master") == 0) &&
                   i + 1 < argc) {
            dp_master = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--layout") == 0 && i + 1 < argc) {
            layout = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--http-port") == 0 && i + 1 < argc) {
            http_port = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--http-host") == 0 && i + 1 < argc) {
            http_host = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--resume") == 0) {
            resume = true;
            continue;
        } else if (strcmp(argv[i], "--xccl-host") == 0 && i + 1 < argc) {
            xhost = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--weight-update-mode") == 0) {
            if (i + 1 >= argc ||
                (strcmp(argv[i + 1], "disk") != 0 && strcmp(argv[i + 1], "xccl") != 0)) {
                areal_print_line(err,
                                 "areal-worker train: --weight-update-mode takes disk or xccl, "
                                 "not '%s'",
                                 i + 1 < argc ? argv[i + 1] : "");
                return 2;
            }
            wmode = argv[++i];
            continue;
        } else if (strcmp(argv[i], "--quiet") == 0) {
            quiet = true;
            continue;
        } else if (strcmp(argv[i], "--no-discover") == 0) {
            discover = false;
            continue;
        } else if (strcmp(argv[i], "--no-overlap") == 0) {
            no_overlap = true;
            continue;
        }
        for (int k = 0; k < F_N && r == 0; k++)
            if ((r = num_flag(argc, argv, &i, f[k].name, f[k].lo, f[k].hi, &f[k].val, err)) > 0)
                f[k].set = true;
        /* --rank / --world: the --dp-* flags' names for a layout's ranks */
        if (r == 0 && (r = num_flag(argc, argv, &i, "--rank", 0, 4095, &f[F_DP_RANK].val, err)) > 0)
            f[F_DP_RANK].set = true;
        if (r == 0 &&
            (r = num_flag(argc, argv, &i, "--world", 1, 4096, &f[F_DP_SIZE].val, err)) > 0)
            f[F_DP_SIZE].set = true;
        if (r < 0)
            return 2;
        if (r == 0) {
            areal_print_line(
                err, "areal-worker train: unknown argument '%s'; see areal-worker train --help",
                argv[i]);
            return 2;
        }
    }
    double port = 8090; /* the contract's default (CONTRACTS.md); 0 disables */
    if (http_port != NULL && http_port[0] != '\0' && !num(http_port, 0, 65535, &port)) {
        areal_print_line(err,
                         "areal-worker train: the HTTP port '%s' (--http-port or env "
                         "AREAL_TRAINER_HTTP_PORT) must be 0 (off) to 65535",
                         http_port);
        return 2;
    }
    if (http_host == NULL) /* in a pod the operator reads /status over the pod network */
        http_host = getenv("POD_IP") != NULL && getenv("POD_IP")[0] ? "0.0.0.0" : "127.0.0.1";
    if (config == NULL && getenv("AREAL_CONFIG") != NULL && getenv("AREAL_CONFIG")[0] != '\0')
        config = getenv("AREAL_CONFIG");
    io x = {out, err, quiet};
    areal_rl_config cfg;
    areal_error e;
    int rc = AREAL_OK;
    if (config != NULL) {
        rc = areal_train_config_load(config, &cfg, &e);
    } else {
        areal_train_config_demo(&cfg);
    }
    if (rc == AREAL_OK) {
        override_flags(f, config != NULL, &cfg);
        if (wmode != NULL)
            snprintf(cfg.rollout.weight_update_mode, sizeof cfg.rollout.weight_update_mode, "%s",
                     wmode);
        rc = areal_train_config_settle(&cfg, &e);
    }
    if (rc != AREAL_OK) {
        areal_print_line(err, "areal-worker train: %s", e.msg);
        areal_rl_config_free(&cfg);
        return rc == AREAL_EIO ? 1 : 2;
    }
    if (model == NULL)
        model = cfg.actor.path;
    int dp_rank = (int)f[F_DP_RANK].val, dp_size = (int)f[F_DP_SIZE].val;
    areal_train_layout lay;
    areal_train_pod_rank pod_rank = {0};
    bool split = false;
    char role_layout[256];
    if (layout == NULL && role_component(role_layout, sizeof role_layout))
        layout = role_layout; /* a pod: the trainer component of the job's allocation */
    if (layout != NULL) {
        if (areal_train_layout_parse(layout, &lay, &e) != AREAL_OK) {
            areal_print_line(err, "areal-worker train: --layout: %s", e.msg);
            areal_rl_config_free(&cfg);
            return 2;
        }
        lay.no_overlap = no_overlap;
        int W = areal_train_layout_world(&lay);
        if (!f[F_DP_SIZE].set)
            dp_size = W;
        if (dp_size != W) {
            areal_print_line(err,
                             "areal-worker train: --layout %s has %d ranks but --world (--dp-size) "
                             "is %d; start one rank per GPU of the layout",
                             layout, W, dp_size);
            areal_rl_config_free(&cfg);
            return 2;
        }
        split = W > 1; /* one rank: the whole model, the single-process trainer */
        /* A job's pod: no rank flags, so the pod's environment says which rank this
         * process is and where the group meets (areal/train/pod_rank.h). */
        bool rank_flags = f[F_DP_RANK].set || f[F_DP_SIZE].set || dp_master != NULL;
        areal_train_pod_env penv = areal_train_pod_env_read();
        if (!rank_flags && areal_train_pod_rank_parse(&penv, W, &pod_rank, &e) != AREAL_OK) {
            areal_print_line(err, "areal-worker train: %s", e.msg);
            areal_rl_config_free(&cfg);
            return 2;
        }
        if (pod_rank.in_pod && pod_rank.launch) {
            /* areal-worker routes this case to its pod launcher; a library caller did not */
            areal_print_line(err,
                             "areal-worker train: the pod holds ranks %d..%d (env %s, %s) and "
                             "env %s is unset: start it as `areal-worker train ...`, whose pod "
                             "launcher runs one process per rank with RANK set",
                             pod_rank.first, pod_rank.first + pod_rank.n - 1, AREAL_ENV_FIRST_RANK,
                             AREAL_ENV_POD_RANKS, AREAL_ENV_RANK);
            areal_rl_config_free(&cfg);
            return 2;
        }
        if (pod_rank.in_pod && W > 1) {
            dp_rank = pod_rank.rank;
            dp_size = pod_rank.world;
            dp_master = pod_rank.master;
            char line[512];
            snprintf(line, sizeof line,
                     "rank %d of %d (the pod's ranks %d..%d), the trainer group meets at %s",
                     dp_rank, dp_size, pod_rank.first, pod_rank.first + pod_rank.n - 1, dp_master);
            log_line(&x, line);
        }
    }
    if (dp_rank >= dp_size || (dp_size > 1 && dp_master == NULL)) {
        areal_print_line(err,
                         "areal-worker train: --dp-rank %d --dp-size %d needs rank < size and "
                         "--dp-master HOST:PORT (rank 0 hosts the rendezvous there)%s%s%s",
                         dp_rank, dp_size, layout ? "; the layout " : "", layout ? layout : "",
                         layout ? (layout == role_layout ? " (from AREAL_ALLOCATION) has that many "
                                                           "ranks"
                                                         : " has that many ranks")
                                : "");
        areal_rl_config_free(&cfg);
        return 2;
    }
    if (dp_rank > 0 && servers == NULL)
        servers = ""; /* a follower talks to rank 0 only */
    int store_port = 0;
    discover = discover && dp_rank == 0 && master_pod(&store_port);
    if (discover && servers == NULL)
        servers = ""; /* the registrations are the list */
    if (model == NULL || job_dir == NULL || servers == NULL) {
        fprintf(err, "areal-worker train: --model DIR (or actor.path in the config), --job-dir "
                     "DIR and --servers HOST:PORT[,...] (outside a job's master pod) are "
                     "required\n");
        areal_rl_config_free(&cfg);
        return 2;
    }
    areal_train_config_report(&cfg, log_line, &x);
    areal_device_env denv = areal_device_env_read(true);
    areal_backend_choice bk = areal_train_backend(&denv);
    if (bk.warn && areal_device_pod_leader())
        log_line(&x, bk.why); /* GPUs asked for and not usable: once per pod */
    if (strcmp(cfg.recover_mode, "on") == 0 || strcmp(cfg.recover_mode, "auto") == 0)
        resume = true; /* AReaL's recover.mode: continue from a checkpoint when there is one */
    char *list = strdup(servers);
    const char *addrs[64];
    int n = 0;
    for (char *save = NULL, *tokn = strtok_r(list, ",", &save); tokn && n < 64;
         tokn = strtok_r(NULL, ",", &save))
        addrs[n++] = tokn;
    areal_train_job job;
    memset(&job, 0, sizeof job);
    job.model_dir = model;
    job.job_dir = job_dir;
    job.servers = addrs;
    job.n_servers = n;
    job.cfg = &cfg;
    job.total_steps = cfg.total_train_steps; /* 0: total_train_epochs over the dataset */
    job.task = (areal_synth_cfg){(int)f[F_MAXOP].val, "+", 0.2, 7};
    job.reward = reward;
    job.eval_every = (int)cfg.evaluator.freq_steps;
    job.eval_n = (int)f[F_EVAL_N].val;
    job.ckpt_every = (int)cfg.recover.freq_steps;
    job.resume = resume;
    job.rollout_workers = (int)f[F_WORKERS].val;
    job.gpu = bk.kind == AREAL_BACKEND_GPU;
    /* the address servers reach this trainer at: the pod's IP in a job */
    job.xccl.host = xhost ? xhost : getenv("POD_IP");
    job.xccl.bucket_bytes = (size_t)(f[F_BUCKET].val * 1048576.0);
    if (job.xccl.bucket_bytes == 0)
        job.xccl.bucket_bytes = 1;
    job.threads = 1;
    job.stop = &stop_flag;
    /* set by the operator on trainer containers, the path of terminationMessagePath */
    job.termination_log = getenv("AREAL_TERMINATION_LOG");
    job.log = log_line;
    job.progress = progress_line;
    job.ctx = &x;
    areal_discover *disc = NULL;
    if (discover) {
        const char *ip = getenv("POD_IP"); /* pods of other jobs may share the host's network */
        if (areal_discover_start(ip && ip[0] ? ip : NULL, store_port, log_line, &x, &disc, &e) !=
            AREAL_OK) {
            areal_print_line(err, "areal-worker train: the job's store: %s (--no-discover: off)",
                             e.msg);
            free(list);
            areal_rl_config_free(&cfg);
            return 1;
        }
        char line[200];
        snprintf(line, sizeof line,
                 "the job's store on %s:%d: rollout servers registered there are discovered",
                 ip && ip[0] ? ip : "0.0.0.0", areal_discover_port(disc));
        log_line(&x, line);
    }
    job.discover = disc;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    if (dp_size > 1) {
        rc = run_dp(&job, dp_rank, dp_size, dp_master, split ? &lay : NULL,
                    port > 0 ? http_host : NULL, (int)port, &x, &e);
        areal_discover_stop(disc);
        free(list);
        areal_rl_config_free(&cfg);
        if (rc != AREAL_OK) {
            areal_print_line(err, "areal-worker train: DP rank %d: %s", dp_rank, e.msg);
            return rc == AREAL_EINVAL ? 2 : 1;
        }
        return 0;
    }
    areal_trainer_http *http = NULL;
    if (port > 0 && (rc = areal_trainer_http_start(http_host, (int)port, &http, &e)) != AREAL_OK) {
        areal_print_line(err, "areal-worker train: %s (--http-port 0 turns the endpoints off)",
                         e.msg);
        areal_discover_stop(disc);
        free(list);
        areal_rl_config_free(&cfg);
        return 1;
    }
    if (http != NULL) {
        char line[160];
        snprintf(line, sizeof line, "status on http://%s:%d/status (/metrics, /healthz)", http_host,
                 areal_trainer_http_port(http));
        log_line(&x, line);
    }
    job.http = http;
    areal_train_result res;
    rc = areal_train_run(&job, &res, &e);
    areal_trainer_http_stop(http);
    areal_discover_stop(disc);
    free(list);
    areal_rl_config_free(&cfg);
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
