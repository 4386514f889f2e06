/* test_simrunner.c - the node simulator's process runner (areal/simkubelet.h):
 * a container runs in its own mount and UTS namespaces with the pod's hosts
 * file, host name, env, working dir and log; failures name the step; the
 * termination-message file (terminationMessagePath) as a kubelet keeps it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "areal/simkubelet.h"

typedef struct dir {
    char path[256], log[300], hosts[300];
} dir;

static void make_dir(dir *d) {
    snprintf(d->path, sizeof d->path, "/tmp/test_simrunner.XXXXXX");
    assert_non_null(mkdtemp(d->path));
    snprintf(d->log, sizeof d->log, "%s/c.log", d->path);
    snprintf(d->hosts, sizeof d->hosts, "%s/hosts", d->path);
    FILE *f = fopen(d->hosts, "w");
    assert_non_null(f);
    fputs("127.0.0.1\tlocalhost\n127.20.0.9\tpod-a.job.ns.svc.cluster.local\tpod-a.job\n", f);
    fclose(f);
}

static void remove_dir(dir *d) {
    unlink(d->log);
    unlink(d->hosts);
    rmdir(d->path);
}

static char *slurp(const char *path) {
    static char buf[4096];
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static void container_sees_its_pod(void **state) {
    (void)state;
    if (geteuid() != 0)
        skip(); /* namespaces need root; CI runs as root */
    dir d;
    make_dir(&d);
    char *argv[] = {"sh", "-c",
                    "echo host=$(hostname); echo env=$GREETING; echo pwd=$(pwd); "
                    "getent hosts pod-a.job; "
                    "echo ns=$(cat /var/run/secrets/kubernetes.io/serviceaccount/namespace); "
                    "echo cfg=$(cat mnt/etc/areal/config.json); "
                    "exit 7",
                    NULL};
    char *envp[] = {"GREETING=hello", "PATH=/usr/bin:/bin", NULL};
    /* the service-account files a kubelet projects, as sim_secrets.c lays them out */
    char secrets[300], sa[340], nsf[360];
    snprintf(secrets, sizeof secrets, "%s/secrets", d.path);
    snprintf(sa, sizeof sa, "%s/kubernetes.io", secrets);
    assert_int_equal(mkdir(secrets, 0755), 0);
    assert_int_equal(mkdir(sa, 0755), 0);
    snprintf(sa, sizeof sa, "%s/kubernetes.io/serviceaccount", secrets);
    assert_int_equal(mkdir(sa, 0755), 0);
    snprintf(nsf, sizeof nsf, "%s/namespace", sa);
    FILE *f = fopen(nsf, "w");
    assert_non_null(f);
    fputs("team-a", f);
    fclose(f);
    /* a volume: the pod dir's "vol" over a path that does not exist yet */
    char vol[300], volf[320], at[300];
    snprintf(vol, sizeof vol, "%s/vol", d.path);
    assert_int_equal(mkdir(vol, 0755), 0);
    snprintf(volf, sizeof volf, "%s/config.json", vol);
    f = fopen(volf, "w");
    assert_non_null(f);
    fputs("{\"rl\":1}", f);
    fclose(f);
    snprintf(at, sizeof at, "%s/mnt/etc/areal", d.path);
    const char *src[] = {vol}, *dst[] = {at};
    sim_spawn s = {"/bin/sh", argv, envp, d.path, d.log, d.hosts, "pod-a",
                   secrets,   src,  dst,  1,      NULL,  NULL};
    pid_t pid = 0;
    areal_error e;
    assert_int_equal(sim_spawn_start(&s, &pid, &e), AREAL_OK);
    assert_true(pid > 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 7);
    const char *out = slurp(d.log);
    assert_non_null(out);
    assert_non_null(strstr(out, "host=pod-a\n"));
    assert_non_null(strstr(out, "env=hello\n"));
    char want[300];
    snprintf(want, sizeof want, "pwd=%s\n", d.path);
    assert_non_null(strstr(out, want));
    assert_non_null(strstr(out, "127.20.0.9"));
    assert_non_null(strstr(out, "ns=team-a\n"));
    assert_non_null(strstr(out, "cfg={\"rl\":1}\n"));
    /* the mount stayed in the pod's namespace: here the made directory is empty */
    char seen[340];
    snprintf(seen, sizeof seen, "%s/config.json", at);
    assert_int_not_equal(access(seen, F_OK), 0);
    unlink(volf);
    rmdir(vol);
    rmdir(at);
    snprintf(at, sizeof at, "%s/mnt/etc", d.path);
    rmdir(at);
    snprintf(at, sizeof at, "%s/mnt", d.path);
    rmdir(at);
    unlink(nsf);
    rmdir(sa);
    snprintf(sa, sizeof sa, "%s/kubernetes.io", secrets);
    rmdir(sa);
    rmdir(secrets);
    /* nothing leaked to this process's view */
    char host[256];
    gethostname(host, sizeof host);
    assert_string_not_equal(host, "pod-a");
    const char *etc = slurp("/etc/hosts");
    assert_true(etc == NULL || strstr(etc, "pod-a.job") == NULL);
    remove_dir(&d);
}

static void the_process_is_its_own_group(void **state) {
    (void)state;
    dir d;
    make_dir(&d);
    char *argv[] = {"sleep", "30", NULL};
    char *envp[] = {NULL};
    sim_spawn s = {"/bin/sleep", argv, envp, d.path, d.log, NULL, NULL,
                   NULL,         NULL, NULL, 0,      NULL,  NULL};
    pid_t pid = 0;
    areal_error e;
    assert_int_equal(sim_spawn_start(&s, &pid, &e), AREAL_OK);
    assert_int_equal(getpgid(pid), pid);
    assert_int_equal(kill(-pid, SIGTERM), 0);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGTERM);
    remove_dir(&d);
}

static void failures_name_the_step(void **state) {
    (void)state;
    dir d;
    make_dir(&d);
    char *argv[] = {"x", NULL};
    char *envp[] = {NULL};
    pid_t pid = 0;
    areal_error e;
    sim_spawn s = {"/nonexistent/prog",
                   argv,
                   envp,
                   d.path,
                   d.log,
                   NULL,
                   NULL,
                   NULL,
                   NULL,
                   NULL,
                   0,
                   NULL,
                   NULL};
    assert_int_equal(sim_spawn_start(&s, &pid, &e), AREAL_EIO);
    assert_non_null(strstr(e.msg, "exec"));
    assert_non_null(strstr(e.msg, "/nonexistent/prog"));
    sim_spawn s2 = {
        "/bin/true", argv, envp, "/nonexistent/dir", d.log, NULL, NULL, NULL, NULL, NULL,
        0,           NULL, NULL};
    assert_int_equal(sim_spawn_start(&s2, &pid, &e), AREAL_EIO);
    assert_non_null(strstr(e.msg, "working directory"));
    sim_spawn s3 = {"/bin/true", argv, envp, d.path, "/nonexistent/dir/log", NULL, NULL, NULL, NULL,
                    NULL,        0,    NULL, NULL};
    assert_int_equal(sim_spawn_start(&s3, &pid, &e), AREAL_EIO);
    assert_non_null(strstr(e.msg, "log file"));

    char path[512];
    assert_int_equal(sim_spawn_resolve("sh", "/nonexistent", path, sizeof path, &e), AREAL_OK);
    assert_true(strcmp(path, "/usr/bin/sh") == 0 || strcmp(path, "/bin/sh") == 0);
    assert_int_equal(sim_spawn_resolve("sh", "/bin", path, sizeof path, &e), AREAL_OK);
    assert_string_equal(path, "/bin/sh"); /* the image dir first */
    assert_int_equal(sim_spawn_resolve("no-such-tool-xyz", "/bin", path, sizeof path, &e),
                     AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "no-such-tool-xyz"));
    assert_int_equal(sim_spawn_resolve("/bin/sh", NULL, path, sizeof path, &e), AREAL_OK);
    chmod(d.hosts, 0644); /* a plain file is no program */
    assert_int_equal(sim_spawn_resolve(d.hosts, NULL, path, sizeof path, &e), AREAL_EINVAL);
    remove_dir(&d);
}

/* terminationMessagePath: a per-container host file mounted there; the default skipped. */
static void termination_file_is_prepared_as_a_kubelet_does(void **state) {
    (void)state;
    dir d;
    make_dir(&d);
    char host[512];
    const char *at = NULL;
    areal_error e;
    /* unset and the kubelet default: nothing made, no mount (the host's /dev is not ours) */
    json_t *c = json_pack("{s:s}", "name", "worker");
    assert_int_equal(sim_termination_prepare(c, d.path, host, sizeof host, &at, &e), AREAL_OK);
    assert_null(at);
    assert_string_equal(host, "");
    json_object_set_new(c, "terminationMessagePath", json_string("/dev/termination-log"));
    assert_int_equal(sim_termination_prepare(c, d.path, host, sizeof host, &at, &e), AREAL_OK);
    assert_null(at);
    json_object_set_new(c, "terminationMessagePath", json_string("var/log/last"));
    assert_int_equal(sim_termination_prepare(c, d.path, host, sizeof host, &at, &e), AREAL_EINVAL);
    assert_non_null(strstr(e.msg, "terminationMessagePath"));
    /* a path of the pod: an empty host file under the pod dir */
    json_object_set_new(c, "terminationMessagePath", json_string("/var/run/areal/termination-log"));
    assert_int_equal(sim_termination_prepare(c, d.path, host, sizeof host, &at, &e), AREAL_OK);
    assert_string_equal(at, "/var/run/areal/termination-log");
    char want[400];
    snprintf(want, sizeof want, "%s/containers/worker/termination-log", d.path);
    assert_string_equal(host, want);
    char msg[SIM_TERMINATION_MESSAGE_MAX + 64];
    assert_int_equal(sim_termination_read(host, msg, sizeof msg), 0);
    json_decref(c);

    if (geteuid() == 0) { /* namespaces need root; CI runs as root */
        /* the container writes its last words at a path that does not exist yet
         * (under the test dir here, not the host's /var/run) */
        char dst[400], script[600];
        snprintf(dst, sizeof dst, "%s/ctr/var/run/areal/termination-log", d.path);
        snprintf(script, sizeof script, "printf '{\"phase\":\"done\",\"step\":60}' > %s", dst);
        char *argv[] = {"sh", "-c", script, NULL};
        char *envp[] = {"PATH=/usr/bin:/bin", NULL};
        sim_spawn s = {"/bin/sh", argv, envp, d.path, d.log, d.hosts, "pod-a",
                       NULL,      NULL, NULL, 0,      host,  dst};
        pid_t pid = 0;
        assert_int_equal(sim_spawn_start(&s, &pid, &e), AREAL_OK);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
        assert_int_equal(sim_termination_read(host, msg, sizeof msg), 26);
        assert_string_equal(msg, "{\"phase\":\"done\",\"step\":60}");
        /* the mount point stays an empty file: the words went to the pod's own file */
        struct stat st;
        assert_int_equal(stat(dst, &st), 0);
        assert_int_equal(st.st_size, 0);
        unlink(dst);
        for (int i = 0; i < 3; i++) {
            *strrchr(dst, '/') = '\0';
            rmdir(dst);
        }
        snprintf(dst, sizeof dst, "%s/ctr", d.path);
        rmdir(dst);
    }
    /* the first 4096 bytes only, never half a UTF-8 sequence */
    FILE *f = fopen(host, "w");
    assert_non_null(f);
    for (int i = 0; i < SIM_TERMINATION_MESSAGE_MAX - 1; i++)
        fputc('a', f);
    fputs("\xc3\xa9tail", f); /* U+00E9 across the bound */
    fclose(f);
    assert_int_equal(sim_termination_read(host, msg, sizeof msg), SIM_TERMINATION_MESSAGE_MAX - 1);
    assert_int_equal(strlen(msg), SIM_TERMINATION_MESSAGE_MAX - 1);
    json_t *js = json_string(msg);
    assert_non_null(js); /* valid UTF-8: a JSON string of the status patch */
    json_decref(js);
    unlink(host);
    *strrchr(host, '/') = '\0';
    rmdir(host);
    *strrchr(host, '/') = '\0';
    rmdir(host);
    remove_dir(&d);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(container_sees_its_pod),
        cmocka_unit_test(the_process_is_its_own_group),
        cmocka_unit_test(failures_name_the_step),
        cmocka_unit_test(termination_file_is_prepared_as_a_kubelet_does),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
