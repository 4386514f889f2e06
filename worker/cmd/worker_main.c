/*
 * worker_main.c - areal-worker: the pod launcher (no RANK in the
 * environment) or one rank (RANK set by the launcher). See worker_env.h.
 *
 * Usage: areal-worker [--selftest] [--hold-ms N]
 *        areal-worker tokenize|score|generate ...  (the model commands,
 *        areal/model/cmd.h)
 *        areal-worker serve --model DIR ...        (the rollout server, worker_serve.c)
 *        areal-worker --model DIR                  (a rank of an inference role serves)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/cmd.h"
#include "areal/train/cmd.h"
#include "worker_env.h"

static int usage(const char *why) {
    fprintf(stderr,
            "areal-worker: %s\nusage: areal-worker [--selftest] [--hold-ms N]\n"
            "       areal-worker tokenize|score|generate --model DIR ... (the CPU model)\n"
            "       areal-worker tiny|train ... (the demo model; the trainer role)\n"
            "       areal-worker serve --model DIR ... (the rollout server; serve --help)\n"
            "  --model DIR  in a job: ranks of an inference role serve DIR over HTTP\n"
            "  --selftest   build every group of the job and check a collective on each\n"
            "  --hold-ms N  stay up N ms after the work\n",
            why);
    return 2;
}

int main(int argc, char **argv) {
    if (argc > 1 && areal_cmd_is_model(argv[1]))
        return areal_cmd_run(argc - 1, argv + 1, stdout, stderr);
    if (argc > 1 && areal_cmd_is_train(argv[1]))
        return areal_cmd_train_run(argc - 1, argv + 1, stdout, stderr);
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return worker_serve_main(argc - 1, argv + 1, NULL);
    worker_opts o = {0, 0, NULL};
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--selftest") == 0) {
            o.selftest = 1;
        } else if (strcmp(argv[i], "--hold-ms") == 0 && i + 1 < argc) {
            char *end = NULL;
            long x = strtol(argv[++i], &end, 10);
            if (*end != '\0' || x < 0 || x > 86400000)
                return usage("--hold-ms needs milliseconds 0..86400000");
            o.hold_ms = (int)x;
        } else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc) {
            o.model = argv[++i]; /* ranks of an inference role serve this model */
        } else if (strcmp(argv[i], "--help") == 0) {
            usage("the AReaL worker");
            return 0;
        } else {
            return usage("unknown argument");
        }
    }
    if (getenv(AREAL_ENV_RANK) == NULL)
        return worker_pod_main(argv);
    return worker_rank_main(&o);
}
