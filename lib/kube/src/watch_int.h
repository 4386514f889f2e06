/* watch_int.h - what reflector.c needs from watch.c (internal). */
#ifndef KUBE_WATCH_INT_H
#define KUBE_WATCH_INT_H

#include "areal/kube/watch.h"

/* 1 once kube_watch_stop was called. */
int kube_watch_stopped_(kube_watch *w);

/* Counts one relist in the watch's stats. */
void kube_watch_count_relist_(kube_watch *w);

/* Sleeps up to `ms`; returns 1 early when the watch is stopped, else 0. */
int kube_watch_sleep_(kube_watch *w, long ms);

/* The client the watch runs on. */
kube_client *kube_watch_client_(kube_watch *w);

#endif
