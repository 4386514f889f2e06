/*
 * priority.c - the rank of waiting jobs (see areal/operator/priority.h). Read
 * from the job objects as the job cache holds them: the controller ranks
 * every other job against the one it reconciles, so these stay allocation
 * free and cheap.
 */
#include "areal/operator/priority.h"

#include <string.h>

static const char *str_at(const json_t *obj, const char *a, const char *b) {
    const json_t *v = json_object_get(obj, a);
    if (b != NULL)
        v = json_object_get(v, b);
    return json_string_value(v);
}

int job_spec_priority(const json_t *job) {
    const json_t *p = json_object_get(json_object_get(job, "spec"), "priority");
    if (!json_is_integer(p))
        return 0;
    json_int_t v = json_integer_value(p);
    return v > 1000 ? 1000 : v < -1000 ? -1000 : (int)v;
}

bool job_waits_for_gpus(const json_t *job) {
    if (str_at(job, "metadata", "deletionTimestamp") != NULL ||
        json_is_true(json_object_get(json_object_get(job, "spec"), "suspend")))
        return false;
    const json_t *st = json_object_get(job, "status");
    const char *phase = str_at(st, "phase", NULL);
    /* Suspended with spec.suspend false: resumed, its first pass not written yet */
    if (phase != NULL && strcmp(phase, "Pending") != 0 && strcmp(phase, "Restarting") != 0 &&
        strcmp(phase, "Suspended") != 0)
        return false;
    size_t i;
    json_t *c;
    json_array_foreach(json_object_get(st, "conditions"), i, c) {
        const char *t = str_at(c, "type", NULL), *s = str_at(c, "status", NULL);
        if (t && strcmp(t, "Scheduled") == 0)
            return !(s && strcmp(s, "True") == 0); /* True: the gang is placed */
    }
    return true; /* never reconciled yet */
}

int job_rank_cmp(const json_t *a, const json_t *b) {
    int pa = job_spec_priority(a), pb = job_spec_priority(b);
    if (pa != pb)
        return pa > pb ? -1 : 1;
    /* RFC 3339 UTC at second resolution, as the API server writes it: text order is time order */
    const char *ca = str_at(a, "metadata", "creationTimestamp");
    const char *cb = str_at(b, "metadata", "creationTimestamp");
    int c = strcmp(ca ? ca : "", cb ? cb : "");
    if (c != 0)
        return c;
    const char *na = str_at(a, "metadata", "namespace"), *nb = str_at(b, "metadata", "namespace");
    c = strcmp(na ? na : "", nb ? nb : "");
    if (c != 0)
        return c;
    const char *ma = str_at(a, "metadata", "name"), *mb = str_at(b, "metadata", "name");
    return strcmp(ma ? ma : "", mb ? mb : "");
}
