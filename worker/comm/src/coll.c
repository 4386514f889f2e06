/*
 * coll.c - the backend-neutral half of areal/comm/coll.h: the handle, the
 * memory-kind check at every entry, dispatch through the ops table, and the
 * work handles that make a backend without asynchronous forms look like one
 * with them (the operation runs at issue; the handle holds its result).
 */
#include "areal/comm/coll.h"

#include <stdlib.h>
#include <string.h>

struct areal_coll {
    const areal_coll_ops *ops;
    void *impl;
    int device; /* -1: host */
};

struct areal_coll_work {
    const areal_coll_ops *ops;
    void *impl;      /* the backend's handle, or NULL when the operation already ran */
    int rc;          /* its result then */
    areal_error err; /* and its error */
};

const char *areal_mem_name(areal_mem m) {
    return m == AREAL_MEM_DEVICE ? "device" : "host";
}

int areal_coll_wrap(const areal_coll_ops *ops, void *impl, int device, areal_coll **out,
                    areal_error *err) {
    *out = NULL;
    areal_coll *c = calloc(1, sizeof *c);
    if (c == NULL) {
        ops->destroy(impl);
        return areal_error_set(err, AREAL_ENOMEM, -1, "out of memory for a %s group handle",
                               ops->backend);
    }
    c->ops = ops;
    c->impl = impl;
    c->device = ops->mem == AREAL_MEM_DEVICE ? device : -1;
    *out = c;
    return AREAL_OK;
}

void areal_coll_destroy(areal_coll *c) {
    if (c == NULL)
        return;
    c->ops->destroy(c->impl);
    free(c);
}

const char *areal_coll_name(const areal_coll *c) {
    return c->ops->name(c->impl);
}
const char *areal_coll_backend(const areal_coll *c) {
    return c->ops->backend;
}
areal_mem areal_coll_mem(const areal_coll *c) {
    return c->ops->mem;
}
int areal_coll_device(const areal_coll *c) {
    return c->device;
}
int areal_coll_size(const areal_coll *c) {
    return c->ops->size(c->impl);
}
int areal_coll_rank(const areal_coll *c) {
    return c->ops->rank(c->impl);
}
int areal_coll_global_rank(const areal_coll *c, int j) {
    return c->ops->global_rank(c->impl, j);
}
void areal_coll_set_timeout(areal_coll *c, int timeout_ms) {
    if (timeout_ms > 0)
        c->ops->set_timeout(c->impl, timeout_ms);
}
void *areal_coll_impl(areal_coll *c) {
    return c->impl;
}

static const char *const kind_names[AREAL_COLL_KIND_COUNT] = {
    "all_reduce", "reduce_scatter", "all_gather",  "broadcast", "send",
    "recv",       "all_to_all",     "all_to_allv", "barrier",   "other"};

const char *areal_coll_kind_name(areal_coll_kind k) {
    return k >= 0 && k < AREAL_COLL_KIND_COUNT ? kind_names[k] : "other";
}

areal_coll_kind areal_coll_kind_of(const char *op) {
    for (int k = 0; op != NULL && k < AREAL_COLL_OTHER; k++)
        if (strcmp(op, kind_names[k]) == 0)
            return (areal_coll_kind)k;
    return AREAL_COLL_OTHER;
}

void areal_coll_bytes_of(const areal_coll *c, areal_coll_bytes *out) {
    memset(out, 0, sizeof *out);
    if (c->ops->bytes != NULL)
        c->ops->bytes(c->impl, out);
}

/*
 * The memory-kind check of one buffer argument. Empty buffers (count 0) and
 * NULL are left to the backend's own argument check, which names them.
 */
static int check_mem(const areal_coll *c, const char *op, const char *arg, const void *p,
                     size_t count, areal_error *err) {
    if (p == NULL || count == 0)
        return AREAL_OK;
    int dev = -1;
    areal_mem m = areal_mem_of(p, &dev);
    if (m != c->ops->mem)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s group %s: %s: %s is %s memory but the group works on %s memory; "
                               "copy it to the %s first",
                               c->ops->backend, areal_coll_name(c), op, arg, areal_mem_name(m),
                               areal_mem_name(c->ops->mem), areal_mem_name(c->ops->mem));
    if (m == AREAL_MEM_DEVICE && dev != c->device)
        return areal_error_set(err, AREAL_EINVAL, -1,
                               "%s group %s: %s: %s is on device %d but the group drives device %d",
                               c->ops->backend, areal_coll_name(c), op, arg, dev, c->device);
    return AREAL_OK;
}

/* Elements in blocks of count: saturates, since the backend refuses an overflow anyway. */
static size_t blocks(const areal_coll *c, size_t count) {
    size_t n = (size_t)areal_coll_size(c);
    return n != 0 && count > (size_t)-1 / n ? (size_t)-1 : count * n;
}

int areal_coll_all_reduce(areal_coll *c, void *buf, size_t count, areal_dtype t, areal_redop op,
                          areal_error *err) {
    int rc = check_mem(c, "all_reduce", "buf", buf, count, err);
    return rc != AREAL_OK ? rc : c->ops->all_reduce(c->impl, buf, count, t, op, err);
}

int areal_coll_reduce_scatter(areal_coll *c, const void *in, void *out, size_t count, areal_dtype t,
                              areal_redop op, areal_error *err) {
    int rc = check_mem(c, "reduce_scatter", "in", in, count, err);
    if (rc == AREAL_OK)
        rc = check_mem(c, "reduce_scatter", "out", out, count, err);
    return rc != AREAL_OK ? rc : c->ops->reduce_scatter(c->impl, in, out, count, t, op, err);
}

int areal_coll_all_gather(areal_coll *c, const void *in, void *out, size_t count, areal_dtype t,
                          areal_error *err) {
    int rc = check_mem(c, "all_gather", "in", in, count, err);
    if (rc == AREAL_OK)
        rc = check_mem(c, "all_gather", "out", out, blocks(c, count), err);
    return rc != AREAL_OK ? rc : c->ops->all_gather(c->impl, in, out, count, t, err);
}

int areal_coll_broadcast(areal_coll *c, void *buf, size_t count, areal_dtype t, int root,
                         areal_error *err) {
    int rc = check_mem(c, "broadcast", "buf", buf, count, err);
    return rc != AREAL_OK ? rc : c->ops->broadcast(c->impl, buf, count, t, root, err);
}

int areal_coll_send(areal_coll *c, const void *buf, size_t count, areal_dtype t, int peer,
                    areal_error *err) {
    int rc = check_mem(c, "send", "buf", buf, count, err);
    return rc != AREAL_OK ? rc : c->ops->send(c->impl, buf, count, t, peer, err);
}

int areal_coll_recv(areal_coll *c, void *buf, size_t count, areal_dtype t, int peer,
                    areal_error *err) {
    int rc = check_mem(c, "recv", "buf", buf, count, err);
    return rc != AREAL_OK ? rc : c->ops->recv(c->impl, buf, count, t, peer, err);
}

int areal_coll_all_to_all(areal_coll *c, const void *in, void *out, size_t count, areal_dtype t,
                          areal_error *err) {
    int rc = check_mem(c, "all_to_all", "in", in, count, err);
    if (rc == AREAL_OK)
        rc = check_mem(c, "all_to_all", "out", out, count, err);
    return rc != AREAL_OK ? rc : c->ops->all_to_all(c->impl, in, out, count, t, err);
}

int areal_coll_all_to_allv(areal_coll *c, const void *in, const size_t *scounts,
                           const size_t *sdispls, void *out, const size_t *rcounts,
                           const size_t *rdispls, areal_dtype t, areal_error *err) {
    /* any non-NULL buffer is checked: a group may send nothing and still receive */
    int rc = check_mem(c, "all_to_allv", "in", in, 1, err);
    if (rc == AREAL_OK)
        rc = check_mem(c, "all_to_allv", "out", out, 1, err);
    return rc != AREAL_OK
               ? rc
               : c->ops->all_to_allv(c->impl, in, scounts, sdispls, out, rcounts, rdispls, t, err);
}

int areal_coll_barrier(areal_coll *c, areal_error *err) {
    return c->ops->barrier(c->impl, err);
}

/* A work handle; for a backend without the async form, run(...) already happened: rc holds it. */
static int new_work(const areal_coll *c, areal_coll_work **w, areal_error *err) {
    *w = calloc(1, sizeof **w);
    if (*w == NULL)
        return areal_error_set(err, AREAL_ENOMEM, -1,
                               "%s group %s: out of memory for a work handle", c->ops->backend,
                               areal_coll_name(c));
    (*w)->ops = c->ops;
    return AREAL_OK;
}

/* Finishes an issue: keeps the backend's handle, or the result of the operation that ran. */
static int issued(areal_coll_work **w, int rc, void *impl_work, int async, const areal_error *e,
                  areal_error *err) {
    if (async) {
        if (rc != AREAL_OK) {
            free(*w);
            *w = NULL;
            if (err != NULL)
                *err = *e;
            return rc;
        }
        (*w)->impl = impl_work;
        return AREAL_OK;
    }
    (*w)->rc = rc;
    (*w)->err = *e;
    return AREAL_OK;
}

int areal_coll_all_reduce_async(areal_coll *c, void *buf, size_t count, areal_dtype t,
                                areal_redop op, areal_coll_work **w, areal_error *err) {
    *w = NULL;
    areal_error e;
    areal_error_clear(&e);
    void *iw = NULL;
    int rc = check_mem(c, "all_reduce", "buf", buf, count, err);
    if (rc != AREAL_OK || (rc = new_work(c, w, err)) != AREAL_OK)
        return rc;
    int async = c->ops->all_reduce_async != NULL;
    rc = async ? c->ops->all_reduce_async(c->impl, buf, count, t, op, &iw, &e)
               : c->ops->all_reduce(c->impl, buf, count, t, op, &e);
    return issued(w, rc, iw, async, &e, err);
}

int areal_coll_reduce_scatter_async(areal_coll *c, const void *in, void *out, size_t count,
                                    areal_dtype t, areal_redop op, areal_coll_work **w,
                                    areal_error *err) {
    *w = NULL;
    areal_error e;
    areal_error_clear(&e);
    void *iw = NULL;
    int rc = check_mem(c, "reduce_scatter", "in", in, count, err);
    if (rc == AREAL_OK)
        rc = check_mem(c, "reduce_scatter", "out", out, count, err);
    if (rc != AREAL_OK || (rc = new_work(c, w, err)) != AREAL_OK)
        return rc;
    int async = c->ops->reduce_scatter_async != NULL;
    rc = async ? c->ops->reduce_scatter_async(c->impl, in, out, count, t, op, &iw, &e)
               : c->ops->reduce_scatter(c->impl, in, out, count, t, op, &e);
    return issued(w, rc, iw, async, &e, err);
}

int areal_coll_all_gather_async(areal_coll *c, const void *in, void *out, size_t count,
                                areal_dtype t, areal_coll_work **w, areal_error *err) {
    *w = NULL;
    areal_error e;
    areal_error_clear(&e);
    void *iw = NULL;
    int rc = check_mem(c, "all_gather", "in", in, count, err);
    if (rc == AREAL_OK)
        rc = check_mem(c, "all_gather", "out", out, blocks(c, count), err);
    if (rc != AREAL_OK || (rc = new_work(c, w, err)) != AREAL_OK)
        return rc;
    int async = c->ops->all_gather_async != NULL;
    rc = async ? c->ops->all_gather_async(c->impl, in, out, count, t, &iw, &e)
               : c->ops->all_gather(c->impl, in, out, count, t, &e);
    return issued(w, rc, iw, async, &e, err);
}

int areal_coll_broadcast_async(areal_coll *c, void *buf, size_t count, areal_dtype t, int root,
                               areal_coll_work **w, areal_error *err) {
    *w = NULL;
    areal_error e;
    areal_error_clear(&e);
    void *iw = NULL;
    int rc = check_mem(c, "broadcast", "buf", buf, count, err);
    if (rc != AREAL_OK || (rc = new_work(c, w, err)) != AREAL_OK)
        return rc;
    int async = c->ops->broadcast_async != NULL;
    rc = async ? c->ops->broadcast_async(c->impl, buf, count, t, root, &iw, &e)
               : c->ops->broadcast(c->impl, buf, count, t, root, &e);
    return issued(w, rc, iw, async, &e, err);
}

void areal_coll_work_test(areal_coll_work *w, int *done) {
    if (w->impl == NULL)
        *done = 1;
    else
        w->ops->work_test(w->impl, done);
}

int areal_coll_work_wait(areal_coll_work *w, areal_error *err) {
    int rc;
    if (w->impl != NULL) {
        rc = w->ops->work_wait(w->impl, err);
    } else {
        rc = w->rc;
        if (rc != AREAL_OK && err != NULL)
            *err = w->err;
    }
    free(w);
    return rc;
}
