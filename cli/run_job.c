/*
 * run_job.c - `arealctl run JOB.yaml`: the AReaLJob manifest that
 * `kubectl apply` takes, run on this machine.
 *
 * The job is planned as the operator plans it (spec.allocation on one local
 * node whose GPUs are CPU slots, areal_place), then every pod becomes a
 * local process: each pod of an inference role an `areal-worker serve`
 * (SGLang's HTTP API on a free loopback port), the trainer role an
 * `areal-worker train` pointed at those servers. spec.config.model.path
 * "tiny" (or no model) has the project's tiny model made first
 * (`areal-worker tiny`, warmed up). The trainer's progress lines drive a
 * progress bar (plain lines when stdout is not a terminal) and a reward-curve
 * SVG written at the end. Ctrl-C (or SIGTERM) asks the trainer to stop with
 * a checkpoint, then stops the servers; `--resume` continues from it. A
 * rollout server that dies is restarted from the newest published weights
 * (the trainer waits for it); if the trainer fails, every other process is
 * stopped and the run fails naming the pod.
 *
 * Validation: the manifest's own fields are checked here as the CRD's schema
 * does (kind, apiVersion, spec.allocation, the types and ranges of
 * config.rl); spec.config is handed whole to the trainer (--config), which
 * reads AReaL's keys and the short ones and names any key it does not know.
 * A trainer role of world W (d * t * p * c) runs W `areal-worker train`
 * ranks (--dp-rank/--dp-size, a rendezvous on a free loopback port; rank 0
 * drives the rollouts and serves /status on a free port), each given the
 * role's strategy (--layout megatron:d1t2p2c1e1, fsdp:d2..., the
 * (attn:|ffn:) form where etp > 1) so it holds its shard of the model:
 * tensor, pipeline, context and expert parallelism (and ZeRO-1 over d-c)
 * for megatron, sharded data parallelism for fsdp
 * (worker/train/trainer_par.h). A rollout pod of t > 1 ranks is one `serve
 * --tp t` (it forks its follower ranks). Not yet: context and expert
 * parallelism together (refused, naming both).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "areal/alloc.h"
#include "areal/placement.h"
#include "areal/yaml_json.h"
#include "cli.h"
#include "run_progress.h"

#define MAX_PROCS    64
#define MAX_RESTARTS 100 /* rollout server restarts in one run */

typedef struct proc {
    char name[160];
    pid_t pid;
    int status;    /* -1 while running */
    int port;      /* servers */
    bool follower; /* a data-parallel trainer rank > 0 */
} proc;

static volatile sig_atomic_t interrupted;

static void on_signal(int sig) {
    (void)sig;
    interrupted = 1;
}

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

static void worker_path(const char *self, char *out, size_t cap) {
    const char *env = getenv("AREAL_WORKER");
    const char *slash = strrchr(self, '/');
    if (env != NULL)
        snprintf(out, cap, "%s", env);
    else if (slash == NULL)
        snprintf(out, cap, "areal-worker");
    else
        snprintf(out, cap, "%.*s/areal-worker", (int)(slash - self), self);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Starts argv with stdout to out_fd (-1: a log file) and stderr to the log file. */
static pid_t spawn(char *const *argv, const char *log, int out_fd) {
    pid_t pid = fork();
    if (pid != 0)
        return pid;
    /* the child ignores the terminal's Ctrl-C: arealctl decides how each process stops */
    signal(SIGINT, SIG_IGN);
    int fd = open(log, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd >= 0) {
        dup2(out_fd >= 0 ? out_fd : fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    if (out_fd >= 0)
        close(out_fd);
    execv(argv[0], argv);
    fprintf(stderr, "arealctl: cannot start %s: %s\n", argv[0], strerror(errno));
    _exit(127);
}

/* Reads an integer of config.rl (absent: def); CLI_BAD_INPUT names the key. */
static int rl_int(json_t *rl, const char *key, long lo, long hi, long def, long *out) {
    json_t *v = json_object_get(rl, key);
    if (v == NULL) {
        *out = def;
        return CLI_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return cli_bad_input("spec.config.rl.%s: expected an integer in [%ld, %ld]", key, lo, hi);
    *out = (long)json_integer_value(v);
    return CLI_OK;
}

static int mkdir_p(const char *path) {
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(buf, 0755);
            *p = '/';
        }
    return mkdir(buf, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* The newest complete weight_update_v<N> of the job, else the initial model. */
static void newest_weights(const char *job_dir, const char *model_dir, char *out, size_t cap) {
    snprintf(out, cap, "%s", model_dir);
    DIR *d = opendir(job_dir);
    long best = -1;
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        long v;
        char extra;
        char path[1500];
        snprintf(path, sizeof path, "%s/%s/model.safetensors", job_dir, e->d_name);
        if (sscanf(e->d_name, "weight_update_v%ld%c", &v, &extra) == 1 && v > best &&
            access(path, R_OK) == 0) {
            best = v;
            snprintf(out, cap, "%.900s/%.255s", job_dir, e->d_name);
        }
    }
    if (d)
        closedir(d);
}

static void stop_all(proc *ps, int n, int sig) {
    for (int i = 0; i < n; i++)
        if (ps[i].status < 0 && ps[i].pid > 0)
            kill(ps[i].pid, sig);
}

/* Waits for one process to finish; records its status. Returns its index or -1. */
static int reap(proc *ps, int n, int flags) {
    int st;
    pid_t pid = waitpid(-1, &st, flags);
    if (pid <= 0)
        return -1;
    for (int i = 0; i < n; i++)
        if (ps[i].pid == pid) {
            ps[i].status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
            return i;
        }
    return -1;
}

/* Stops the processes that still run: SIGTERM, then SIGKILL after grace_s. */
static void shutdown_all(proc *ps, int n, double grace_s) {
    stop_all(ps, n, SIGTERM);
    double kill_at = now_s() + grace_s;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++)
            left += ps[i].status < 0 && ps[i].pid > 0;
        if (left == 0)
            return;
        if (reap(ps, n, WNOHANG) >= 0)
            continue;
        if (now_s() > kill_at) {
            stop_all(ps, n, SIGKILL);
            kill_at = now_s() + 60;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

int cmd_run_job(const char *path, bool resume, const char *job_dir_opt, long timeout,
                const char *self) {
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return cli_bad_input("%s: cannot read (%s)", path, strerror(errno));
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    char buf[65536];
    size_t k;
    while ((k = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, k, mem);
    fclose(f);
    fclose(mem);
    areal_error err;
    json_t *doc = areal_yaml_to_json(text, len, path, &err);
    free(text);
    if (doc == NULL)
        return cli_bad_input("%s", err.msg);
    int rc = CLI_OK;
    const char *kind = json_string_value(json_object_get(doc, "kind"));
    const char *api = json_string_value(json_object_get(doc, "apiVersion"));
    json_t *spec = json_object_get(doc, "spec");
    const char *name = json_string_value(json_object_get(json_object_get(doc, "metadata"), "name"));
    const char *alloc_text = json_string_value(json_object_get(spec, "allocation"));
    if (kind == NULL || strcmp(kind, "AReaLJob") != 0)
        rc = cli_bad_input("%s: kind must be AReaLJob", path);
    else if (api == NULL || strcmp(api, "areal.io/v1alpha1") != 0)
        rc = cli_bad_input("%s: apiVersion must be areal.io/v1alpha1", path);
    else if (name == NULL || name[0] == '\0')
        rc = cli_bad_input("%s: metadata.name is required", path);
    else if (alloc_text == NULL)
        rc = cli_bad_input("%s: spec.allocation is required (e.g. \"sglang:d1+fsdp:d1\")", path);
    json_t *config = json_object_get(spec, "config");
    json_t *rl = json_object_get(config, "rl");
    long steps = 0, batch = 0, group = 0, eta = 0, warmup = 0;
    if (rc == CLI_OK)
        rc = rl_int(rl, "totalSteps", 1, 10000000, 300, &steps);
    if (rc == CLI_OK)
        rc = rl_int(rl, "batchSize", 1, 4096, 32, &batch);
    if (rc == CLI_OK)
        rc = rl_int(rl, "groupSize", 1, 1024, 8, &group);
    if (rc == CLI_OK)
        rc = rl_int(rl, "maxStaleness", 0, 1000000, 1, &eta);
    json_t *model = json_object_get(config, "model");
    if (rc == CLI_OK)
        rc = rl_int(model, "warmupSteps", 0, 1000000, 300, &warmup);
    json_t *lrv = json_object_get(rl, "learningRate");
    if (rc == CLI_OK && lrv != NULL && (!json_is_number(lrv) || !(json_number_value(lrv) > 0)))
        rc = cli_bad_input("spec.config.rl.learningRate: expected a number > 0");
    /* AReaL's own key for the step count, when the short one is absent (the bar's total) */
    json_t *tts = json_object_get(config, "total_train_steps");
    if (rc == CLI_OK && json_object_get(rl, "totalSteps") == NULL && json_is_integer(tts) &&
        json_integer_value(tts) > 0)
        steps = (long)json_integer_value(tts);
    const char *model_path = json_string_value(json_object_get(model, "path"));
    areal_alloc alloc;
    areal_plan plan;
    memset(&plan, 0, sizeof plan);
    areal_cluster cluster;
    areal_cluster_init(&cluster);
    bool planned = false;
    if (rc == CLI_OK && areal_alloc_parse(alloc_text, &alloc, &err) != AREAL_OK)
        rc = cli_bad_input("spec.allocation '%s': %s", alloc_text, err.msg);
    if (rc == CLI_OK) {
        long gpus = areal_alloc_total_gpus(&alloc);
        areal_job job;
        if (gpus > 256)
            rc = cli_bad_input("spec.allocation needs %ld slots; at most 256 run locally", gpus);
        else if (areal_cluster_add_node(&cluster, "local", (int)gpus, 0, &err) < 0)
            rc = cli_bad_input("%s", err.msg);
        if (rc == CLI_OK) {
            areal_job_init(&job, name, &alloc);
            if (areal_place(&job, &cluster, &plan, &err) != AREAL_OK)
                rc = cli_bad_input("cannot run '%s' locally: %s", alloc_text, err.msg);
            else
                planned = true;
        }
    }
    int n_servers = 0, trainer_pod = -1, dp_size = 1;
    char layout[96] = ""; /* the trainer role's strategy, handed to every rank (--layout) */
    for (int i = 0; rc == CLI_OK && i < plan.n_pods; i++) {
        const areal_role_plan *role = &plan.roles[plan.pods[i].role];
        if (role->inference) {
            /* one pod per server: its t ranks are `serve --tp t` (rank 0 forks the others) */
            if (plan.pods[i].n_ranks != role->strategy.tp)
                rc = cli_bad_input("pod %s has %d ranks but its servers have t = %d: the local "
                                   "run starts one server of t ranks per pod",
                                   plan.pods[i].name, plan.pods[i].n_ranks, role->strategy.tp);
            n_servers++;
        } else if (trainer_pod >= 0 && plan.pods[trainer_pod].role != plan.pods[i].role) {
            rc = cli_bad_input("the local run has one trainer role; '%s' is a second", role->name);
        } else if (role->strategy.cp > 1 && role->strategy.ep > 1) {
            rc = cli_bad_input("the local trainer does not build context parallelism together "
                               "with expert parallelism yet (c%d e%d); use one of them",
                               role->strategy.cp, role->strategy.ep);
        } else if (trainer_pod < 0) {
            trainer_pod = i;
            dp_size = role->world;
            const areal_strategy *s = &role->strategy;
            /* every dimension the trainer builds; etp only has the (attn:|ffn:) form */
            if (s->etp > 1)
                snprintf(layout, sizeof layout, "%s:(attn:d%dt%dp%d|ffn:d%dt%dp%de%d)",
                         areal_backend_name(role->backend), s->dp, s->tp, s->pp, s->edp, s->etp,
                         s->pp, s->ep);
            else
                snprintf(layout, sizeof layout, "%s:d%dt%dp%dc%de%d",
                         areal_backend_name(role->backend), s->dp, s->tp, s->pp,
                         s->cp > 1 ? s->cp : 1, s->ep > 1 ? s->ep : 1);
        }
    }
    if (rc == CLI_OK && (n_servers == 0 || trainer_pod < 0))
        rc = cli_bad_input("spec.allocation '%s' needs an inference role and a trainer role",
                           alloc_text);
    char job_dir[1024], model_dir[1200], logs[1200], logf[1500], worker[1024];
    snprintf(job_dir, sizeof job_dir, "%s", job_dir_opt ? job_dir_opt : "runs");
    if (job_dir_opt == NULL)
        snprintf(job_dir, sizeof job_dir, "runs/%s", name ? name : "job");
    snprintf(logs, sizeof logs, "%s/logs", job_dir);
    if (rc == CLI_OK && (mkdir_p(job_dir) != 0 || mkdir_p(logs) != 0))
        rc = cli_bad_input("%s: cannot create (%s)", job_dir, strerror(errno));
    worker_path(self, worker, sizeof worker);
    bool tiny = model_path == NULL || strcmp(model_path, "tiny") == 0;
    if (tiny)
        snprintf(model_dir, sizeof model_dir, "%s/model", job_dir);
    else
        snprintf(model_dir, sizeof model_dir, "%s", model_path);
    proc ps[MAX_PROCS];
    int n_ps = 0;
    memset(ps, 0, sizeof ps);
    double t0 = now_s();
    if (rc == CLI_OK) {
        printf("arealctl run: job %s (%s): %d rollout server(s) and %d trainer rank(s) on this "
               "machine; job directory %s\n",
               name, alloc_text, n_servers, dp_size, job_dir);
        fflush(stdout);
    }
    char cfg_path[1300];
    snprintf(cfg_path, sizeof cfg_path, "%s/config.json", model_dir);
    if (rc == CLI_OK && tiny && !(resume && access(cfg_path, R_OK) == 0)) {
        char ws[32];
        snprintf(ws, sizeof ws, "%ld", warmup);
        char *argv[] = {worker, "tiny", "--out", model_dir, "--warmup-steps", ws, NULL};
        snprintf(logf, sizeof logf, "%s/tiny.log", logs);
        int fds[2];
        if (pipe(fds) != 0) {
            rc = CLI_FAILURE;
        } else {
            pid_t pid = spawn(argv, logf, fds[1]);
            close(fds[1]);
            ssize_t r;
            while ((r = read(fds[0], buf, sizeof buf)) > 0) {
                fwrite(buf, 1, (size_t)r, stdout);
                fflush(stdout);
            }
            close(fds[0]);
            int st = 0;
            waitpid(pid, &st, 0);
            if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                rc = cli_bad_input("making the tiny model failed; see %s", logf);
        }
    }
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    char servers[4096] = "";
    for (int i = 0; rc == CLI_OK && i < plan.n_pods; i++) {
        if (!plan.roles[plan.pods[i].role].inference)
            continue;
        proc *p = &ps[n_ps++];
        snprintf(p->name, sizeof p->name, "%s", plan.pods[i].name);
        p->port = free_port();
        p->status = -1;
        char port[16], tps[16];
        snprintf(port, sizeof port, "%d", p->port);
        snprintf(tps, sizeof tps, "%d", plan.pods[i].n_ranks);
        char *argv[] = {worker,      "serve", "--model", model_dir, "--port", port,
                        "--threads", "1",     "--tp",    tps,       NULL};
        snprintf(logf, sizeof logf, "%s/%s.log", logs, p->name);
        p->pid = spawn(argv, logf, -1);
        size_t used = strlen(servers);
        snprintf(servers + used, sizeof servers - used, "%s127.0.0.1:%d", used ? "," : "", p->port);
    }
    /* Data-parallel ranks 1..d-1 first: rank 0 stays the last process (the one whose
     * progress lines drive the bar and who is asked to stop). */
    char dp_master[64] = "", dp_size_s[16];
    snprintf(dp_size_s, sizeof dp_size_s, "%d", dp_size);
    if (dp_size > 1)
        snprintf(dp_master, sizeof dp_master, "127.0.0.1:%d", free_port());
    char cfg_file[1200];
    snprintf(cfg_file, sizeof cfg_file, "%s/job_config.json", job_dir);
    bool have_cfg = json_is_object(config);
    if (rc == CLI_OK && have_cfg &&
        json_dump_file(config, cfg_file, JSON_INDENT(2) | JSON_SORT_KEYS) != 0)
        rc = cli_bad_input("%s: cannot write", cfg_file);
    for (int r = 1; rc == CLI_OK && r < dp_size && n_ps < MAX_PROCS - 1; r++) {
        proc *p = &ps[n_ps++];
        snprintf(p->name, sizeof p->name, "%.140s-dp%d", plan.pods[trainer_pod].name, r);
        p->status = -1;
        p->follower = true;
        char rs[16];
        snprintf(rs, sizeof rs, "%d", r);
        char *argv[] = {worker,
                        "train",
                        "--model",
                        model_dir,
                        "--job-dir",
                        job_dir,
                        "--dp-rank",
                        rs,
                        "--dp-size",
                        dp_size_s,
                        "--dp-master",
                        dp_master,
                        "--layout",
                        layout,
                        "--http-port",
                        "0",
                        have_cfg ? "--config" : NULL,
                        cfg_file,
                        NULL};
        snprintf(logf, sizeof logf, "%s/%s.log", logs, p->name);
        p->pid = spawn(argv, logf, -1);
    }
    int out_fd = -1;
    if (rc == CLI_OK) {
        proc *p = &ps[n_ps++];
        snprintf(p->name, sizeof p->name, "%s", plan.pods[trainer_pod].name);
        p->status = -1;
        /* spec.config goes to the trainer whole, as the operator's ConfigMap does in a
         * pod (env AREAL_CONFIG there): the trainer reads AReaL's keys and the short ones,
         * and names a bad one. No spec.config: the trainer's demo configuration. */
        char *argv[24];
        int na = 0;
        argv[na++] = worker;
        argv[na++] = "train";
        argv[na++] = "--model";
        argv[na++] = model_dir;
        argv[na++] = "--job-dir";
        argv[na++] = job_dir;
        argv[na++] = "--servers";
        argv[na++] = servers;
        if (resume)
            argv[na++] = "--resume";
        char hport[16]; /* a free port: 8090 may be taken on a shared machine */
        int trainer_port = free_port();
        snprintf(hport, sizeof hport, "%d", trainer_port);
        argv[na++] = "--http-port";
        argv[na++] = hport;
        if (dp_size > 1) {
            argv[na++] = "--dp-rank";
            argv[na++] = "0";
            argv[na++] = "--dp-size";
            argv[na++] = dp_size_s;
            argv[na++] = "--dp-master";
            argv[na++] = dp_master;
            argv[na++] = "--layout";
            argv[na++] = layout;
        }
        if (have_cfg) {
            argv[na++] = "--config";
            argv[na++] = cfg_file;
        }
        argv[na] = NULL;
        int fds[2];
        if (rc != CLI_OK) {
        } else if (pipe(fds) != 0) {
            rc = CLI_FAILURE;
        } else {
            snprintf(logf, sizeof logf, "%s/%s.log", logs, p->name);
            p->pid = spawn(argv, logf, fds[1]);
            close(fds[1]);
            out_fd = fds[0];
            printf("arealctl run: trainer status on http://127.0.0.1:%d/status\n", trainer_port);
            fflush(stdout);
        }
    }
    run_progress prog;
    bool have_prog = rc == CLI_OK && run_progress_init(&prog, steps, stdout, isatty(1)) == 0;
    int failed = -1, restarts = 0;
    bool asked_stop = false, trainer_done = false;
    double deadline = now_s() + (double)timeout;
    while (rc == CLI_OK && !trainer_done) {
        if (interrupted && !asked_stop) {
            asked_stop = true;
            fprintf(stderr, "\narealctl run: stopping: the trainer checkpoints, then every "
                            "process stops (continue with --resume)\n");
            kill(ps[n_ps - 1].pid, SIGTERM);
        }
        if (timeout > 0 && now_s() > deadline && !asked_stop) {
            asked_stop = true;
            fprintf(stderr, "\narealctl run: the job did not finish within %ld s (--timeout)\n",
                    timeout);
            kill(ps[n_ps - 1].pid, SIGTERM);
            failed = n_ps - 1;
        }
        struct pollfd pfd = {out_fd, POLLIN, 0};
        if (out_fd >= 0 && poll(&pfd, 1, 100) > 0) {
            ssize_t r = read(out_fd, buf, sizeof buf);
            if (r > 0 && have_prog)
                run_progress_feed(&prog, buf, (size_t)r);
            if (r <= 0) {
                close(out_fd);
                out_fd = -1;
            }
        } else if (out_fd < 0) {
            struct timespec ts = {0, 50 * 1000 * 1000};
            nanosleep(&ts, NULL);
        }
        int i;
        while ((i = reap(ps, n_ps, WNOHANG)) >= 0) {
            if (i == n_ps - 1) {
                trainer_done = true;
                if (ps[i].status != 0 && failed < 0)
                    failed = i;
            } else if (ps[i].follower) {
                if (ps[i].status != 0 && failed < 0) {
                    failed = i; /* a trainer rank went down: the gang goes with it */
                    trainer_done = true;
                }
            } else if (!asked_stop && restarts < MAX_RESTARTS) {
                /* A rollout server went down: restart it, as the operator would, from the
                 * newest weights the trainer published (a new server must not serve the
                 * initial policy under the trainer's current version); the trainer's
                 * rollouts wait for it meanwhile. */
                restarts++;
                char from[1200];
                newest_weights(job_dir, model_dir, from, sizeof from);
                char port[16];
                snprintf(port, sizeof port, "%d", ps[i].port);
                char *argv[] = {worker, "serve",     "--model", from, "--port",
                                port,   "--threads", "1",       NULL};
                snprintf(logf, sizeof logf, "%s/%s.log", logs, ps[i].name);
                fprintf(stderr,
                        "\narealctl run: pod %s exited with status %d; restarting it from %s "
                        "(restart %d, log %s)\n",
                        ps[i].name, ps[i].status, from, restarts, logf);
                ps[i].status = -1;
                ps[i].pid = spawn(argv, logf, -1);
            } else if (failed < 0) {
                failed = i; /* a server went down: the gang goes with it */
                trainer_done = true;
            }
        }
    }
    /* Stop what still runs first (the trainer checkpoints on SIGTERM), then read the
     * trainer's last lines: draining before would wait on a trainer that still waits
     * for a dead server. The pipe holds 64 KiB, far more than the few lines of a stop. */
    if (n_ps > 0)
        shutdown_all(ps, n_ps, 30);
    if (out_fd >= 0) {
        ssize_t r;
        while ((r = read(out_fd, buf, sizeof buf)) > 0)
            if (have_prog)
                run_progress_feed(&prog, buf, (size_t)r);
        close(out_fd);
    }
    if (have_prog)
        run_progress_end(&prog);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    if (rc == CLI_OK && failed >= 0) {
        fprintf(stderr,
                "arealctl: run: pod %s exited with status %d; every process was stopped "
                "(log: %s/%s.log)\n",
                ps[failed].name, ps[failed].status, logs, ps[failed].name);
        rc = CLI_FAILURE;
    }
    if (have_prog) {
        char svg[1200], title[256];
        snprintf(svg, sizeof svg, "%s/reward.svg", job_dir);
        snprintf(title, sizeof title, "%s: GRPO on the synthetic task (%s)", name, alloc_text);
        if (prog.n > 0 && run_progress_svg(&prog, svg, title) == 0)
            printf("arealctl run: reward curve %s\n", svg);
        if (rc == CLI_OK && prog.have_first_acc)
            printf("arealctl run: %s at step %ld in %.0f s: held-out accuracy %.1f%% -> %.1f%%\n",
                   asked_stop ? "stopped" : "done", prog.step, now_s() - t0, 100 * prog.first_acc,
                   100 * prog.acc);
        run_progress_free(&prog);
    }
    if (planned)
        areal_plan_free(&plan);
    areal_cluster_free(&cluster);
    json_decref(doc);
    return rc;
}
