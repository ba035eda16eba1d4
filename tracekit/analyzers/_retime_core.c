/*
 * tracekit.analyzers._retime_core: one rank's re-timing under one scenario, in C.
 *
 * The same arithmetic as tracekit.analyzers.retime._Rank's one-at-a-time paths (its methods
 * named alike: block, stream_until, launch_one, host_shift_one, ...), in the same order on the
 * same doubles, so the same times to the last bit: the module's property tests hold the two to
 * it (tests/analyzers/test_retime_core.py). Python's paths that work on several times at once as
 * NumPy arrays give those times too (tests/analyzers/test_retime.py), so here every time is
 * worked out one at a time, as a loop over plain arrays: what costs there is the interpreter,
 * not the arithmetic (benchmarks/README.md).
 *
 * Core(shape, scenario, state, hide, no_wait, track)
 *   shape     the arrays of tracekit.analyzers.retime_shape.RankShape.packed(), in its order
 *   scenario  (dur, r_start, r_end, r_rate, r_cum, r_at_start, r_at_end): the task durations
 *             and the host time removed (tracekit.analyzers.retime_removal.HostRemoval)
 *   state     (s_new, e_new, e_src, b_shift, b_src, done, arrived, arrived_src): arrays it
 *             writes, which the caller reads (each task's re-timed start, end and source; each
 *             block's shift and source; per stream, the tasks re-timed; each collective's
 *             re-timed arrival and its source, NOT_ARRIVED where it has none yet: retime._Rank's
 *             dicts arrived and arrived_src, without a Python object per collective)
 *
 * Where a collective's instance is met, it calls sim.instance(i) (tracekit.analyzers.retime.Meets),
 * which calls back collective_arrival and finish_collective on each rank that holds it; a
 * collective re-timed alone reads sim.last_old. An exception there propagates.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#define NO_SOURCE ((int64_t)-1)
/* arrived_src of a collective not re-timed yet (retime._NOT_ARRIVED) */
#define NOT_ARRIVED ((int64_t)-2)
#define NEVER (-INFINITY)

enum {
    /* per task */
    SH_START, SH_END, SH_ARRIVAL, SH_LCH, SH_DELAY, SH_OVERLAP,
    SH_INSTANCE, SH_PLACE, SH_STREAM_OF, SH_DEP,
    SH_FREE, SH_LAUNCHED, SH_FIRST_UNLAUNCHED,
    /* streams and their stops, as offsets into one array */
    SH_S_IDX, SH_S_OFF, SH_ST_IDX, SH_ST_OFF,
    /* blocks */
    SH_B_START, SH_B_END, SH_B_DRAIN, SH_B_OWN, SH_B_TAIL,
    SH_B_WAITED, SH_B_COLL, SH_B_KEPT,
    SH_AW, SH_AW_OFF, SH_AWF, SH_AWF_OFF,
    /* host collectives by completion */
    SH_COMP_TASK, SH_COMP_END, SH_COMP_LCH,
    N_SHAPE
};
enum { SC_DUR, SC_R_START, SC_R_END, SC_R_RATE, SC_R_CUM, SC_AT_START, SC_AT_END, N_SCEN };
enum { ST_S_NEW, ST_E_NEW, ST_E_SRC, ST_B_SHIFT, ST_B_SRC, ST_DONE, ST_ARRIVED, ST_ARRIVED_SRC, N_STATE };
#define N_BUF (N_SCEN + N_STATE)

/* A rank's shape under every scenario: RankShape.packed()'s arrays, held and checked once. */
typedef struct {
    Py_ssize_t n, ns, nb, nc;
    const double *start, *end, *arrival, *lch, *delay, *overlap;
    const int64_t *instance, *place, *stream_of, *dep;
    const uint8_t *free_, *launched, *first_unlaunched;
    const int64_t *s_idx, *s_off, *st_idx, *st_off;
    const double *b_start, *b_end, *b_drain, *b_own, *b_tail;
    const uint8_t *b_waited, *b_coll, *b_kept;
    const int64_t *aw, *aw_off, *awf, *awf_off, *comp_task;
    const double *comp_end, *comp_lch;
    int b_start_sorted; /* b_start ascending, no NaN: bisect_near may search it */
} Arrays;

typedef struct {
    PyObject_HEAD
    Py_buffer buf[N_SHAPE];
    int held;
    Arrays a;
} Shape;

typedef struct Core {
    PyObject_HEAD
    Py_buffer buf[N_BUF];
    int held;
    Shape *shape;
    Arrays a; /* the shape's */
    Py_ssize_t nr;
    const double *dur;
    const double *r_start, *r_end, *r_rate, *r_cum, *at_start, *at_end;
    double *s_new, *e_new, *b_shift, *arrived;
    int64_t *e_src, *b_src, *done, *arrived_src;
    Py_ssize_t b_done, b_busy;
    /* the last answers of the searches of b_start and r_end (bisect_near); r_end ascending, no NaN */
    Py_ssize_t near_b, near_r;
    int r_end_sorted;
    int hide, no_wait, track, device_end;
    double window_end, tolerance;
} Core;

static PyObject *s_instance, *s_last_old;
static PyTypeObject ShapeType;

/* Python's max(a, b) and min(a, b): the first unless the second is larger (smaller). */
static inline double pmax(double a, double b) { return b > a ? b : a; }
static inline double pmin(double a, double b) { return b < a ? b : a; }

static inline Py_ssize_t bisect_right(const double *a, Py_ssize_t n, double x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (x < a[mid]) hi = mid; else lo = mid + 1;
    }
    return lo;
}

/* Whether a[0..n) ascends (each a[i] <= a[i + 1]: no NaN among them). */
static int ascending(const double *a, Py_ssize_t n) {
    for (Py_ssize_t i = 1; i < n; i++)
        if (!(a[i - 1] <= a[i])) return 0;
    return n == 0 || a[0] == a[0];
}

/* bisect_right of an ascending array (see ascending), searched from *near, the last answer,
 * galloping out: the same index, the first i with x < a[i] (n if none: a predicate that
 * ascends with i), in a few steps where one search follows the last; *near becomes it. */
static inline Py_ssize_t bisect_near(const double *a, Py_ssize_t n, double x, Py_ssize_t *near) {
    if (x != x) return bisect_right(a, n, x);
    Py_ssize_t h = *near, lo, hi;
    if (h < 0 || h > n) h = 0;
    if (h < n && !(x < a[h])) { /* the answer is after h */
        Py_ssize_t step = 1;
        lo = h + 1;
        hi = lo;
        while (hi < n && !(x < a[hi])) {
            lo = hi + 1;
            hi = lo + step;
            step <<= 1;
        }
        if (hi > n) hi = n;
    } else { /* at h or before */
        Py_ssize_t step = 1, probe = h - 1;
        hi = h;
        while (probe >= 0 && x < a[probe]) {
            hi = probe;
            probe -= step;
            step <<= 1;
        }
        lo = probe < 0 ? 0 : probe + 1;
    }
    while (lo < hi) {
        Py_ssize_t mid = lo + (hi - lo) / 2;
        if (x < a[mid]) hi = mid; else lo = mid + 1;
    }
    *near = lo;
    return lo;
}

static inline Py_ssize_t bisect_left_i(const int64_t *a, Py_ssize_t n, int64_t x) {
    Py_ssize_t lo = 0, hi = n;
    while (lo < hi) {
        Py_ssize_t mid = (lo + hi) / 2;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

/* A time and the instance it hangs on. */
typedef struct { double t; int64_t src; } Timed;

/* Where a rank's collectives meet the other ranks' (tracekit.analyzers.retime.Meets): a Python
 * object (py), or here: one rank alone (retime_ranks._Alone, alone set), or every rank of the
 * run (retime.Simulation). The instances by their ids, sorted; each one's members (the core,
 * an index into cores, and the task), in the order Python lists them. */
typedef struct Meet {
    PyObject *py;
    int alone;
    struct Core **cores;
    Py_ssize_t ni;
    const int64_t *ids, *m_off, *m_core, *m_task;
    const double *last_old, *given;
    uint8_t *finished, *in_progress;
    /* one rank alone: the instances in the order it finished them, its arrival at each and the
     * instance that arrival hangs on; whether it met a cycle */
    Py_ssize_t *order;
    Py_ssize_t norder;
    double *own;
    int64_t *own_src;
    int cycled;
} Meet;

static int stream_until(Core *c, Py_ssize_t j, Py_ssize_t last, Meet *m);
static int process_through(Core *c, Py_ssize_t last, Meet *m);
static int ensure_free(Core *c, Py_ssize_t k, Meet *m);

static int alone_instance(Meet *m, Py_ssize_t i);
static int sim_instance(Meet *m, Py_ssize_t i);

/* The index of instance ``inst`` among m's, or -1. */
static Py_ssize_t find(const Meet *m, int64_t inst) {
    Py_ssize_t i = bisect_left_i(m->ids, m->ni, inst);
    return i < m->ni && m->ids[i] == inst ? i : -1;
}

static int meet(Meet *m, int64_t inst) {
    if (m->py == NULL) {
        Py_ssize_t i = find(m, inst);
        if (i < 0) {
            PyErr_Format(PyExc_KeyError, "collective instance %lld is not met here", (long long)inst);
            return -1;
        }
        return m->alone ? alone_instance(m, i) : sim_instance(m, i);
    }
    PyObject *i = PyLong_FromLongLong(inst);
    if (i == NULL) return -1;
    PyObject *r = PyObject_CallMethodOneArg(m->py, s_instance, i);
    Py_DECREF(i);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* HostRemoval.removed_one */
static inline double removed_one(Core *c, double t) {
    Py_ssize_t n = c->nr;
    if (n == 0) return 0.0;
    Py_ssize_t i = c->r_end_sorted ? bisect_near(c->r_end, n, t, &c->near_r) : bisect_right(c->r_end, n, t);
    if (i >= n) return c->r_cum[i];
    return c->r_cum[i] + pmax(t - c->r_start[i], 0.0) * c->r_rate[i];
}

static inline double shift_at_start_one(const Core *c, Py_ssize_t b) {
    if (b > 0) return c->b_shift[b - 1] + c->at_start[b] - c->at_end[b - 1];
    return c->at_start[b];
}

static inline int64_t src_at_start(const Core *c, Py_ssize_t b) { return b > 0 ? c->b_src[b - 1] : NO_SOURCE; }

static int after_completion_one(Core *c, double t, Py_ssize_t b, double before, Meet *m, Timed *out) {
    Py_ssize_t i = bisect_right(c->a.comp_end, c->a.nc, t) - 1;
    while (i >= 0 && c->a.comp_lch[i] >= t) i--; /* launched at t or later: not yet released it */
    if (i < 0 || c->a.comp_end[i] < c->a.b_start[b]) {
        out->t = before;
        out->src = src_at_start(c, b);
        return 0;
    }
    Py_ssize_t k = (Py_ssize_t)c->a.comp_task[i];
    if (ensure_free(c, k, m) < 0) return -1;
    double gained = c->a.end[k] - c->e_new[k];
    double reach = before + (t - c->a.b_start[b]);
    if (reach <= gained) {
        out->t = reach;
        out->src = src_at_start(c, b);
    } else {
        out->t = gained;
        out->src = c->e_src[k];
    }
    return 0;
}

/* _Rank.host_shift_one (the recursion counted as Python counts it: where Python's re-timing
 * would raise RecursionError, so does this, never running out of C stack) */
static int host_shift_one_(Core *c, double t, Meet *m, Timed *out);
static int host_shift_one(Core *c, double t, Meet *m, Timed *out) {
    if (Py_EnterRecursiveCall(" while re-timing a rank")) return -1;
    int r = host_shift_one_(c, t, m, out);
    Py_LeaveRecursiveCall();
    return r;
}

static int host_shift_one_(Core *c, double t, Meet *m, Timed *out) {
    double removed = c->nr ? removed_one(c, t) : 0.0;
    Py_ssize_t j = (c->a.b_start_sorted ? bisect_near(c->a.b_start, c->a.nb, t, &c->near_b)
                                        : bisect_right(c->a.b_start, c->a.nb, t)) - 1;
    if (j < 0) {
        out->t = removed;
        out->src = NO_SOURCE;
        return 0;
    }
    if (0 <= c->b_busy && c->b_busy <= j) {
        out->t = shift_at_start_one(c, c->b_busy);
        out->src = src_at_start(c, c->b_busy);
        return 0;
    }
    double end = c->a.b_end[j];
    int resumed = t >= end || (c->a.b_waited[j] && t >= c->a.b_drain[j]);
    Py_ssize_t through = resumed ? j : j - 1;
    if (through >= c->b_done && process_through(c, through, m) < 0) return -1;
    if (t >= end) {
        out->t = c->b_shift[j] + removed - c->at_end[j];
        out->src = c->b_src[j];
        return 0;
    }
    double before = shift_at_start_one(c, j);
    if (c->a.nc && c->a.b_coll[j]) return after_completion_one(c, t, j, before, m, out);
    if (resumed) {
        out->t = c->b_shift[j];
        out->src = c->b_src[j];
    } else {
        out->t = before;
        out->src = src_at_start(c, j);
    }
    return 0;
}

/* _Rank.launch_one */
static int launch_one(Core *c, Py_ssize_t k, Meet *m, Timed *out) {
    if (c->a.first_unlaunched[k]) {
        out->t = c->a.start[k] - c->a.delay[k];
        out->src = NO_SOURCE;
        return 0;
    }
    if (!c->a.launched[k]) {
        out->t = NEVER;
        out->src = NO_SOURCE;
        return 0;
    }
    double lch = c->a.lch[k];
    Timed shift;
    if (host_shift_one(c, lch, m, &shift) < 0) return -1;
    out->t = lch - shift.t;
    out->src = shift.src;
    return 0;
}

/* _Rank.block */
static int block(Core *c, Meet *m) {
    Py_ssize_t b = c->b_done;
    c->b_busy = b;
    double start_new = c->a.b_start[b] - shift_at_start_one(c, b);
    double drain = NEVER;
    int64_t drain_src = NO_SOURCE;
    for (int64_t a = c->a.aw_off[b]; a < c->a.aw_off[b + 1]; a++) {
        Py_ssize_t j = (Py_ssize_t)c->a.aw[3 * a], last = (Py_ssize_t)c->a.aw[3 * a + 1], k = (Py_ssize_t)c->a.aw[3 * a + 2];
        if (c->done[j] <= last && stream_until(c, j, last, m) < 0) return -1;
        if (c->e_new[k] > drain) {
            drain = c->e_new[k];
            drain_src = c->e_src[k];
        }
    }
    for (int64_t a = c->a.awf_off[b]; a < c->a.awf_off[b + 1]; a++) {
        Py_ssize_t k = (Py_ssize_t)c->a.awf[a];
        if (ensure_free(c, k, m) < 0) return -1;
        if (c->e_new[k] > drain) {
            drain = c->e_new[k];
            drain_src = c->e_src[k];
        }
    }
    double ret = start_new + c->a.b_own[b];
    int64_t src = src_at_start(c, b);
    if ((!c->no_wait || c->a.b_kept[b]) && drain + c->a.b_tail[b] > ret) {
        ret = drain + c->a.b_tail[b];
        src = drain_src;
    }
    c->b_shift[b] = c->a.b_end[b] - ret;
    c->b_src[b] = src;
    c->b_done = b + 1;
    c->b_busy = -1;
    return 0;
}

/* _Rank.process_through */
static int process_through(Core *c, Py_ssize_t last, Meet *m) {
    if (last < c->b_done) return 0;
    if (last > c->a.nb - 1) last = c->a.nb - 1;
    while (c->b_done <= last) {
        if (block(c, m) < 0) return -1;
    }
    return 0;
}

static inline double prev_end(const Core *c, Py_ssize_t j, Py_ssize_t place) {
    if (place == 0) return NEVER;
    return c->e_new[c->a.s_idx[c->a.s_off[j] + place - 1]];
}

static inline int64_t prev_src(const Core *c, Py_ssize_t j, Py_ssize_t place) {
    if (place == 0) return NO_SOURCE;
    return c->e_src[c->a.s_idx[c->a.s_off[j] + place - 1]];
}

/* _Rank._dep_end */
static int dep_end(Core *c, Py_ssize_t k, Meet *m, Timed *out) {
    int64_t d = c->a.dep[k];
    if (d < 0) {
        out->t = NEVER;
        out->src = NO_SOURCE;
        return 0;
    }
    if (isnan(c->e_new[d]) && stream_until(c, (Py_ssize_t)c->a.stream_of[d], (Py_ssize_t)c->a.place[d], m) < 0) return -1;
    out->t = c->e_new[d];
    out->src = c->e_src[d];
    return 0;
}

/* _Rank._start_after */
static int start_after(Core *c, Py_ssize_t k, Timed launch, Meet *m, Timed *out) {
    Py_ssize_t j = (Py_ssize_t)c->a.stream_of[k], place = (Py_ssize_t)c->a.place[k];
    Timed dep;
    if (dep_end(c, k, m, &dep) < 0) return -1;
    double prev = prev_end(c, j, place) - c->a.overlap[k];
    int64_t psrc = prev_src(c, j, place);
    double start = launch.t;
    int64_t src = launch.src;
    if (prev > start) {
        start = prev;
        src = psrc;
    }
    if (dep.t > start) {
        start = dep.t;
        src = dep.src;
    }
    out->t = start + c->a.delay[k];
    out->src = src;
    return 0;
}

/* _Rank._one */
static int one(Core *c, Py_ssize_t j, Py_ssize_t place, Meet *m) {
    Py_ssize_t k = (Py_ssize_t)c->a.s_idx[c->a.s_off[j] + place];
    Timed ignored, launch, start;
    if (dep_end(c, k, m, &ignored) < 0) return -1;
    if (c->done[j] != place) return 0;
    if (launch_one(c, k, m, &launch) < 0) return -1;
    if (start_after(c, k, launch, m, &start) < 0) return -1;
    c->s_new[k] = start.t;
    c->e_new[k] = start.t + c->dur[k];
    c->e_src[k] = start.src;
    c->done[j] = place + 1;
    return 0;
}

/* _Rank._run_few (and _run: the same sums in the same order): tasks lo:hi of stream j. */
static int run(Core *c, Py_ssize_t j, Py_ssize_t lo, Py_ssize_t hi, Meet *m) {
    const int64_t *ks = c->a.s_idx + c->a.s_off[j] + lo;
    Py_ssize_t n = hi - lo;
    Timed few[32];
    Timed *a = few;
    if (n > 32) {
        a = PyMem_Malloc(sizeof(Timed) * (size_t)n);
        if (a == NULL) {
            PyErr_NoMemory();
            return -1;
        }
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        if (launch_one(c, (Py_ssize_t)ks[i], m, &a[i]) < 0) {
            if (a != few) PyMem_Free(a);
            return -1;
        }
    }
    Py_ssize_t place = (Py_ssize_t)c->a.place[ks[0]];
    double carry = prev_end(c, j, place);
    int64_t carry_src = prev_src(c, j, place);
    double cum = 0.0, most = NEVER;
    int64_t most_src = NO_SOURCE;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k = (Py_ssize_t)ks[i];
        double d = c->dur[k], w = c->a.delay[k];
        cum += w + d - c->a.overlap[k];
        double x = a[i].t + w + d - cum;
        if (x >= most) {
            most = x;
            most_src = a[i].src;
        }
        double e;
        int64_t src;
        if (carry >= most) {
            e = cum + carry;
            src = carry_src;
        } else {
            e = cum + most;
            src = most_src;
        }
        c->e_new[k] = e;
        c->s_new[k] = e - d;
        c->e_src[k] = src;
    }
    if (a != few) PyMem_Free(a);
    c->done[j] = hi;
    return 0;
}

static int collective_arrival(Core *c, Py_ssize_t k, Meet *m, Timed *start, Timed *arrival) {
    Timed a;
    if (launch_one(c, k, m, &a) < 0) return -1;
    int free_ = c->a.free_[k];
    if (free_) {
        start->t = a.t + c->a.delay[k];
        start->src = a.src;
    } else {
        Py_ssize_t j = (Py_ssize_t)c->a.stream_of[k], place = (Py_ssize_t)c->a.place[k];
        if (stream_until(c, j, place - 1, m) < 0) return -1;
        if (start_after(c, k, a, m, start) < 0) return -1;
    }
    *arrival = (free_ && c->a.launched[k]) ? a : *start;
    c->arrived[k] = arrival->t;
    c->arrived_src[k] = arrival->src;
    return 0;
}

static void finish_collective(Core *c, Py_ssize_t k, Timed start, Timed last, double last_old) {
    double tail = c->a.end[k] - pmax(c->a.start[k], last_old);
    if (c->hide) tail = pmin(tail, 0.0);
    double end;
    int64_t src;
    if (start.t >= last.t) {
        end = start.t + tail;
        src = start.src;
    } else {
        end = last.t + tail;
        src = last.src;
    }
    if (start.t > end) {
        end = start.t;
        src = start.src;
    }
    c->s_new[k] = start.t;
    c->e_new[k] = end;
    c->e_src[k] = src;
    if (!c->a.free_[k]) {
        Py_ssize_t j = (Py_ssize_t)c->a.stream_of[k];
        int64_t next = c->a.place[k] + 1;
        if (next > c->done[j]) c->done[j] = next;
    }
}

/* _Rank._collective_alone */
static int collective_alone(Core *c, Py_ssize_t k, Meet *m) {
    Timed start, arrival;
    if (collective_arrival(c, k, m, &start, &arrival) < 0) return -1;
    double old_last = c->a.arrival[k];
    if (m->py == NULL) {
        Py_ssize_t i = find(m, c->a.instance[k]);
        if (i >= 0) old_last = m->last_old[i];
    } else {
        PyObject *last_old = PyObject_GetAttr(m->py, s_last_old);
        if (last_old == NULL) return -1;
        PyObject *key = PyLong_FromLongLong(c->a.instance[k]);
        if (key == NULL) {
            Py_DECREF(last_old);
            return -1;
        }
        PyObject *got = PyObject_GetItem(last_old, key);
        Py_DECREF(key);
        Py_DECREF(last_old);
        if (got == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_KeyError)) return -1;
            PyErr_Clear();
        } else {
            old_last = PyFloat_AsDouble(got);
            Py_DECREF(got);
            if (old_last == -1.0 && PyErr_Occurred()) return -1;
        }
    }
    Timed last = {old_last - (c->a.arrival[k] - arrival.t), arrival.src};
    finish_collective(c, k, start, last, old_last);
    return 0;
}

/* _Rank.ensure_free */
static int ensure_free(Core *c, Py_ssize_t k, Meet *m) {
    if (!isnan(c->e_new[k])) return 0;
    int64_t inst = c->a.instance[k];
    if (inst >= 0 && meet(m, inst) < 0) return -1;
    if (isnan(c->e_new[k])) return collective_alone(c, k, m);
    return 0;
}

/* _Rank.stream_until (its recursion counted, as host_shift_one's) */
static int stream_until_(Core *c, Py_ssize_t j, Py_ssize_t last, Meet *m);
static int stream_until(Core *c, Py_ssize_t j, Py_ssize_t last, Meet *m) {
    if (Py_EnterRecursiveCall(" while re-timing a rank")) return -1;
    int r = stream_until_(c, j, last, m);
    Py_LeaveRecursiveCall();
    return r;
}

static int stream_until_(Core *c, Py_ssize_t j, Py_ssize_t last, Meet *m) {
    const int64_t *idx = c->a.s_idx + c->a.s_off[j];
    const int64_t *stops = c->a.st_idx + c->a.st_off[j];
    Py_ssize_t nstops = (Py_ssize_t)(c->a.st_off[j + 1] - c->a.st_off[j]);
    while (c->done[j] <= last) {
        Py_ssize_t lo = (Py_ssize_t)c->done[j];
        Py_ssize_t s = bisect_left_i(stops, nstops, lo);
        Py_ssize_t hi = s < nstops ? (Py_ssize_t)stops[s] : last + 1;
        if (hi > last + 1) hi = last + 1;
        if (hi > lo && run(c, j, lo, hi, m) < 0) return -1;
        if (hi > last) continue;
        Py_ssize_t k = (Py_ssize_t)idx[hi];
        int64_t inst = c->a.instance[k];
        if (inst < 0) {
            if (one(c, j, hi, m) < 0) return -1;
            continue;
        }
        if (meet(m, inst) < 0) return -1;
        if (c->done[j] == hi) {
            if (collective_alone(c, k, m) < 0) return -1;
            c->done[j] = hi + 1;
        }
    }
    return 0;
}

/* A collective's arrival as re-timed before (retime._Rank.arrived, arrived_src), else as recorded. */
static int arrived_of(Core *c, Py_ssize_t k, Timed *out) {
    if (c->arrived_src[k] == NOT_ARRIVED) {
        out->t = c->a.arrival[k];
        out->src = NO_SOURCE;
    } else {
        out->t = c->arrived[k];
        out->src = c->arrived_src[k];
    }
    return 0;
}

/* retime_ranks._Alone.instance: instance i on the one rank, ending on the last arrival given
 * or the rank's own if later. */
static int alone_instance(Meet *m, Py_ssize_t i) {
    if (m->finished[i]) return 0;
    if (m->in_progress[i]) {
        m->cycled = 1;
        return 0;
    }
    m->in_progress[i] = 1;
    Core *c = m->cores[0];
    Py_ssize_t lo = (Py_ssize_t)m->m_off[i], hi = (Py_ssize_t)m->m_off[i + 1];
    Timed few[8];
    Timed *starts = hi - lo <= 8 ? few : PyMem_Malloc(sizeof(Timed) * (size_t)(hi - lo));
    uint8_t fresh_few[8];
    uint8_t *fresh = hi - lo <= 8 ? fresh_few : PyMem_Malloc((size_t)(hi - lo));
    int err = 0;
    if (starts == NULL || fresh == NULL) {
        PyErr_NoMemory();
        err = 1;
        goto done;
    }
    Timed own = {NEVER, NO_SOURCE};
    for (Py_ssize_t x = lo; x < hi; x++) {
        Py_ssize_t k = (Py_ssize_t)m->m_task[x];
        Timed arrival;
        fresh[x - lo] = (uint8_t)isnan(c->e_new[k]);
        if (fresh[x - lo]) {
            if (collective_arrival(c, k, m, &starts[x - lo], &arrival) < 0) {
                err = 1;
                goto done;
            }
        } else {  /* re-timed alone meanwhile, through a cycle */
            m->cycled = 1;
            if (arrived_of(c, k, &arrival) < 0) {
                err = 1;
                goto done;
            }
        }
        if (arrival.t > own.t) own = arrival;
    }
    double given = m->given[i];
    Timed last = given >= own.t ? (Timed){given, m->ids[i]} : own;
    for (Py_ssize_t x = lo; x < hi; x++) {
        Py_ssize_t k = (Py_ssize_t)m->m_task[x];
        if (fresh[x - lo] && isnan(c->e_new[k])) finish_collective(c, k, starts[x - lo], last, m->last_old[i]);
    }
    m->in_progress[i] = 0;
    m->finished[i] = 1;
    m->order[m->norder++] = i;
    m->own[i] = own.t;
    m->own_src[i] = own.src;
done:
    if (starts != few) PyMem_Free(starts);
    if (fresh != fresh_few) PyMem_Free(fresh);
    return err ? -1 : 0;
}

/* retime.Simulation.instance: instance i on every rank that holds it. */
static int sim_instance(Meet *m, Py_ssize_t i) {
    if (m->finished[i] || m->in_progress[i]) return 0;
    m->in_progress[i] = 1;
    Py_ssize_t lo = (Py_ssize_t)m->m_off[i], hi = (Py_ssize_t)m->m_off[i + 1];
    Timed few[16];
    Timed *starts = hi - lo <= 16 ? few : PyMem_Malloc(sizeof(Timed) * (size_t)(hi - lo));
    Py_ssize_t few_at[16];
    Py_ssize_t *at = hi - lo <= 16 ? few_at : PyMem_Malloc(sizeof(Py_ssize_t) * (size_t)(hi - lo));
    int err = 0;
    if (starts == NULL || at == NULL) {
        PyErr_NoMemory();
        err = 1;
        goto done;
    }
    double last_new = NEVER, latest = NEVER;
    Py_ssize_t n = 0;
    for (Py_ssize_t x = lo; x < hi; x++) {
        Core *c = m->cores[m->m_core[x]];
        Py_ssize_t k = (Py_ssize_t)m->m_task[x];
        if (!isnan(c->e_new[k])) {
            /* re-timed alone meanwhile (reached again through a cycle across ranks): it still
             * arrives when it did, and the others wait for it */
            Timed before;
            if (arrived_of(c, k, &before) < 0) {
                err = 1;
                goto done;
            }
            last_new = pmax(last_new, before.t);
            continue;
        }
        Timed arrival;
        if (collective_arrival(c, k, m, &starts[n], &arrival) < 0) {
            err = 1;
            goto done;
        }
        /* Python's max over the arrivals: the first, unless a later one is larger */
        if (n == 0 || arrival.t > latest) latest = arrival.t;
        at[n++] = x;
    }
    last_new = pmax(last_new, n ? latest : NEVER);
    Timed last = {last_new, m->ids[i]};
    for (Py_ssize_t y = 0; y < n; y++) {
        Core *c = m->cores[m->m_core[at[y]]];
        Py_ssize_t k = (Py_ssize_t)m->m_task[at[y]];
        if (isnan(c->e_new[k])) finish_collective(c, k, starts[y], last, m->last_old[i]);
    }
    m->in_progress[i] = 0;
    m->finished[i] = 1;
done:
    if (starts != few) PyMem_Free(starts);
    if (at != few_at) PyMem_Free(at);
    return err ? -1 : 0;
}

/* _Rank.gained: how much earlier the rank's measured time ends. */
static int gained(Core *c, Meet *m, double *out) {
    *out = 0.0;
    if (c->device_end && c->a.n) {
        for (Py_ssize_t j = 0; j < c->a.ns; j++) {
            Py_ssize_t size = (Py_ssize_t)(c->a.s_off[j + 1] - c->a.s_off[j]);
            if (stream_until(c, j, size - 1, m) < 0) return -1;
        }
        for (Py_ssize_t x = 0; x < c->a.nc; x++)
            if (ensure_free(c, (Py_ssize_t)c->a.comp_task[x], m) < 0) return -1;
        /* the first task that ends last in the window (numpy's argmax) */
        Py_ssize_t last = -1;
        double best = NEVER;
        for (Py_ssize_t k = 0; k < c->a.n; k++) {
            double v = c->a.end[k] <= c->window_end + c->tolerance ? c->a.end[k] : NEVER;
            if (last < 0 || v > best) {
                best = v;
                last = k;
            }
        }
        int any = 0;
        for (Py_ssize_t k = 0; k < c->a.n && !any; k++) any = c->a.end[k] <= c->window_end + c->tolerance;
        if (any) *out = c->a.end[last] - c->e_new[last];
        return 0;
    }
    if (process_through(c, bisect_right(c->a.b_end, c->a.nb, c->window_end) - 1, m) < 0) return -1;
    Timed shift;
    if (host_shift_one(c, c->window_end, m, &shift) < 0) return -1;
    *out = shift.t;
    return 0;
}

/* The re-timing in the order retime.Simulation.run (and retime_ranks._Alone.run) visits it: the
 * blocks by their ends (ev_core, ev_block: sorted by time, then rank, then block), the instances
 * by their first end on any rank (i_order: sorted by time, then id), a block before an instance
 * at the same time (as a heap of (time, kind, ...) pops them). */
static int visit(Meet *m, Py_ssize_t nev, const int64_t *ev_core, const int64_t *ev_block,
                 const int64_t *i_order, const double *i_t) {
    Py_ssize_t a = 0, b = 0;
    while (a < nev || b < m->ni) {
        double ta = a < nev ? m->cores[ev_core[a]]->a.b_end[ev_block[a]] : INFINITY;
        if (a < nev && (b >= m->ni || !(i_t[b] < ta))) {
            Core *c = m->cores[ev_core[a]];
            if (process_through(c, bisect_right(c->a.b_end, c->a.nb, ta) - 1, m) < 0) return -1;
            a++;
        } else {
            Py_ssize_t i = (Py_ssize_t)i_order[b++];
            if ((m->alone ? alone_instance(m, i) : sim_instance(m, i)) < 0) return -1;
        }
    }
    return 0;
}

/* -- the Python side ------------------------------------------------------------------------ */

static int check_index(const Core *c, Py_ssize_t k, Py_ssize_t n, const char *what) {
    (void)c;
    if (k < 0 || k >= n) {
        PyErr_Format(PyExc_IndexError, "%s %zd out of range (%zd)", what, k, n);
        return -1;
    }
    return 0;
}

static PyObject *timed2(Timed a) { return Py_BuildValue("(dL)", a.t, (long long)a.src); }

static PyObject *Core_blocks_until(Core *c, PyObject *args) {
    double t;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "dO", &t, &sim)) return NULL;
    Meet py = {.py = sim};
    if (process_through(c, bisect_right(c->a.b_end, c->a.nb, t) - 1, &py) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Core_stream_until(Core *c, PyObject *args) {
    Py_ssize_t j, last;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "nnO", &j, &last, &sim)) return NULL;
    Meet py = {.py = sim};
    if (check_index(c, j, c->a.ns, "stream") < 0) return NULL;
    Py_ssize_t size = (Py_ssize_t)(c->a.s_off[j + 1] - c->a.s_off[j]);
    if (last >= size) last = size - 1;
    if (stream_until(c, j, last, &py) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Core_host_shift_one(Core *c, PyObject *args) {
    double t;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "dO", &t, &sim)) return NULL;
    Meet py = {.py = sim};
    Timed out;
    if (host_shift_one(c, t, &py, &out) < 0) return NULL;
    return timed2(out);
}

static PyObject *Core_collective_arrival(Core *c, PyObject *args) {
    Py_ssize_t k;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "nO", &k, &sim)) return NULL;
    Meet py = {.py = sim};
    if (check_index(c, k, c->a.n, "task") < 0) return NULL;
    Timed start, arrival;
    if (collective_arrival(c, k, &py, &start, &arrival) < 0) return NULL;
    return Py_BuildValue("(dLdL)", start.t, (long long)start.src, arrival.t, (long long)arrival.src);
}

static PyObject *Core_finish_collective(Core *c, PyObject *args) {
    Py_ssize_t k;
    Timed start, last;
    long long start_src, last_src;
    double last_old;
    if (!PyArg_ParseTuple(args, "ndL(dL)d", &k, &start.t, &start_src, &last.t, &last_src, &last_old)) return NULL;
    if (check_index(c, k, c->a.n, "task") < 0) return NULL;
    start.src = start_src;
    last.src = last_src;
    finish_collective(c, k, start, last, last_old);
    Py_RETURN_NONE;
}

static PyObject *Core_ensure_free(Core *c, PyObject *args) {
    Py_ssize_t k;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "nO", &k, &sim)) return NULL;
    Meet py = {.py = sim};
    if (check_index(c, k, c->a.n, "task") < 0) return NULL;
    if (ensure_free(c, k, &py) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Core_gained(Core *c, PyObject *sim) {
    Meet py = {.py = sim};
    double out;
    if (gained(c, &py, &out) < 0) return NULL;
    return PyFloat_FromDouble(out);
}

static void Core_dealloc(Core *c) {
    for (int i = 0; i < c->held; i++) PyBuffer_Release(&c->buf[i]);
    Py_XDECREF(c->shape);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* Each array of ``seq`` (a tuple of ``count``) held in ``bufs`` from ``*held`` on: C-contiguous,
 * ``itemsizes[i]`` bytes an item, ``sizes[i]`` items (-1: any). */
static int hold(Py_buffer *bufs, int *held, PyObject *seq, int count, const Py_ssize_t *sizes, const int *itemsizes,
                int writable, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != count) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of %d arrays", what, count);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        Py_buffer *v = &bufs[*held];
        int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(seq, i), v, flags) < 0) return -1;
        (*held)++;
        if (v->itemsize != itemsizes[i] || (sizes[i] >= 0 && v->len != sizes[i] * itemsizes[i]) || v->ndim != 1) {
            PyErr_Format(PyExc_ValueError, "%s[%d]: %zd bytes of %zd-byte items, not %zd of %d", what, i, v->len,
                         v->itemsize, sizes[i], itemsizes[i]);
            return -1;
        }
    }
    return 0;
}

/* The number of items of ``obj``'s buffer, or -1. */
static Py_ssize_t items(PyObject *obj) {
    Py_buffer probe;
    if (PyObject_GetBuffer(obj, &probe, PyBUF_C_CONTIGUOUS) < 0) return -1;
    Py_ssize_t n = probe.len / (probe.itemsize ? probe.itemsize : 1);
    PyBuffer_Release(&probe);
    return n;
}

static void Shape_dealloc(Shape *h) {
    for (int i = 0; i < h->held; i++) PyBuffer_Release(&h->buf[i]);
    Py_TYPE(h)->tp_free((PyObject *)h);
}

#define PTR(i) (h->buf[i].buf)

/* Shape(arrays): a rank's shape (RankShape.packed()), its arrays held and every index in them
 * checked once, for every Core of the rank to read without checking. */
static PyObject *Shape_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *arrays;
    static char *kw[] = {"arrays", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!", kw, &PyTuple_Type, &arrays)) return NULL;
    if (PyTuple_GET_SIZE(arrays) != N_SHAPE) {
        PyErr_Format(PyExc_TypeError, "shape: a tuple of %d arrays", N_SHAPE);
        return NULL;
    }
    Shape *h = (Shape *)type->tp_alloc(type, 0);
    if (h == NULL) return NULL;
    h->held = 0;
    Py_ssize_t n = items(PyTuple_GET_ITEM(arrays, SH_START)), ns = items(PyTuple_GET_ITEM(arrays, SH_S_OFF)) - 1;
    Py_ssize_t nb = items(PyTuple_GET_ITEM(arrays, SH_B_START)), nc = items(PyTuple_GET_ITEM(arrays, SH_COMP_TASK));
    if (PyErr_Occurred()) goto fail;
    if (ns < 0) {
        PyErr_SetString(PyExc_ValueError, "shape: no stream offsets");
        goto fail;
    }
    h->a.n = n;
    h->a.ns = ns;
    h->a.nb = nb;
    h->a.nc = nc;
    {
        Py_ssize_t sizes[N_SHAPE] = {n, n, n, n, n, n, n, n, n, n, n, n, n, -1, ns + 1, -1, ns + 1,
                                     nb, nb, nb, nb, nb, nb, nb, nb, -1, nb + 1, -1, nb + 1, nc, nc, nc};
        int itemsizes[N_SHAPE] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 1, 1, 1, 8, 8, 8, 8,
                                  8, 8, 8, 8, 8, 1, 1, 1, 8, 8, 8, 8, 8, 8, 8};
        if (hold(h->buf, &h->held, arrays, N_SHAPE, sizes, itemsizes, 0, "shape") < 0) goto fail;
    }
    h->a.start = PTR(SH_START);
    h->a.end = PTR(SH_END);
    h->a.arrival = PTR(SH_ARRIVAL);
    h->a.lch = PTR(SH_LCH);
    h->a.delay = PTR(SH_DELAY);
    h->a.overlap = PTR(SH_OVERLAP);
    h->a.instance = PTR(SH_INSTANCE);
    h->a.place = PTR(SH_PLACE);
    h->a.stream_of = PTR(SH_STREAM_OF);
    h->a.dep = PTR(SH_DEP);
    h->a.free_ = PTR(SH_FREE);
    h->a.launched = PTR(SH_LAUNCHED);
    h->a.first_unlaunched = PTR(SH_FIRST_UNLAUNCHED);
    h->a.s_idx = PTR(SH_S_IDX);
    h->a.s_off = PTR(SH_S_OFF);
    h->a.st_idx = PTR(SH_ST_IDX);
    h->a.st_off = PTR(SH_ST_OFF);
    h->a.b_start = PTR(SH_B_START);
    h->a.b_end = PTR(SH_B_END);
    h->a.b_drain = PTR(SH_B_DRAIN);
    h->a.b_own = PTR(SH_B_OWN);
    h->a.b_tail = PTR(SH_B_TAIL);
    h->a.b_waited = PTR(SH_B_WAITED);
    h->a.b_coll = PTR(SH_B_COLL);
    h->a.b_kept = PTR(SH_B_KEPT);
    h->a.aw = PTR(SH_AW);
    h->a.aw_off = PTR(SH_AW_OFF);
    h->a.awf = PTR(SH_AWF);
    h->a.awf_off = PTR(SH_AWF_OFF);
    h->a.comp_task = PTR(SH_COMP_TASK);
    h->a.comp_end = PTR(SH_COMP_END);
    h->a.comp_lch = PTR(SH_COMP_LCH);
    h->a.b_start_sorted = ascending(h->a.b_start, nb);
    /* the offsets and indexes must stay inside their arrays: checked here, not at every read */
    {
        Py_ssize_t n_sidx = h->buf[SH_S_IDX].len / 8, n_stidx = h->buf[SH_ST_IDX].len / 8;
        Py_ssize_t n_aw = h->buf[SH_AW].len / 8, n_awf = h->buf[SH_AWF].len / 8;
        const int64_t *offs[4] = {h->a.s_off, h->a.st_off, h->a.aw_off, h->a.awf_off};
        Py_ssize_t counts[4] = {ns, ns, nb, nb};
        Py_ssize_t limits[4] = {n_sidx, n_stidx, n_aw / 3, n_awf};
        for (int i = 0; i < 4; i++)
            for (Py_ssize_t x = 0; x <= counts[i]; x++)
                if (offs[i][x] < 0 || offs[i][x] > limits[i] || (x > 0 && offs[i][x] < offs[i][x - 1])) goto bad_index;
        for (Py_ssize_t x = 0; x < n_sidx; x++)
            if (h->a.s_idx[x] < 0 || h->a.s_idx[x] >= n) goto bad_index;
        for (Py_ssize_t x = 0; x < n_aw / 3; x++)
            if (h->a.aw[3 * x] < 0 || h->a.aw[3 * x] >= ns || h->a.aw[3 * x + 2] < 0 || h->a.aw[3 * x + 2] >= n) goto bad_index;
        for (Py_ssize_t x = 0; x < n_awf; x++)
            if (h->a.awf[x] < 0 || h->a.awf[x] >= n) goto bad_index;
        for (Py_ssize_t x = 0; x < nc; x++)
            if (h->a.comp_task[x] < 0 || h->a.comp_task[x] >= n) goto bad_index;
        for (Py_ssize_t x = 0; x < n; x++) {
            int64_t j = h->a.stream_of[x];
            if (h->a.dep[x] >= n || j < 0 || j >= (ns ? ns : 1)) goto bad_index;
            /* a task's place in its stream, where the stream order reads it back */
            if (ns && !h->a.free_[x] && (h->a.place[x] < 0 || h->a.place[x] >= h->a.s_off[j + 1] - h->a.s_off[j])) goto bad_index;
            if (h->a.dep[x] >= 0 && h->a.free_[h->a.dep[x]]) goto bad_index;
        }
    }
    return (PyObject *)h;
bad_index:
    PyErr_SetString(PyExc_ValueError, "shape: an offset, task or stream index out of range");
fail:
    Py_DECREF(h);
    return NULL;
}

#undef PTR
#define PTR(i) (c->buf[i].buf)

static PyObject *Core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *shape, *scen, *state;
    int hide, no_wait, track, device_end;
    double window_end, tolerance;
    static char *kw[] = {"shape",      "scenario",   "state",     "hide", "no_wait", "track",
                         "window_end", "device_end", "tolerance", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!pppdpd", kw, &ShapeType, &shape, &PyTuple_Type, &scen,
                                     &PyTuple_Type, &state, &hide, &no_wait, &track, &window_end, &device_end,
                                     &tolerance))
        return NULL;
    if (PyTuple_GET_SIZE(scen) != N_SCEN || PyTuple_GET_SIZE(state) != N_STATE) {
        PyErr_SetString(PyExc_TypeError, "Core: scenario and state of the wrong lengths");
        return NULL;
    }
    Core *c = (Core *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    Shape *h = (Shape *)shape;
    c->held = 0;
    c->shape = (Shape *)Py_NewRef(shape);
    c->hide = hide;
    c->no_wait = no_wait;
    c->track = track;
    c->window_end = window_end;
    c->device_end = device_end;
    c->tolerance = tolerance;
    c->b_done = 0;
    c->b_busy = -1;
    c->a = h->a;
    {
        Py_ssize_t n = c->a.n, ns = c->a.ns, nb = c->a.nb;
        Py_ssize_t nr = items(PyTuple_GET_ITEM(scen, SC_R_START));
        if (nr < 0) goto fail;
        c->nr = nr;
        Py_ssize_t sc_sizes[N_SCEN] = {n, nr, nr, nr, nr + 1, nb, nb};
        int sc_items[N_SCEN] = {8, 8, 8, 8, 8, 8, 8};
        Py_ssize_t st_sizes[N_STATE] = {n, n, n, nb, nb, ns, n, n};
        int st_items[N_STATE] = {8, 8, 8, 8, 8, 8, 8, 8};
        if (hold(c->buf, &c->held, scen, N_SCEN, sc_sizes, sc_items, 0, "scenario") < 0) goto fail;
        if (hold(c->buf, &c->held, state, N_STATE, st_sizes, st_items, 1, "state") < 0) goto fail;
    }
    c->dur = PTR(SC_DUR);
    c->r_start = PTR(SC_R_START);
    c->r_end = PTR(SC_R_END);
    c->r_rate = PTR(SC_R_RATE);
    c->r_cum = PTR(SC_R_CUM);
    c->at_start = PTR(SC_AT_START);
    c->at_end = PTR(SC_AT_END);
    c->r_end_sorted = ascending(c->r_end, c->nr);
    c->s_new = PTR(N_SCEN + ST_S_NEW);
    c->e_new = PTR(N_SCEN + ST_E_NEW);
    c->e_src = PTR(N_SCEN + ST_E_SRC);
    c->b_shift = PTR(N_SCEN + ST_B_SHIFT);
    c->b_src = PTR(N_SCEN + ST_B_SRC);
    c->done = PTR(N_SCEN + ST_DONE);
    c->arrived = PTR(N_SCEN + ST_ARRIVED);
    c->arrived_src = PTR(N_SCEN + ST_ARRIVED_SRC);
    for (Py_ssize_t j = 0; j < c->a.ns; j++) c->done[j] = 0;
    return (PyObject *)c;
fail:
    Py_DECREF(c);
    return NULL;
}

static PyMethodDef Core_methods[] = {
    {"blocks_until", (PyCFunction)Core_blocks_until, METH_VARARGS, "Re-time every block that ends by t."},
    {"stream_until", (PyCFunction)Core_stream_until, METH_VARARGS, "Re-time stream j through its task at place last."},
    {"host_shift_one", (PyCFunction)Core_host_shift_one, METH_VARARGS, "How much earlier the host is at t, and its source."},
    {"collective_arrival", (PyCFunction)Core_collective_arrival, METH_VARARGS,
     "A collective's start and arrival, re-timed: (start, its source, arrival, its source)."},
    {"finish_collective", (PyCFunction)Core_finish_collective, METH_VARARGS,
     "A collective's end from its start and its instance's last arrival."},
    {"ensure_free", (PyCFunction)Core_ensure_free, METH_VARARGS, "Re-time host collective k, if not yet."},
    {"gained", (PyCFunction)Core_gained, METH_O, "How much earlier the rank's measured time ends, the rest re-timed."},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ShapeType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tracekit.analyzers._retime_core.Shape",
    .tp_basicsize = sizeof(Shape),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A rank's shape under every scenario (RankShape.packed()), checked once.",
    .tp_new = Shape_new,
    .tp_dealloc = (destructor)Shape_dealloc,
};

static PyTypeObject CoreType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "tracekit.analyzers._retime_core.Core",
    .tp_basicsize = sizeof(Core),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "One rank's re-timing under one scenario (tracekit.analyzers.retime._Rank's arithmetic).",
    .tp_new = Core_new,
    .tp_dealloc = (destructor)Core_dealloc,
    .tp_methods = Core_methods,
};

/* -- the meetings here: one rank alone, or every rank ------------------------------------------ */

typedef struct {
    Py_buffer v[12];
    int held;
} Views;

static void release(Views *w) {
    for (int i = 0; i < w->held; i++) PyBuffer_Release(&w->v[i]);
    w->held = 0;
}

/* ``obj``'s items (C-contiguous, ``itemsize`` bytes each; -1 elements: any number), or NULL. */
static const void *view(Views *w, PyObject *obj, Py_ssize_t itemsize, Py_ssize_t n, Py_ssize_t *got, const char *what) {
    Py_buffer *v = &w->v[w->held];
    if (PyObject_GetBuffer(obj, v, PyBUF_C_CONTIGUOUS) < 0) return NULL;
    w->held++;
    if (v->itemsize != itemsize || v->ndim != 1 || (n >= 0 && v->len != n * itemsize)) {
        PyErr_Format(PyExc_ValueError, "%s: %zd bytes of %zd-byte items", what, v->len, v->itemsize);
        return NULL;
    }
    if (got != NULL) *got = v->len / itemsize;
    return v->buf;
}

static int in_range(const int64_t *a, Py_ssize_t n, int64_t lo, int64_t hi, const char *what) {
    for (Py_ssize_t x = 0; x < n; x++)
        if (a[x] < lo || a[x] >= hi) {
            PyErr_Format(PyExc_ValueError, "%s out of range", what);
            return -1;
        }
    return 0;
}

/* The instances, their members and the order of the visits, checked; ``m`` set to read them. */
static int meetings(Meet *m, Views *w, Core **cores, Py_ssize_t ncores, PyObject *ids, PyObject *m_off, PyObject *m_core,
                    PyObject *m_task, PyObject *last_old, PyObject *ev_core, PyObject *ev_block, PyObject *i_order,
                    PyObject *i_t, Py_ssize_t *nev, const int64_t **evc, const int64_t **evb, const int64_t **io,
                    const double **it) {
    Py_ssize_t ni, nm;
    m->cores = cores;
    if ((m->ids = view(w, ids, 8, -1, &ni, "ids")) == NULL) return -1;
    m->ni = ni;
    if ((m->m_off = view(w, m_off, 8, ni + 1, NULL, "m_off")) == NULL) return -1;
    if ((m->m_core = view(w, m_core, 8, -1, &nm, "m_core")) == NULL) return -1;
    if ((m->m_task = view(w, m_task, 8, nm, NULL, "m_task")) == NULL) return -1;
    if ((m->last_old = view(w, last_old, 8, ni, NULL, "last_old")) == NULL) return -1;
    if ((*evc = view(w, ev_core, 8, -1, nev, "ev_core")) == NULL) return -1;
    if ((*evb = view(w, ev_block, 8, *nev, NULL, "ev_block")) == NULL) return -1;
    if ((*io = view(w, i_order, 8, ni, NULL, "i_order")) == NULL) return -1;
    if ((*it = view(w, i_t, 8, ni, NULL, "i_t")) == NULL) return -1;
    for (Py_ssize_t x = 1; x < ni; x++)
        if (m->ids[x] <= m->ids[x - 1]) {
            PyErr_SetString(PyExc_ValueError, "ids: not sorted and unique");
            return -1;
        }
    if (m->m_off[0] != 0 || m->m_off[ni] != nm) goto bad;
    for (Py_ssize_t x = 0; x < ni; x++)
        if (m->m_off[x + 1] < m->m_off[x]) goto bad;
    if (in_range(m->m_core, nm, 0, ncores, "m_core") < 0 || in_range(*evc, *nev, 0, ncores, "ev_core") < 0 ||
        in_range(*io, ni, 0, ni, "i_order") < 0)
        return -1;
    for (Py_ssize_t x = 0; x < nm; x++)
        if (m->m_task[x] < 0 || m->m_task[x] >= cores[m->m_core[x]]->a.n) goto bad;
    for (Py_ssize_t x = 0; x < *nev; x++)
        if ((*evb)[x] < 0 || (*evb)[x] >= cores[(*evc)[x]]->a.nb) goto bad;
    m->finished = PyMem_Calloc((size_t)ni + 1, 1);
    m->in_progress = PyMem_Calloc((size_t)ni + 1, 1);
    if (m->finished == NULL || m->in_progress == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
bad:
    PyErr_SetString(PyExc_ValueError, "members or visits out of range");
    return -1;
}

static void meetings_free(Meet *m) {
    PyMem_Free(m->finished);
    PyMem_Free(m->in_progress);
    PyMem_Free(m->order);
    PyMem_Free(m->own);
    PyMem_Free(m->own_src);
}

static PyObject *alone(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *core, *ids, *m_off, *m_core, *m_task, *last_old, *given, *ev_core, *ev_block, *i_order, *i_t;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOOO", &CoreType, &core, &ids, &m_off, &m_core, &m_task, &last_old, &given,
                          &ev_core, &ev_block, &i_order, &i_t))
        return NULL;
    Core *c = (Core *)core;
    Meet m = {.alone = 1};
    Views w = {.held = 0};
    Py_ssize_t nev;
    const int64_t *evc, *evb, *io;
    const double *it;
    PyObject *out = NULL;
    if (meetings(&m, &w, &c, 1, ids, m_off, m_core, m_task, last_old, ev_core, ev_block, i_order, i_t, &nev, &evc, &evb,
                 &io, &it) < 0)
        goto done;
    if ((m.given = view(&w, given, 8, m.ni, NULL, "given")) == NULL) goto done;
    m.order = PyMem_Malloc(sizeof(Py_ssize_t) * ((size_t)m.ni + 1));
    m.own = PyMem_Malloc(sizeof(double) * ((size_t)m.ni + 1));
    m.own_src = PyMem_Malloc(sizeof(int64_t) * ((size_t)m.ni + 1));
    if (m.order == NULL || m.own == NULL || m.own_src == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    double g;
    if (visit(&m, nev, evc, evb, io, it) < 0 || gained(c, &m, &g) < 0) goto done;
    PyObject *order = PyList_New(m.norder), *own = PyList_New(m.norder), *src = PyList_New(m.norder);
    if (order == NULL || own == NULL || src == NULL) goto lists;
    for (Py_ssize_t x = 0; x < m.norder; x++) {
        Py_ssize_t i = m.order[x];
        PyObject *a = PyLong_FromLongLong(m.ids[i]), *b = PyFloat_FromDouble(m.own[i]), *d = PyLong_FromLongLong(m.own_src[i]);
        if (a == NULL || b == NULL || d == NULL) {
            Py_XDECREF(a);
            Py_XDECREF(b);
            Py_XDECREF(d);
            goto lists;
        }
        PyList_SET_ITEM(order, x, a);
        PyList_SET_ITEM(own, x, b);
        PyList_SET_ITEM(src, x, d);
    }
    out = Py_BuildValue("(dOOOO)", g, order, own, src, m.cycled ? Py_True : Py_False);
lists:
    Py_XDECREF(order);
    Py_XDECREF(own);
    Py_XDECREF(src);
done:
    release(&w);
    meetings_free(&m);
    return out;
}

static PyObject *simulate(PyObject *module, PyObject *args) {
    (void)module;
    PyObject *ranks, *ids, *m_off, *m_core, *m_task, *last_old, *ev_core, *ev_block, *i_order, *i_t;
    if (!PyArg_ParseTuple(args, "O!OOOOOOOOO", &PyTuple_Type, &ranks, &ids, &m_off, &m_core, &m_task, &last_old, &ev_core,
                          &ev_block, &i_order, &i_t))
        return NULL;
    Py_ssize_t nc = PyTuple_GET_SIZE(ranks);
    for (Py_ssize_t x = 0; x < nc; x++)
        if (!PyObject_TypeCheck(PyTuple_GET_ITEM(ranks, x), &CoreType)) {
            PyErr_SetString(PyExc_TypeError, "simulate: a tuple of Core");
            return NULL;
        }
    Core **cores = (Core **)&PyTuple_GET_ITEM(ranks, 0);
    Meet m = {.alone = 0};
    Views w = {.held = 0};
    Py_ssize_t nev;
    const int64_t *evc, *evb, *io;
    const double *it;
    PyObject *out = NULL;
    if (meetings(&m, &w, cores, nc, ids, m_off, m_core, m_task, last_old, ev_core, ev_block, i_order, i_t, &nev, &evc, &evb,
                 &io, &it) < 0 ||
        visit(&m, nev, evc, evb, io, it) < 0)
        goto done;
    out = PyList_New(nc);
    if (out == NULL) goto done;
    for (Py_ssize_t x = 0; x < nc; x++) {
        double g;
        PyObject *v;
        if (gained(cores[x], &m, &g) < 0 || (v = PyFloat_FromDouble(g)) == NULL) {
            Py_CLEAR(out);
            goto done;
        }
        PyList_SET_ITEM(out, x, v);
    }
done:
    release(&w);
    meetings_free(&m);
    return out;
}

static PyMethodDef FUNCTIONS[] = {
    {"alone", alone, METH_VARARGS,
     "alone(core, ids, m_off, m_core, m_task, last_old, given, ev_core, ev_block, i_order, i_t) -> "
     "(gained, order, arrivals, sources, cycled): one rank re-timed alone (retime_ranks._Alone.run)."},
    {"simulate", simulate, METH_VARARGS,
     "simulate(cores, ids, m_off, m_core, m_task, last_old, ev_core, ev_block, i_order, i_t) -> each core's gain: "
     "every rank re-timed at once (retime.Simulation.run)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_retime_core", "One rank's re-timing under one scenario, in C.", -1, FUNCTIONS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__retime_core(void) {
    if (PyType_Ready(&CoreType) < 0 || PyType_Ready(&ShapeType) < 0) return NULL;
    s_instance = PyUnicode_InternFromString("instance");
    s_last_old = PyUnicode_InternFromString("last_old");
    if (s_instance == NULL || s_last_old == NULL) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    if (PyModule_AddObjectRef(m, "Core", (PyObject *)&CoreType) < 0 ||
        PyModule_AddObjectRef(m, "Shape", (PyObject *)&ShapeType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
