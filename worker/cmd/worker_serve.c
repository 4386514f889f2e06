/*
 * worker_serve.c - `areal-worker serve`: the rollout server (SGLang's HTTP
 * API, areal/rollout/server.h) until SIGTERM/SIGINT, then drain and exit 0.
 *
 *   areal-worker serve --model DIR [--host H] [--port P] [--kv-memory BYTES]
 *       [--max-running N] [--max-queued N] [--threads N] [--weight-version V]
 *       [--served-name NAME] [--grace-ms MS] [--disable-prefix-cache] [--no-prepack]
 *       [--tp N]
 *
 * --tp N (by hand) forks N - 1 follower ranks on this machine (a store of
 * their own on a free loopback port) and serves as rank 0 of the
 * tensor-parallel server (worker_serve_tp.c); in a job the ranks of an
 * inference role with t > 1 arrive already split (worker_rank.c). The server
 * exits 1 when its tp group fails (a follower died): /health fails first.
 *
 * In a job (MASTER_ADDR set: a rank of an inference role started with
 * --model, or serve by hand inside a pod) it also registers in the trainer's
 * store as rollout/servers/<POD_NAME or host-port> (worker/rollout/README.md)
 * and deregisters after draining. Signals are blocked in every thread and
 * taken by sigwait here, so no library code runs in a handler.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "areal/escape.h"
#include "areal/rollout/backend.h"
#include "areal/rollout/server.h"
#include "areal/version.h"
#include "worker_env.h"
#include "worker_serve_tp.h"

#define SERVE_SYNOPSIS                                                                             \
    "usage: areal-worker serve --model DIR [--host H] [--port P] [--kv-memory BYTES]\n"            \
    "           [--max-running N] [--max-queued N] [--threads N] [--weight-version V]\n"           \
    "           [--served-name NAME] [--grace-ms MS] [--disable-prefix-cache]\n"                   \
    "           [--no-prepack] [--tp N]\n"

static const char serve_help[] = SERVE_SYNOPSIS
    "The rollout server: SGLang's HTTP API (worker/rollout/README.md).\n"
    "  --model DIR         HF model directory (config.json, *.safetensors, tokenizer.json)\n"
    "  --host H, --port P  listen address (default 127.0.0.1, port 30000; 0 picks one)\n"
    "  --kv-memory BYTES   KV-cache budget (suffix k, m or g)\n"
    "  --max-running N     requests batched at once;  --max-queued N  queue bound (then 503)\n"
    "  --threads N         compute threads\n"
    "  --weight-version V  version reported before the first update\n"
    "  --served-name NAME  model name of /v1/models;  --grace-ms MS  drain time on SIGTERM\n"
    "  --disable-prefix-cache  no KV block is shared between requests (SGLang's\n"
    "                      --disable-radix-cache; for benches and debugging)\n"
    "  --no-prepack        no packed copy of the linear weights (less memory, slower decode)\n"
    "  --tp N              tensor parallelism: N ranks on this machine (N - 1 forked\n"
    "                      followers); --kv-memory is per rank, for its 1/N of the KV heads\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

/* One error line quoting the argument (control bytes escaped). Returns 2. */
static int usage(const char *why, const char *arg) {
    if (arg)
        areal_print_line(stderr, "areal-worker serve: %s '%s'; see areal-worker serve --help", why,
                         arg);
    else
        areal_print_line(stderr, "areal-worker serve: %s; see areal-worker serve --help", why);
    return AREAL_EXIT_USAGE;
}

static int num(const char *s, long long lo, long long hi, long long *out) {
    char *end = NULL;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || (*end != '\0' && strchr("kKmMgG", *end) == NULL) ||
        (*end && end[1] != '\0'))
        return -1;
    if (*end)
        v <<= (*end == 'k' || *end == 'K') ? 10 : (*end == 'm' || *end == 'M') ? 20 : 30;
    if (v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Waits for SIGTERM/SIGINT (the signal) or a failed tp group (0). */
static int wait_stop(areal_rollout_server *s, const sigset_t *sigs) {
    for (;;) {
        struct timespec ts = {0, 500 * 1000000L};
        int sig = sigtimedwait(sigs, NULL, &ts);
        if (sig > 0)
            return sig;
        char why[700];
        if (areal_rollout_server_failed(s, why, sizeof why)) {
            areal_print_line(stderr, "areal-worker serve: %s; exiting", why);
            return 0;
        }
    }
}

int worker_serve_main(int argc, char **argv, const char *job_model) {
    return worker_serve_job(argc, argv, job_model, NULL);
}

int worker_serve_job(int argc, char **argv, const char *job_model, const worker_tp_spec *job_tp) {
    areal_rollout_server_config cfg = {.model_dir = job_model};
    long long grace = 30000, v = 0, tp = job_tp ? job_tp->t : 1;
    bool in_job = job_model != NULL;
    const char *pod_ip = getenv(AREAL_ENV_POD_IP);
    if (in_job) { /* a rank of an inference role: address from the pod */
        cfg.host = pod_ip && pod_ip[0] ? pod_ip : "0.0.0.0";
        const char *p = getenv("AREAL_ROLLOUT_PORT");
        const char *lr = getenv(AREAL_ENV_LOCAL_RANK);
        cfg.port = (p && num(p, 1, 65535, &v) == 0 ? (int)v : 30000) + (lr ? atoi(lr) : 0);
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            fputs(serve_help, stdout);
            return AREAL_EXIT_OK;
        }
        if (strcmp(a, "--version") == 0)
            return areal_print_version(stdout, "areal-worker serve");
        if (strcmp(a, "--disable-prefix-cache") == 0) { /* the flags without a value */
            cfg.disable_prefix_cache = true;
            continue;
        }
        if (strcmp(a, "--no-prepack") == 0) {
            cfg.no_prepack = true;
            continue;
        }
        if (val == NULL)
            return usage("a value is missing after, or unknown option", a);
        i++;
        if (strcmp(a, "--model") == 0)
            cfg.model_dir = val;
        else if (strcmp(a, "--host") == 0)
            cfg.host = val;
        else if (strcmp(a, "--served-name") == 0)
            cfg.served_name = val;
        else if (strcmp(a, "--weight-version") == 0)
            cfg.weight_version = val;
        else if (strcmp(a, "--port") == 0 && num(val, 0, 65535, &v) == 0)
            cfg.port = (int)v;
        else if (strcmp(a, "--kv-memory") == 0 && num(val, 1, (long long)1 << 42, &v) == 0)
            cfg.kv_bytes = (size_t)v;
        else if (strcmp(a, "--max-running") == 0 && num(val, 1, 1 << 20, &v) == 0)
            cfg.max_running = (int)v;
        else if (strcmp(a, "--max-queued") == 0 && num(val, 1, 1 << 24, &v) == 0)
            cfg.max_queued = (int)v;
        else if (strcmp(a, "--threads") == 0 && num(val, 1, 1024, &v) == 0)
            cfg.threads = (int)v;
        else if (strcmp(a, "--grace-ms") == 0 && num(val, 0, 86400000, &v) == 0)
            grace = v;
        else if (strcmp(a, "--tp") == 0 && job_tp == NULL && num(val, 1, WORKER_TP_MAX, &v) == 0)
            tp = v;
        else {
            areal_print_line(stderr,
                             "areal-worker serve: unknown option '%s', or a bad value '%s' for it; "
                             "see areal-worker serve --help",
                             a, val);
            return AREAL_EXIT_USAGE;
        }
    }
    if (cfg.model_dir == NULL)
        return usage("--model DIR is required", NULL);
    char advertise[256];
    if (pod_ip && pod_ip[0])
        snprintf(advertise, sizeof advertise, "%s", pod_ip);
    else if (cfg.host && strcmp(cfg.host, "0.0.0.0") != 0)
        snprintf(advertise, sizeof advertise, "%s", cfg.host);
    else if (gethostname(advertise, sizeof advertise) != 0)
        snprintf(advertise, sizeof advertise, "127.0.0.1");
    cfg.advertise_host = advertise;

    areal_error e;
    areal_comm *tcomm = NULL;
    areal_coll *tgroup = NULL;
    pid_t fpids[WORKER_TP_MAX] = {0};
    if (tp > 1) { /* before any thread: the local followers are forked here */
        worker_tp_spec sp = {.rank = 0,
                             .t = (int)tp,
                             .store_host = "127.0.0.1",
                             .host_store = true,
                             .prefix = "serve-tp"};
        int tmo = 0;
        if (worker_env_int(WORKER_ENV_COMM_TIMEOUT_MS, 60000, 1, 86400000, &tmo, &e) != AREAL_OK)
            return usage(e.msg, NULL);
        sp.timeout_ms = tmo;
        if (job_tp != NULL)
            sp = *job_tp;
        else if ((sp.store_port = worker_tp_free_port()) <= 0 ||
                 worker_tp_spawn_local(&sp, cfg.model_dir, cfg.threads, fpids) != 0) {
            areal_print_line(stderr, "areal-worker serve: cannot start %lld local tp ranks", tp);
            worker_tp_reap(fpids, (int)tp, 0);
            return 1;
        }
        if (worker_tp_join(&sp, &tcomm, &tgroup, &e) != AREAL_OK) {
            areal_print_line(stderr, "areal-worker serve: tp rank 0 of %lld: %s", tp, e.msg);
            worker_tp_reap(fpids, (int)tp, 0);
            return 1;
        }
        cfg.tensor_parallel = (int)tp;
        cfg.tp_group = tgroup;
    }

    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    areal_device_env denv = areal_device_env_read(true);
    areal_backend_choice bk = areal_rollout_backend(&denv);
    if (bk.warn && areal_device_pod_leader()) /* GPUs asked for and not usable: once per pod */
        areal_print_line(stderr, "areal-worker serve: %s", bk.why);
    cfg.gpu = bk.kind == AREAL_BACKEND_GPU;

    areal_rollout_server *s = NULL;
    if (areal_rollout_server_start(&cfg, &s, &e) != AREAL_OK) {
        areal_print_line(stderr, "areal-worker serve: %s", e.msg);
        areal_coll_destroy(tgroup); /* the followers see the group close and exit */
        areal_comm_destroy(tcomm);
        worker_tp_reap(fpids, (int)tp, 5000);
        return e.code == AREAL_EIO || e.code == AREAL_EINVAL ? 2 : 1;
    }
    if (areal_rollout_server_backend_note(s)[0] != '\0')
        areal_print_line(stderr, "areal-worker serve: %s", areal_rollout_server_backend_note(s));
    int port = areal_rollout_server_port(s);
    char addr[300];
    snprintf(addr, sizeof addr, "%s:%d", advertise, port);
    fprintf(stderr, "areal-worker serve: %s serving on %s:%d\n", cfg.model_dir,
            cfg.host ? cfg.host : "127.0.0.1", port);
    areal_rollout_reg *reg = NULL;
    const char *master = getenv(AREAL_ENV_MASTER_ADDR);
    if (master && master[0]) {
        int mport = 0;
        if (worker_env_int(AREAL_ENV_MASTER_PORT, AREAL_DEFAULT_MASTER_PORT, 1, 65535, &mport,
                           &e) != AREAL_OK) {
            areal_print_line(stderr, "areal-worker serve: %s", e.msg);
            areal_rollout_server_stop(s);
            return 2;
        }
        const char *pod = getenv(AREAL_ENV_POD_NAME);
        char name[300];
        if (pod && pod[0])
            snprintf(name, sizeof name, "%s", pod);
        else
            snprintf(name, sizeof name, "%s-%d", advertise, port);
        if (areal_rollout_register_start(s, master, mport, name, addr, stderr, &reg, &e) !=
            AREAL_OK)
            areal_print_line(stderr, "areal-worker serve: %s", e.msg);
    }
    fflush(stderr);
    int sig = wait_stop(s, &sigs);
    int code = 0;
    if (sig == 0) { /* the tp group failed: nothing can be served any more */
        code = 1;
        areal_rollout_server_drain(s, 0);
    } else {
        fprintf(stderr, "areal-worker serve: signal %d: draining (grace %lld ms)\n", sig, grace);
        areal_rollout_server_drain(s, (int)grace);
    }
    areal_rollout_register_stop(reg);
    areal_rollout_server_stop(s); /* at t > 1 this tells the followers to stop */
    areal_coll_destroy(tgroup);
    areal_comm_destroy(tcomm);
    int fcode = worker_tp_reap(fpids, (int)tp, 10000);
    if (code == 0 && fcode != 0 && job_tp == NULL)
        code = 1;
    fprintf(stderr, "areal-worker serve: %s, exiting\n", code ? "failed" : "drained");
    return code;
}
