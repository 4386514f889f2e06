/*
 * sim_image.c - which local directory plays an image (see areal/simpod.h).
 *
 * What: the simulator runs no container runtime; an image is replaced by a
 * directory of locally built programs (the build dir for the worker image,
 * the system dirs for the tenant pods' image). The repository part of the
 * image reference is compared exactly: "areal/worker:latest",
 * "areal/worker@sha256:..." and "areal/worker" all name "areal/worker".
 * Rejected: prefix matching (a typo in an image would silently run
 * something) and pulling anything.
 */
#include <stdio.h>
#include <string.h>

#include "areal/simpod.h"

int sim_image_add(sim_image_map *m, const char *spec, areal_error *err) {
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (eq == NULL || eq == spec || eq[1] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "image map '%s' is not REPOSITORY=DIRECTORY, e.g. "
                               "areal/worker=build/rel",
                               spec ? spec : "");
    if (m->n == SIM_IMAGES_MAX)
        return areal_error_set(err, AREAL_ERANGE, -1, "at most %d image maps", SIM_IMAGES_MAX);
    size_t rl = (size_t)(eq - spec), dl = strlen(eq + 1);
    if (rl >= sizeof m->repo[0] || dl >= sizeof m->dir[0])
        return areal_error_set(err, AREAL_ERANGE, -1, "image map '%s' is too long", spec);
    memcpy(m->repo[m->n], spec, rl);
    m->repo[m->n][rl] = '\0';
    memcpy(m->dir[m->n], eq + 1, dl + 1);
    m->n++;
    return AREAL_OK;
}

/* Length of the repository part: up to '@', or up to a ':' after the last '/'. */
static size_t repo_len(const char *image) {
    size_t n = strcspn(image, "@");
    const char *slash = NULL;
    for (size_t i = 0; i < n; i++)
        if (image[i] == '/')
            slash = image + i;
    const char *from = slash ? slash : image;
    const char *colon = memchr(from, ':', n - (size_t)(from - image));
    return colon ? (size_t)(colon - image) : n;
}

const char *sim_image_dir(const sim_image_map *m, const char *image) {
    if (image == NULL)
        return NULL;
    size_t n = repo_len(image);
    for (int i = 0; i < m->n; i++)
        if (strlen(m->repo[i]) == n && strncmp(m->repo[i], image, n) == 0)
            return m->dir[i];
    return NULL;
}

int sim_image_set_entrypoint(sim_image_map *m, const char *spec, areal_error *err) {
    const char *eq = spec ? strchr(spec, '=') : NULL;
    if (eq == NULL || eq == spec || eq[1] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "entrypoint '%s' is not REPOSITORY=PROGRAM, e.g. "
                               "areal/operator=areal-operator",
                               spec ? spec : "");
    size_t rl = (size_t)(eq - spec), el = strlen(eq + 1);
    for (int i = 0; i < m->n; i++) {
        if (strlen(m->repo[i]) != rl || strncmp(m->repo[i], spec, rl) != 0)
            continue;
        if (el >= sizeof m->entry[i])
            return areal_error_set(err, AREAL_ERANGE, -1, "entrypoint '%s' is too long", spec);
        memcpy(m->entry[i], eq + 1, el + 1);
        return AREAL_OK;
    }
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "entrypoint '%s': repository '%.*s' has no image map; give --image "
                           "%.*s=DIR before it",
                           spec, (int)rl, spec, (int)rl, spec);
}

const char *sim_image_entrypoint(const sim_image_map *m, const char *image) {
    if (image == NULL)
        return NULL;
    size_t n = repo_len(image);
    for (int i = 0; i < m->n; i++)
        if (strlen(m->repo[i]) == n && strncmp(m->repo[i], image, n) == 0)
            return m->entry[i][0] ? m->entry[i] : NULL;
    return NULL;
}
