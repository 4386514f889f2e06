/*
 * test_run_layout.c - `arealctl run` starts a tensor-parallel trainer role
 * (megatron:d1t2) as two `areal-worker train` ranks that split the model
 * (--layout, worker/train/trainer_par.h) and completes a few GRPO steps
 * against a local rollout server: both ranks take every step, the policy is
 * published after each (gathered whole from the shards, sent by the
 * xccl sender of AReaL's default config) and the checkpoint is written. A refused layout (context
 * parallelism) fails before any process starts, naming the dimension.
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

static void write_job(const char *path, const char *alloc) {
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
            "    recover:\n"
            "      freq_steps: 2\n",
            alloc);
    fclose(f);
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
    write_job(job, "sglang:d1+megatron:d1c2");
    int status = -1;
    const char *argv[] = {arealctl(), "run", job, "--job-dir", job_dir, NULL};
    assert_int_equal(child_run(argv, &status, out, sizeof out, errs, sizeof errs), 0);
    assert_int_equal(status, 2);
    assert_non_null(strstr(errs, "context parallelism"));
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(cp_trainer_refused),
        cmocka_unit_test(t2_trainer_runs),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
