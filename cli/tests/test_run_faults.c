/*
 * test_run_faults.c - issue 13's third named fault: a trainer rank killed
 * under `arealctl run JOB.yaml` stops every process of the local job, and
 * the run fails naming the trainer's pod and its signal.
 *
 * The kill is real: $AREAL_WORKER points at a wrapper script that records
 * each worker's pid, then execs the real areal-worker; for the `train`
 * subcommand it first arms a SIGKILL of its own pid (the trainer, once
 * exec'ed) a few seconds in. After arealctl returns, no recorded pid may
 * still run.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "child.h"

static char out[1 << 20], errs[1 << 16];

/* Whether pid runs: a zombie (reparented, not yet reaped by pid 1) does not. */
static bool alive(pid_t pid) {
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return kill(pid, 0) == 0 || errno != ESRCH;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *close_paren = strrchr(buf, ')');
    return close_paren == NULL || (close_paren[1] == ' ' && close_paren[2] != 'Z');
}

static void trainer_killed_stops_the_job(void **state) {
    (void)state;
    const char *bin = getenv("AREALCTL") ? getenv("AREALCTL") : "build/rel/arealctl";
    const char *wb = getenv("AREAL_BIN");
    char worker[1024], dir[256], wrapper[300], pids[300], job[300], job_dir[300];
    char *cwd = getcwd(NULL, 0);
    snprintf(worker, sizeof worker, "%s/%s/areal-worker", wb && wb[0] == '/' ? "" : cwd,
             wb && wb[0] ? wb : "build/rel");
    free(cwd);
    if (access(worker, X_OK) != 0)
        fail_msg("%s: not built", worker);
    const char *t = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    snprintf(dir, sizeof dir, "%s/areal-runfault-XXXXXX", t);
    assert_non_null(mkdtemp(dir));
    snprintf(wrapper, sizeof wrapper, "%s/worker.sh", dir);
    snprintf(pids, sizeof pids, "%s/pids", dir);
    snprintf(job, sizeof job, "%s/job.yaml", dir);
    snprintf(job_dir, sizeof job_dir, "%s/run", dir);
    FILE *f = fopen(wrapper, "w");
    assert_non_null(f);
    fprintf(f,
            "#!/bin/sh\n"
            "echo $$ >> '%s'\n"
            "if [ \"$1\" = train ]; then (sleep 4; kill -9 $$) & fi\n"
            "exec '%s' \"$@\"\n",
            pids, worker);
    fclose(f);
    assert_int_equal(chmod(wrapper, 0755), 0);
    f = fopen(job, "w");
    assert_non_null(f);
    fputs("apiVersion: areal.io/v1alpha1\n"
          "kind: AReaLJob\n"
          "metadata:\n"
          "  name: fault\n"
          "spec:\n"
          "  allocation: \"sglang:d1+fsdp:d1\"\n"
          "  config:\n"
          "    model:\n"
          "      path: tiny\n"
          "      warmupSteps: 0\n"
          "    rl:\n"
          "      totalSteps: 100000\n"
          "      batchSize: 4\n"
          "      groupSize: 2\n",
          f);
    fclose(f);
    setenv("AREAL_WORKER", wrapper, 1);
    int status = -1;
    const char *argv[] = {bin, "run", job, "--job-dir", job_dir, "--timeout", "120", NULL};
    assert_int_equal(child_run(argv, &status, out, sizeof out, errs, sizeof errs), 0);
    unsetenv("AREAL_WORKER");
    fprintf(stderr, "%s", errs);
    assert_int_equal(status, 1);
    /* the trainer's pod (the plan's name for the fsdp role), with its signal (128 + 9) */
    assert_non_null(strstr(errs, "arealctl: run: pod fault-trainer-0 exited with status 137; "
                                 "every process was stopped"));
    /* every worker process of the job is gone */
    f = fopen(pids, "r");
    assert_non_null(f);
    int n = 0;
    long pid;
    while (fscanf(f, "%ld", &pid) == 1) {
        n++;
        if (alive((pid_t)pid))
            fail_msg("worker pid %ld still runs after arealctl returned", pid);
    }
    fclose(f);
    assert_true(n >= 3); /* tiny, serve, train */
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(trainer_killed_stops_the_job),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
