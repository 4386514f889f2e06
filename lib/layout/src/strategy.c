/* strategy.c - see areal/strategy.h. */
#include "areal/strategy.h"

areal_strategy areal_strategy_single(void) {
    areal_strategy s = {.dp = 1, .tp = 1, .pp = 1, .cp = 1, .ep = 1, .etp = 1, .edp = 1};
    return s;
}

long areal_strategy_world(const areal_strategy *s) {
    return (long)s->dp * s->tp * s->pp * s->cp;
}
