/*
 * arealctl.c - the command-line entry point: dispatches subcommands.
 */
#include <stdio.h>
#include <string.h>

#include "areal/version.h"
#include "cli.h"

static void usage(FILE *out) {
    fprintf(out,
            "usage: arealctl plan [--alloc STRING] [--cluster FILE] [--gpus-per-node N]\n"
            "                     [--rank R] [--role NAME] [--job NAME] [--json]\n"
            "                     [--require KIND=LEVEL] [--prefer KIND=LEVEL]\n"
            "\n"
            "  plan   place a job's pods by parallel-group topology and print the layout.\n"
            "         Without --alloc and --cluster it plans an embedded example job on an\n"
            "         embedded 8-node cluster. See README.md for the JSON format.\n"
            "\n"
            "usage: arealctl run [--alloc STRING] [--slots N] [--timeout SECONDS] [-- ARGS...]\n"
            "  run    run the job on this machine: every pod an areal-worker process on CPU.\n"
            "\n"
            "arealctl SUBCOMMAND --help shows a subcommand's options; --version the "
            "version.\n" AREAL_EXIT_HELP);
}

int main(int argc, char **argv) {
    if (argc >= 2 && strcmp(argv[1], "plan") == 0)
        return cmd_plan(argc - 1, argv + 1);
    if (argc >= 2 && strcmp(argv[1], "run") == 0)
        return cmd_run(argc - 1, argv + 1, argv[0]);
    if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 ||
                      strcmp(argv[1], "help") == 0)) {
        usage(stdout);
        return CLI_OK;
    }
    if (argc >= 2 && strcmp(argv[1], "--version") == 0)
        return areal_print_version(stdout, "arealctl");
    if (argc < 2)
        return cli_bad_input("a subcommand is required (plan or run); try arealctl --help");
    return cli_bad_input("unknown subcommand '%s'; the subcommands are plan and run", argv[1]);
}
