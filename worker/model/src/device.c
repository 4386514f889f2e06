/*
 * device.c - the device choice of a pod's model (areal/model/device.h): the
 * visibility variables read as the NVIDIA container toolkit and the CUDA
 * runtime read them, the runtime probed through dlopen (rejected: linking
 * libcudart into the CPU build, which must run where no CUDA exists at all;
 * and parsing nvidia-smi, which a slim image lacks).
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "areal/model/device.h"

static bool blank(const char *s) {
    for (; s != NULL && *s != '\0'; s++)
        if (*s != ' ' && *s != '\t')
            return false;
    return true;
}

bool areal_device_env_asks_gpu(const areal_device_env *env) {
    const char *nv = env->nvidia_visible, *cv = env->cuda_visible;
    bool nv_grants = nv != NULL && !blank(nv) && strcmp(nv, "void") != 0 &&
                     strcmp(nv, "none") != 0 && strcmp(nv, "NoDevFiles") != 0;
    /* CUDA_VISIBLE_DEVICES: set and non-empty grants (its list), "" or "-1..." hides all */
    bool cv_set = cv != NULL;
    bool cv_hides = cv_set && (blank(cv) || strncmp(cv, "-1", 2) == 0);
    if (cv_hides)
        return false;
    return nv_grants || cv_set;
}

areal_backend_choice areal_backend_select(const char *side, const areal_device_env *env,
                                          bool gpu_built, const char *missing) {
    areal_backend_choice c = {AREAL_BACKEND_CPU, false, {0}};
    const char *who = side != NULL ? side : "model";
    char asked[96];
    snprintf(asked, sizeof asked, "NVIDIA_VISIBLE_DEVICES=%s CUDA_VISIBLE_DEVICES=%s",
             env->nvidia_visible != NULL ? env->nvidia_visible : "(unset)",
             env->cuda_visible != NULL ? env->cuda_visible : "(unset)");
    if (!areal_device_env_asks_gpu(env)) {
        snprintf(c.why, sizeof c.why, "%s runs on the CPU: the pod has no GPU (%s)", who, asked);
        return c;
    }
    if (!gpu_built) {
        c.warn = true;
        snprintf(c.why, sizeof c.why, "%s runs on the CPU although the pod has GPUs (%s): %s", who,
                 asked, missing != NULL ? missing : "this build has no GPU path");
        return c;
    }
    if (env->device_count <= 0) {
        c.warn = true;
        snprintf(c.why, sizeof c.why, "%s runs on the CPU although the pod has GPUs (%s): %s", who,
                 asked,
                 env->device_count < 0
                     ? "the CUDA runtime (libcudart) cannot be loaded or finds no driver"
                     : "the CUDA runtime counts 0 devices");
        return c;
    }
    c.kind = AREAL_BACKEND_GPU;
    snprintf(c.why, sizeof c.why, "%s runs on the GPU: %d device(s) visible (%s)", who,
             env->device_count, asked);
    return c;
}

int areal_device_probe(const char *lib) {
    static const char *const names[] = {"libcudart.so", "libcudart.so.13", "libcudart.so.12"};
    void *h = NULL;
    if (lib != NULL)
        h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    for (size_t i = 0; lib == NULL && h == NULL && i < sizeof names / sizeof names[0]; i++)
        h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL)
        return -1;
    typedef int (*count_fn)(int *);
    count_fn count;
    void *sym = dlsym(h, "cudaGetDeviceCount");
    memcpy(&count, &sym, sizeof count); /* object -> function pointer without a cast warning */
    if (count == NULL) {
        dlclose(h);
        return -1;
    }
    /* kept loaded once called: the runtime holds process-wide state and atexit handlers */
    int n = 0, rc = count(&n);
    return rc == 0 ? n : -1;
}

bool areal_device_pod_leader(void) {
    const char *lr = getenv("LOCAL_RANK");
    return lr == NULL || lr[0] == '\0' || strcmp(lr, "0") == 0;
}

areal_device_env areal_device_env_read(bool probe) {
    areal_device_env e = {getenv("NVIDIA_VISIBLE_DEVICES"), getenv("CUDA_VISIBLE_DEVICES"), -1};
    if (probe && areal_device_env_asks_gpu(&e))
        e.device_count = areal_device_probe(NULL);
    return e;
}
