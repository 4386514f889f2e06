/* ratelimit.c - see areal/kube/ratelimit.h. */
#include "areal/kube/ratelimit.h"

#include <errno.h>
#include <time.h>

double kube_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void kube_sleep_ms(long ms) {
    if (ms <= 0)
        return;
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

int kube_ratelimit_init(kube_ratelimit *rl, double qps, int burst) {
    rl->qps = qps;
    rl->burst = burst < 1 ? 1.0 : (double)burst;
    rl->tokens = rl->burst;
    rl->last = kube_now();
    return pthread_mutex_init(&rl->mu, NULL) == 0 ? 0 : -1;
}

void kube_ratelimit_destroy(kube_ratelimit *rl) {
    pthread_mutex_destroy(&rl->mu);
}

double kube_ratelimit_take(kube_ratelimit *rl) {
    if (rl->qps <= 0)
        return 0;
    pthread_mutex_lock(&rl->mu);
    double now = kube_now();
    rl->tokens += (now - rl->last) * rl->qps;
    if (rl->tokens > rl->burst)
        rl->tokens = rl->burst;
    rl->last = now;
    rl->tokens -= 1.0;
    double wait = rl->tokens < 0 ? -rl->tokens / rl->qps : 0;
    pthread_mutex_unlock(&rl->mu);
    if (wait > 0)
        kube_sleep_ms((long)(wait * 1000.0 + 0.999));
    return wait;
}
