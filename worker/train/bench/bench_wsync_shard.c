/*
 * bench_wsync_shard.c - `make bench`: one full weight update of the bench
 * model from a two-rank trainer (t2: tensor-parallel slices; p2: pipeline
 * stages) to 1 and 2 `areal-worker serve` processes, in two forms run side
 * by side:
 *   shard-direct:  each rank broadcasts its own slices (wsync_shard.h);
 *   gather-rank-0: rank 1 sends its slices to rank 0 over a trainer group,
 *                  rank 0 assembles the whole HF tensors and broadcasts
 *                  everything (the form the sharded one replaces).
 * Per form: the bytes rank 0 moves per update (its broadcasts, plus what it
 * gathers), the median wall seconds of an update, the trainer's CPU seconds
 * (both ranks) and the servers' (from /proc), and the ratio gather / shard.
 * On a loaded 2-core machine the wall times mostly measure the scheduler;
 * the CPU seconds are the cost.
 * Rank 1 is a forked process. The binary is $AREAL_BIN/areal-worker
 * (default build/rel). AREAL_BENCH_QUICK=1: the small model, one rep.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/comm/comm.h"
#include "areal/model/model.h"
#include "areal/train/tiny.h"
#include "areal/train/wsync_shard.h"
#include "bench_serve.h"

#define BUCKET ((size_t)16 << 20)

/* ---- one configuration ------------------------------------------------------------- */

typedef enum { SHARD, GATHER } form;

typedef struct setup {
    const char *dir;
    areal_model_config cfg;
    areal_model_shard sh[2];
    form f;
    int n_servers;
    srv *servers;
    int reps;
} setup;

typedef struct rank_state {
    areal_model m;          /* this rank's shard */
    const void **local;     /* its tensors */
    areal_wsync_plan *plan; /* the plan the update world runs (whole on rank 0 for GATHER) */
    areal_wsync_plan *shard_plan;
    areal_comm *tc; /* GATHER: the trainer world of 2 */
    areal_pg *tg;
    float *full;          /* GATHER, rank 0: the whole model */
    const void **full_at; /* its tensors */
} rank_state;

static int rank_init(const setup *s, int rank, int store_port, rank_state *r, areal_error *e) {
    memset(r, 0, sizeof *r);
    int rc = areal_model_load_shard(&r->m, s->dir, &s->sh[rank], NULL, e);
    if (rc == 0)
        rc = areal_wsync_plan_build(&s->cfg, s->sh, 2, AREAL_DT_F32, BUCKET, &r->shard_plan, e);
    if (rc == 0 && s->f == GATHER)
        rc = areal_wsync_plan_whole(&s->cfg, 2, AREAL_DT_F32, BUCKET, &r->plan, e);
    if (rc != 0)
        return rc;
    if (s->f == SHARD)
        r->plan = r->shard_plan;
    r->local = calloc(r->m.n_specs, sizeof *r->local);
    for (size_t i = 0; i < r->m.n_specs; i++)
        r->local[i] = r->m.params + r->m.offset[i];
    if (s->f == GATHER) {
        areal_comm_config cc = {.rank = rank,
                                .world = 2,
                                .store_host = "127.0.0.1",
                                .store_port = store_port,
                                .bind_host = "127.0.0.1",
                                .advertise_host = "127.0.0.1",
                                .timeout_ms = 120000,
                                .connect_timeout_ms = 120000,
                                .key_prefix = "bench-trainers"};
        int both[2] = {0, 1};
        rc = areal_comm_init(&cc, &r->tc, e);
        if (rc == 0)
            rc = areal_comm_group(r->tc, "trainers", both, 2, &r->tg, e);
        if (rc == 0 && rank == 0) {
            const areal_wsync_plan *w = r->plan;
            size_t total = w->bytes / 4, off = 0;
            r->full = malloc(total * sizeof *r->full);
            r->full_at = calloc(w->n_specs, sizeof *r->full_at);
            for (size_t k = 0; k < w->n_specs; k++) {
                r->full_at[k] = r->full + off;
                off += (size_t)w->specs[k].shape[0] *
                       (size_t)(w->specs[k].ndim > 1 ? w->specs[k].shape[1] : 1);
            }
        }
    }
    return rc;
}

static void rank_free(rank_state *r) {
    areal_pg_destroy(r->tg);
    areal_comm_destroy(r->tc);
    if (r->plan != r->shard_plan)
        areal_wsync_plan_free(r->plan);
    areal_wsync_plan_free(r->shard_plan);
    free(r->local);
    free(r->full);
    free(r->full_at);
    areal_model_free(&r->m);
}

/* Copies one slice into its place in the whole tensor. */
static void place(float *full, const areal_wsync_piece *pc, const float *src) {
    int64_t cols = pc->ndim > 1 ? pc->full[1] : 1;
    if (pc->dim <= 0 || pc->ndim == 1) {
        int64_t row = pc->ndim > 1 ? pc->full[1] : 1;
        memcpy(full + pc->offset * (pc->dim < 0 ? 0 : row), src,
               (size_t)(pc->local[0] * (pc->ndim > 1 ? pc->local[1] : 1)) * sizeof *src);
        return;
    }
    for (int64_t r = 0; r < pc->local[0]; r++)
        memcpy(full + r * cols + pc->offset, src + r * pc->local[1],
               (size_t)pc->local[1] * sizeof *src);
}

/*
 * GATHER's first half: rank 1 sends each of its pieces (the shard plan's)
 * to rank 0, which places them and its own into the whole tensors.
 */
static int gather(rank_state *r, int rank, areal_error *e) {
    const areal_wsync_plan *p = r->shard_plan;
    float *tmp = NULL;
    for (size_t i = 0; i < p->n_pieces; i++) {
        const areal_wsync_piece *pc = &p->pieces[i];
        size_t n = (size_t)pc->local[0] * (size_t)(pc->ndim > 1 ? pc->local[1] : 1);
        if (pc->owner != 0 && rank != 0) {
            int rc = areal_pg_send(r->tg, r->local[pc->local_index], n, AREAL_DT_F32, 0, e);
            if (rc != 0)
                return rc;
        } else if (rank == 0) {
            size_t k = 0;
            while (strcmp(p->specs[k].name, pc->name) != 0)
                k++;
            const float *src = r->local[pc->local_index];
            if (pc->owner != 0) {
                float *t = realloc(tmp, n * sizeof *t);
                if (t == NULL) {
                    free(tmp);
                    return areal_error_set(e, AREAL_ENOMEM, -1, "out of memory");
                }
                tmp = t;
                int rc = areal_pg_recv(r->tg, tmp, n, AREAL_DT_F32, 1, e);
                if (rc != 0) {
                    free(tmp);
                    return rc;
                }
                src = tmp;
            }
            place((float *)r->full_at[k], pc, src);
        }
    }
    free(tmp);
    return 0;
}

/* One update as `rank`; t is rank 0's. */
static int one_update(rank_state *r, int rank, areal_wsync *w, const areal_wsync_target *t,
                      areal_error *e) {
    if (r->tg != NULL) { /* GATHER */
        int rc = gather(r, rank, e);
        if (rc != 0 || rank != 0)
            return rc; /* rank 1 has no bucket of the whole plan */
        return areal_wsync_update_sharded(w, r->plan, r->full_at, t, NULL, e);
    }
    return areal_wsync_update_sharded(w, r->plan, r->local, t, NULL, e);
}

/* The forked rank 1: a byte on `go` starts an update; it answers with its CPU seconds. */
static void rank1_main(const setup *s, int port, int go, int done) {
    areal_error e;
    rank_state r;
    areal_wsync *w = NULL;
    int world = 2 + s->n_servers;
    memset(&r, 0, sizeof r);
    /* the same order as rank 0: the update world, then the trainer world */
    if (areal_wsync_attach("127.0.0.1", port, NULL, &w, &e) != 0 ||
        areal_wsync_join_rank(w, 1, world, "update_weight_group", 120000, &e) != 0 ||
        rank_init(s, 1, port, &r, &e) != 0) {
        fprintf(stderr, "bench_wsync_shard rank 1: %s\n", e.msg);
        _exit(2);
    }
    char c;
    while (read(go, &c, 1) == 1) {
        double c0 = cpu_self();
        if (one_update(&r, 1, w, NULL, &e) != 0) {
            fprintf(stderr, "bench_wsync_shard rank 1: %s\n", e.msg);
            _exit(3);
        }
        double dc = cpu_self() - c0;
        if (write(done, &dc, sizeof dc) != (ssize_t)sizeof dc)
            _exit(4);
    }
    areal_wsync_close(w);
    rank_free(&r);
    _exit(0);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct result {
    double wall, cpu_trainer, cpu_servers;
    int buckets;
    double rank0_mb; /* bytes rank 0 moves per update: its broadcasts, plus what it gathers */
} result;

static int run_setup(const setup *s, result *out) {
    areal_error e;
    areal_wsync *w = NULL;
    if (areal_wsync_listen("127.0.0.1", 0, &w, &e) != 0) {
        fprintf(stderr, "bench_wsync_shard: %s\n", e.msg);
        return -1;
    }
    int go[2], done[2];
    if (pipe(go) != 0 || pipe(done) != 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        close(go[1]);
        close(done[0]);
        rank1_main(s, areal_wsync_port(w), go[0], done[1]);
    }
    close(go[0]);
    close(done[1]);
    const char *addrs[2] = {s->servers[0].addr, s->servers[1].addr};
    char version[32] = "";
    areal_wsync_target t = {.addrs = addrs,
                            .n = s->n_servers,
                            .version = version,
                            .abort_all = true,
                            .http_timeout_s = 600};
    rank_state r;
    memset(&r, 0, sizeof r);
    int rc = areal_wsync_join_servers(w, 2, &t, 120000, &e);
    if (rc == 0)
        rc = rank_init(s, 0, areal_wsync_port(w), &r, &e);
    double wall[17], cpu_t[17], cpu_s[17];
    /* update 0 warms up (it also builds the per-root groups): not counted */
    for (int k = 0; rc == 0 && k <= s->reps; k++) {
        snprintf(version, sizeof version, "bench-%d", k + 1);
        double s0 = 0;
        for (int i = 0; i < s->n_servers; i++)
            s0 += cpu_of(s->servers[i].pid);
        double c0 = cpu_self(), t0 = now_s();
        char c = 1;
        if (write(go[1], &c, 1) != 1)
            rc = -1;
        if (rc == 0)
            rc = one_update(&r, 0, w, &t, &e);
        wall[k] = now_s() - t0;
        double c1 = 0;
        if (rc == 0 && read(done[0], &c1, sizeof c1) != (ssize_t)sizeof c1)
            rc = areal_error_set(&e, AREAL_EIO, -1, "rank 1 did not finish its update");
        cpu_t[k] = cpu_self() - c0 + c1;
        double s1 = 0;
        for (int i = 0; i < s->n_servers; i++)
            s1 += cpu_of(s->servers[i].pid);
        cpu_s[k] = s1 - s0;
    }
    if (rc == 0) {
        out->wall = median(wall + 1, s->reps);
        out->cpu_trainer = median(cpu_t + 1, s->reps);
        out->cpu_servers = median(cpu_s + 1, s->reps);
        out->buckets = (int)r.plan->n_buckets;
        size_t moved = 0;
        for (size_t b = 0; b < r.plan->n_buckets; b++)
            moved += r.plan->buckets[b].root == 0 ? r.plan->buckets[b].bytes : 0;
        for (size_t b = 0; s->f == GATHER && b < r.shard_plan->n_buckets; b++)
            moved += r.shard_plan->buckets[b].root != 0 ? r.shard_plan->buckets[b].bytes : 0;
        out->rank0_mb = (double)moved / 1e6;
    } else {
        fprintf(stderr, "bench_wsync_shard: %s\n", e.msg);
    }
    close(go[1]);
    waitpid(pid, NULL, 0);
    close(done[0]);
    rank_free(&r);
    areal_wsync_close(w);
    return rc == 0 ? 0 : -1;
}

static int one_model(const char *label, areal_tiny_cfg tc, int reps) {
    char dir[256];
    snprintf(dir, sizeof dir, "%s/areal-bench-wsync-shard-XXXXXX",
             getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (mkdtemp(dir) == NULL)
        return -1;
    char model[300];
    snprintf(model, sizeof model, "%s/model", dir);
    mkdir(model, 0755);
    areal_error e;
    setup s = {.dir = model, .reps = reps};
    srv servers[2] = {{0}, {0}};
    s.servers = servers;
    int rc = areal_tiny_create(model, &tc, &e);
    if (rc == 0)
        rc = areal_tiny_model_config(&tc, &s.cfg, &e);
    if (rc != 0)
        fprintf(stderr, "bench_wsync_shard: %s\n", e.msg);
    if (rc == 0 && (serve(model, &servers[0]) != 0 || serve(model, &servers[1]) != 0)) {
        fprintf(stderr, "bench_wsync_shard: areal-worker serve did not start (AREAL_BIN?)\n");
        rc = -1;
    }
    const char *lay[2] = {"t2", "p2"};
    for (int l = 0; rc == 0 && l < 2; l++) {
        for (int i = 0; i < 2; i++) {
            s.sh[i] = areal_model_shard_whole(&s.cfg);
            if (l == 0) {
                s.sh[i].tp = 2;
                s.sh[i].tp_rank = i;
            } else if (areal_model_shard_stage(&s.cfg, i, 2, &s.sh[i], &e) != 0) {
                fprintf(stderr, "bench_wsync_shard: %s\n", e.msg);
                rc = -1;
            }
        }
        for (int ns = 1; rc == 0 && ns <= 2; ns++) {
            s.n_servers = ns;
            result res[2];
            for (int f = 0; rc == 0 && f < 2; f++) {
                s.f = (form)f;
                rc = run_setup(&s, &res[f]);
            }
            if (rc != 0)
                break;
            for (int f = 0; f < 2; f++)
                printf("| %s | %s | %d | %s | %d | %.1f MB | %.3f s | %.3f s | %.3f s |\n", label,
                       lay[l], ns, f == SHARD ? "shard-direct" : "gather-rank-0", res[f].buckets,
                       res[f].rank0_mb, res[f].wall, res[f].cpu_trainer, res[f].cpu_servers);
            printf("| %s | %s | %d | **gather / shard** | | %.2fx | **%.2fx** | **%.2fx** | "
                   "%.2fx |\n",
                   label, lay[l], ns, res[1].rank0_mb / res[0].rank0_mb, res[1].wall / res[0].wall,
                   res[1].cpu_trainer / res[0].cpu_trainer,
                   res[0].cpu_servers > 0 ? res[1].cpu_servers / res[0].cpu_servers : 0);
            fflush(stdout);
        }
    }
    unserve(&servers[0]);
    unserve(&servers[1]);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "bench_wsync_shard: could not remove %s\n", dir);
    return rc;
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    setvbuf(stdout, NULL, _IOLBF, 0);
    bool quick = getenv("AREAL_BENCH_QUICK") && strcmp(getenv("AREAL_BENCH_QUICK"), "1") == 0;
    int reps = quick ? 1 : 5;
    printf("bench_wsync_shard: one full weight update from a 2-rank trainer to 1-2 areal-worker "
           "serve processes (median of %d after a warm-up, 16 MiB buckets); trainer CPU = both "
           "ranks\n\n",
           reps);
    printf("| model | layout | servers | form | buckets | through rank 0 | s / update | "
           "trainer CPU s | server CPU s |\n");
    printf("| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |\n");
    int rc;
    if (quick)
        rc = one_model("tiny demo", areal_tiny_default(), reps);
    else {
        /* the bench model's layers (bench_model_train.c), the demo tokenizer's vocabulary */
        areal_tiny_cfg mid = {512, 1408, 4, 8, 2, 1};
        rc = one_model("hidden 512, 4 layers", mid, reps);
    }
    return rc == 0 ? 0 : 1;
}
