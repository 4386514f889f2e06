/*
 * placement.c - gang placement by parallel-group topology (areal/placement.h).
 *
 * The approach, per attempt:
 *
 * 1. Pod size. A role's pods are equal slices of n consecutive ranks. n is a
 *    multiple of the TP x CP group (or of TP alone when TP x CP exceeds every
 *    node), divides the world, and aligns with pipeline stages. Inference pods
 *    hold whole servers where a server fits a node. The first attempt uses the
 *    largest n of every role; each later attempt shrinks every role to its next
 *    smaller size, so fragments of partly used nodes become usable.
 *
 * 2. Bundles. Pods linked by groups that should stay close are bundled by
 *    union-find, innermost first: kinds with a required locality rule, CP
 *    groups that cross pods, expert (tp-ep) groups, then pipeline groups. Pods
 *    are ordered bundle by bundle, and each boundary between neighbours in that
 *    order gets a strength: how coarse the bundle it separates is.
 *
 * 3. Descent. A run of pods goes to the child domain that fits it most tightly
 *    (best fit, so partly used domains fill first). When no child fits the
 *    whole run, its bundles go whole into best-fitting children, largest
 *    first; a bundle no child holds is split the same way at its next weaker
 *    boundaries, and a run of unbundled pods is spread over as few children as
 *    the greedy finds (roomiest first, best fit for the rest). So a job lands
 *    in the lowest level that holds it and bundles are split only when they
 *    must be.
 *
 * 4. Check. Required locality rules are verified on the result; a violation
 *    fails the attempt with the rule, the group and the level named.
 *
 * Rejected alternatives: an exact ILP or exhaustive search (exponential, and
 * the operator replans on every cluster change); first-fit over a flat node
 * list (scatters pipeline groups over racks); per-rank placement (splits TP
 * groups, which NCCL needs inside one node).
 */
#include "areal/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "domains.h"

#define MAX_POD_SIZES  24
#define MAX_LINK_KINDS 8

/* ---- topology and job defaults -------------------------------------------- */

void areal_topology_default(areal_topology *t) {
    static const char *const keys[] = {"nvidia.com/gpu.clique", "network.topology.nvidia.com/leaf",
                                       "network.topology.nvidia.com/spine",
                                       "topology.kubernetes.io/zone"};
    static const char *const names[] = {"clique", "leaf", "spine", "zone"};
    memset(t, 0, sizeof *t);
    t->n_levels = 4;
    for (int i = 0; i < 4; i++) {
        snprintf(t->key[i], sizeof t->key[i], "%s", keys[i]);
        snprintf(t->name[i], sizeof t->name[i], "%s", names[i]);
    }
}

int areal_topology_level(const areal_topology *t, const char *s) {
    if (strcmp(s, "node") == 0 || strcmp(s, "kubernetes.io/hostname") == 0)
        return 0;
    for (int i = 0; i < t->n_levels; i++)
        if (strcmp(s, t->name[i]) == 0 || strcmp(s, t->key[i]) == 0)
            return i + 1;
    return -1;
}

const char *areal_topology_level_name(const areal_topology *t, int level) {
    if (level == 0)
        return "node";
    if (level >= 1 && level <= t->n_levels)
        return t->name[level - 1];
    return "cluster";
}

void areal_job_init(areal_job *job, const char *name, const areal_alloc *alloc) {
    memset(job, 0, sizeof *job);
    job->name = name;
    job->alloc = alloc;
    areal_topology_default(&job->topology);
}

void areal_plan_free(areal_plan *plan) {
    free(plan->pods);
    memset(plan, 0, sizeof *plan);
}

/* ---- planner state ---------------------------------------------------------- */

typedef struct role_work {
    int n_sizes;
    int sizes[MAX_POD_SIZES]; /* candidate pod sizes, descending */
    int unit;                 /* GPUs of the group that must share a node (tp or tp x cp) */
    bool unit_has_cp;         /* the unit is tp x cp (false: tp alone, cp crosses pods) */
    int n_links;
    areal_group_kind links[MAX_LINK_KINDS]; /* bundle kinds, innermost first */
} role_work;

typedef struct planner {
    const areal_job *job;
    const areal_cluster *c;
    areal_plan *plan;
    domain_tree tree;
    role_work work[AREAL_ALLOC_MAX_COMPONENTS];
    bool *eligible; /* [role * N + node] */
    int *gpus_free; /* per node, this attempt */
    long *cpu_free; /* per node; LONG_MAX-like when not tracked */
    long long *mem_free;
    int *order;    /* pods of the role being placed, bundle by bundle */
    int *strength; /* strength[i]: boundary between order[i-1] and order[i] */
    int *uf;       /* union-find over pods */
    int *keys;     /* [link level * pods + pod] bundle representative */
    int *members;  /* one group's ranks */
    /* Per-GPU requests of a role's pods: its own plus those of roles colocated on it. */
    long long cpu_per_gpu[AREAL_ALLOC_MAX_COMPONENTS];
    long long mem_per_gpu[AREAL_ALLOC_MAX_COMPONENTS];
    bool rule_broken; /* the last attempt placed every pod but broke a required rule */
    areal_error *err;
} planner;

/* ---- eligibility and capacity ---------------------------------------------- */

static bool tolerated(const areal_role_resources *res, const areal_taint *t) {
    if (strcmp(t->effect, "PreferNoSchedule") == 0)
        return true;
    for (int i = 0; i < res->n_tolerations; i++) {
        const areal_toleration *tol = &res->tolerations[i];
        if (tol->effect[0] != '\0' && strcmp(tol->effect, t->effect) != 0)
            continue;
        if (tol->key[0] == '\0' && tol->exists)
            return true;
        if (strcmp(tol->key, t->key) != 0)
            continue;
        if (tol->exists || strcmp(tol->value, t->value) == 0)
            return true;
    }
    return false;
}

typedef enum { EXCL_NONE, EXCL_NOT_READY, EXCL_CORDONED, EXCL_TAINT, EXCL_SELECTOR } exclusion;

static exclusion node_exclusion(const areal_node *n, const areal_role_resources *res) {
    if (!n->ready)
        return EXCL_NOT_READY;
    if (n->unschedulable)
        return EXCL_CORDONED;
    for (int i = 0; i < n->n_taints; i++)
        if (!tolerated(res, &n->taints[i]))
            return EXCL_TAINT;
    for (int i = 0; i < res->n_selectors; i++) {
        const char *v = areal_node_label(n, res->selectors[i].key);
        if (v == NULL || strcmp(v, res->selectors[i].value) != 0)
            return EXCL_SELECTOR;
    }
    return EXCL_NONE;
}

/* Pods of `gpus` GPUs that node `i` can still take for role `r`. */
static long node_slots(const planner *p, int r, int i, int gpus) {
    if (!p->eligible[r * p->c->n_nodes + i])
        return 0;
    long slots = p->gpus_free[i] / gpus;
    /* validate_job bounds the per-GPU requests, so these products cannot overflow */
    if (p->cpu_per_gpu[r] > 0 && p->c->nodes[i].cpu_milli > 0) {
        long long by_cpu = p->cpu_free[i] / (p->cpu_per_gpu[r] * gpus);
        if (by_cpu < slots)
            slots = (long)by_cpu;
    }
    if (p->mem_per_gpu[r] > 0 && p->c->nodes[i].mem_bytes > 0) {
        long long by_mem = p->mem_free[i] / (p->mem_per_gpu[r] * gpus);
        if (by_mem < slots)
            slots = (long)by_mem;
    }
    return slots < 0 ? 0 : slots;
}

/* Recomputes every domain's slots for role r with pods of `gpus`. */
static void compute_slots(planner *p, int r, int gpus) {
    domain *dom = p->tree.dom;
    for (int d = 0; d < p->tree.n_dom; d++)
        dom[d].slots = dom[d].level == 0 ? node_slots(p, r, dom[d].node, gpus) : 0;
    /* Children have larger indices than their parents: fold bottom-up. */
    for (int d = p->tree.n_dom - 1; d > 0; d--)
        dom[dom[d].parent].slots += dom[d].slots;
}

/* ---- pod sizes and bundles --------------------------------------------------- */

/*
 * The GPUs that must share a node for one role (a TP x CP group, or TP alone
 * when TP x CP exceeds every node) and the run of ranks pods must align with
 * (a pipeline stage; a server for inference).
 */
static void role_unit(const areal_role_plan *role, int gmax, int *unit, int *stage, bool *has_cp) {
    const areal_strategy *s = &role->strategy;
    if (role->inference) {
        *unit = s->tp; /* pods hold whole stages of a server; best, whole servers */
        *stage = s->tp * s->pp;
        *has_cp = false;
    } else {
        *has_cp = s->tp * s->cp <= gmax;
        *unit = *has_cp ? s->tp * s->cp : s->tp;
        *stage = role->world / s->pp;
    }
}

/*
 * Whether pods of n GPUs suit a role. An inference pod holds part of one
 * server or, only when other roles share its pods, several whole servers.
 */
static bool size_aligns(const areal_role_plan *role, int n, int unit, int stage, bool shared_pods) {
    if (n % unit != 0 || role->world % n != 0)
        return false;
    if (role->inference && !shared_pods)
        return stage % n == 0;
    return stage % n == 0 || n % stage == 0;
}

/*
 * Candidate pod sizes of anchor role r, largest first. Roles colocated on r
 * run in its pods, so every size must also hold their TP groups whole.
 */
static int role_pod_sizes(planner *p, int r, role_work *w) {
    const areal_plan *plan = p->plan;
    const areal_role_plan *role = &plan->roles[r];
    int N = p->c->n_nodes, gmax = 0, node_max = 0;
    for (int i = 0; i < N; i++)
        if (p->eligible[r * N + i] && p->c->nodes[i].gpus > node_max)
            node_max = p->c->nodes[i].gpus;
    gmax = node_max;
    if (p->job->max_pod_gpus > 0 && p->job->max_pod_gpus < gmax)
        gmax = p->job->max_pod_gpus;
    if (gmax == 0)
        return areal_error_set(p->err, AREAL_ENOFIT, -1,
                               "role %s: no node is eligible (none is ready, schedulable, "
                               "tolerated and matching the node selector of every role on its "
                               "pods, with GPUs)",
                               role->name);
    int unit, stage;
    role_unit(role, gmax, &unit, &stage, &w->unit_has_cp);
    w->unit = unit;
    if (unit > gmax) {
        const char *limit =
            gmax < node_max ? "the pod size cap is" : "the largest eligible node has";
        return areal_error_set(p->err, AREAL_ENOFIT, -1,
                               "role %s: a tp group of %d GPUs must sit in one node, but %s %d "
                               "GPUs; lower t or add larger nodes",
                               role->name, unit, limit, gmax);
    }
    bool shared = false;
    for (int m = 0; m < plan->n_roles; m++)
        shared = shared || (m != r && plan->roles[m].colocated_with == r);
    w->n_sizes = 0;
    for (int n = (gmax / unit) * unit; n >= unit; n -= unit) {
        bool ok = size_aligns(role, n, unit, stage, shared);
        for (int m = 0; ok && m < plan->n_roles; m++) {
            const areal_role_plan *member = &plan->roles[m];
            if (m == r || member->colocated_with != r)
                continue;
            int mu, ms;
            bool mc;
            role_unit(member, gmax, &mu, &ms, &mc);
            ok = size_aligns(member, n, mu, ms, true);
        }
        if (!ok)
            continue;
        if (w->n_sizes == MAX_POD_SIZES)
            w->n_sizes--; /* keep the smallest: it is the most flexible retry */
        w->sizes[w->n_sizes++] = n;
    }
    if (w->n_sizes == 0)
        return areal_error_set(p->err, AREAL_ENOFIT, -1,
                               "role %s: no pod size up to %d GPUs keeps the tp groups of %s and "
                               "of the roles colocated on it inside one node",
                               role->name, gmax, role->name);
    return AREAL_OK;
}

static void add_link(role_work *w, areal_group_kind k) {
    for (int i = 0; i < w->n_links; i++)
        if (w->links[i] == k)
            return;
    if (w->n_links < MAX_LINK_KINDS)
        w->links[w->n_links++] = k;
}

static void role_links(const planner *p, int r, role_work *w) {
    const areal_role_plan *role = &p->plan->roles[r];
    const areal_strategy *s = &role->strategy;
    w->n_links = 0;
    for (int i = 0; i < p->job->n_rules; i++)
        if (p->job->rules[i].mode == AREAL_TOPO_REQUIRED &&
            areal_role_has_kind(role, p->job->rules[i].kind))
            add_link(w, p->job->rules[i].kind);
    if (!role->inference) {
        if (s->cp > 1)
            add_link(w, AREAL_GROUP_CP);
        if (s->ep > 1 || s->etp > 1)
            add_link(w, AREAL_GROUP_TP_EP);
    }
    if (s->pp > 1)
        add_link(w, AREAL_GROUP_PP);
}

static int uf_find(int *uf, int x) {
    while (uf[x] != x) {
        uf[x] = uf[uf[x]];
        x = uf[x];
    }
    return x;
}

static void uf_union(int *uf, int a, int b) {
    a = uf_find(uf, a);
    b = uf_find(uf, b);
    if (a < b)
        uf[b] = a; /* the smallest pod index represents its bundle: deterministic order */
    else if (b < a)
        uf[a] = b;
}

/* qsort context (qsort takes none); thread-local so concurrent plans do not mix. */
static _Thread_local int g_order_levels, g_order_pods;
static _Thread_local const int *g_order_keys;

static int cmp_pods(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    for (int li = g_order_levels - 1; li >= 0; li--) {
        int ka = g_order_keys[li * g_order_pods + a], kb = g_order_keys[li * g_order_pods + b];
        if (ka != kb)
            return (ka > kb) - (ka < kb);
    }
    return (a > b) - (a < b);
}

/* Orders the pods of role r (pod size n) bundle by bundle and sets boundary strengths. */
static void order_pods(planner *p, int r, int n) {
    const areal_role_plan *role = &p->plan->roles[r];
    const role_work *w = &p->work[r];
    int pods = role->world / n;
    for (int i = 0; i < pods; i++)
        p->uf[i] = i;
    for (int li = 0; li < w->n_links; li++) {
        areal_group_kind k = w->links[li];
        int count = areal_role_group_count(role, k);
        for (int g = 0; g < count; g++) {
            int size = areal_role_group_ranks(role, k, g, p->members);
            for (int j = 1; j < size; j++)
                uf_union(p->uf, p->members[0] / n, p->members[j] / n);
        }
        for (int i = 0; i < pods; i++)
            p->keys[li * pods + i] = uf_find(p->uf, i);
    }
    for (int i = 0; i < pods; i++)
        p->order[i] = i;
    g_order_levels = w->n_links;
    g_order_pods = pods;
    g_order_keys = p->keys;
    qsort(p->order, (size_t)pods, sizeof *p->order, cmp_pods);
    p->strength[0] = w->n_links + 1;
    for (int i = 1; i < pods; i++) {
        int s = 0;
        for (int li = w->n_links - 1; li >= 0 && s == 0; li--)
            if (p->keys[li * pods + p->order[i - 1]] != p->keys[li * pods + p->order[i]])
                s = li + 1;
        p->strength[i] = s;
    }
}

/* ---- descent ------------------------------------------------------------------ */

static void take_slots(planner *p, int d, long k) {
    for (; d >= 0; d = p->tree.dom[d].parent)
        p->tree.dom[d].slots -= k;
}

static void assign_to_node(planner *p, int r, int d, int lo, int hi, int n) {
    int node = p->tree.dom[d].node;
    areal_plan *plan = p->plan;
    for (int i = lo; i < hi; i++)
        plan->pods[plan->roles[r].first_pod + p->order[i]].node = node;
    int k = hi - lo;
    p->gpus_free[node] -= k * n;
    p->cpu_free[node] -= (long)((long long)k * n * p->cpu_per_gpu[r]);
    p->mem_free[node] -= (long long)k * n * p->mem_per_gpu[r];
    take_slots(p, d, k);
}

/*
 * The cut for a prefix of order[lo..hi) that fits `room` pods: the largest
 * position on the strongest boundary within reach.
 */
static int choose_cut(const planner *p, int lo, int room) {
    int best = lo + 1, best_strength = -1;
    for (int i = lo + 1; i <= lo + room; i++) {
        if (p->strength[i] >= best_strength) {
            best_strength = p->strength[i];
            best = i;
        }
    }
    return best;
}

static void place_run(planner *p, int r, int d, int lo, int hi, int n);

/* The child of d with the fewest slots that still holds `need` pods, or -1. */
static int best_fit_child(const planner *p, int d, long need) {
    const domain *dom = p->tree.dom;
    int best = -1;
    for (int c = dom[d].first_child; c < dom[d].first_child + dom[d].n_children; c++)
        if (dom[c].slots >= need && (best < 0 || dom[c].slots < dom[best].slots))
            best = c;
    return best;
}

/* Largest position in [from, to] on the strongest boundary (from > lo). */
static int strongest_cut(const planner *p, int from, int to) {
    int best = to, best_strength = -1;
    for (int i = from; i <= to; i++) {
        if (p->strength[i] >= best_strength) {
            best_strength = p->strength[i];
            best = i;
        }
    }
    return best;
}

#define PAIR_SEARCH_MAX_CHILDREN 64

/*
 * Spreads a run that no single child of d can hold over as few children as the
 * greedy finds. Two children are tried first: the pair with the least room
 * that holds the run (leaving roomier children for later bundles), split on
 * the strongest boundary that fits both. Otherwise the roomiest child takes
 * the longest prefix ending on the strongest boundary it can hold, and so on.
 */
static void fill_fewest(planner *p, int r, int d, int lo, int hi, int n) {
    const domain *dom = p->tree.dom;
    int first = dom[d].first_child, end = first + dom[d].n_children;
    if (dom[d].n_children <= PAIR_SEARCH_MAX_CHILDREN) {
        int pa = -1, pb = -1;
        for (int a = first; a < end; a++) {
            for (int b = a + 1; b < end; b++) {
                if (dom[a].slots == 0 || dom[b].slots == 0 || dom[a].slots + dom[b].slots < hi - lo)
                    continue;
                if (pa < 0 || dom[a].slots + dom[b].slots < dom[pa].slots + dom[pb].slots)
                    pa = a, pb = b;
            }
        }
        if (pa >= 0) {
            if (dom[pb].slots > dom[pa].slots) {
                int t = pa;
                pa = pb, pb = t;
            }
            /* pa (the roomier) takes a prefix, pb the rest; both must fit. */
            long room_a = dom[pa].slots, room_b = dom[pb].slots;
            int from = hi - (int)room_b > lo + 1 ? hi - (int)room_b : lo + 1;
            int to = lo + (int)room_a < hi - 1 ? lo + (int)room_a : hi - 1;
            int cut = strongest_cut(p, from, to);
            place_run(p, r, pa, lo, cut, n);
            place_run(p, r, pb, cut, hi, n);
            return;
        }
    }
    while (lo < hi) {
        int best = best_fit_child(p, d, hi - lo);
        if (best >= 0) {
            place_run(p, r, best, lo, hi, n);
            return;
        }
        int biggest = first;
        for (int c = first + 1; c < end; c++)
            if (dom[c].slots > dom[biggest].slots)
                biggest = c;
        /* The caller guarantees room in d, so the roomiest child has some. */
        int cut = choose_cut(p, lo, (int)dom[biggest].slots);
        place_run(p, r, biggest, lo, cut, n);
        lo = cut;
    }
}

#define EXACT_MAX_CHILDREN 16
#define EXACT_MAX_BUNDLES  32
#define EXACT_BUDGET       20000

/* Search state of exact_two_domain: bundle i goes to child a[i], or to a[i] and b[i]
 * with take[i] pods in a[i]. */
typedef struct exact_search {
    int n_children, n_bundles;
    long room[EXACT_MAX_CHILDREN];
    int size[EXACT_MAX_BUNDLES];
    int a[EXACT_MAX_BUNDLES], b[EXACT_MAX_BUNDLES], take[EXACT_MAX_BUNDLES];
    long budget;
} exact_search;

static bool exact_dfs(exact_search *x, int i) {
    if (i == x->n_bundles)
        return true;
    if (--x->budget < 0)
        return false;
    int need = x->size[i];
    /* whole in one child, the tightest first (best fit keeps roomy children whole) */
    int order[EXACT_MAX_CHILDREN], n_order = 0;
    for (int c = 0; c < x->n_children; c++) {
        if (x->room[c] < need)
            continue;
        int at = n_order++;
        while (at > 0 && x->room[order[at - 1]] > x->room[c]) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = c;
    }
    for (int k = 0; k < n_order; k++) {
        int c = order[k];
        x->room[c] -= need;
        x->a[i] = c, x->b[i] = -1, x->take[i] = need;
        if (exact_dfs(x, i + 1))
            return true;
        x->room[c] += need;
    }
    /* split over two children, emptying one of them */
    for (int c = 0; c < x->n_children; c++) {
        for (int e = 0; e < x->n_children; e++) {
            if (e == c || x->room[c] <= 0 || x->room[c] >= need || x->room[c] + x->room[e] < need)
                continue;
            int t = (int)x->room[c];
            x->room[c] -= t;
            x->room[e] -= need - t;
            x->a[i] = c, x->b[i] = e, x->take[i] = t;
            if (exact_dfs(x, i + 1))
                return true;
            x->room[c] += t;
            x->room[e] += need - t;
        }
    }
    return false;
}

/*
 * For bundles of unbundled pods (no inner boundaries) in a domain with few
 * children: a bounded exhaustive search for an assignment that puts every
 * bundle in one child or two. Greedy packing misses such assignments when free
 * capacity is fragmented; the search is capped, and the caller falls back to
 * the greedy when it gives up. True when it placed everything.
 */
static bool place_two_domain_exact(planner *p, int r, int d, const int *seg, int n_seg, int n) {
    const domain *dom = p->tree.dom;
    if (dom[d].n_children > EXACT_MAX_CHILDREN || n_seg > EXACT_MAX_BUNDLES)
        return false;
    exact_search x = {.n_children = dom[d].n_children, .n_bundles = n_seg, .budget = EXACT_BUDGET};
    for (int c = 0; c < x.n_children; c++)
        x.room[c] = dom[dom[d].first_child + c].slots;
    long top1 = 0, top2 = 0;
    for (int c = 0; c < x.n_children; c++) {
        if (x.room[c] > top1) {
            top2 = top1;
            top1 = x.room[c];
        } else if (x.room[c] > top2) {
            top2 = x.room[c];
        }
    }
    for (int i = 0; i < n_seg; i++) {
        x.size[i] = seg[i + 1] - seg[i];
        if (x.size[i] > top1 + top2)
            return false; /* some bundle needs three children whatever we do */
    }
    if (!exact_dfs(&x, 0))
        return false;
    for (int i = 0; i < n_seg; i++) {
        int first = dom[d].first_child;
        place_run(p, r, first + x.a[i], seg[i], seg[i] + x.take[i], n);
        if (x.b[i] >= 0)
            place_run(p, r, first + x.b[i], seg[i] + x.take[i], seg[i + 1], n);
    }
    return true;
}

/*
 * A run that no single child of d can hold: its bundles (the segments between
 * its strongest inner boundaries) go whole into best-fitting children, largest
 * bundle first; bundles that fit no child are split the same way one strength
 * lower, and runs of atoms are spread over as few children as possible.
 */
static void split_run(planner *p, int r, int d, int lo, int hi, int n) {
    int top = 0;
    for (int i = lo + 1; i < hi; i++)
        if (p->strength[i] > top)
            top = p->strength[i];
    if (top == 0) {
        fill_fewest(p, r, d, lo, hi, n);
        return;
    }
    /* Segment bounds, then largest first (stable: equal sizes keep rank order). */
    int n_seg = 1;
    for (int i = lo + 1; i < hi; i++)
        n_seg += p->strength[i] == top;
    int *seg = malloc((size_t)(n_seg + 1) * sizeof *seg);
    int *by_size = malloc((size_t)n_seg * sizeof *by_size);
    bool *pending = calloc((size_t)n_seg, sizeof *pending);
    if (seg == NULL || by_size == NULL || pending == NULL) {
        free(seg);
        free(by_size);
        free(pending);
        fill_fewest(p, r, d, lo, hi, n); /* still correct, only less local */
        return;
    }
    int k = 0;
    seg[k++] = lo;
    for (int i = lo + 1; i < hi; i++)
        if (p->strength[i] == top)
            seg[k++] = i;
    seg[k] = hi;
    /* Bundles of plain pods: look for a packing with each bundle in at most two children. */
    if (top == 1 && place_two_domain_exact(p, r, d, seg, n_seg, n)) {
        free(seg);
        free(by_size);
        free(pending);
        return;
    }
    for (int i = 0; i < n_seg; i++) {
        int at = i;
        while (at > 0 && seg[by_size[at - 1] + 1] - seg[by_size[at - 1]] < seg[i + 1] - seg[i]) {
            by_size[at] = by_size[at - 1];
            at--;
        }
        by_size[at] = i;
    }
    for (int i = 0; i < n_seg; i++) {
        int s = by_size[i];
        int c = best_fit_child(p, d, seg[s + 1] - seg[s]);
        if (c >= 0)
            place_run(p, r, c, seg[s], seg[s + 1], n);
        else
            pending[s] = true;
    }
    for (int i = 0; i < n_seg; i++)
        if (pending[by_size[i]])
            split_run(p, r, d, seg[by_size[i]], seg[by_size[i] + 1], n);
    free(seg);
    free(by_size);
    free(pending);
}

/* Places order[lo..hi) inside domain d, which has room for all of it. */
static void place_run(planner *p, int r, int d, int lo, int hi, int n) {
    if (p->tree.dom[d].level == 0) {
        assign_to_node(p, r, d, lo, hi, n);
        return;
    }
    int best = best_fit_child(p, d, hi - lo);
    if (best >= 0)
        place_run(p, r, best, lo, hi, n);
    else
        split_run(p, r, d, lo, hi, n);
}

/* ---- rules and quality ---------------------------------------------------------- */

static int node_of_rank(const areal_plan *plan, int r, int rank) {
    const areal_role_plan *role = &plan->roles[r];
    return plan->pods[role->first_pod + rank / role->gpus_per_pod].node;
}

/* Level index in the tree of a job level (1-based), or -1 when the level was dropped. */
static int tree_level(const planner *p, int job_level) {
    if (job_level == 0)
        return 0;
    for (int i = 0; i < p->tree.n_levels; i++)
        if (p->tree.level_src[i] == job_level - 1)
            return i + 1;
    return -1;
}

static int check_rules(planner *p) {
    const areal_job *job = p->job;
    p->rule_broken = true; /* until every rule passes */
    for (int i = 0; i < job->n_rules; i++) {
        const areal_locality_rule *rule = &job->rules[i];
        if (rule->mode != AREAL_TOPO_REQUIRED)
            continue;
        int level = tree_level(p, rule->level);
        for (int r = 0; r < p->plan->n_roles; r++) {
            const areal_role_plan *role = &p->plan->roles[r];
            if (!areal_role_has_kind(role, rule->kind))
                continue;
            int count = areal_role_group_count(role, rule->kind);
            for (int g = 0; g < count; g++) {
                int size = areal_role_group_ranks(role, rule->kind, g, p->members);
                int first = node_of_rank(p->plan, r, p->members[0]);
                for (int j = 1; j < size; j++) {
                    int node = node_of_rank(p->plan, r, p->members[j]);
                    /* A dropped level (no node has the label): only one node can satisfy it. */
                    bool same = level >= 0 ? domain_of(&p->tree, node, level) ==
                                                 domain_of(&p->tree, first, level)
                                           : node == first;
                    if (!same)
                        return areal_error_set(
                            p->err, AREAL_ENOFIT, -1,
                            "role %s: %s group %d must lie within one %s (required), but the free "
                            "capacity splits it between nodes %s and %s; free GPUs in one %s or "
                            "relax the rule to preferred",
                            role->name, areal_group_kind_name(rule->kind), g,
                            areal_topology_level_name(&job->topology, rule->level),
                            p->c->nodes[first].name, p->c->nodes[node].name,
                            areal_topology_level_name(&job->topology, rule->level));
                }
            }
        }
    }
    p->rule_broken = false;
    return AREAL_OK;
}

static void compute_quality(planner *p) {
    areal_plan *plan = p->plan;
    int LV = p->tree.n_levels + 1; /* node + kept levels */
    int dom_first[AREAL_TOPO_MAX_LEVELS + 1];
    for (int r = 0; r < plan->n_roles; r++) {
        areal_role_plan *role = &plan->roles[r];
        role->n_quality = 0;
        for (int k = 0; k < AREAL_GROUP_KIND_COUNT; k++) {
            if (!areal_role_has_kind(role, (areal_group_kind)k))
                continue;
            areal_kind_quality *q = &role->quality[role->n_quality++];
            memset(q, 0, sizeof *q);
            q->kind = (areal_group_kind)k;
            q->n_groups = areal_role_group_count(role, q->kind);
            for (int g = 0; g < q->n_groups; g++) {
                int size = areal_role_group_ranks(role, q->kind, g, p->members);
                bool inside[AREAL_TOPO_MAX_LEVELS + 1];
                int prev = node_of_rank(plan, r, p->members[0]);
                for (int l = 0; l < LV; l++) {
                    dom_first[l] = domain_of(&p->tree, prev, l);
                    inside[l] = true;
                }
                for (int j = 1; j < size; j++) {
                    int node = node_of_rank(plan, r, p->members[j]);
                    for (int l = 0; l < LV; l++) {
                        int dn = domain_of(&p->tree, node, l);
                        if (dn != domain_of(&p->tree, prev, l))
                            q->cross_links[l]++;
                        if (dn != dom_first[l])
                            inside[l] = false;
                    }
                    prev = node;
                }
                for (int l = 0; l < LV; l++)
                    q->within[l] += inside[l];
            }
        }
    }
    plan->n_levels = p->tree.n_levels;
    snprintf(plan->level_name[0], AREAL_TOPO_NAME_MAX, "node");
    for (int l = 0; l < p->tree.n_levels; l++)
        snprintf(plan->level_name[l + 1], AREAL_TOPO_NAME_MAX, "%s",
                 p->job->topology.name[p->tree.level_src[l]]);
}

/* ---- roles -------------------------------------------------------------------- */

/* True when `name` is a component's own name or the name of an earlier role. */
static bool role_name_taken(const areal_alloc *a, char names[][AREAL_ALLOC_NAME_MAX], int upto,
                            const char *name) {
    for (int j = 0; j < a->n_components; j++)
        if (strcmp(a->comp[j].name, name) == 0)
            return true;
    for (int j = 0; j < upto; j++)
        if (strcmp(names[j], name) == 0)
            return true;
    return false;
}

void areal_role_names(const areal_alloc *a, char names[][AREAL_ALLOC_NAME_MAX]) {
    for (int i = 0; i < a->n_components && i < AREAL_ALLOC_MAX_COMPONENTS; i++) {
        if (a->comp[i].name[0] != '\0') {
            snprintf(names[i], AREAL_ALLOC_NAME_MAX, "%s", a->comp[i].name);
            continue;
        }
        const char *base = areal_backend_is_inference(a->comp[i].backend) ? "rollout" : "trainer";
        snprintf(names[i], AREAL_ALLOC_NAME_MAX, "%s", base);
        for (int k = 2; role_name_taken(a, names, i, names[i]); k++)
            snprintf(names[i], AREAL_ALLOC_NAME_MAX, "%s%d", base, k);
    }
}

static int setup_roles(planner *p) {
    const areal_alloc *a = p->job->alloc;
    areal_plan *plan = p->plan;
    char names[AREAL_ALLOC_MAX_COMPONENTS][AREAL_ALLOC_NAME_MAX];
    areal_role_names(a, names);
    plan->n_roles = a->n_components;
    for (int i = 0; i < a->n_components; i++) {
        const areal_component *comp = &a->comp[i];
        areal_role_plan *role = &plan->roles[i];
        memset(role, 0, sizeof *role);
        role->backend = comp->backend;
        role->strategy = comp->strategy;
        role->world = (int)areal_strategy_world(&comp->strategy);
        role->inference = areal_backend_is_inference(comp->backend);
        role->colocated_with = comp->sched == AREAL_SCHED_COLOCATION ? comp->colocate_with : -1;
        snprintf(role->name, sizeof role->name, "%.*s", AREAL_ALLOC_NAME_MAX - 1, names[i]);
        if (!role->inference) {
            areal_layout l;
            int rc = areal_layout_init(&l, &role->strategy, p->err);
            if (rc != AREAL_OK)
                return rc;
        }
    }
    return AREAL_OK;
}

/*
 * One attempt: role r uses sizes[min(attempt, n_sizes - 1)]. Fills pods and
 * nodes, or returns AREAL_ENOFIT with the reason.
 */
static int attempt(planner *p, int attempt_no) {
    areal_plan *plan = p->plan;
    p->rule_broken = false;
    const areal_cluster *c = p->c;
    for (int i = 0; i < c->n_nodes; i++) {
        p->gpus_free[i] = c->nodes[i].gpus - c->nodes[i].gpus_used;
        p->cpu_free[i] = c->nodes[i].cpu_milli - c->nodes[i].cpu_used_milli;
        p->mem_free[i] = c->nodes[i].mem_bytes - c->nodes[i].mem_used_bytes;
    }
    /* Pods of every role, in role order; colocated roles share their anchor's. */
    int n_pods = 0;
    for (int r = 0; r < plan->n_roles; r++) {
        areal_role_plan *role = &plan->roles[r];
        if (role->colocated_with >= 0)
            continue;
        role_work *w = &p->work[r];
        role->gpus_per_pod = w->sizes[attempt_no < w->n_sizes ? attempt_no : w->n_sizes - 1];
        role->first_pod = n_pods;
        role->n_pods = role->world / role->gpus_per_pod;
        for (int i = 0; i < role->n_pods; i++) {
            areal_pod_plan *pod = &plan->pods[n_pods + i];
            snprintf(pod->name, sizeof pod->name, "%s-%s-%d", p->job->name, role->name, i);
            pod->role = r;
            pod->index = i;
            pod->first_rank = i * role->gpus_per_pod;
            pod->n_ranks = role->gpus_per_pod;
            pod->node = -1;
        }
        n_pods += role->n_pods;
    }
    plan->n_pods = n_pods;
    for (int r = 0; r < plan->n_roles; r++) {
        areal_role_plan *role = &plan->roles[r];
        if (role->colocated_with >= 0) {
            const areal_role_plan *anchor = &plan->roles[role->colocated_with];
            role->first_pod = anchor->first_pod;
            role->n_pods = anchor->n_pods;
            role->gpus_per_pod = anchor->gpus_per_pod;
        }
    }
    /* Largest pods first: with sizes that divide each other this never strands capacity. */
    int order[AREAL_ALLOC_MAX_COMPONENTS], n_order = 0;
    for (int r = 0; r < plan->n_roles; r++) {
        if (plan->roles[r].colocated_with >= 0)
            continue;
        int at = n_order++; /* insertion sort: pod size descending, then role index */
        while (at > 0 && plan->roles[order[at - 1]].gpus_per_pod < plan->roles[r].gpus_per_pod) {
            order[at] = order[at - 1];
            at--;
        }
        order[at] = r;
    }
    for (int k = 0; k < n_order; k++) {
        int r = order[k];
        areal_role_plan *role = &plan->roles[r];
        int n = role->gpus_per_pod;
        compute_slots(p, r, n);
        long room = p->tree.dom[p->tree.root].slots;
        if (room < role->n_pods) {
            int excl[5] = {0};
            for (int i = 0; i < c->n_nodes; i++)
                excl[node_exclusion(&c->nodes[i], &p->job->resources[r])]++;
            return areal_error_set(
                p->err, AREAL_ENOFIT, -1,
                "role %s needs %d pods of %d GPUs (whole %s groups of %d stay in one node), but "
                "the cluster has room for %ld such pods (%d of %d nodes excluded: %d not ready, "
                "%d cordoned, %d tainted, %d not matching the node selector); free GPUs or add "
                "nodes",
                role->name, role->n_pods, n, p->work[r].unit_has_cp ? "tp x cp" : "tp",
                p->work[r].unit, room, c->n_nodes - excl[EXCL_NONE], c->n_nodes,
                excl[EXCL_NOT_READY], excl[EXCL_CORDONED], excl[EXCL_TAINT], excl[EXCL_SELECTOR]);
        }
        order_pods(p, r, n);
        place_run(p, r, p->tree.root, 0, role->n_pods, n);
    }
    return check_rules(p);
}

static int alloc_planner(planner *p) {
    int N = p->c->n_nodes, R = p->plan->n_roles;
    long total_pods = 0, max_world = 1;
    for (int r = 0; r < R; r++) {
        if (p->plan->roles[r].colocated_with < 0)
            total_pods += p->plan->roles[r].world; /* pods of 1 GPU at worst */
        if (p->plan->roles[r].world > max_world)
            max_world = p->plan->roles[r].world;
    }
    p->eligible = calloc((size_t)R * (size_t)N + 1, sizeof *p->eligible);
    p->gpus_free = calloc((size_t)N + 1, sizeof *p->gpus_free);
    p->cpu_free = calloc((size_t)N + 1, sizeof *p->cpu_free);
    p->mem_free = calloc((size_t)N + 1, sizeof *p->mem_free);
    p->order = calloc((size_t)max_world + 1, sizeof *p->order);
    p->strength = calloc((size_t)max_world + 2, sizeof *p->strength);
    p->uf = calloc((size_t)max_world + 1, sizeof *p->uf);
    p->keys = calloc((size_t)max_world * MAX_LINK_KINDS + 1, sizeof *p->keys);
    p->members = calloc((size_t)max_world + 1, sizeof *p->members);
    p->plan->pods = calloc((size_t)total_pods + 1, sizeof *p->plan->pods);
    if (!p->eligible || !p->gpus_free || !p->cpu_free || !p->mem_free || !p->order ||
        !p->strength || !p->uf || !p->keys || !p->members || !p->plan->pods)
        return areal_error_set(p->err, AREAL_ENOMEM, -1, "out of memory planning the job");
    return AREAL_OK;
}

static void free_planner(planner *p) {
    free(p->eligible);
    free(p->gpus_free);
    free(p->cpu_free);
    free(p->mem_free);
    free(p->order);
    free(p->strength);
    free(p->uf);
    free(p->keys);
    free(p->members);
    domain_tree_free(&p->tree);
}

#define MAX_CPU_MILLI_PER_GPU 1000000000LL /* 1M cores: keeps requests x GPUs in range */
#define MAX_MEM_BYTES_PER_GPU (1LL << 50)

static int validate_job(const areal_job *job, areal_error *err) {
    if (job->alloc == NULL || job->alloc->n_components <= 0 ||
        job->alloc->n_components > AREAL_ALLOC_MAX_COMPONENTS)
        return areal_error_set(err, AREAL_EINVAL, -1, "the job needs 1 to %d roles",
                               AREAL_ALLOC_MAX_COMPONENTS);
    for (int i = 0; i < job->alloc->n_components; i++) {
        const areal_component *comp = &job->alloc->comp[i];
        const areal_role_resources *res = &job->resources[i];
        if (comp->sched == AREAL_SCHED_COLOCATION &&
            (comp->colocate_with < 0 || comp->colocate_with >= i ||
             job->alloc->comp[comp->colocate_with].sched != AREAL_SCHED_SEPARATION ||
             areal_strategy_world(&comp->strategy) !=
                 areal_strategy_world(&job->alloc->comp[comp->colocate_with].strategy)))
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "role %d: a colocated role needs an earlier anchor of the same "
                                   "world size",
                                   i);
        if (res->n_selectors < 0 || res->n_selectors > AREAL_MAX_SELECTORS ||
            res->n_tolerations < 0 || res->n_tolerations > AREAL_MAX_TOLERATIONS)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "role %d: at most %d node selectors and %d tolerations", i,
                                   AREAL_MAX_SELECTORS, AREAL_MAX_TOLERATIONS);
        if (res->cpu_milli_per_gpu < 0 || res->cpu_milli_per_gpu > MAX_CPU_MILLI_PER_GPU ||
            res->mem_bytes_per_gpu < 0 || res->mem_bytes_per_gpu > MAX_MEM_BYTES_PER_GPU)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "role %d: CPU and memory per GPU must be between 0 and %lld "
                                   "millicores / %lld bytes",
                                   i, MAX_CPU_MILLI_PER_GPU, MAX_MEM_BYTES_PER_GPU);
    }
    if (job->name == NULL || job->name[0] == '\0')
        return areal_error_set(err, AREAL_EINVAL, -1, "the job needs a name");
    if (job->topology.n_levels < 0 || job->topology.n_levels > AREAL_TOPO_MAX_LEVELS)
        return areal_error_set(err, AREAL_EINVAL, -1, "at most %d topology levels",
                               AREAL_TOPO_MAX_LEVELS);
    if (job->n_rules < 0 || job->n_rules > AREAL_MAX_RULES)
        return areal_error_set(err, AREAL_EINVAL, -1, "at most %d locality rules", AREAL_MAX_RULES);
    for (int i = 0; i < job->n_rules; i++) {
        const areal_locality_rule *rule = &job->rules[i];
        if (rule->kind < 0 || rule->kind >= AREAL_GROUP_KIND_COUNT)
            return areal_error_set(err, AREAL_EINVAL, -1, "rule %d: unknown group kind", i);
        if (rule->level < 0 || rule->level > job->topology.n_levels)
            return areal_error_set(err, AREAL_EINVAL, -1,
                                   "rule %d: level %d is not one of the job's %d levels", i,
                                   rule->level, job->topology.n_levels);
    }
    return AREAL_OK;
}

int areal_place(const areal_job *job, const areal_cluster *cluster, areal_plan *plan,
                areal_error *err) {
    memset(plan, 0, sizeof *plan);
    int rc = validate_job(job, err);
    if (rc != AREAL_OK)
        return rc;
    if (cluster->n_nodes == 0)
        return areal_error_set(err, AREAL_ENOFIT, -1, "the cluster has no nodes");
    /* A job larger than every free GPU is refused before anything is sized by it. */
    long long wanted = areal_alloc_total_gpus(job->alloc), free_gpus = 0;
    for (int i = 0; i < cluster->n_nodes; i++)
        free_gpus += cluster->nodes[i].gpus - cluster->nodes[i].gpus_used;
    if (wanted > free_gpus)
        return areal_error_set(err, AREAL_ENOFIT, -1,
                               "the job needs %lld GPUs but the cluster has %lld free; free GPUs "
                               "or add nodes",
                               wanted, free_gpus);
    planner p = {.job = job, .c = cluster, .plan = plan, .err = err};
    rc = setup_roles(&p);
    if (rc == AREAL_OK)
        rc = alloc_planner(&p);
    if (rc == AREAL_OK)
        rc = domain_tree_build(&p.tree, cluster, &job->topology, err);
    int N = cluster->n_nodes;
    for (int r = 0; rc == AREAL_OK && r < plan->n_roles; r++) {
        for (int i = 0; i < N; i++)
            p.eligible[r * N + i] =
                node_exclusion(&cluster->nodes[i], &job->resources[r]) == EXCL_NONE;
        p.cpu_per_gpu[r] = job->resources[r].cpu_milli_per_gpu;
        p.mem_per_gpu[r] = job->resources[r].mem_bytes_per_gpu;
    }
    /* Roles colocated on an anchor run in its pods: its nodes must suit them all. */
    for (int m = 0; rc == AREAL_OK && m < plan->n_roles; m++) {
        int a = plan->roles[m].colocated_with;
        if (a < 0)
            continue;
        for (int i = 0; i < N; i++)
            p.eligible[a * N + i] = p.eligible[a * N + i] && p.eligible[m * N + i];
        p.cpu_per_gpu[a] += p.cpu_per_gpu[m];
        p.mem_per_gpu[a] += p.mem_per_gpu[m];
    }
    int max_attempts = 1;
    for (int r = 0; rc == AREAL_OK && r < plan->n_roles; r++) {
        if (plan->roles[r].colocated_with >= 0)
            continue;
        rc = role_pod_sizes(&p, r, &p.work[r]);
        role_links(&p, r, &p.work[r]);
        if (rc == AREAL_OK && p.work[r].n_sizes > max_attempts)
            max_attempts = p.work[r].n_sizes;
    }
    /*
     * The reason reported is the one a person can act on: a broken required
     * rule (every pod had room) over a shortage of room, else the first
     * attempt's, with the largest pods.
     */
    areal_error reason;
    areal_error_clear(&reason);
    bool reason_is_rule = false;
    for (int a = 0; rc == AREAL_OK && a < max_attempts; a++) {
        int arc = attempt(&p, a);
        if (arc == AREAL_OK) {
            compute_quality(&p);
            break;
        }
        if (err != NULL && (a == 0 || (p.rule_broken && !reason_is_rule))) {
            reason = *err;
            reason_is_rule = p.rule_broken;
        }
        if (a == max_attempts - 1) {
            rc = arc;
            if (err != NULL) {
                *err = reason;
                size_t len = strlen(err->msg);
                if (max_attempts > 1 && !reason_is_rule)
                    snprintf(err->msg + len, sizeof err->msg - len,
                             " (smaller pods were tried too)");
            }
        }
    }
    free_planner(&p);
    if (rc != AREAL_OK) {
        areal_plan_free(plan);
        return rc;
    }
    for (int i = 0; i < plan->n_pods; i++)
        plan->gpus += plan->pods[i].n_ranks;
    return AREAL_OK;
}
