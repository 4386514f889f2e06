/*
 * fuzz_simpod.c - libFuzzer target for what the node simulator derives from
 * a pod object it did not write.
 *
 * Arbitrary bytes are read as JSON; when they are an object, it is taken as a
 * pod: sim_env_build must return AREAL_OK with a NULL-terminated argv (at
 * least the command) and envp of NAME=value strings, or an error with both
 * vectors empty; the pod's names go through sim_hosts_render (bounded
 * buffer) and a status patch is built. Sanitizers catch memory errors in
 * the $(VAR) expansion and the fieldRef parsing.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "areal/simpod.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_t *pod = json_loadb((const char *)data, size, 0, NULL);
    if (!json_is_object(pod)) {
        json_decref(pod);
        return 0;
    }
    json_t *c = json_array_get(json_object_get(json_object_get(pod, "spec"), "containers"), 0);
    sim_env_ctx ctx = {.pod_ip = "127.20.0.1", .host_ip = "10.200.0.1", .image_dir = "/opt/bin"};
    sim_strv argv = {0}, envp = {0};
    areal_error e;
    int rc = sim_env_build(pod, c, &ctx, &argv, &envp, &e);
    if (rc == AREAL_OK) {
        if (argv.n == 0 || argv.v[argv.n] != NULL || envp.v[envp.n] != NULL)
            abort();
        for (size_t i = 0; i < envp.n; i++)
            if (strchr(envp.v[i], '=') == NULL)
                abort();
    } else if (argv.n != 0 || envp.n != 0) {
        abort();
    }
    sim_strv_free(&argv);
    sim_strv_free(&envp);

    const json_t *meta = json_object_get(pod, "metadata"), *spec = json_object_get(pod, "spec");
    const char *h = json_string_value(json_object_get(spec, "hostname"));
    sim_host_entry self = {"127.20.0.1", h ? h : "x",
                           json_string_value(json_object_get(spec, "subdomain")),
                           json_string_value(json_object_get(meta, "namespace"))};
    char buf[2048];
    size_t len = 0;
    if (sim_hosts_render(&self, &self, 1, NULL, buf, sizeof buf, &len, &e) == AREAL_OK &&
        len != strlen(buf))
        abort();
    sim_report r = {.phase = "Running", .container = h, .state = SIM_CSTATE_RUNNING};
    json_decref(sim_status_patch(&r, "2026-01-01T00:00:00Z"));
    json_decref(pod);
    return 0;
}
