/*
 * plan_cmd.c - `arealctl plan`: parse the allocation, read the inventory,
 * place the gang and print the layout as tables or JSON.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "areal/alloc.h"
#include "areal/escape.h"
#include "areal/version.h"
#include "cli.h"

#define DEFAULT_ALLOC "sglang:d4t2+megatron:d2p2t4e2"
#define DEFAULT_JOB   "demo"
#define DEFAULT_GPUS  8

typedef struct plan_args {
    const char *alloc;
    const char *cluster;
    const char *job;
    const char *role;
    int gpus_per_node;
    long rank; /* -1 = none */
    bool json;
    int n_rules;
    areal_locality_rule rules[AREAL_MAX_RULES];
    const char *rule_text[AREAL_MAX_RULES];
    plan_mem_args mem;
} plan_args;

static void cli_vline(const char *fmt, va_list ap) {
    char msg[4096];
    vsnprintf(msg, sizeof msg, fmt, ap);
    areal_print_line(stderr, "arealctl: %s", msg);
}

int cli_bad_input(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vline(fmt, ap);
    va_end(ap);
    return CLI_BAD_INPUT;
}

int cli_failure(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    cli_vline(fmt, ap);
    va_end(ap);
    return CLI_FAILURE;
}

static const char plan_usage[] =
    "usage: arealctl plan [--alloc STRING] [--cluster FILE] [--gpus-per-node N]\n"
    "                     [--rank R] [--role NAME] [--job NAME] [--json]\n"
    "                     [--require KIND=LEVEL] [--prefer KIND=LEVEL]\n"
    "Places a job's pods by parallel-group topology and prints the layout.\n"
    "  --alloc STRING        the allocation (default " DEFAULT_ALLOC ")\n"
    "  --cluster FILE        inventory (YAML/JSON, or kubectl get nodes -o json);\n"
    "                        default: an embedded 8-node cluster\n"
    "  --gpus-per-node N     GPUs of nodes that state none (default 8)\n"
    "  --rank R, --role NAME also print the groups of rank R of a role\n"
    "  --require KIND=LEVEL, --prefer KIND=LEVEL\n"
    "                        every group of KIND inside one LEVEL (node, clique,\n"
    "                        leaf, spine, zone or a label key)\n"
    "  --job NAME            pod name prefix (default " DEFAULT_JOB ")\n"
    "  --json                the plan as one JSON document (README.md)\n"
    "  --model PATH          config.json (or its directory): print each trainer\n"
    "                        rank's memory (parameters, gradients, optimizer, peak\n"
    "                        activations); with --gpu-memory Q refuse a layout\n"
    "                        that does not fit Q bytes (e.g. 80Gi)\n"
    "  --mb-tokens N, --seq-len N, --n-mb N\n"
    "                        tokens a micro-batch (4096), a sequence (= mb-tokens),\n"
    "                        micro-batches a step (1)\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

static int parse_long(const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno != 0 || end == text || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* KIND=LEVEL for --require / --prefer; the level is checked against the topology later. */
static int add_rule(plan_args *a, const char *text, areal_topo_mode mode, const char *flag) {
    if (a->n_rules == AREAL_MAX_RULES)
        return cli_bad_input("%s: at most %d locality rules", flag, AREAL_MAX_RULES);
    const char *eq = strchr(text, '=');
    char kind[32];
    if (eq == NULL || eq == text || (size_t)(eq - text) >= sizeof kind || eq[1] == '\0')
        return cli_bad_input("%s '%s': expected KIND=LEVEL, for example pp=leaf", flag, text);
    memcpy(kind, text, (size_t)(eq - text));
    kind[eq - text] = '\0';
    int k = areal_group_kind_from_name(kind);
    if (k < 0)
        return cli_bad_input("%s '%s': unknown group kind '%s'; use tp, cp, dp, dp-cp, pp, ep, "
                             "tp-ep, edp, ... (the kinds of arealctl plan --json)",
                             flag, text, kind);
    a->rules[a->n_rules] = (areal_locality_rule){.kind = (areal_group_kind)k, .mode = mode};
    a->rule_text[a->n_rules] = eq + 1;
    a->n_rules++;
    return CLI_OK;
}

static int parse_args(int argc, char **argv, plan_args *a) {
    static const struct option options[] = {
        {"alloc", required_argument, NULL, 'a'},
        {"cluster", required_argument, NULL, 'c'},
        {"gpus-per-node", required_argument, NULL, 'g'},
        {"rank", required_argument, NULL, 'r'},
        {"role", required_argument, NULL, 'o'},
        {"job", required_argument, NULL, 'j'},
        {"json", no_argument, NULL, 'J'},
        {"require", required_argument, NULL, 'q'},
        {"prefer", required_argument, NULL, 'p'},
        {"model", required_argument, NULL, 'm'},
        {"gpu-memory", required_argument, NULL, 'G'},
        {"mb-tokens", required_argument, NULL, 'T'},
        {"seq-len", required_argument, NULL, 'S'},
        {"n-mb", required_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {NULL, 0, NULL, 0},
    };
    *a = (plan_args){
        .alloc = DEFAULT_ALLOC, .job = DEFAULT_JOB, .gpus_per_node = DEFAULT_GPUS, .rank = -1};
    a->mem = (plan_mem_args){.mb_tokens = 4096, .n_mb = 1};
    opterr = 0; /* one message of our own instead of getopt's */
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, "", options, NULL);
        if (c == -1)
            break;
        long v;
        int rc = CLI_OK;
        switch (c) {
        case 'a':
            a->alloc = optarg;
            break;
        case 'c':
            a->cluster = optarg;
            break;
        case 'g':
            if (parse_long(optarg, 1, 4096, &v) != 0)
                return cli_bad_input("--gpus-per-node '%s': expected a whole number from 1 to 4096",
                                     optarg);
            a->gpus_per_node = (int)v;
            break;
        case 'r':
            if (parse_long(optarg, 0, AREAL_ALLOC_MAX_WORLD, &v) != 0)
                return cli_bad_input("--rank '%s': expected a rank, a whole number from 0", optarg);
            a->rank = v;
            break;
        case 'o':
            a->role = optarg;
            break;
        case 'j':
            if (optarg[0] == '\0' || strlen(optarg) > 63)
                return cli_bad_input("--job: expected a name of 1 to 63 characters");
            a->job = optarg;
            break;
        case 'J':
            a->json = true;
            break;
        case 'm':
            a->mem.model = optarg;
            break;
        case 'G':
            if (areal_quantity_parse(optarg, 1, &a->mem.gpu_bytes) != AREAL_OK ||
                a->mem.gpu_bytes < 1)
                return cli_bad_input("--gpu-memory '%s': expected bytes, e.g. 80Gi", optarg);
            break;
        case 'T':
        case 'S':
        case 'n':
            if (parse_long(optarg, 1, 1L << 40, &v) != 0)
                return cli_bad_input("--%s '%s': expected a whole number from 1",
                                     c == 'T'   ? "mb-tokens"
                                     : c == 'S' ? "seq-len"
                                                : "n-mb",
                                     optarg);
            *(c == 'T' ? &a->mem.mb_tokens : c == 'S' ? &a->mem.seq_len : &a->mem.n_mb) = v;
            break;
        case 'q':
            rc = add_rule(a, optarg, AREAL_TOPO_REQUIRED, "--require");
            break;
        case 'p':
            rc = add_rule(a, optarg, AREAL_TOPO_PREFERRED, "--prefer");
            break;
        case 'h':
            fputs(plan_usage, stdout);
            return -1;
        case 'V':
            areal_print_version(stdout, "arealctl");
            return -1;
        default:
            if (optopt != 0)
                return cli_bad_input("plan: option '%s' needs a value", argv[optind - 1]);
            return cli_bad_input("plan: unknown option '%s'; see arealctl --help",
                                 argv[optind - 1]);
        }
        if (rc != CLI_OK)
            return rc;
    }
    if (a->mem.seq_len == 0)
        a->mem.seq_len = a->mem.mb_tokens;
    if (a->mem.gpu_bytes > 0 && a->mem.model == NULL)
        return cli_bad_input("--gpu-memory needs --model (the model's config.json)");
    if (optind < argc)
        return cli_bad_input("plan: unexpected argument '%s'; values go after their option, e.g. "
                             "--alloc 'sglang:d4t2+megatron:d2p2t2'",
                             argv[optind]);
    return CLI_OK;
}

/* The role that --rank refers to: --role, else the first training role. */
static int pick_role(const plan_args *a, const areal_plan *plan) {
    if (a->role != NULL) {
        for (int r = 0; r < plan->n_roles; r++)
            if (strcmp(plan->roles[r].name, a->role) == 0)
                return r;
        return -1;
    }
    for (int r = 0; r < plan->n_roles; r++)
        if (!plan->roles[r].inference)
            return r;
    return 0;
}

int cmd_plan(int argc, char **argv) {
    plan_args a;
    int rc = parse_args(argc, argv, &a);
    if (rc < 0)
        return CLI_OK; /* --help, --version */
    if (rc != CLI_OK)
        return rc;

    areal_error err;
    areal_alloc alloc;
    if (areal_alloc_parse(a.alloc, &alloc, &err) != AREAL_OK)
        return cli_bad_input("--alloc '%s': %s", a.alloc, err.msg);
    if (alloc.legacy)
        areal_print_line(stderr,
                         "arealctl: warning: '%s' uses legacy syntax; today it is written %s",
                         a.alloc, alloc.legacy_hint[0] ? alloc.legacy_hint : "in the colon form");

    areal_cluster cluster;
    if (a.cluster != NULL)
        rc = areal_cluster_load_file(a.cluster, a.gpus_per_node, &cluster, &err);
    else
        rc = default_cluster(&cluster, a.gpus_per_node, &err);
    if (rc == AREAL_ENOMEM)
        return cli_failure("%s", err.msg);
    if (rc != AREAL_OK)
        return cli_bad_input("--cluster: %s", err.msg);

    areal_job job;
    areal_job_init(&job, a.job, &alloc);
    job.n_rules = a.n_rules;
    for (int i = 0; i < a.n_rules; i++) {
        job.rules[i] = a.rules[i];
        job.rules[i].level = areal_topology_level(&job.topology, a.rule_text[i]);
        if (job.rules[i].level < 0) {
            areal_cluster_free(&cluster);
            return cli_bad_input(
                "rule '%s=%s': unknown level '%s'; use node, clique, leaf, spine or "
                "zone (or a label key)",
                areal_group_kind_name(a.rules[i].kind), a.rule_text[i], a.rule_text[i]);
        }
    }

    areal_plan plan;
    rc = areal_place(&job, &cluster, &plan, &err);
    if (rc != AREAL_OK) {
        areal_cluster_free(&cluster);
        if (rc == AREAL_ENOMEM)
            return cli_failure("%s", err.msg);
        return cli_bad_input("cannot place '%s': %s", a.alloc, err.msg);
    }

    plan_view view = {.job_name = a.job,
                      .alloc_text = a.alloc,
                      .alloc = &alloc,
                      .cluster = &cluster,
                      .plan = &plan,
                      .rank_role = -1,
                      .rank = -1};
    if (a.rank >= 0 || a.role != NULL) {
        view.rank_role = pick_role(&a, &plan);
        if (view.rank_role < 0) {
            rc = cli_bad_input("--role '%s': the job has no such role", a.role);
        } else if (a.rank >= plan.roles[view.rank_role].world) {
            rc = cli_bad_input("--rank %ld: role %s has ranks 0 to %d", a.rank,
                               plan.roles[view.rank_role].name,
                               plan.roles[view.rank_role].world - 1);
        }
        view.rank = a.rank >= 0 ? (int)a.rank : 0;
    }
    if (rc == CLI_OK) {
        if (a.json) {
            rc = plan_print_json(stdout, &view);
        } else {
            plan_print_text(stdout, &view);
            rc = a.mem.model != NULL ? plan_memory(stdout, &plan, &a.mem) : CLI_OK;
        }
    }
    areal_plan_free(&plan);
    areal_cluster_free(&cluster);
    return rc;
}
