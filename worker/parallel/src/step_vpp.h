/*
 * step_vpp.h - step.c's private view of the interleaved-pipeline form
 * (step_vpp.c): freeing the chunk arrays.
 */
#ifndef AREAL_PARALLEL_STEP_VPP_H
#define AREAL_PARALLEL_STEP_VPP_H

#include "areal/parallel/step.h"

/* Frees the chunk array and chunks 1..'s moments (the chunks are the caller's); s->vpp 0. */
void areal_par_step_vpp_free(areal_par_step *s);

#endif
