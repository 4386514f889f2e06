/*
 * config_internal.h - the key table shared by the config reader and writer
 * of worker/rl (not public).
 */
#ifndef AREAL_RL_CONFIG_INTERNAL_H
#define AREAL_RL_CONFIG_INTERNAL_H

#include <stddef.h>

#include "areal/rl/config.h"

typedef enum {
    K_BOOL,
    K_INT,          /* int, range lo..hi */
    K_LONG,         /* long, range lo..hi */
    K_LONG_NULL0,   /* long; null (AReaL None) stores 0 */
    K_OPT_LONG,     /* long + bool at off2; null clears the bool */
    K_DOUBLE,       /* double, range lo..hi */
    K_DOUBLE_NULL0, /* double; null stores 0 */
    K_OPT_DOUBLE,   /* double + bool at off2; null clears the bool */
    K_STR,          /* owned char *; null stores NULL */
    K_BUF,          /* char[16] from `choices` */
    K_ENUM,         /* int-sized enum: the index in `choices` */
    K_NORM_LEVEL,   /* areal_norm_level from "batch"/"group"/null */
    K_INTLIST,      /* int * at off, size_t count at off2 */
    K_SECTION,      /* an object whose keys are listed separately; null refused */
    K_NORM,         /* areal_norm_config: null disables, an object enables */
    K_RS,           /* areal_rejection_config: likewise */
    K_DATASET,      /* areal_dataset_config: null = absent */
} cfg_kind;

typedef struct cfg_field {
    const char *path;
    cfg_kind kind;
    size_t off;
    size_t off2;
    double lo, hi;
    const char *const *choices;
} cfg_field;

typedef struct cfg_alias {
    const char *alias;
    const char *target;
} cfg_alias;

extern const cfg_field cfg_fields[];
extern const cfg_field cfg_norm_fields[];
extern const cfg_alias cfg_aliases[];

/* The field with this dotted path, or NULL. */
const cfg_field *cfg_find_field(const char *path);

#endif
