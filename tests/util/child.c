/*
 * child.c - see child.h. Output goes to temporary files rather than pipes, so
 * a child that prints more than a pipe holds can never block on a parent that
 * is waiting for it.
 */
#include "child.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void read_back(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f)
        fclose(f);
    unlink(path);
}

int child_run(const char *const *argv, int *status, char *out, size_t out_cap, char *err,
              size_t err_cap) {
    char out_path[] = "/tmp/areal-child-out-XXXXXX", err_path[] = "/tmp/areal-child-err-XXXXXX";
    int out_fd = mkstemp(out_path), err_fd = mkstemp(err_path);
    if (out_fd < 0 || err_fd < 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        dup2(out_fd, 1);
        dup2(err_fd, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    close(out_fd);
    close(err_fd);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    read_back(out_path, out, out_cap);
    read_back(err_path, err, err_cap);
    return 0;
}

int child_run_va(const char *bin, const char *first, va_list ap, int *status, char *out,
                 size_t out_cap, char *err, size_t err_cap) {
    const char *argv[32];
    int argc = 0;
    argv[argc++] = bin;
    for (const char *a = first; a != NULL && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = a;
    argv[argc] = NULL;
    return child_run(argv, status, out, out_cap, err, err_cap);
}
