/*
 * cmd_run.c - dispatch of the model commands by name (areal/model/cmd.h), so
 * a program's main needs one call: `areal-worker tokenize|score|generate`.
 */
#include <string.h>

#include "areal/model/cmd.h"

typedef int (*cmd_fn)(int argc, char **argv, FILE *out, FILE *err);

static cmd_fn lookup(const char *name) {
    if (name == NULL)
        return NULL;
    if (strcmp(name, "tokenize") == 0)
        return areal_cmd_tokenize;
    if (strcmp(name, "score") == 0)
        return areal_cmd_score;
    if (strcmp(name, "generate") == 0)
        return areal_cmd_generate;
    return NULL;
}

bool areal_cmd_is_model(const char *name) {
    return lookup(name) != NULL;
}

int areal_cmd_run(int argc, char **argv, FILE *out, FILE *err) {
    cmd_fn f = argc > 0 ? lookup(argv[0]) : NULL;
    if (f == NULL) {
        fprintf(err,
                "areal-worker: unknown command %s; the model commands are tokenize, score "
                "and generate\n",
                argc > 0 && argv[0] != NULL ? argv[0] : "(none)");
        return 2;
    }
    return f(argc, argv, out, err);
}
