/*
 * strategy.h - the parallel sizes of one component (AReaL's ParallelStrategy).
 */
#ifndef AREAL_STRATEGY_H
#define AREAL_STRATEGY_H

typedef struct areal_strategy {
    int dp;  /* data parallel */
    int tp;  /* tensor parallel */
    int pp;  /* pipeline parallel */
    int cp;  /* context parallel */
    int ep;  /* expert parallel */
    int etp; /* expert tensor parallel (AReaL default 1) */
    int edp; /* expert data parallel = world / (pp * etp * ep) */
} areal_strategy;

/* All sizes 1. */
areal_strategy areal_strategy_single(void);

/* dp * tp * pp * cp, as long (never overflows for parsed strategies). */
long areal_strategy_world(const areal_strategy *s);

#endif
