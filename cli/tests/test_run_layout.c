/*
 * test_run_layout.c - `arealctl run` starts a tensor-parallel trainer role
 * (megatron:d1t2) as two `areal-worker train` ranks that split the model
 * (--layout, worker/train/trainer_par.h) and completes a few GRPO steps
 * against a local rollout server: both ranks take every step, the policy is
 * published after each (gathered whole from the shards, sent by the
 * xccl sender of AReaL's default config: shard-direct, each rank sending its slices,
 * worker/train/xccl_shard.h) and the checkpoint is written; the t2 and p2 shard-direct runs
 * follow the same curve as the gathered disk path. A context-parallel trainer (d1c2) runs
 * its xccl updates through the gathered path (the shard-direct plan knows tp / pp slices
 * only), saying so in every progress line. A refused layout (context with expert
 * parallelism) fails before any process starts, naming the dimensions.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"

static char out[1 << 20], errs[1 << 16];

static const char *arealctl(void) {
    return getenv("AREALCTL") ? getenv("AREALCTL") : "build/rel/arealctl";
}

/* mode NULL: AReaL's default (xccl); else actor.weight_update_mode. */
static void write_job_mode(const char *path, const char *alloc, const char *mode) {
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fprintf(f,
            "apiVersion: areal.io/v1alpha1\n"
            "kind: AReaLJob\n"
            "metadata:\n"
            "  name: tp\n"
            "spec:\n"
            "  allocation: \"%s\"\n"
            "  config:\n"
            "    model:\n"
            "      path: tiny\n"
            "      warmupSteps: 0\n"
            "    rl:\n"
            "      totalSteps: 4\n"
            "      batchSize: 4\n"
            "      groupSize: 2\n"
            "    gconfig:\n"
            "      max_new_tokens: 4\n"
            "    evaluator:\n"
            "      freq_steps: 4\n"
            "%s%s%s"
            "    recover:\n"
            "      freq_steps: 2\n",
            alloc, mode ? "    actor:\n      weight_update_mode: " : "", mode ? mode : "",
            mode ? "\n" : "");
    fclose(f);
}

static void write_job(const char *path, const char *alloc) {
    write_job_mode(path, alloc, NULL);
}

static void file_has(const char *path, const char *what) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: missing", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (strstr(buf, what) == NULL)
        fail_msg("%s lacks '%s':\n%s", path, what, buf);
}

static void file_lacks(const char *path, const char *what) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: missing", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    if (strstr(buf, what) != NULL)
        fail_msg("%s has '%s' (a failed shard-direct update or fallback):\n%s", path, what, buf);
}

/* Every step line of progress.jsonl took the shard path, rank 0 sending part of the model
 * (its slices: less than the whole, which the gathered path's buckets would carry), and no
 * answer came from a server behind the policy. */
static void shard_every_step(const char *path, int steps) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: missing", path);
    static char line[1 << 16];
    int seen = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, "\"weight_sync_mode\"") == NULL)
            continue;
        seen++;
        if (strstr(line, "\"weight_sync_path\":\"shard\"") == NULL)
            fail_msg("a step not sent shard-direct: %s", line);
        if (strstr(line, "\"stale_answers\":0") == NULL)
            fail_msg("answers from a server behind the policy: %s", line);
        const char *b = strstr(line, "\"weight_sync_bytes\":");
        assert_non_null(b);
        long bytes = strtol(b + strlen("\"weight_sync_bytes\":"), NULL, 10);
        if (bytes <= 0)
            fail_msg("rank 0 sent nothing: %s", line);
    }
    fclose(f);
    assert_int_equal(seen, steps);
}

static void t2_trainer_runs(void **state) {
    (void)state;
    char dir[256], job[300], job_dir[300], path[400];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-runtp-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(job, sizeof job, "%s/job.yaml", dir);
    snprintf(job_dir, sizeof job_dir, "%s/run", dir);
    write_job(job, "sglang:d1+megatron:d1t2");
    int status = -1;
    const char *argv[] = {arealctl(), "run", job, "--job-dir", job_dir, "--timeout", "120", NULL};
    assert_int_equal(child_run(argv, &status, out, sizeof out, errs, sizeof errs), 0);
    if (status != 0)
        fail_msg("arealctl run exited %d:\n%s\n%s", status, out, errs);
    assert_non_null(strstr(out, "2 trainer rank(s)"));
    assert_non_null(strstr(out, "done at step 4"));
    snprintf(path, sizeof path, "%s/logs/tp-trainer-0-dp1.log", job_dir);
    file_has(path, "rank 1 of 2 (megatron:d1t2p1): 4 steps");
    snprintf(path, sizeof path, "%s/logs/tp-trainer-0.log", job_dir);
    file_has(path, "megatron:d1t2p1");
    snprintf(path, sizeof path, "%s/recover/step_00000004/MANIFEST.json", job_dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/progress.jsonl", job_dir);
    file_has(path, "\"step\":4");
    file_has(path, "\"weight_sync_mode\":\"xccl\""); /* AReaL's default: the xccl sender */
    /* a t2 layout's updates go shard-direct (xccl_shard.h): every step's, no gather */
    shard_every_step(path, 4);
    snprintf(path, sizeof path, "%s/logs/tp-trainer-0.log", job_dir);
    file_has(path, "shard-direct from 2 trainer ranks");
    file_lacks(path, "shard-direct weight update");
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Each step line's loss and importance ratio (the trainer's logprobs over the servers'
 * behaviour logprobs), as printed, joined into out. */
static void curve_of(const char *path, char *curve, size_t cap) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: missing", path);
    static char line[1 << 16];
    curve[0] = '\0';
    while (fgets(line, sizeof line, f) != NULL) {
        static const char *keys[] = {"\"loss\":", "\"importance_ratio_mean\":"};
        for (int k = 0; k < 2; k++) {
            const char *v = strstr(line, keys[k]);
            if (v == NULL)
                continue;
            size_t n = strcspn(v, ",}");
            size_t at = strlen(curve);
            if (at + n + 2 < cap)
                snprintf(curve + at, cap - at, "%.*s;", (int)n, v);
        }
    }
    fclose(f);
}

/* One job of `alloc` (mode as write_job_mode) under dir/name; its curve into curve. */
static void run_curve(const char *dir, const char *name, const char *alloc, const char *mode,
                      char *curve, size_t cap) {
    char job[400], job_dir[400], path[500];
    snprintf(job, sizeof job, "%s/%s.yaml", dir, name);
    snprintf(job_dir, sizeof job_dir, "%s/%s", dir, name);
    write_job_mode(job, alloc, mode);
    int status = -1;
    const char *argv[] = {arealctl(), "run", job, "--job-dir", job_dir, "--timeout", "120", NULL};
    assert_int_equal(child_run(argv, &status, out, sizeof out, errs, sizeof errs), 0);
    if (status != 0)
        fail_msg("arealctl run %s exited %d:\n%s\n%s", alloc, status, out, errs);
    snprintf(path, sizeof path, "%s/progress.jsonl", job_dir);
    if (mode == NULL) /* xccl: a t/p layout sends shard-direct */
        shard_every_step(path, 4);
    curve_of(path, curve, cap);
}

/* The servers serve what the trainer holds: the shard-direct runs (t2, p2) and the same
 * layouts publishing through the gathered disk path (HF safetensors written from rank 0's
 * whole model) give the same curve to the last printed digit - the ratios compare the
 * trainer's logprobs with the servers', so one wrong slice on a server shows there. */
static void shard_direct_serves_the_policy(void **state) {
    (void)state;
    char dir[256];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-runsd-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    static const char *allocs[] = {"sglang:d1+megatron:d1t2", "sglang:d1+megatron:d1p2"};
    static char a[1 << 14], b[1 << 14];
    for (int i = 0; i < 2; i++) {
        run_curve(dir, "shard", allocs[i], NULL, a, sizeof a);
        run_curve(dir, "disk", allocs[i], "disk", b, sizeof b);
        if (strstr(a, "importance_ratio_mean") == NULL)
            fail_msg("%s: no step lines: %s", allocs[i], a);
        if (strcmp(a, b) != 0)
            fail_msg("%s: shard-direct and gathered curves differ:\n%s\n%s", allocs[i], a, b);
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf '%s/shard' '%s/disk'", dir, dir);
        assert_int_equal(system(cmd), 0);
    }
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

/* Every step line of progress.jsonl took the gathered xccl path. */
static void gathered_every_step(const char *path, int steps) {
    FILE *f = fopen(path, "r");
    if (f == NULL)
        fail_msg("%s: missing", path);
    static char line[1 << 16];
    int seen = 0;
    while (fgets(line, sizeof line, f) != NULL) {
        if (strstr(line, "\"weight_sync_mode\"") == NULL)
            continue;
        seen++;
        if (strstr(line, "\"weight_sync_mode\":\"xccl\"") == NULL ||
            strstr(line, "\"weight_sync_path\":\"gather\"") == NULL)
            fail_msg("a step not sent the gathered xccl way: %s", line);
    }
    fclose(f);
    assert_int_equal(seen, steps);
}

/* megatron:d1c2: two ranks each holding half of every sequence (load-balanced causal
 * split), xccl updates gathered through rank 0. */
static void c2_trainer_runs(void **state) {
    (void)state;
    char dir[256], job[300], job_dir[300], path[400];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-runc2-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(job, sizeof job, "%s/job.yaml", dir);
    snprintf(job_dir, sizeof job_dir, "%s/run", dir);
    write_job(job, "sglang:d1+megatron:d1c2");
    int status = -1;
    const char *argv[] = {arealctl(), "run", job, "--job-dir", job_dir, "--timeout", "120", NULL};
    assert_int_equal(child_run(argv, &status, out, sizeof out, errs, sizeof errs), 0);
    if (status != 0)
        fail_msg("arealctl run exited %d:\n%s\n%s", status, out, errs);
    assert_non_null(strstr(out, "2 trainer rank(s)"));
    assert_non_null(strstr(out, "done at step 4"));
    snprintf(path, sizeof path, "%s/recover/step_00000004/MANIFEST.json", job_dir);
    assert_int_equal(access(path, R_OK), 0);
    snprintf(path, sizeof path, "%s/progress.jsonl", job_dir);
    file_has(path, "\"step\":4");
    gathered_every_step(path, 4);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

static void cp_trainer_refused(void **state) {
    (void)state;
    char dir[256], job[300], job_dir[300];
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-runcp-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(job, sizeof job, "%s/job.yaml", dir);
    snprintf(job_dir, sizeof job_dir, "%s/run", dir);
    write_job(job, "sglang:d1+megatron:d2c2e2");
    int status = -1;
    const char *argv[] = {arealctl(), "run", job, "--job-dir", job_dir, NULL};
    assert_int_equal(child_run(argv, &status, out, sizeof out, errs, sizeof errs), 0);
    assert_int_equal(status, 2);
    assert_non_null(strstr(errs, "context parallelism together with expert parallelism"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cp_trainer_refused),
        cmocka_unit_test(t2_trainer_runs),
        cmocka_unit_test(c2_trainer_runs),
        cmocka_unit_test(shard_direct_serves_the_policy),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
