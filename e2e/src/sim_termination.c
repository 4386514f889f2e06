/*
 * sim_termination.c - a container's termination message, as a kubelet keeps
 * it (see areal/simkubelet.h): terminationMessagePath is a file the
 * container writes its last words to; the kubelet bind-mounts a per-container
 * host file there and, when the container exits, puts the file's first 4096
 * bytes into status.containerStatuses[].state.terminated.message.
 *
 * Here: the host file is <pod dir>/containers/<name>/termination-log, made
 * empty before the start; the runner bind-mounts it (sim_runner.c). Not done:
 * terminationMessagePolicy FallbackToLogsOnError (the log's tail when the file
 * is empty and the container failed): File only, which is what the operator
 * asks of its trainers.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "areal/simkubelet.h"

int sim_termination_prepare(const json_t *container, const char *pod_dir, char *host_path,
                            size_t cap, const char **at, areal_error *err) {
    *at = NULL;
    host_path[0] = '\0';
    const char *path = json_string_value(json_object_get(container, "terminationMessagePath"));
    /* Unset means the kubelet's default, /dev/termination-log. That one alone is
     * skipped: its mount point would be a file made in this host's own /dev,
     * which is not the simulator's to write; such a container's message stays
     * empty (nothing in this system reads it). */
    if (path == NULL || path[0] == '\0' || strcmp(path, SIM_TERMINATION_DEFAULT_PATH) == 0)
        return AREAL_OK;
    if (path[0] != '/' || strstr(path, "/../") != NULL || strcmp(path, "/") == 0)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "terminationMessagePath '%s' must be an absolute file path", path);
    const char *name = json_string_value(json_object_get(container, "name"));
    char dir[SIM_PATH_MAX];
    int n = snprintf(dir, sizeof dir, "%s/containers", pod_dir);
    if (n < 0 || (size_t)n >= sizeof dir || (mkdir(dir, 0755) != 0 && errno != EEXIST))
        return areal_error_set(err, AREAL_EIO, -1, "cannot create %s: %s", dir, strerror(errno));
    n = snprintf(dir, sizeof dir, "%s/containers/%s", pod_dir, name && name[0] ? name : "c");
    if (n < 0 || (size_t)n >= sizeof dir || (mkdir(dir, 0755) != 0 && errno != EEXIST))
        return areal_error_set(err, AREAL_EIO, -1, "cannot create %s: %s", dir, strerror(errno));
    n = snprintf(host_path, cap, "%s/termination-log", dir);
    if (n < 0 || (size_t)n >= cap)
        return areal_error_set(err, AREAL_EIO, -1, "%s/termination-log: path too long", dir);
    /* empty at each start: a message is the last words of this run only */
    int fd = open(host_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (fd < 0)
        return areal_error_set(err, AREAL_EIO, -1, "cannot create %s: %s", host_path,
                               strerror(errno));
    close(fd);
    *at = path;
    return AREAL_OK;
}

size_t sim_termination_read(const char *host_path, char *out, size_t cap) {
    out[0] = '\0';
    if (host_path == NULL || host_path[0] == '\0' || cap == 0)
        return 0;
    int fd = open(host_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t want = cap - 1 < SIM_TERMINATION_MESSAGE_MAX ? cap - 1 : SIM_TERMINATION_MESSAGE_MAX;
    size_t got = 0;
    while (got < want) {
        ssize_t r = read(fd, out + got, want - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    close(fd);
    out[got] = '\0';
    /* a cut through a UTF-8 sequence would make the JSON string invalid: drop its head */
    if (got == SIM_TERMINATION_MESSAGE_MAX) {
        size_t i = got;
        while (i > 0 && ((unsigned char)out[i - 1] & 0xC0) == 0x80)
            i--;
        if (i > 0 && ((unsigned char)out[i - 1] & 0x80) != 0) {
            unsigned char lead = (unsigned char)out[i - 1];
            size_t len = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
            if (got - (i - 1) < len) {
                got = i - 1;
                out[got] = '\0';
            }
        }
    }
    return got;
}
