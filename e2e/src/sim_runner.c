/*
 * sim_runner.c - starts one container as a local process (areal/simkubelet.h).
 *
 * What: fork; in the child, only system calls (the parent is multi-threaded,
 * so nothing that may take a lock runs between fork and exec): setsid, the
 * parent-death signal, unshare(CLONE_NEWNS | CLONE_NEWUTS), "/" made private
 * so nothing mounted here reaches the host, the hosts file bind-mounted over
 * /etc/hosts (glibc re-reads it on each lookup; the simulator rewrites it in
 * place, since a bind mount pins the inode), the volumes and the
 * termination-message file bind-mounted, sethostname, chdir, stdout and
 * stderr to the log, the signal mask cleared, execve. A failed step writes
 * {step, errno} to a close-on-exec pipe; the parent reads the pipe: EOF means
 * the exec happened.
 * Rejected: posix_spawn (cannot unshare or mount), a shell wrapper
 * (`unshare --mount sh -c 'mount --bind ...; exec ...'`: a second program per
 * pod, quoting of every argument, and a shell between the kubelet and the
 * container's signals).
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "areal/simkubelet.h"

enum {
    STEP_LOG = 1,
    STEP_UNSHARE,
    STEP_PRIVATE,
    STEP_MOUNT,
    STEP_SECRETS,
    STEP_VOLUMES,
    STEP_TERMINATION,
    STEP_HOSTNAME,
    STEP_CHDIR,
    STEP_EXEC
};

static const char *step_name(int step) {
    switch (step) {
    case STEP_LOG:
        return "open the log file";
    case STEP_UNSHARE:
        return "unshare the mount and UTS namespaces (needs root)";
    case STEP_PRIVATE:
        return "make / private in the pod's mount namespace";
    case STEP_MOUNT:
        return "bind-mount the pod's hosts file over /etc/hosts";
    case STEP_SECRETS:
        return "bind-mount the pod's service-account files over /var/run/secrets";
    case STEP_VOLUMES:
        return "bind-mount a volume of the pod over its mountPath";
    case STEP_TERMINATION:
        return "bind-mount the container's termination-message file over its "
               "terminationMessagePath";
    case STEP_HOSTNAME:
        return "set the pod's host name";
    case STEP_CHDIR:
        return "enter the working directory";
    default:
        return "exec the command";
    }
}

static void child_fail(int fd, int step) {
    int msg[2] = {step, errno};
    ssize_t w = write(fd, msg, sizeof msg);
    (void)w;
    _exit(127);
}

/* mkdir -p with a stack buffer: only system calls between fork and exec. */
static int make_dirs(const char *path) {
    char buf[1024];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0755) != 0 && errno != EEXIST)
                return -1;
            buf[i] = c;
        }
    }
    return 0;
}

/* The mount point of a file: its directory (mkdir -p) and an empty file, made
 * once on the host and kept (what a pod sees there is only its own file). */
static int make_file_point(const char *path) {
    char buf[1024];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    char *slash = strrchr(buf, '/');
    if (slash != NULL && slash != buf) {
        *slash = '\0';
        if (make_dirs(buf) != 0)
            return -1;
    }
    int f = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (f < 0)
        return -1;
    close(f);
    return 0;
}

static void child(const sim_spawn *s, int fd) {
    setsid();
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    int log = open(s->log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (log < 0)
        child_fail(fd, STEP_LOG);
    if (s->hosts_path != NULL) {
        if (unshare(CLONE_NEWNS | CLONE_NEWUTS) != 0)
            child_fail(fd, STEP_UNSHARE);
        if (mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0)
            child_fail(fd, STEP_PRIVATE);
        if (mount(s->hosts_path, "/etc/hosts", NULL, MS_BIND, NULL) != 0)
            child_fail(fd, STEP_MOUNT);
        /* the mount point on the host: an empty directory, made once (a bind
         * mount needs one; what a pod sees there is only its own files) */
        if (s->secrets_path != NULL &&
            ((mkdir("/var/run/secrets", 0755) != 0 && errno != EEXIST) ||
             mount(s->secrets_path, "/var/run/secrets", NULL, MS_BIND, NULL) != 0))
            child_fail(fd, STEP_SECRETS);
        for (size_t i = 0; i < s->n_mounts; i++)
            if (make_dirs(s->mount_dst[i]) != 0 ||
                mount(s->mount_src[i], s->mount_dst[i], NULL, MS_BIND | MS_REC, NULL) != 0)
                child_fail(fd, STEP_VOLUMES);
        if (s->termination_src != NULL && s->termination_dst != NULL &&
            (make_file_point(s->termination_dst) != 0 ||
             mount(s->termination_src, s->termination_dst, NULL, MS_BIND, NULL) != 0))
            child_fail(fd, STEP_TERMINATION);
        if (s->hostname != NULL && sethostname(s->hostname, strlen(s->hostname)) != 0)
            child_fail(fd, STEP_HOSTNAME);
    }
    if (chdir(s->workdir) != 0)
        child_fail(fd, STEP_CHDIR);
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (devnull >= 0)
        dup2(devnull, 0);
    dup2(log, 1);
    dup2(log, 2);
    for (int sig = 1; sig < NSIG; sig++)
        if (sig != SIGKILL && sig != SIGSTOP)
            signal(sig, SIG_DFL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    execve(s->path, s->argv, s->envp);
    child_fail(fd, STEP_EXEC);
}

int sim_spawn_start(const sim_spawn *s, pid_t *pid, areal_error *err) {
    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0)
        return areal_error_set(err, AREAL_EIO, -1, "pipe: %s", strerror(errno));
    pid_t c = fork();
    if (c < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        return areal_error_set(err, AREAL_EIO, -1, "fork: %s", strerror(e));
    }
    if (c == 0) {
        close(p[0]);
        child(s, p[1]);
    }
    close(p[1]);
    int msg[2] = {0, 0};
    ssize_t n;
    do
        n = read(p[0], msg, sizeof msg);
    while (n < 0 && errno == EINTR);
    close(p[0]);
    if (n == (ssize_t)sizeof msg) {
        waitpid(c, NULL, 0);
        return areal_error_set(err, AREAL_EIO, -1, "cannot %s for %s: %s", step_name(msg[0]),
                               s->path, strerror(msg[1]));
    }
    *pid = c;
    return AREAL_OK;
}

int sim_spawn_resolve(const char *name, const char *dir, char *out, size_t cap, areal_error *err) {
    static const char *const sys[] = {"/usr/local/bin", "/usr/bin", "/bin", "/usr/sbin", "/sbin"};
    if (name == NULL || name[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1, "empty command");
    if (strchr(name, '/') != NULL) {
        snprintf(out, cap, "%s", name);
        if (access(out, X_OK) == 0)
            return AREAL_OK;
        return areal_error_set(err, AREAL_EINVAL, -1, "command %s is not an executable file", name);
    }
    for (int i = -1; i < (int)(sizeof sys / sizeof sys[0]); i++) {
        const char *d = i < 0 ? dir : sys[i];
        if (d == NULL)
            continue;
        int n = snprintf(out, cap, "%s/%s", d, name);
        struct stat st;
        if (n > 0 && (size_t)n < cap && stat(out, &st) == 0 && S_ISREG(st.st_mode) &&
            access(out, X_OK) == 0)
            return AREAL_OK;
    }
    return areal_error_set(err, AREAL_EINVAL, -1,
                           "executable file '%s' not found in the image (%s) or the system dirs",
                           name, dir ? dir : "no image dir");
}
