/*
 * worker_main.c - areal-worker: the pod launcher (no RANK in the
 * environment) or one rank (RANK set by the launcher). See worker_env.h.
 *
 * Usage: areal-worker [--selftest] [--hold-ms N]
 *        areal-worker tokenize|score|generate ...  (the model commands,
 *        areal/model/cmd.h)
 *        areal-worker serve --model DIR ...        (the rollout server, worker_serve.c)
 *        areal-worker train ...                    (the trainer; in a pod of several
 *                                                   trainer ranks, the launcher first)
 *        areal-worker --model DIR                  (a rank of an inference role serves)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/escape.h"
#include "areal/log.h"
#include "areal/model/cmd.h"
#include "areal/train/cmd.h"
#include "areal/version.h"
#include "worker_env.h"

static const char worker_usage[] =
    "usage: areal-worker [--selftest] [--hold-ms N] [--model DIR]\n"
    "       areal-worker tokenize|score|generate --model DIR ... (the CPU model;\n"
    "                    areal-worker COMMAND --help shows its options)\n"
    "       areal-worker tiny|train ... (the demo model; the trainer role; COMMAND --help)\n"
    "       areal-worker serve --model DIR ... (the rollout server; serve --help)\n"
    "Without RANK in the environment it is a pod's launcher and starts one rank per\n"
    "slot; with RANK it is one rank (see worker/README.md for the environment).\n"
    "  --model DIR  in a job: ranks of an inference role serve DIR over HTTP\n"
    "  --selftest   build every group of the job and check a collective on each\n"
    "  --hold-ms N  stay up N ms after the work\n"
    "  --help, --version\n" AREAL_EXIT_HELP;

/* One error line naming the argument, then a pointer to --help. Returns 2. */
static int usage_error(const char *why, const char *arg) {
    areal_print_line(stderr, "areal-worker: %s '%s'; see areal-worker --help", why, arg);
    return AREAL_EXIT_USAGE;
}

int main(int argc, char **argv) {
    if (argc > 1 && areal_cmd_is_model(argv[1]))
        return areal_cmd_run(argc - 1, argv + 1, stdout, stderr);
    if (argc > 1 && areal_cmd_train_wants_ranks(argc - 1, argv + 1)) {
        /* a trainer pod of several ranks: one `train` process per rank, RANK set.
         * On SIGTERM rank 0 checkpoints before it exits: the launcher's SIGKILL
         * waits most of the kubelet's default 30 s grace, not the 5 s it gives
         * selftest ranks (AREAL_GRACE_MS still wins). */
        setenv(WORKER_ENV_GRACE_MS, "25000", 0);
        areal_log_setup();
        return worker_pod_main(argv);
    }
    if (argc > 1 && areal_cmd_is_train(argv[1]))
        return areal_cmd_train_run(argc - 1, argv + 1, stdout, stderr);
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return worker_serve_main(argc - 1, argv + 1, NULL);
    worker_opts o = {0, 0, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--selftest") == 0) {
            o.selftest = 1;
        } else if (strcmp(argv[i], "--hold-ms") == 0) {
            if (i + 1 == argc)
                return usage_error("a value is missing after", argv[i]);
            char *end = NULL;
            long x = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || x < 0 || x > 86400000)
                return usage_error("--hold-ms needs milliseconds 0..86400000, not", argv[i]);
            o.hold_ms = (int)x;
        } else if (strcmp(argv[i], "--model") == 0) {
            if (i + 1 == argc)
                return usage_error("a value is missing after", argv[i]);
            o.model = argv[++i]; /* ranks of an inference role serve this model */
        } else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
            fputs(worker_usage, stdout);
            return AREAL_EXIT_OK;
        } else if (strcmp(argv[i], "--version") == 0) {
            return areal_print_version(stdout, "areal-worker");
        } else {
            return usage_error("unknown argument", argv[i]);
        }
    }
    areal_log_setup(); /* the launcher and the ranks log records; the model commands do not */
    if (getenv(AREAL_ENV_RANK) == NULL)
        return worker_pod_main(argv);
    return worker_rank_main(&o);
}
