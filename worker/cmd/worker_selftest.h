/* worker_selftest.h - areal-worker --selftest; see worker_selftest.c. */
#ifndef AREAL_WORKER_SELFTEST_H
#define AREAL_WORKER_SELFTEST_H

#include "areal/comm/comm.h"
#include "areal/placement.h"

/*
 * Runs the collective checks on every group of groups[] (NULL entries
 * skipped; r, the role whose groups they are, may be NULL, then only the
 * world group) and on the world group
 * wg; the first member of each group prints its summary line, rank 0 the
 * total. Returns 0 when every check on every rank passed, else 1.
 */
int worker_selftest(areal_comm *c, const areal_role_plan *r, areal_coll *const *groups,
                    areal_coll *wg);

#endif
