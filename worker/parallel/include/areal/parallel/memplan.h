/*
 * memplan.h - a model config's dimensions as lib/layout's memory plan takes
 * them (areal/memplan.h), so the planner's formulas and the worker's shards
 * are checked against each other (test_par_memplan.c) and a trainer can
 * report its own plan.
 */
#ifndef AREAL_PARALLEL_MEMPLAN_H
#define AREAL_PARALLEL_MEMPLAN_H

#include "areal/memplan.h"
#include "areal/model/config.h"

/* cfg's dimensions, its MoE layers included. */
areal_mem_model areal_par_mem_model(const areal_model_config *cfg);

#endif
