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
 * Core(shape, scenario, state, hide, no_wait, track, arrived, arrived_src)
 *   shape     the arrays of tracekit.analyzers.retime_shape.RankShape.packed(), in its order
 *   scenario  (dur, r_start, r_end, r_rate, r_cum, r_at_start, r_at_end): the task durations
 *             and the host time removed (tracekit.analyzers.retime_removal.HostRemoval)
 *   state     (s_new, e_new, e_src, b_shift, b_src, done): arrays it writes, which the caller
 *             reads (each task's re-timed start, end and source; each block's shift and source;
 *             per stream, the tasks re-timed)
 *   arrived, arrived_src   dicts it fills: each collective's re-timed arrival and its source
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
    SH_COMP_TASK, SH_COMP_END,
    N_SHAPE
};
enum { SC_DUR, SC_R_START, SC_R_END, SC_R_RATE, SC_R_CUM, SC_AT_START, SC_AT_END, N_SCEN };
enum { ST_S_NEW, ST_E_NEW, ST_E_SRC, ST_B_SHIFT, ST_B_SRC, ST_DONE, N_STATE };
#define N_BUF (N_SHAPE + N_SCEN + N_STATE)

typedef struct {
    PyObject_HEAD
    Py_buffer buf[N_BUF];
    int held;
    Py_ssize_t n, ns, nb, nc, nr;
    const double *start, *end, *arrival, *lch, *delay, *overlap, *dur;
    const int64_t *instance, *place, *stream_of, *dep;
    const uint8_t *free_, *launched, *first_unlaunched;
    const int64_t *s_idx, *s_off, *st_idx, *st_off;
    const double *b_start, *b_end, *b_drain, *b_own, *b_tail;
    const uint8_t *b_waited, *b_coll, *b_kept;
    const int64_t *aw, *aw_off, *awf, *awf_off, *comp_task;
    const double *comp_end;
    const double *r_start, *r_end, *r_rate, *r_cum, *at_start, *at_end;
    double *s_new, *e_new, *b_shift;
    int64_t *e_src, *b_src, *done;
    Py_ssize_t b_done, b_busy;
    int hide, no_wait, track;
    PyObject *arrived, *arrived_src;
} Core;

static PyObject *s_instance, *s_last_old;

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

static int stream_until(Core *c, Py_ssize_t j, Py_ssize_t last, PyObject *sim);
static int process_through(Core *c, Py_ssize_t last, PyObject *sim);
static int ensure_free(Core *c, Py_ssize_t k, PyObject *sim);

static int meet(PyObject *sim, int64_t inst) {
    PyObject *i = PyLong_FromLongLong(inst);
    if (i == NULL) return -1;
    PyObject *r = PyObject_CallMethodOneArg(sim, s_instance, i);
    Py_DECREF(i);
    if (r == NULL) return -1;
    Py_DECREF(r);
    return 0;
}

/* HostRemoval.removed_one */
static inline double removed_one(const Core *c, double t) {
    Py_ssize_t n = c->nr;
    if (n == 0) return 0.0;
    Py_ssize_t i = bisect_right(c->r_end, n, t);
    if (i >= n) return c->r_cum[i];
    return c->r_cum[i] + pmax(t - c->r_start[i], 0.0) * c->r_rate[i];
}

static inline double shift_at_start_one(const Core *c, Py_ssize_t b) {
    if (b > 0) return c->b_shift[b - 1] + c->at_start[b] - c->at_end[b - 1];
    return c->at_start[b];
}

static inline int64_t src_at_start(const Core *c, Py_ssize_t b) { return b > 0 ? c->b_src[b - 1] : NO_SOURCE; }

static int after_completion_one(Core *c, double t, Py_ssize_t b, double before, PyObject *sim, Timed *out) {
    Py_ssize_t i = bisect_right(c->comp_end, c->nc, t) - 1;
    if (i < 0 || c->comp_end[i] < c->b_start[b]) {
        out->t = before;
        out->src = src_at_start(c, b);
        return 0;
    }
    Py_ssize_t k = (Py_ssize_t)c->comp_task[i];
    if (ensure_free(c, k, sim) < 0) return -1;
    double gained = c->end[k] - c->e_new[k];
    double reach = before + (t - c->b_start[b]);
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
static int host_shift_one_(Core *c, double t, PyObject *sim, Timed *out);
static int host_shift_one(Core *c, double t, PyObject *sim, Timed *out) {
    if (Py_EnterRecursiveCall(" while re-timing a rank")) return -1;
    int r = host_shift_one_(c, t, sim, out);
    Py_LeaveRecursiveCall();
    return r;
}

static int host_shift_one_(Core *c, double t, PyObject *sim, Timed *out) {
    double removed = c->nr ? removed_one(c, t) : 0.0;
    Py_ssize_t j = bisect_right(c->b_start, c->nb, t) - 1;
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
    double end = c->b_end[j];
    int resumed = t >= end || (c->b_waited[j] && t >= c->b_drain[j]);
    Py_ssize_t through = resumed ? j : j - 1;
    if (through >= c->b_done && process_through(c, through, sim) < 0) return -1;
    if (t >= end) {
        out->t = c->b_shift[j] + removed - c->at_end[j];
        out->src = c->b_src[j];
        return 0;
    }
    double before = shift_at_start_one(c, j);
    if (c->nc && c->b_coll[j]) return after_completion_one(c, t, j, before, sim, out);
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
static int launch_one(Core *c, Py_ssize_t k, PyObject *sim, Timed *out) {
    if (c->first_unlaunched[k]) {
        out->t = c->start[k] - c->delay[k];
        out->src = NO_SOURCE;
        return 0;
    }
    if (!c->launched[k]) {
        out->t = NEVER;
        out->src = NO_SOURCE;
        return 0;
    }
    double lch = c->lch[k];
    Timed shift;
    if (host_shift_one(c, lch, sim, &shift) < 0) return -1;
    out->t = lch - shift.t;
    out->src = shift.src;
    return 0;
}

/* _Rank.block */
static int block(Core *c, PyObject *sim) {
    Py_ssize_t b = c->b_done;
    c->b_busy = b;
    double start_new = c->b_start[b] - shift_at_start_one(c, b);
    double drain = NEVER;
    int64_t drain_src = NO_SOURCE;
    for (int64_t a = c->aw_off[b]; a < c->aw_off[b + 1]; a++) {
        Py_ssize_t j = (Py_ssize_t)c->aw[3 * a], last = (Py_ssize_t)c->aw[3 * a + 1], k = (Py_ssize_t)c->aw[3 * a + 2];
        if (c->done[j] <= last && stream_until(c, j, last, sim) < 0) return -1;
        if (c->e_new[k] > drain) {
            drain = c->e_new[k];
            drain_src = c->e_src[k];
        }
    }
    for (int64_t a = c->awf_off[b]; a < c->awf_off[b + 1]; a++) {
        Py_ssize_t k = (Py_ssize_t)c->awf[a];
        if (ensure_free(c, k, sim) < 0) return -1;
        if (c->e_new[k] > drain) {
            drain = c->e_new[k];
            drain_src = c->e_src[k];
        }
    }
    double ret = start_new + c->b_own[b];
    int64_t src = src_at_start(c, b);
    if ((!c->no_wait || c->b_kept[b]) && drain + c->b_tail[b] > ret) {
        ret = drain + c->b_tail[b];
        src = drain_src;
    }
    c->b_shift[b] = c->b_end[b] - ret;
    c->b_src[b] = src;
    c->b_done = b + 1;
    c->b_busy = -1;
    return 0;
}

/* _Rank.process_through */
static int process_through(Core *c, Py_ssize_t last, PyObject *sim) {
    if (last < c->b_done) return 0;
    if (last > c->nb - 1) last = c->nb - 1;
    while (c->b_done <= last) {
        if (block(c, sim) < 0) return -1;
    }
    return 0;
}

static inline double prev_end(const Core *c, Py_ssize_t j, Py_ssize_t place) {
    if (place == 0) return NEVER;
    return c->e_new[c->s_idx[c->s_off[j] + place - 1]];
}

static inline int64_t prev_src(const Core *c, Py_ssize_t j, Py_ssize_t place) {
    if (place == 0) return NO_SOURCE;
    return c->e_src[c->s_idx[c->s_off[j] + place - 1]];
}

/* _Rank._dep_end */
static int dep_end(Core *c, Py_ssize_t k, PyObject *sim, Timed *out) {
    int64_t m = c->dep[k];
    if (m < 0) {
        out->t = NEVER;
        out->src = NO_SOURCE;
        return 0;
    }
    if (isnan(c->e_new[m]) && stream_until(c, (Py_ssize_t)c->stream_of[m], (Py_ssize_t)c->place[m], sim) < 0) return -1;
    out->t = c->e_new[m];
    out->src = c->e_src[m];
    return 0;
}

/* _Rank._start_after */
static int start_after(Core *c, Py_ssize_t k, Timed launch, PyObject *sim, Timed *out) {
    Py_ssize_t j = (Py_ssize_t)c->stream_of[k], place = (Py_ssize_t)c->place[k];
    Timed dep;
    if (dep_end(c, k, sim, &dep) < 0) return -1;
    double prev = prev_end(c, j, place) - c->overlap[k];
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
    out->t = start + c->delay[k];
    out->src = src;
    return 0;
}

/* _Rank._one */
static int one(Core *c, Py_ssize_t j, Py_ssize_t place, PyObject *sim) {
    Py_ssize_t k = (Py_ssize_t)c->s_idx[c->s_off[j] + place];
    Timed ignored, launch, start;
    if (dep_end(c, k, sim, &ignored) < 0) return -1;
    if (c->done[j] != place) return 0;
    if (launch_one(c, k, sim, &launch) < 0) return -1;
    if (start_after(c, k, launch, sim, &start) < 0) return -1;
    c->s_new[k] = start.t;
    c->e_new[k] = start.t + c->dur[k];
    c->e_src[k] = start.src;
    c->done[j] = place + 1;
    return 0;
}

/* _Rank._run_few (and _run: the same sums in the same order): tasks lo:hi of stream j. */
static int run(Core *c, Py_ssize_t j, Py_ssize_t lo, Py_ssize_t hi, PyObject *sim) {
    const int64_t *ks = c->s_idx + c->s_off[j] + lo;
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
        if (launch_one(c, (Py_ssize_t)ks[i], sim, &a[i]) < 0) {
            if (a != few) PyMem_Free(a);
            return -1;
        }
    }
    Py_ssize_t place = (Py_ssize_t)c->place[ks[0]];
    double carry = prev_end(c, j, place);
    int64_t carry_src = prev_src(c, j, place);
    double cum = 0.0, most = NEVER;
    int64_t most_src = NO_SOURCE;
    for (Py_ssize_t i = 0; i < n; i++) {
        Py_ssize_t k = (Py_ssize_t)ks[i];
        double d = c->dur[k], w = c->delay[k];
        cum += w + d - c->overlap[k];
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

static int collective_arrival(Core *c, Py_ssize_t k, PyObject *sim, Timed *start, Timed *arrival) {
    Timed a;
    if (launch_one(c, k, sim, &a) < 0) return -1;
    int free_ = c->free_[k];
    if (free_) {
        start->t = a.t + c->delay[k];
        start->src = a.src;
    } else {
        Py_ssize_t j = (Py_ssize_t)c->stream_of[k], place = (Py_ssize_t)c->place[k];
        if (stream_until(c, j, place - 1, sim) < 0) return -1;
        if (start_after(c, k, a, sim, start) < 0) return -1;
    }
    *arrival = (free_ && c->launched[k]) ? a : *start;
    PyObject *key = PyLong_FromSsize_t(k);
    if (key == NULL) return -1;
    PyObject *t = PyFloat_FromDouble(arrival->t);
    PyObject *s = PyLong_FromLongLong(arrival->src);
    int err = t == NULL || s == NULL || PyDict_SetItem(c->arrived, key, t) < 0 || PyDict_SetItem(c->arrived_src, key, s) < 0;
    Py_XDECREF(t);
    Py_XDECREF(s);
    Py_DECREF(key);
    return err ? -1 : 0;
}

static void finish_collective(Core *c, Py_ssize_t k, Timed start, Timed last, double last_old) {
    double tail = c->end[k] - pmax(c->start[k], last_old);
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
    if (!c->free_[k]) {
        Py_ssize_t j = (Py_ssize_t)c->stream_of[k];
        int64_t next = c->place[k] + 1;
        if (next > c->done[j]) c->done[j] = next;
    }
}

/* _Rank._collective_alone */
static int collective_alone(Core *c, Py_ssize_t k, PyObject *sim) {
    Timed start, arrival;
    if (collective_arrival(c, k, sim, &start, &arrival) < 0) return -1;
    double old_last = c->arrival[k];
    PyObject *last_old = PyObject_GetAttr(sim, s_last_old);
    if (last_old == NULL) return -1;
    PyObject *key = PyLong_FromLongLong(c->instance[k]);
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
    Timed last = {old_last - (c->arrival[k] - arrival.t), arrival.src};
    finish_collective(c, k, start, last, old_last);
    return 0;
}

/* _Rank.ensure_free */
static int ensure_free(Core *c, Py_ssize_t k, PyObject *sim) {
    if (!isnan(c->e_new[k])) return 0;
    int64_t inst = c->instance[k];
    if (inst >= 0 && meet(sim, inst) < 0) return -1;
    if (isnan(c->e_new[k])) return collective_alone(c, k, sim);
    return 0;
}

/* _Rank.stream_until (its recursion counted, as host_shift_one's) */
static int stream_until_(Core *c, Py_ssize_t j, Py_ssize_t last, PyObject *sim);
static int stream_until(Core *c, Py_ssize_t j, Py_ssize_t last, PyObject *sim) {
    if (Py_EnterRecursiveCall(" while re-timing a rank")) return -1;
    int r = stream_until_(c, j, last, sim);
    Py_LeaveRecursiveCall();
    return r;
}

static int stream_until_(Core *c, Py_ssize_t j, Py_ssize_t last, PyObject *sim) {
    const int64_t *idx = c->s_idx + c->s_off[j];
    const int64_t *stops = c->st_idx + c->st_off[j];
    Py_ssize_t nstops = (Py_ssize_t)(c->st_off[j + 1] - c->st_off[j]);
    while (c->done[j] <= last) {
        Py_ssize_t lo = (Py_ssize_t)c->done[j];
        Py_ssize_t s = bisect_left_i(stops, nstops, lo);
        Py_ssize_t hi = s < nstops ? (Py_ssize_t)stops[s] : last + 1;
        if (hi > last + 1) hi = last + 1;
        if (hi > lo && run(c, j, lo, hi, sim) < 0) return -1;
        if (hi > last) continue;
        Py_ssize_t k = (Py_ssize_t)idx[hi];
        int64_t inst = c->instance[k];
        if (inst < 0) {
            if (one(c, j, hi, sim) < 0) return -1;
            continue;
        }
        if (meet(sim, inst) < 0) return -1;
        if (c->done[j] == hi) {
            if (collective_alone(c, k, sim) < 0) return -1;
            c->done[j] = hi + 1;
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
    if (process_through(c, bisect_right(c->b_end, c->nb, t) - 1, sim) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Core_stream_until(Core *c, PyObject *args) {
    Py_ssize_t j, last;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "nnO", &j, &last, &sim)) return NULL;
    if (check_index(c, j, c->ns, "stream") < 0) return NULL;
    Py_ssize_t size = (Py_ssize_t)(c->s_off[j + 1] - c->s_off[j]);
    if (last >= size) last = size - 1;
    if (stream_until(c, j, last, sim) < 0) return NULL;
    Py_RETURN_NONE;
}

static PyObject *Core_host_shift_one(Core *c, PyObject *args) {
    double t;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "dO", &t, &sim)) return NULL;
    Timed out;
    if (host_shift_one(c, t, sim, &out) < 0) return NULL;
    return timed2(out);
}

static PyObject *Core_collective_arrival(Core *c, PyObject *args) {
    Py_ssize_t k;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "nO", &k, &sim)) return NULL;
    if (check_index(c, k, c->n, "task") < 0) return NULL;
    Timed start, arrival;
    if (collective_arrival(c, k, sim, &start, &arrival) < 0) return NULL;
    return Py_BuildValue("(dLdL)", start.t, (long long)start.src, arrival.t, (long long)arrival.src);
}

static PyObject *Core_finish_collective(Core *c, PyObject *args) {
    Py_ssize_t k;
    Timed start, last;
    long long start_src, last_src;
    double last_old;
    if (!PyArg_ParseTuple(args, "ndL(dL)d", &k, &start.t, &start_src, &last.t, &last_src, &last_old)) return NULL;
    if (check_index(c, k, c->n, "task") < 0) return NULL;
    start.src = start_src;
    last.src = last_src;
    finish_collective(c, k, start, last, last_old);
    Py_RETURN_NONE;
}

static PyObject *Core_ensure_free(Core *c, PyObject *args) {
    Py_ssize_t k;
    PyObject *sim;
    if (!PyArg_ParseTuple(args, "nO", &k, &sim)) return NULL;
    if (check_index(c, k, c->n, "task") < 0) return NULL;
    if (ensure_free(c, k, sim) < 0) return NULL;
    Py_RETURN_NONE;
}

static void Core_dealloc(Core *c) {
    for (int i = 0; i < c->held; i++) PyBuffer_Release(&c->buf[i]);
    Py_XDECREF(c->arrived);
    Py_XDECREF(c->arrived_src);
    Py_TYPE(c)->tp_free((PyObject *)c);
}

/* Each array of ``seq`` (a tuple of ``count``) held: C-contiguous, ``itemsize`` bytes an item,
 * ``sizes[i]`` items (-1: any). */
static int hold(Core *c, PyObject *seq, int count, const Py_ssize_t *sizes, const int *itemsizes, int writable, const char *what) {
    if (!PyTuple_Check(seq) || PyTuple_GET_SIZE(seq) != count) {
        PyErr_Format(PyExc_TypeError, "%s: a tuple of %d arrays", what, count);
        return -1;
    }
    for (int i = 0; i < count; i++) {
        Py_buffer *v = &c->buf[c->held];
        int flags = PyBUF_C_CONTIGUOUS | (writable ? PyBUF_WRITABLE : 0);
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(seq, i), v, flags) < 0) return -1;
        c->held++;
        if (v->itemsize != itemsizes[i] || (sizes[i] >= 0 && v->len != sizes[i] * itemsizes[i]) || v->ndim != 1) {
            PyErr_Format(PyExc_ValueError, "%s[%d]: %zd bytes of %zd-byte items, not %zd of %d", what, i, v->len,
                         v->itemsize, sizes[i], itemsizes[i]);
            return -1;
        }
    }
    return 0;
}

#define LEN(i, size) (c->buf[i].len / (size))
#define PTR(i) (c->buf[i].buf)

static PyObject *Core_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *shape, *scen, *state, *arrived, *arrived_src;
    int hide, no_wait, track;
    static char *kw[] = {"shape", "scenario", "state", "hide", "no_wait", "track", "arrived", "arrived_src", NULL};
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "O!O!O!pppO!O!", kw, &PyTuple_Type, &shape, &PyTuple_Type, &scen,
                                     &PyTuple_Type, &state, &hide, &no_wait, &track, &PyDict_Type, &arrived, &PyDict_Type,
                                     &arrived_src))
        return NULL;
    Core *c = (Core *)type->tp_alloc(type, 0);
    if (c == NULL) return NULL;
    c->held = 0;
    c->arrived = Py_NewRef(arrived);
    c->arrived_src = Py_NewRef(arrived_src);
    c->hide = hide;
    c->no_wait = no_wait;
    c->track = track;
    c->b_done = 0;
    c->b_busy = -1;
    if (PyTuple_GET_SIZE(shape) != N_SHAPE || PyTuple_GET_SIZE(scen) != N_SCEN || PyTuple_GET_SIZE(state) != N_STATE) {
        PyErr_SetString(PyExc_TypeError, "Core: shape, scenario and state of the wrong lengths");
        goto fail;
    }
    /* the sizes: tasks, streams, blocks, completions, removals, from the arrays that set them */
    {
        Py_buffer probe;
        Py_ssize_t got[4];
        int which[4] = {SH_START, SH_S_OFF, SH_B_START, SH_COMP_TASK};
        for (int i = 0; i < 4; i++) {
            if (PyObject_GetBuffer(PyTuple_GET_ITEM(shape, which[i]), &probe, PyBUF_C_CONTIGUOUS) < 0) goto fail;
            got[i] = probe.len / (probe.itemsize ? probe.itemsize : 1);
            PyBuffer_Release(&probe);
        }
        c->n = got[0];
        c->ns = got[1] - 1;
        c->nb = got[2];
        c->nc = got[3];
        if (PyObject_GetBuffer(PyTuple_GET_ITEM(scen, SC_R_START), &probe, PyBUF_C_CONTIGUOUS) < 0) goto fail;
        c->nr = probe.len / (probe.itemsize ? probe.itemsize : 1);
        PyBuffer_Release(&probe);
        if (c->ns < 0) {
            PyErr_SetString(PyExc_ValueError, "Core: no stream offsets");
            goto fail;
        }
    }
    {
        Py_ssize_t n = c->n, ns = c->ns, nb = c->nb, nc = c->nc, nr = c->nr;
        Py_ssize_t sh_sizes[N_SHAPE] = {n, n, n, n, n, n, n, n, n, n, n, n, n, -1, ns + 1, -1, ns + 1,
                                        nb, nb, nb, nb, nb, nb, nb, nb, -1, nb + 1, -1, nb + 1, nc, nc};
        int sh_items[N_SHAPE] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 1, 1, 1, 8, 8, 8, 8,
                                 8, 8, 8, 8, 8, 1, 1, 1, 8, 8, 8, 8, 8, 8};
        Py_ssize_t sc_sizes[N_SCEN] = {n, nr, nr, nr, nr + 1, nb, nb};
        int sc_items[N_SCEN] = {8, 8, 8, 8, 8, 8, 8};
        Py_ssize_t st_sizes[N_STATE] = {n, n, n, nb, nb, ns};
        int st_items[N_STATE] = {8, 8, 8, 8, 8, 8};
        if (hold(c, shape, N_SHAPE, sh_sizes, sh_items, 0, "shape") < 0) goto fail;
        if (hold(c, scen, N_SCEN, sc_sizes, sc_items, 0, "scenario") < 0) goto fail;
        if (hold(c, state, N_STATE, st_sizes, st_items, 1, "state") < 0) goto fail;
    }
    c->start = PTR(SH_START);
    c->end = PTR(SH_END);
    c->arrival = PTR(SH_ARRIVAL);
    c->lch = PTR(SH_LCH);
    c->delay = PTR(SH_DELAY);
    c->overlap = PTR(SH_OVERLAP);
    c->instance = PTR(SH_INSTANCE);
    c->place = PTR(SH_PLACE);
    c->stream_of = PTR(SH_STREAM_OF);
    c->dep = PTR(SH_DEP);
    c->free_ = PTR(SH_FREE);
    c->launched = PTR(SH_LAUNCHED);
    c->first_unlaunched = PTR(SH_FIRST_UNLAUNCHED);
    c->s_idx = PTR(SH_S_IDX);
    c->s_off = PTR(SH_S_OFF);
    c->st_idx = PTR(SH_ST_IDX);
    c->st_off = PTR(SH_ST_OFF);
    c->b_start = PTR(SH_B_START);
    c->b_end = PTR(SH_B_END);
    c->b_drain = PTR(SH_B_DRAIN);
    c->b_own = PTR(SH_B_OWN);
    c->b_tail = PTR(SH_B_TAIL);
    c->b_waited = PTR(SH_B_WAITED);
    c->b_coll = PTR(SH_B_COLL);
    c->b_kept = PTR(SH_B_KEPT);
    c->aw = PTR(SH_AW);
    c->aw_off = PTR(SH_AW_OFF);
    c->awf = PTR(SH_AWF);
    c->awf_off = PTR(SH_AWF_OFF);
    c->comp_task = PTR(SH_COMP_TASK);
    c->comp_end = PTR(SH_COMP_END);
    c->dur = PTR(N_SHAPE + SC_DUR);
    c->r_start = PTR(N_SHAPE + SC_R_START);
    c->r_end = PTR(N_SHAPE + SC_R_END);
    c->r_rate = PTR(N_SHAPE + SC_R_RATE);
    c->r_cum = PTR(N_SHAPE + SC_R_CUM);
    c->at_start = PTR(N_SHAPE + SC_AT_START);
    c->at_end = PTR(N_SHAPE + SC_AT_END);
    c->s_new = PTR(N_SHAPE + N_SCEN + ST_S_NEW);
    c->e_new = PTR(N_SHAPE + N_SCEN + ST_E_NEW);
    c->e_src = PTR(N_SHAPE + N_SCEN + ST_E_SRC);
    c->b_shift = PTR(N_SHAPE + N_SCEN + ST_B_SHIFT);
    c->b_src = PTR(N_SHAPE + N_SCEN + ST_B_SRC);
    c->done = PTR(N_SHAPE + N_SCEN + ST_DONE);
    /* the offsets and indexes must stay inside their arrays: checked once, not at every read */
    {
        Py_ssize_t n_sidx = LEN(SH_S_IDX, 8), n_stidx = LEN(SH_ST_IDX, 8), n_aw = LEN(SH_AW, 8), n_awf = LEN(SH_AWF, 8);
        const int64_t *offs[4] = {c->s_off, c->st_off, c->aw_off, c->awf_off};
        Py_ssize_t counts[4] = {c->ns, c->ns, c->nb, c->nb};
        Py_ssize_t limits[4] = {n_sidx, n_stidx, n_aw / 3, n_awf};
        for (int i = 0; i < 4; i++)
            for (Py_ssize_t x = 0; x <= counts[i]; x++)
                if (offs[i][x] < 0 || offs[i][x] > limits[i] || (x > 0 && offs[i][x] < offs[i][x - 1])) {
                    PyErr_SetString(PyExc_ValueError, "Core: offsets out of range");
                    goto fail;
                }
        for (Py_ssize_t x = 0; x < n_sidx; x++)
            if (c->s_idx[x] < 0 || c->s_idx[x] >= c->n) goto bad_index;
        for (Py_ssize_t x = 0; x < n_aw / 3; x++)
            if (c->aw[3 * x] < 0 || c->aw[3 * x] >= c->ns || c->aw[3 * x + 2] < 0 || c->aw[3 * x + 2] >= c->n) goto bad_index;
        for (Py_ssize_t x = 0; x < n_awf; x++)
            if (c->awf[x] < 0 || c->awf[x] >= c->n) goto bad_index;
        for (Py_ssize_t x = 0; x < c->nc; x++)
            if (c->comp_task[x] < 0 || c->comp_task[x] >= c->n) goto bad_index;
        for (Py_ssize_t x = 0; x < c->n; x++)
            if (c->dep[x] >= c->n || c->stream_of[x] < 0 || c->stream_of[x] >= (c->ns ? c->ns : 1)) goto bad_index;
    }
    return (PyObject *)c;
bad_index:
    PyErr_SetString(PyExc_ValueError, "Core: a task or stream index out of range");
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
    {NULL, NULL, 0, NULL},
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

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_retime_core", "One rank's re-timing under one scenario, in C.", -1, NULL, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__retime_core(void) {
    if (PyType_Ready(&CoreType) < 0) return NULL;
    s_instance = PyUnicode_InternFromString("instance");
    s_last_old = PyUnicode_InternFromString("last_old");
    if (s_instance == NULL || s_last_old == NULL) return NULL;
    PyObject *m = PyModule_Create(&MODULE);
    if (m == NULL) return NULL;
    Py_INCREF(&CoreType);
    if (PyModule_AddObject(m, "Core", (PyObject *)&CoreType) < 0) {
        Py_DECREF(&CoreType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
