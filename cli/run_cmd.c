/*
 * run_cmd.c - `arealctl run`: the job on this machine, without a cluster.
 *
 * It plans the job as the operator does, on a one-node inventory whose "GPUs"
 * are local CPU slots, then starts every planned pod as a local process of
 * areal-worker with exactly the environment the operator gives a pod
 * (areal/podenv.h), MASTER_ADDR being this machine. Gang semantics as in the
 * cluster: if one pod fails, the others are stopped (SIGTERM, then SIGKILL
 * after a grace period) and the run fails naming the pod; a deadline bounds
 * the whole run.
 */
#include <errno.h>
#include <stdbool.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/alloc.h"
#include "areal/clock.h"
#include "areal/escape.h"
#include "areal/podenv.h"
#include "areal/version.h"
#include "cli.h"

#define DEFAULT_RUN_ALLOC "sglang:d2+fsdp:d2t2"
#define MAX_ENV           32

/* A free loopback TCP port (the kernel's choice), or -1. */
static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    int port = -1;
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0)
        close(fd);
    return port;
}

/* areal-worker beside this arealctl, unless $AREAL_WORKER names another. */
static void worker_path(const char *self, char *out, size_t cap) {
    const char *env = getenv("AREAL_WORKER");
    if (env != NULL) {
        snprintf(out, cap, "%s", env);
        return;
    }
    const char *slash = strrchr(self, '/');
    if (slash == NULL)
        snprintf(out, cap, "areal-worker");
    else
        snprintf(out, cap, "%.*s/areal-worker", (int)(slash - self), self);
}

typedef struct local_pod {
    pid_t pid;
    int status; /* exit code, or 128 + signal; -1 while running */
} local_pod;

static pid_t start_pod(const char *worker, char *const *args, const areal_plan *plan, int i,
                       const char *canonical, int port) {
    const areal_pod_plan *p = &plan->pods[i];
    const areal_role_plan *role = &plan->roles[p->role];
    char buf[MAX_ENV][256];
    int n = 0;
#define SETENV(name, fmt, ...) snprintf(buf[n++], sizeof buf[0], "%s=" fmt, name, __VA_ARGS__)
    SETENV(AREAL_ENV_JOB, "%s", "local");
    SETENV(AREAL_ENV_NAMESPACE, "%s", "local");
    SETENV(AREAL_ENV_ROLE, "%s", role->name);
    SETENV(AREAL_ENV_POD_INDEX, "%d", p->index);
    SETENV(AREAL_ENV_FIRST_RANK, "%d", p->first_rank);
    SETENV(AREAL_ENV_POD_RANKS, "%d", p->n_ranks);
    SETENV(AREAL_ENV_WORLD_SIZE, "%d", role->world);
    SETENV(AREAL_ENV_MASTER_ADDR, "%s", "127.0.0.1");
    SETENV(AREAL_ENV_MASTER_PORT, "%d", port);
    SETENV(AREAL_ENV_POD_NAME, "%s", p->name);
    SETENV(AREAL_ENV_POD_IP, "%s", "127.0.0.1");
#undef SETENV
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    for (int k = 0; k < n; k++)
        putenv(buf[k]);
    setenv(AREAL_ENV_ALLOCATION, canonical, 1);
    execv(worker, args);
    areal_print_line(stderr, "arealctl: cannot start %s: %s", worker, strerror(errno));
    _exit(127);
}

static bool is_manifest(const char *a) {
    size_t n = strlen(a);
    return (n > 5 && strcmp(a + n - 5, ".yaml") == 0) ||
           (n > 4 && strcmp(a + n - 4, ".yml") == 0) || (n > 5 && strcmp(a + n - 5, ".json") == 0);
}

/* `arealctl run JOB.yaml [--resume] [--job-dir DIR] [--timeout S]` (run_job.c). */
static int run_manifest(int argc, char **argv, const char *self) {
    const char *path = NULL, *job_dir = NULL;
    bool resume = false;
    long timeout = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--resume") == 0) {
            resume = true;
        } else if (strcmp(argv[i], "--job-dir") == 0 && i + 1 < argc) {
            job_dir = argv[++i];
        } else if (strcmp(argv[i], "--timeout") == 0 && i + 1 < argc) {
            char *end = NULL;
            timeout = strtol(argv[++i], &end, 10);
            if (*end || timeout < 0 || timeout > 864000)
                return cli_bad_input("--timeout '%s': expected 0 to 864000 seconds", argv[i]);
        } else if (is_manifest(argv[i]) && path == NULL) {
            path = argv[i];
        } else {
            return cli_bad_input("run %s: unknown argument '%s'; usage: arealctl run JOB.yaml "
                                 "[--resume] [--job-dir DIR] [--timeout S]",
                                 path ? path : "", argv[i]);
        }
    }
    return cmd_run_job(path, resume, job_dir, timeout, self);
}

int cmd_run(int argc, char **argv, const char *self) {
    for (int i = 1; i < argc && strcmp(argv[i], "--") != 0; i++)
        if (is_manifest(argv[i]))
            return run_manifest(argc, argv, self);
    static const struct option options[] = {
        {"alloc", required_argument, NULL, 'a'},   {"slots", required_argument, NULL, 's'},
        {"timeout", required_argument, NULL, 't'}, {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},       {NULL, 0, NULL, 0},
    };
    const char *alloc_text = DEFAULT_RUN_ALLOC;
    long slots = 0, timeout = 120;
    opterr = 0;
    optind = 1;
    for (;;) {
        int c = getopt_long(argc, argv, "+", options, NULL);
        if (c == -1)
            break;
        char *end = NULL;
        switch (c) {
        case 'a':
            alloc_text = optarg;
            break;
        case 's':
            slots = strtol(optarg, &end, 10);
            if (end == optarg || *end || slots < 1 || slots > 256)
                return cli_bad_input("--slots '%s': expected 1 to 256 local slots", optarg);
            break;
        case 't':
            timeout = strtol(optarg, &end, 10);
            if (end == optarg || *end || timeout < 1 || timeout > 86400)
                return cli_bad_input("--timeout '%s': expected 1 to 86400 seconds", optarg);
            break;
        case 'h':
            printf(
                "usage: arealctl run [--alloc STRING] [--slots N] [--timeout SECONDS] "
                "[-- WORKER-ARGS...]\n"
                "Plans the job on one local node of N CPU slots and runs every pod as an\n"
                "areal-worker process (beside arealctl, or $AREAL_WORKER).\n"
                "  --alloc STRING     the allocation (default " DEFAULT_RUN_ALLOC ")\n"
                "  --slots N          local slots, 1 to 256 (default: the GPUs the job needs)\n"
                "  --timeout SECONDS  deadline of the whole run (default 120)\n"
                "  -- WORKER-ARGS     the workers' arguments (default --selftest)\n"
                "  --help, --version\n"
                "       arealctl run JOB.yaml [--resume] [--job-dir DIR] [--timeout S]\n"
                "Runs an AReaLJob manifest: rollout servers and the trainer as local\n"
                "processes, a progress bar, a reward curve (JOB_DIR/reward.svg).\n" AREAL_EXIT_HELP
                "(1 also when a pod fails or the run passes --timeout)\n");
            return CLI_OK;
        case 'V':
            return areal_print_version(stdout, "arealctl");
        default:
            return cli_bad_input("run: unknown or incomplete option '%s'; see arealctl run --help",
                                 argv[optind - 1]);
        }
    }
    areal_alloc alloc;
    areal_error err;
    if (areal_alloc_parse(alloc_text, &alloc, &err) != AREAL_OK)
        return cli_bad_input("--alloc '%s': %s", alloc_text, err.msg);
    long gpus = areal_alloc_total_gpus(&alloc);
    if (slots == 0)
        slots = gpus;
    if (gpus > 256)
        return cli_bad_input("--alloc '%s' needs %ld local slots; at most 256 run on one machine",
                             alloc_text, gpus);
    areal_cluster cluster;
    areal_cluster_init(&cluster);
    if (areal_cluster_add_node(&cluster, "local", (int)slots, 0, &err) < 0)
        return cli_bad_input("%s", err.msg);
    areal_job job;
    areal_job_init(&job, "local", &alloc);
    areal_plan plan;
    int rc = areal_place(&job, &cluster, &plan, &err);
    if (rc != AREAL_OK) {
        areal_cluster_free(&cluster);
        return cli_bad_input("cannot run '%s' on %ld local slots: %s", alloc_text, slots, err.msg);
    }
    char canonical[1024], worker[1024];
    areal_alloc_format(&alloc, canonical, sizeof canonical);
    worker_path(self, worker, sizeof worker);
    char *args[64];
    int n_args = 0;
    args[n_args++] = worker;
    if (optind >= argc)
        args[n_args++] = "--selftest";
    for (int i = optind; i < argc && n_args < 63; i++)
        args[n_args++] = argv[i];
    args[n_args] = NULL;
    int port = free_port();
    printf("arealctl run: %s on %ld local slots: %d pods, rendezvous 127.0.0.1:%d\n", canonical,
           slots, plan.n_pods, port);
    fflush(stdout);

    local_pod *pods = calloc((size_t)plan.n_pods, sizeof *pods);
    int running = 0, failed = -1;
    for (int i = 0; i < plan.n_pods && pods; i++) {
        pods[i].status = -1;
        pods[i].pid = start_pod(worker, args, &plan, i, canonical, port);
        running += pods[i].pid > 0;
    }
    double deadline = areal_mono_s() + (double)timeout, kill_at = 0;
    bool timed_out = false;
    while (running > 0) {
        int st;
        pid_t pid = waitpid(-1, &st, WNOHANG);
        if (pid > 0) {
            for (int i = 0; i < plan.n_pods; i++) {
                if (pods[i].pid != pid)
                    continue;
                pods[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                running--;
                if (pods[i].status != 0 && failed < 0) {
                    failed = i; /* the gang goes down with it */
                    for (int k = 0; k < plan.n_pods; k++)
                        if (pods[k].status < 0)
                            kill(pods[k].pid, SIGTERM);
                    kill_at = areal_mono_s() + 5;
                }
            }
            continue;
        }
        double now = areal_mono_s();
        if (!timed_out && now > deadline) {
            timed_out = true;
            for (int k = 0; k < plan.n_pods; k++)
                if (pods[k].status < 0)
                    kill(pods[k].pid, SIGTERM);
            kill_at = now + 5;
        }
        if (kill_at > 0 && now > kill_at) {
            for (int k = 0; k < plan.n_pods; k++)
                if (pods[k].status < 0)
                    kill(pods[k].pid, SIGKILL);
            kill_at = 0;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    rc = CLI_OK;
    if (pods == NULL) {
        rc = cli_failure("run: out of memory for %d pods", plan.n_pods);
    } else if (timed_out) {
        rc = cli_failure("run: the job did not finish within %ld s (--timeout)", timeout);
    } else if (failed >= 0) {
        rc = cli_failure("run: pod %s exited with status %d; the gang was stopped",
                         plan.pods[failed].name, pods[failed].status);
    } else {
        printf("arealctl run: all %d pods succeeded\n", plan.n_pods);
    }
    free(pods);
    areal_plan_free(&plan);
    areal_cluster_free(&cluster);
    return rc;
}
