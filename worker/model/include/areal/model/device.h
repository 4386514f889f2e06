/*
 * device.h - which device a pod's model runs on: the rule shared by the
 * trainer (areal/train/backend.h) and the rollout engine
 * (areal/rollout/backend.h), each of which adds whether its own GPU path is
 * built and wired.
 *
 * A pod asks for GPUs through its environment: Kubernetes' NVIDIA device
 * plugin (and the container toolkit) set NVIDIA_VISIBLE_DEVICES to the
 * granted devices ("all", "0,1", a UUID list; "void"/"none"/empty: none), and
 * CUDA_VISIBLE_DEVICES narrows or hides them ("" or "-1": none). The machine
 * has a GPU when the CUDA runtime, loaded at run time (dlopen of libcudart,
 * so a CPU build links nothing of CUDA), counts at least one device. The
 * choice: the GPU when the pod asks, the side's GPU path exists and a device
 * is there; otherwise the CPU, with a warning when the pod asked for GPUs it
 * cannot use (the caller logs it once per pod). Pure logic apart from the
 * probe and the environment reader, so it is tested on CPU with fake
 * environments (worker/model/tests/test_model_device.c).
 */
#ifndef AREAL_MODEL_DEVICE_H
#define AREAL_MODEL_DEVICE_H

#include <stdbool.h>

typedef struct areal_device_env {
    const char *nvidia_visible; /* NVIDIA_VISIBLE_DEVICES, NULL: unset */
    const char *cuda_visible;   /* CUDA_VISIBLE_DEVICES, NULL: unset */
    int device_count;           /* the CUDA runtime's count; -1: no runtime could be loaded */
} areal_device_env;

typedef enum { AREAL_BACKEND_CPU = 0, AREAL_BACKEND_GPU = 1 } areal_backend_kind;

typedef struct areal_backend_choice {
    areal_backend_kind kind;
    bool warn;     /* the pod asked for GPUs and runs on the CPU: log `why` once */
    char why[320]; /* one line: what was chosen and why */
} areal_backend_choice;

/*
 * The choice for `side` ("trainer", "rollout": named in `why`) from env and
 * whether the side's GPU path is compiled into this program (gpu_built;
 * `missing` says what is missing when it is not, e.g. "this build has no
 * GPU model (no nvcc / cuBLASLt)"; NULL for a generic text).
 */
areal_backend_choice areal_backend_select(const char *side, const areal_device_env *env,
                                          bool gpu_built, const char *missing);

/* True when env's visibility variables grant at least one GPU to the pod. */
bool areal_device_env_asks_gpu(const areal_device_env *env);

/*
 * The process's environment (getenv) and, when probe is true, the CUDA
 * runtime's device count through areal_device_probe(NULL); else device_count -1.
 * The strings point into the environment: valid until it changes.
 */
areal_device_env areal_device_env_read(bool probe);

/* True in the pod's first rank process (LOCAL_RANK unset, empty or 0): the one that logs a
 * choice's warning, so the pod says it once however many ranks it runs. */
bool areal_device_pod_leader(void);

/*
 * The number of CUDA devices the runtime library `lib` reports (dlopen,
 * cudaGetDeviceCount, dlclose); NULL tries libcudart.so, then .so.13 and
 * .so.12. -1 when no such library can be loaded or the call fails (no
 * driver): the caller treats both as "no GPU here".
 */
int areal_device_probe(const char *lib);

#endif
