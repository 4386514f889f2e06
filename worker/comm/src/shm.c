/*
 * shm.c - the shared-memory rings and doorbells of one process group; see
 * shm.h for the design.
 *
 * Layout of the segment: a header (magic, member count, ring capacity, the
 * member that broke the group), k doorbells, k*k ring control blocks (head
 * written only by the producer, tail only by the consumer, on separate cache
 * lines), then k*k data areas of `cap` bytes, page aligned (the diagonal is
 * never touched, so it costs no memory), then k slot control lines and k
 * pairs of slots (see shm.h: one-round collectives). Producer: copy in, then
 * publish head with release order; consumer: read head with acquire order,
 * copy out, publish tail. Large puts publish in pieces so the consumer starts
 * copying out while the producer still copies in.
 *
 * Waiting (areal_shm_wait_until): poll the condition, then sleep on the
 * doorbell futex. The polling spins on `pause` for SPIN_NS only when no
 * other local member last waited on this CPU and the members fit the CPUs
 * this process may use (a peer on the same CPU cannot run while we spin; one
 * on another core answers within microseconds, which a spin catches without
 * a syscall), then, up to the caller's budget, polls with sched_yield(),
 * which hands the core to a peer waiting for it at once (OpenMPI's sm
 * transport yields when oversubscribed too). The slot collectives, whose
 * waits are short, poll 200 us (pg_small.c); the rings none: under other
 * load a yielding task gives its timeslices to other processes while CFS
 * wakes a futex sleeper promptly. Measured on the 2-core VM under other
 * builds (load 10-25): 1 KiB all-reduce on 2 ranks, median per call: 200
 * pauses then futex (before) 20 us, pause 20 us then yield 44 us (the
 * scheduler often puts both ranks on one core, so each waits out its spin
 * before the peer runs), pause 1 us then yield 6 us, yield at once 4 us;
 * 1 MiB on 4 ranks through the rings, GB/s of all-reduce / all-gather /
 * reduce-scatter / all-to-all / broadcast: futex at once 0.80 / 0.57 / 1.64
 * / 0.43 / 0.73, yield 20 us first 0.34 / 0.09 / 0.53 / 0.12 / 0.23, yield
 * 200 us first 0.14 / 0.06 / 0.25 / 0.09 / 0.12, before 0.33 / 0.40 / 0.49
 * / 0.38 / 0.55 (two runs each, the same order). Yielding also has a tail:
 * while other processes keep both cores busy (a parallel build), one
 * sched_yield can hand them a whole slice, 16-20 ms at load 20; the poll
 * budget is checked after every yield, so such a wait pays one slice and
 * then sleeps on the futex. Rejected (the previous version): a yield over
 * 200 us turning yielding off for the whole process for 200 ms. Under load
 * 7-10 from other work (2026-12-01, bench_comm, median of 3-5 blocks) that
 * left nearly every wait a futex sleep and wake: 1 KiB-64 KiB slot
 * collectives took 2-4x the CPU per call (8-rank all-to-all at 4 KiB 110-136
 * vs 27-31 us summed over the ranks; 2-rank all-reduce at 16 KiB 13-15 vs 6-7
 * us) and 1.5-5x the wall time.
 */
#include "shm.h"

#include "copy.h"

#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define SHM_MAGIC   0x4d48534cu /* "LSHM" */
#define RING_BUDGET (24u << 20) /* bytes of rings per segment, before the bounds below */
#define RING_MIN    (64u << 10)
#define RING_MAX    (1u << 20)
#define PUB_PIECE   (64u << 10) /* a producer publishes at least every this many bytes */
#define SPIN_NS     20000L      /* pause-polling before yielding (no peer on this CPU) */
#define PAGE        4096u
#define SLOT_BUDGET (8u << 20) /* bytes of slots per segment, before the bounds */
#define SLOT_MIN    (16u << 10)
#define SLOT_MAX    (256u << 10)

typedef struct {
    _Atomic uint32_t seq;
    _Atomic uint32_t sleeping;
    _Atomic int32_t cpu; /* where the owner last waited (-1: never), a hint only */
    char pad[52];
} bell;

typedef struct {
    _Atomic uint64_t head; /* bytes ever written, by the producer */
    char pad1[56];
    _Atomic uint64_t tail; /* bytes ever read, by the consumer */
    char pad2[56];
} ring_ctl;

typedef struct {
    uint32_t magic;
    uint32_t k;
    uint64_t cap;
    _Atomic int32_t broken_by; /* group member + 1, 0 while healthy */
    char pad[44];
} shm_hdr;

typedef struct {
    _Atomic uint64_t arrived;  /* last sequence this member published its slot for */
    _Atomic uint64_t finished; /* last sequence this member finished reading slots of */
    _Atomic uint64_t reduced;  /* last sequence whose reduced piece it published (two-stage) */
    char pad[40];
} slot_ctl;

_Static_assert(sizeof(slot_ctl) == 64, "slot control is one cache line");
struct areal_shm {
    uint8_t *base;
    size_t len;
    int k, mine, n;
    size_t cap;
    int *loc; /* group member -> local index, -1 */
    shm_hdr *hdr;
    bell *bells;
    ring_ctl *ctl;
    uint8_t *data;
    int fits; /* no more local members than CPUs this process may use */
    size_t slot_cap;
    slot_ctl *sctl;
    uint8_t *slots;
};

_Static_assert(sizeof(bell) == 64, "bell is one cache line");
_Static_assert(sizeof(ring_ctl) == 128, "head and tail on their own lines");
_Static_assert(sizeof(shm_hdr) == 64, "header is one cache line");

size_t areal_shm_ring_cap(int k) {
    size_t per = RING_BUDGET / ((size_t)k * (size_t)(k - 1)), cap = RING_MIN;
    while (cap * 2 <= per && cap < RING_MAX)
        cap *= 2;
    return cap;
}

size_t areal_shm_slot_bytes(int k) {
    size_t per = SLOT_BUDGET / (2 * (size_t)k), cap = SLOT_MIN;
    while (cap * 2 <= per && cap < SLOT_MAX)
        cap *= 2;
    return cap;
}

static size_t sctl_offset(int k) {
    return sizeof(shm_hdr) + sizeof(bell) * (size_t)k + sizeof(ring_ctl) * (size_t)k * k;
}

static size_t data_offset(int k) {
    size_t ctl = sctl_offset(k) + sizeof(slot_ctl) * (size_t)k;
    return (ctl + PAGE - 1) / PAGE * PAGE;
}

static size_t slots_offset(int k) {
    return data_offset(k) + areal_shm_ring_cap(k) * (size_t)k * (size_t)k;
}

size_t areal_shm_segment_bytes(int k) {
    return slots_offset(k) + areal_shm_slot_bytes(k) * 2 * (size_t)k;
}

static int cpus_usable(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

areal_shm *areal_shm_map(int fd, size_t len, int k, int mine, const int *loc, int n, int init) {
    if (k < 2 || k > AREAL_SHM_MAX_LOCAL || mine < 0 || mine >= k ||
        len != areal_shm_segment_bytes(k))
        return NULL;
    areal_shm *s = calloc(1, sizeof *s);
    int *lc = malloc(sizeof *lc * (size_t)n);
    void *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (s == NULL || lc == NULL || base == MAP_FAILED) {
        free(s);
        free(lc);
        if (base != MAP_FAILED)
            munmap(base, len);
        return NULL;
    }
    memcpy(lc, loc, sizeof *lc * (size_t)n);
    *s = (areal_shm){.base = base,
                     .len = len,
                     .k = k,
                     .mine = mine,
                     .n = n,
                     .cap = areal_shm_ring_cap(k),
                     .loc = lc,
                     .hdr = base,
                     .bells = (bell *)((uint8_t *)base + sizeof(shm_hdr)),
                     .data = (uint8_t *)base + data_offset(k),
                     .fits = k <= cpus_usable(),
                     .slot_cap = areal_shm_slot_bytes(k),
                     .sctl = (slot_ctl *)((uint8_t *)base + sctl_offset(k)),
                     .slots = (uint8_t *)base + slots_offset(k)};
    s->ctl = (ring_ctl *)((uint8_t *)s->bells + sizeof(bell) * (size_t)k);
    if (init) {
        /* a fresh memfd reads as zeros: counters start at 0, nobody broke it */
        s->hdr->k = (uint32_t)k;
        s->hdr->cap = s->cap;
        for (int i = 0; i < k; i++)
            atomic_store(&s->bells[i].cpu, -1);
        s->hdr->magic = SHM_MAGIC;
    } else if (s->hdr->magic != SHM_MAGIC || s->hdr->k != (uint32_t)k || s->hdr->cap != s->cap) {
        areal_shm_close(s);
        return NULL;
    }
    return s;
}

void areal_shm_close(areal_shm *s) {
    if (s == NULL)
        return;
    munmap(s->base, s->len);
    free(s->loc);
    free(s);
}

int areal_shm_local(const areal_shm *s, int j) {
    return s != NULL && j >= 0 && j < s->n ? s->loc[j] : -1;
}

static void ring_bell(areal_shm *s, int li) {
    bell *b = &s->bells[li];
    atomic_fetch_add(&b->seq, 1);
    if (atomic_load(&b->sleeping))
        syscall(SYS_futex, &b->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
}

static ring_ctl *ctl_of(areal_shm *s, int from, int to) {
    return &s->ctl[(size_t)from * (size_t)s->k + (size_t)to];
}

static uint8_t *data_of(areal_shm *s, int from, int to) {
    return s->data + ((size_t)from * (size_t)s->k + (size_t)to) * s->cap;
}

size_t areal_shm_put(areal_shm *s, int j, const void *buf, size_t n) {
    int to = s->loc[j];
    ring_ctl *c = ctl_of(s, s->mine, to);
    uint8_t *d = data_of(s, s->mine, to);
    const uint8_t *src = buf;
    uint64_t head = atomic_load_explicit(&c->head, memory_order_relaxed);
    size_t done = 0;
    while (done < n) {
        uint64_t tail = atomic_load_explicit(&c->tail, memory_order_acquire);
        size_t room = s->cap - (size_t)(head - tail), k = n - done;
        if (k > room)
            k = room;
        if (k > PUB_PIECE)
            k = PUB_PIECE;
        if (k == 0)
            break;
        size_t at = (size_t)head & (s->cap - 1), first = k < s->cap - at ? k : s->cap - at;
        areal_comm_copy(d + at, src + done, first);
        areal_comm_copy(d, src + done + first, k - first);
        head += k;
        done += k;
        atomic_store_explicit(&c->head, head, memory_order_release);
        ring_bell(s, to);
    }
    return done;
}

/* Takes up to n bytes from member j's ring: copies them (t invalid) or reduces them into out. */
static size_t take(areal_shm *s, int j, uint8_t *out, size_t n, int reduce, areal_dtype t,
                   areal_redop op) {
    int from = s->loc[j];
    ring_ctl *c = ctl_of(s, from, s->mine);
    const uint8_t *d = data_of(s, from, s->mine);
    uint64_t tail = atomic_load_explicit(&c->tail, memory_order_relaxed);
    uint64_t head = atomic_load_explicit(&c->head, memory_order_acquire);
    size_t avail = (size_t)(head - tail), es = reduce ? areal_dtype_size(t) : 1;
    size_t k = n < avail ? n : avail;
    k -= k % es;
    if (k == 0)
        return 0;
    size_t at = (size_t)tail & (s->cap - 1), first = k < s->cap - at ? k : s->cap - at;
    if (!reduce) {
        areal_comm_copy(out, d + at, first);
        areal_comm_copy(out + first, d, k - first);
    } else if (at % es == 0) {
        /* cap is a multiple of es, so the wrap falls between elements */
        areal_reduce(out, d + at, first / es, t, op);
        areal_reduce(out + first, d, (k - first) / es, t, op);
    } else {
        /* misaligned (an odd-sized earlier message): bounce through an aligned buffer */
        _Alignas(64) uint8_t tmp[4096];
        for (size_t o = 0; o < k; o += sizeof tmp) {
            size_t m = k - o < sizeof tmp ? k - o : sizeof tmp;
            size_t a2 = (at + o) & (s->cap - 1), f2 = m < s->cap - a2 ? m : s->cap - a2;
            areal_comm_copy(tmp, d + a2, f2);
            areal_comm_copy(tmp + f2, d, m - f2);
            areal_reduce(out + o, tmp, m / es, t, op);
        }
    }
    atomic_store_explicit(&c->tail, tail + k, memory_order_release);
    ring_bell(s, from);
    return k;
}

size_t areal_shm_get(areal_shm *s, int j, void *buf, size_t n) {
    return take(s, j, buf, n, 0, AREAL_DT_U8, AREAL_SUM);
}

size_t areal_shm_get_reduce(areal_shm *s, int j, void *dst, size_t n, areal_dtype t,
                            areal_redop op) {
    return take(s, j, dst, n, 1, t, op);
}

uint32_t areal_shm_bell(const areal_shm *s) {
    return atomic_load(&s->bells[s->mine].seq);
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000L + ts.tv_nsec;
}

/* Records this member's CPU; 1 when another local member last waited on the same one. */
static int cpu_shared(areal_shm *s) {
    int me = sched_getcpu();
    atomic_store_explicit(&s->bells[s->mine].cpu, me, memory_order_relaxed);
    for (int i = 0; i < s->k; i++)
        if (i != s->mine && atomic_load_explicit(&s->bells[i].cpu, memory_order_relaxed) == me)
            return 1;
    return 0;
}

int areal_shm_wait_until(areal_shm *s, int (*ready)(void *), void *arg, int timeout_ms,
                         long poll_ns) {
    bell *b = &s->bells[s->mine];
    int64_t t0 = now_ns(), spin = s->fits && !cpu_shared(s) ? SPIN_NS : 0;
    int64_t poll = poll_ns > spin ? poll_ns : spin;
    for (;;) {
        if (ready(arg))
            return 0;
        int64_t el = now_ns() - t0;
        if (el >= poll || el >= (int64_t)timeout_ms * 1000000L)
            break;
        if (el < spin) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
            continue;
        }
        sched_yield();
    }
    int64_t left_ns = (int64_t)timeout_ms * 1000000L - (now_ns() - t0);
    if (left_ns <= 0)
        return 1;
    struct timespec ts = {.tv_sec = left_ns / 1000000000L, .tv_nsec = left_ns % 1000000000L};
    uint32_t seen = atomic_load(&b->seq);
    atomic_store(&b->sleeping, 1);
    /* pairs with the waker's fence: it sees `sleeping` or we see its update */
    atomic_thread_fence(memory_order_seq_cst);
    int timed_out = 0;
    if (!ready(arg) && syscall(SYS_futex, &b->seq, FUTEX_WAIT, seen, &ts, NULL, 0) != 0 &&
        errno == ETIMEDOUT)
        timed_out = 1;
    atomic_store(&b->sleeping, 0);
    return timed_out;
}

typedef struct {
    const areal_shm *s;
    uint32_t seen;
} bell_wait;

static int bell_moved(void *arg) {
    const bell_wait *w = arg;
    return atomic_load_explicit(&w->s->bells[w->s->mine].seq, memory_order_acquire) != w->seen;
}

int areal_shm_wait(areal_shm *s, uint32_t seen, int timeout_ms) {
    bell_wait w = {s, seen};
    return areal_shm_wait_until(s, bell_moved, &w, timeout_ms, 0);
}

size_t areal_shm_slot_cap(const areal_shm *s) {
    return s->slot_cap;
}

uint8_t *areal_shm_slot(areal_shm *s, int li, uint64_t seq) {
    return s->slots + ((size_t)li * 2 + (size_t)(seq & 1)) * s->slot_cap;
}

uint64_t areal_shm_slot_next(const areal_shm *s) {
    return atomic_load_explicit(&s->sctl[s->mine].arrived, memory_order_relaxed) + 1;
}

static _Atomic uint64_t *counter(slot_ctl *c, int which) {
    return which == AREAL_SHM_FINISHED  ? &c->finished
           : which == AREAL_SHM_REDUCED ? &c->reduced
                                        : &c->arrived;
}

uint64_t areal_shm_slot_seq(const areal_shm *s, int li, int which) {
    return atomic_load_explicit(counter(&s->sctl[li], which), memory_order_acquire);
}

void areal_shm_slot_publish(areal_shm *s, uint64_t seq, int which) {
    slot_ctl *c = &s->sctl[s->mine];
    atomic_store_explicit(counter(c, which), seq, memory_order_release);
    /* pairs with the sleeper's fence in areal_shm_wait_until */
    atomic_thread_fence(memory_order_seq_cst);
    for (int i = 0; i < s->k; i++) {
        bell *b = &s->bells[i];
        if (i != s->mine && atomic_load_explicit(&b->sleeping, memory_order_relaxed)) {
            atomic_fetch_add(&b->seq, 1);
            syscall(SYS_futex, &b->seq, FUTEX_WAKE, 1, NULL, NULL, 0);
        }
    }
}

void areal_shm_break(areal_shm *s, int who) {
    int32_t none = 0;
    atomic_compare_exchange_strong(&s->hdr->broken_by, &none, who + 1);
    for (int i = 0; i < s->k; i++)
        if (i != s->mine)
            ring_bell(s, i);
}

int areal_shm_broken_by(const areal_shm *s) {
    return atomic_load(&((shm_hdr *)s->hdr)->broken_by) - 1;
}
