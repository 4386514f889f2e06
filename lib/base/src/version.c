/* version.c - see areal/version.h. AREAL_VERSION is set by the Makefile from VERSION. */
#include "areal/version.h"

#ifndef AREAL_VERSION
#define AREAL_VERSION "unknown" /* a build outside the Makefile (fuzz targets) */
#endif

const char *areal_version(void) {
    return AREAL_VERSION;
}

int areal_print_version(FILE *out, const char *prog) {
    fprintf(out, "%s %s\n", prog, AREAL_VERSION);
    return AREAL_EXIT_OK;
}
