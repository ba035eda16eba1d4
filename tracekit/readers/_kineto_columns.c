/*
 * tracekit.readers._kineto_columns: a chunk of Kineto events (a JSON array) -> raw columns.
 *
 * One pass over the text writes the columns of tracekit.readers.kineto_decode.raw_frames
 * straight into arrays: no Python object per event. It gives what the reader makes of the
 * chunk with msgspec (tracekit.readers.kineto.decode_chunk): the typed decoder's frames, or,
 * where that rejects the chunk, the lenient decoder's. It accepts what the typed decoder
 * accepts, and besides only text where an integer argument belongs (AMD's "bytes": "128"),
 * read as the lenient path reads it and as pid and tid are always read (value_id); anything
 * else (a value of another type, a key written with an escape, a duplicate key, a number
 * beyond int64, malformed JSON...) returns None, and the caller decodes the chunk with
 * msgspec, which decides. So this module may decline any chunk, but never answers differently.
 *
 * decode(buffer) -> None | (n, instant, uniques, codes, floats, ints, memory)
 *   n        the kept events (durations "X" and instants "i"/"I"), in file order
 *   instant  n bytes, 1 for an instant
 *   uniques  the distinct strings of the string columns; uniques[0] is None (no value)
 *   codes    4 bytes objects of n uint32 (cat, name, coll_name, pg_name): indexes into uniques
 *   floats   2 (values, valid) pairs (ts, dur): n doubles, and n bytes or None when all valid
 *   ints     12 (values, valid) pairs (pid, tid, then the Args fields in their order, then threads:
 *            the product of a launch's "grid" and "block", see launch_threads): int64
 *   memory   (m, (ts values, valid), 6 (values, valid) pairs): the "[memory]" instants
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <math.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif
#if defined(__GLIBC__)
#include <locale.h>
#include <stdlib.h>
#define KINETO_STRTOD_L
/* The C locale, for numbers that the fast path does not convert exactly. */
static locale_t c_locale;
#endif

enum { S_CAT, S_NAME, S_COLL, S_PG, N_STR };
enum { I_PID, I_TID, I_EXT, I_EXT2021, I_CORR, I_DEVICE, I_STREAM, I_BYTES, I_NELEMS, I_GROUP, I_SEQ, I_THREADS, N_INT };
enum { D_GRID, D_BLOCK, N_DIMS };
/* tracekit.model.schema.THREADS_LIMIT: a launch of this many threads or more has no count. */
#define THREADS_LIMIT ((int64_t)1 << 31)
enum { M_DEVTYPE, M_DEVID, M_ADDR, M_BYTES, M_ALLOC, M_RESERVED, N_MEM };
enum { F_TS, F_DUR, N_FLOAT };
enum { PH_NONE, PH_X, PH_INSTANT, PH_SKIP };

#define MAX_DEPTH 64

/* Declined: the caller decodes the chunk with msgspec. A Python error is set only for
 * failures of this process (no memory), which the caller sees as an exception. */
#define DECLINE 1
#define FAIL 2
/* A string longer than MAX_STRING bytes: no profiler writes one (the longest kernel names are a
 * few KiB); the file is refused before the string is copied (a ValueError naming its length). */
#define TOO_LONG 3
#define MAX_STRING ((size_t)16 << 20)

typedef struct {
    const char *p;
    const char *end;
} Cursor;

/* ---------------------------------------------------------------- the interned strings */

/* The scan runs without the GIL: it touches no Python object and allocates with the raw
 * allocator. The distinct strings are kept as spans of the text, made Python strings after. */

typedef struct {
    const char *text; /* the raw JSON text between the quotes, in the caller's buffer */
    uint32_t len;
    uint32_t index; /* in the uniques; 0 marks an empty slot */
    uint64_t hash;
} Slot;

typedef struct {
    const char *text;
    uint32_t len;
    uint8_t escaped;
    uint8_t memory; /* is it "[memory]" */
} Span;

typedef struct {
    Slot *slots;
    size_t mask;
    Span *spans; /* per unique; spans[0] is no value */
    size_t count, cap;
    char *scratch; /* an escaped string, unescaped */
    size_t scratch_cap;
    size_t too_long; /* the length of the string that was TOO_LONG */
} Strings;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xFF51AFD7ED558CCDull;
        h ^= h >> 32;
        s += 8;
        n -= 8;
    }
    if (n) {
        uint64_t w = 0;
        memcpy(&w, s, n);
        h = (h ^ w) * 0xC4CEB9FE1A85EC53ull;
        h ^= h >> 29;
    }
    return h ^ (h >> 31);
}

static int strings_init(Strings *t) {
    memset(t, 0, sizeof(*t));
    t->mask = 4095;
    t->slots = PyMem_RawCalloc(t->mask + 1, sizeof(Slot));
    t->cap = 1024;
    t->spans = PyMem_RawCalloc(t->cap, sizeof(Span));
    t->count = 1;
    return t->slots && t->spans ? 0 : FAIL;
}

static void strings_free(Strings *t) {
    PyMem_RawFree(t->slots);
    PyMem_RawFree(t->spans);
    PyMem_RawFree(t->scratch);
}

static int strings_grow(Strings *t) {
    size_t size = (t->mask + 1) * 2;
    Slot *slots = PyMem_RawCalloc(size, sizeof(Slot));
    if (!slots) return FAIL;
    for (size_t i = 0; i <= t->mask; i++) {
        if (t->slots[i].index) {
            size_t j = t->slots[i].hash & (size - 1);
            while (slots[j].index) j = (j + 1) & (size - 1);
            slots[j] = t->slots[i];
        }
    }
    PyMem_RawFree(t->slots);
    t->slots = slots;
    t->mask = size - 1;
    return 0;
}

static int hex4(const char *s, uint32_t *out) {
    uint32_t v = 0;
    for (int i = 0; i < 4; i++) {
        char c = s[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (uint32_t)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (uint32_t)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (uint32_t)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* The text between the quotes with its escapes undone, as UTF-8 in t->scratch. The escapes
 * were checked by scan_string: a surrogate is the high half of a pair. */
static int unescape(Strings *t, const char *s, size_t n, size_t *out_len) {
    if (t->scratch_cap < n) {
        char *p = PyMem_RawRealloc(t->scratch, n);
        if (!p) return FAIL;
        t->scratch = p;
        t->scratch_cap = n;
    }
    char *o = t->scratch;
    const char *end = s + n;
    while (s < end) {
        if (*s != '\\') {
            *o++ = *s++;
            continue;
        }
        char c = s[1];
        s += 2;
        switch (c) {
        case '"': *o++ = '"'; break;
        case '\\': *o++ = '\\'; break;
        case '/': *o++ = '/'; break;
        case 'b': *o++ = '\b'; break;
        case 'f': *o++ = '\f'; break;
        case 'n': *o++ = '\n'; break;
        case 'r': *o++ = '\r'; break;
        case 't': *o++ = '\t'; break;
        case 'u': {
            uint32_t cp, low;
            if (hex4(s, &cp) < 0) return DECLINE;
            s += 4;
            if (cp >= 0xD800 && cp <= 0xDFFF) { /* a pair, as scan_string checked */
                if (cp >= 0xDC00 || end - s < 6 || s[0] != '\\' || s[1] != 'u' || hex4(s + 2, &low) < 0 ||
                    low < 0xDC00 || low > 0xDFFF)
                    return DECLINE;
                s += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            }
            if (cp < 0x80) {
                *o++ = (char)cp;
            } else if (cp < 0x800) { /* 6 bytes of escape become at most 3: it fits */
                *o++ = (char)(0xC0 | (cp >> 6));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *o++ = (char)(0xE0 | (cp >> 12));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            } else { /* 12 bytes of escapes become 4 */
                *o++ = (char)(0xF0 | (cp >> 18));
                *o++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *o++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *o++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: return DECLINE;
        }
    }
    *out_len = (size_t)(o - t->scratch);
    return 0;
}

/* The index among the distinct strings of the JSON string text s[0:n] (escaped when `escaped`). */
static int intern(Strings *t, const char *s, size_t n, int escaped, uint32_t *index) {
    if (n > MAX_STRING) {
        t->too_long = n;
        return TOO_LONG;
    }
    uint64_t h = hash_bytes(s, n);
    size_t j = h & t->mask;
    while (t->slots[j].index) {
        Slot *slot = &t->slots[j];
        if (slot->hash == h && slot->len == n && memcmp(slot->text, s, n) == 0) {
            *index = slot->index;
            return 0;
        }
        j = (j + 1) & t->mask;
    }
    const char *text = s;
    size_t len = n;
    if (escaped) {
        int rc = unescape(t, s, n, &len);
        if (rc) return rc;
        text = t->scratch;
    }
    if (t->count == t->cap) {
        Span *spans = PyMem_RawRealloc(t->spans, t->cap * 2 * sizeof(Span));
        if (!spans) return FAIL;
        t->spans = spans;
        t->cap *= 2;
    }
    uint32_t count = (uint32_t)t->count++;
    Span *span = &t->spans[count];
    span->text = s;
    span->len = (uint32_t)n;
    span->escaped = (uint8_t)escaped;
    span->memory = len == 8 && memcmp(text, "[memory]", 8) == 0;
    Slot *slot = &t->slots[j];
    slot->text = s;
    slot->len = (uint32_t)n;
    slot->index = count;
    slot->hash = h;
    *index = count;
    if (t->count * 2 > t->mask) return strings_grow(t);
    return 0;
}

/* The distinct strings as a list (None first), made with the GIL held; None when one is no
 * UTF-8 (msgspec says so). */
static PyObject *uniques(Strings *t, int *rc) {
    PyObject *list = PyList_New((Py_ssize_t)t->count);
    if (!list) return NULL;
    PyList_SET_ITEM(list, 0, Py_NewRef(Py_None));
    for (size_t i = 1; i < t->count; i++) {
        Span *span = &t->spans[i];
        const char *text = span->text;
        size_t len = span->len;
        if (span->escaped) {
            *rc = unescape(t, span->text, span->len, &len);
            if (*rc) {
                Py_DECREF(list);
                if (*rc == FAIL) PyErr_NoMemory();
                return NULL;
            }
            text = t->scratch;
        }
        PyObject *value = PyUnicode_DecodeUTF8(text, (Py_ssize_t)len, "strict");
        if (!value) {
            Py_DECREF(list);
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyErr_Clear();
                *rc = DECLINE;
            }
            return NULL;
        }
        PyList_SET_ITEM(list, (Py_ssize_t)i, value);
    }
    return list;
}

/* ---------------------------------------------------------------- the columns */

/* A column of numbers (`size` bytes each) and whether each is there. */
typedef struct {
    void *values;
    uint8_t *ok;
} Valued;

typedef struct {
    size_t n, cap;
    uint8_t *instant;
    uint32_t *codes[N_STR];
    Valued floats[N_FLOAT]; /* double */
    Valued ints[N_INT];     /* int64_t */
    /* the "[memory]" instants */
    size_t m, mcap;
    Valued mem_ts;      /* double */
    Valued mem[N_MEM];  /* int64_t */
} Columns;

static int grow(void **p, size_t count, size_t size) {
    void *q = PyMem_RawRealloc(*p, count * size);
    if (!q) return -1;
    *p = q;
    return 0;
}

/* `count` columns of numbers grown to `cap` values. */
static int grow_valued(Valued *v, int count, size_t cap, size_t size) {
    for (int i = 0; i < count; i++)
        if (grow(&v[i].values, cap, size) < 0 || grow((void **)&v[i].ok, cap, 1) < 0) return -1;
    return 0;
}

static void free_valued(Valued *v, int count) {
    for (int i = 0; i < count; i++) {
        PyMem_RawFree(v[i].values);
        PyMem_RawFree(v[i].ok);
    }
}

static int columns_resize(Columns *c, size_t cap) {
    if (grow((void **)&c->instant, cap, 1) < 0) return -1;
    for (int i = 0; i < N_STR; i++)
        if (grow((void **)&c->codes[i], cap, sizeof(uint32_t)) < 0) return -1;
    if (grow_valued(c->floats, N_FLOAT, cap, sizeof(double)) < 0) return -1;
    if (grow_valued(c->ints, N_INT, cap, sizeof(int64_t)) < 0) return -1;
    c->cap = cap;
    return 0;
}

static int columns_room(Columns *c) {
    return c->n < c->cap ? 0 : columns_resize(c, c->cap ? c->cap * 2 : 4096);
}

static int memory_room(Columns *c) {
    if (c->m < c->mcap) return 0;
    size_t cap = c->mcap ? c->mcap * 2 : 256;
    if (grow_valued(&c->mem_ts, 1, cap, sizeof(double)) < 0) return -1;
    if (grow_valued(c->mem, N_MEM, cap, sizeof(int64_t)) < 0) return -1;
    c->mcap = cap;
    return 0;
}

static void columns_free(Columns *c) {
    PyMem_RawFree(c->instant);
    for (int i = 0; i < N_STR; i++) PyMem_RawFree(c->codes[i]);
    free_valued(c->floats, N_FLOAT);
    free_valued(c->ints, N_INT);
    free_valued(&c->mem_ts, 1);
    free_valued(c->mem, N_MEM);
}

/* One event's values while its object is read. */
typedef struct {
    int phase;
    uint32_t seen;      /* the keys met, one bit each: a duplicate declines */
    uint32_t args_seen;
    uint32_t codes[N_STR];
    double floats[N_FLOAT];
    uint8_t float_ok[N_FLOAT];
    int64_t ints[N_INT];
    uint8_t int_ok[N_INT];
    int64_t mem[N_MEM];
    uint8_t mem_ok[N_MEM];
    int64_t dims[N_DIMS][3]; /* "grid" and "block" */
    uint8_t dims_ok[N_DIMS];
} Row;

/* ---------------------------------------------------------------- the JSON grammar */

static inline void skip_ws(Cursor *c) {
    const char *p = c->p, *end = c->end;
    while (p < end && (unsigned char)*p <= ' ' && (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')) p++;
    c->p = p;
}

/* A string whose opening quote is at c->p: its text is [*start, c->p - 1) after the call.
 * Checks the escapes (a surrogate other than a pair's declines: msgspec has its own rules for
 * them) and that no control character is written raw; UTF-8 is checked only where a value is
 * kept, as msgspec does. */
static int scan_string(Cursor *c, const char **start, int *escaped) {
    const char *p = c->p + 1;
    const char *end = c->end;
    *start = p;
    *escaped = 0;
    for (;;) {
#ifdef __SSE2__
        const __m128i quote = _mm_set1_epi8('"');
        const __m128i slash = _mm_set1_epi8('\\');
        const __m128i ctrl = _mm_set1_epi8(0x1F);
        while (end - p >= 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)p);
            __m128i hit = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(x, quote), _mm_cmpeq_epi8(x, slash)),
                                       _mm_cmpeq_epi8(_mm_max_epu8(x, ctrl), ctrl));
            int mask = _mm_movemask_epi8(hit);
            if (mask) {
                p += __builtin_ctz((unsigned)mask);
                break;
            }
            p += 16;
        }
#endif
        while (p < end && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20) p++;
        if (p >= end) return DECLINE;
        if (*p == '"') {
            c->p = p + 1;
            return 0;
        }
        if (*p != '\\') return DECLINE; /* a raw control character */
        *escaped = 1;
        if (end - p < 2) return DECLINE;
        switch (p[1]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            p += 2;
            break;
        case 'u': {
            uint32_t cp, low;
            if (end - p < 6 || hex4(p + 2, &cp) < 0) return DECLINE;
            p += 6;
            if (cp >= 0xD800 && cp <= 0xDFFF) { /* only a high surrogate then a low one: msgspec decides the rest */
                if (cp >= 0xDC00 || end - p < 6 || p[0] != '\\' || p[1] != 'u' || hex4(p + 2, &low) < 0 ||
                    low < 0xDC00 || low > 0xDFFF)
                    return DECLINE;
                p += 6;
            }
            break;
        }
        default: return DECLINE;
        }
    }
}

/* A number at c->p. `integer`: no fraction or exponent; then *ival is its value when it
 * fits int64 (`fits`). *dval is its value as a double when `want_double`. */
typedef struct {
    int integer;
    int fits;
    int64_t ival;
    double dval;
} Number;

static const double POW10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,  1e8,  1e9,  1e10, 1e11,
                                  1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

static int scan_number(Cursor *c, Number *num, int want_double) {
    const char *s = c->p;
    const char *p = s;
    const char *end = c->end;
    int negative = 0;
    if (p < end && *p == '-') {
        negative = 1;
        p++;
    }
    if (p >= end || *p < '0' || *p > '9') return DECLINE;
    uint64_t mantissa = 0;
    int digits = 0; /* significant digits accumulated in mantissa */
    int dropped = 0; /* digits beyond 19 */
    if (*p == '0') {
        p++;
    } else {
        while (p < end && *p >= '0' && *p <= '9') {
            if (digits < 19) {
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
                digits++;
            } else {
                dropped++;
            }
            p++;
        }
    }
    int integer_digits_dropped = dropped;
    int fraction = 0;
    int exponent = 0;
    num->integer = 1;
    if (p < end && *p == '.') {
        num->integer = 0;
        p++;
        if (p >= end || *p < '0' || *p > '9') return DECLINE;
        while (p < end && *p >= '0' && *p <= '9') {
            if (digits < 19 && !(digits == 0 && *p == '0')) {
                mantissa = mantissa * 10 + (uint64_t)(*p - '0');
                digits++;
                fraction++;
            } else if (digits == 0) {
                fraction++; /* a leading zero of the fraction */
            } else {
                dropped++;
            }
            p++;
        }
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        num->integer = 0;
        p++;
        int sign = 1;
        if (p < end && (*p == '+' || *p == '-')) {
            if (*p == '-') sign = -1;
            p++;
        }
        if (p >= end || *p < '0' || *p > '9') return DECLINE;
        while (p < end && *p >= '0' && *p <= '9') {
            if (exponent < 100000) exponent = exponent * 10 + (*p - '0');
            p++;
        }
        exponent *= sign;
    }
    c->p = p;
    num->fits = 0;
    if (num->integer && !integer_digits_dropped) {
        if (!negative && mantissa <= (uint64_t)INT64_MAX) {
            num->fits = 1;
            num->ival = (int64_t)mantissa;
        } else if (negative && mantissa <= (uint64_t)INT64_MAX + 1) {
            num->fits = 1;
            num->ival = mantissa == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mantissa;
        }
    }
    if (!want_double) return 0;
    if (num->integer && num->fits) {
        num->dval = (double)num->ival; /* as msgspec: "-0" is 0.0 */
        return 0;
    }
    int e10 = exponent - fraction;
    if (!dropped && mantissa <= (1ull << 53) && e10 >= -22 && e10 <= 22) {
        double v = (double)mantissa; /* exact; one correctly rounded operation follows */
        v = e10 >= 0 ? v * POW10[e10] : v / POW10[-e10];
        num->dval = negative ? -v : v;
        return 0;
    }
    char text[128];
    size_t n = (size_t)(p - s);
    if (n >= sizeof(text)) return DECLINE;
    memcpy(text, s, n);
    text[n] = 0;
#ifdef KINETO_STRTOD_L
    /* correctly rounded, as msgspec's fallback (PyOS_string_to_double) is; in the C locale */
    char *stop;
    double v = strtod_l(text, &stop, c_locale);
    if (stop != text + n) return DECLINE;
    if (v == HUGE_VAL || v == -HUGE_VAL) return DECLINE; /* msgspec: out of range */
    num->dval = v;
    return 0;
#else
    return DECLINE;
#endif
}

/* After a member of an object or an item of an array: *more when a comma follows (read),
 * else the closing `close` (read); DECLINE for anything else. */
static int after_item(Cursor *c, char close, int *more) {
    skip_ws(c);
    if (c->p >= c->end) return DECLINE;
    *more = *c->p == ',';
    if (!*more && *c->p != close) return DECLINE;
    c->p++;
    return 0;
}

static int skip_value(Cursor *c, int depth);

static int skip_container(Cursor *c, int depth, char close) {
    if (depth > MAX_DEPTH) return DECLINE;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == close) {
        c->p++;
        return 0;
    }
    for (;;) {
        skip_ws(c);
        if (close == '}') {
            const char *s;
            int escaped;
            if (c->p >= c->end || *c->p != '"' || scan_string(c, &s, &escaped)) return DECLINE;
            skip_ws(c);
            if (c->p >= c->end || *c->p != ':') return DECLINE;
            c->p++;
            skip_ws(c);
        }
        int more, rc = skip_value(c, depth + 1);
        if (!rc) rc = after_item(c, close, &more);
        if (rc || !more) return rc;
    }
}

static int literal(Cursor *c, const char *word, size_t n) {
    if ((size_t)(c->end - c->p) < n || memcmp(c->p, word, n) != 0) return DECLINE;
    c->p += n;
    return 0;
}

static int skip_value(Cursor *c, int depth) {
    if (c->p >= c->end) return DECLINE;
    switch (*c->p) {
    case '"': {
        const char *s;
        int escaped;
        return scan_string(c, &s, &escaped);
    }
    case '{': return skip_container(c, depth, '}');
    case '[': return skip_container(c, depth, ']');
    case 't': return literal(c, "true", 4);
    case 'f': return literal(c, "false", 5);
    case 'n': return literal(c, "null", 4);
    default: {
        Number num;
        return scan_number(c, &num, 0);
    }
    }
}

static inline int is_null(Cursor *c) {
    if (c->end - c->p >= 4 && memcmp(c->p, "null", 4) == 0) {
        c->p += 4;
        return 1;
    }
    return 0;
}

/* ---------------------------------------------------------------- the typed values */

static int value_string(Cursor *c, Strings *t, uint32_t *code) {
    if (is_null(c)) {
        *code = 0;
        return 0;
    }
    if (c->p >= c->end || *c->p != '"') return DECLINE;
    const char *s;
    int escaped;
    int rc = scan_string(c, &s, &escaped);
    if (rc) return rc;
    return intern(t, s, (size_t)(c->p - 1 - s), escaped, code);
}

/* A number or null: *ok says which. */
static int value_number(Cursor *c, Number *num, int want_double, uint8_t *ok) {
    *ok = 0;
    if (is_null(c)) return 0;
    if (c->p >= c->end || !(*c->p == '-' || (*c->p >= '0' && *c->p <= '9'))) return DECLINE;
    int rc = scan_number(c, num, want_double);
    *ok = !rc;
    return rc;
}

static int value_int(Cursor *c, int64_t *v, uint8_t *ok) {
    Number num;
    int rc = value_number(c, &num, 0, ok);
    if (rc || !*ok) return rc;
    if (!num.integer || !num.fits) return DECLINE; /* msgspec: a float is no int */
    *v = num.ival;
    return 0;
}

static int value_float(Cursor *c, double *v, uint8_t *ok) {
    Number num;
    int rc = value_number(c, &num, 1, ok);
    if (!rc && *ok) *v = num.dval;
    return rc;
}

/* pid, tid and the integer arguments: an int, or text whose last run of digits is the id
 * (tracekit.readers.columns:
 * the regex (-?\d+)\s*$, then a cast to Int64 that makes an overflow no value). */
static int value_id(Cursor *c, int64_t *v, uint8_t *ok) {
    if (c->p >= c->end || *c->p != '"') return value_int(c, v, ok);
    const char *s;
    int escaped;
    int rc = scan_string(c, &s, &escaped);
    if (rc) return rc;
    const char *e = c->p - 1;
    for (const char *q = s; q < e; q++)
        if ((unsigned char)*q >= 0x80) return DECLINE; /* Unicode digits and spaces: polars decides */
    if (escaped) return DECLINE;
    while (e > s && (*(e - 1) == ' ' || (*(e - 1) >= '\t' && *(e - 1) <= '\r'))) e--;
    const char *d = e;
    while (d > s && *(d - 1) >= '0' && *(d - 1) <= '9') d--;
    *ok = 0;
    if (d == e) return 0;
    int negative = d > s && *(d - 1) == '-';
    while (d < e - 1 && *d == '0') d++; /* leading zeros */
    if (e - d > 19) return 0;
    uint64_t m = 0;
    for (const char *q = d; q < e; q++) m = m * 10 + (uint64_t)(*q - '0');
    if (!negative && m <= (uint64_t)INT64_MAX) {
        *v = (int64_t)m;
        *ok = 1;
    } else if (negative && m <= (uint64_t)INT64_MAX + 1) {
        *v = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
        *ok = 1;
    }
    return 0;
}

/* A launch's dimensions: null, or an array of three integers (what the typed decoder's
 * tuple[int, int, int] takes); anything else declines. */
static int value_dims(Cursor *c, int64_t dims[3], uint8_t *ok) {
    *ok = 0;
    if (is_null(c)) return 0;
    if (c->p >= c->end || *c->p != '[') return DECLINE;
    c->p++;
    for (int i = 0; i < 3; i++) {
        uint8_t there;
        skip_ws(c);
        int rc = value_int(c, &dims[i], &there);
        if (rc || !there) return DECLINE; /* a null in the array: msgspec decides */
        int more;
        rc = after_item(c, ']', &more);
        if (rc || more != (i < 2)) return DECLINE; /* not three items */
    }
    *ok = 1;
    return 0;
}

/* The threads of a launch (tracekit.readers.kineto_decode.threads): its grid's and block's
 * dimensions multiplied, when both are there, none is negative and the product is under
 * THREADS_LIMIT; else no value. */
static void launch_threads(const Row *row, int64_t *v, uint8_t *ok) {
    *ok = 0;
    if (!row->dims_ok[D_GRID] || !row->dims_ok[D_BLOCK]) return;
    int zero = 0;
    for (int d = 0; d < N_DIMS; d++)
        for (int i = 0; i < 3; i++) {
            if (row->dims[d][i] < 0) return;
            zero |= row->dims[d][i] == 0;
        }
    int64_t product = 1;
    if (!zero)
        for (int d = 0; d < N_DIMS; d++)
            for (int i = 0; i < 3; i++) {
                if (row->dims[d][i] > (THREADS_LIMIT - 1) / product) return; /* product * dim >= the limit */
                product *= row->dims[d][i];
            }
    *v = zero ? 0 : product;
    *ok = product < THREADS_LIMIT;
}

/* ---------------------------------------------------------------- the keys */

typedef struct {
    const char *key;
    int len;
} Key;

#define KEY(s) {s, (int)sizeof(s) - 1}

/* The Args fields, in the order of the ints after pid and tid, then the launch's dimensions,
 * then the instants' own. */
static const Key ARG_KEYS[] = {
    KEY("External id"), KEY("external id"), KEY("correlation"), KEY("device"), KEY("stream"), KEY("bytes"),
    KEY("Collective name"), KEY("In msg nelems"), KEY("Process Group Name"), KEY("Group size"), KEY("Seq"),
    KEY("grid"), KEY("block"),
    KEY("Device Type"), KEY("Device Id"), KEY("Addr"), KEY("Bytes"), KEY("Total Allocated"),
    KEY("Total Reserved"),
};
#define N_INT_ARG_KEYS 11
#define N_ARG_KEYS 13
#define N_ALL_ARG_KEYS 19

static int find_key(const Key *keys, int count, const char *s, size_t n) {
    for (int i = 0; i < count; i++)
        if ((size_t)keys[i].len == n && keys[i].key[0] == s[0] && memcmp(keys[i].key, s, n) == 0) return i;
    return -1;
}

static int read_key(Cursor *c, const char **s, size_t *n) {
    int escaped;
    if (c->p >= c->end || *c->p != '"') return DECLINE;
    int rc = scan_string(c, s, &escaped);
    if (rc) return rc;
    if (escaped) return DECLINE; /* a key written with escapes: msgspec matches it */
    *n = (size_t)(c->p - 1 - *s);
    skip_ws(c);
    if (c->p >= c->end || *c->p != ':') return DECLINE;
    c->p++;
    skip_ws(c);
    return 0;
}

/* The next member's key among `keys` (*k, -1 for another), its colon read; a key met
 * before in this object (one bit each in *seen) declines: msgspec keeps the last. */
static int member_key(Cursor *c, const Key *keys, int count, uint32_t *seen, int *k) {
    const char *s;
    size_t n;
    skip_ws(c);
    int rc = read_key(c, &s, &n);
    if (rc) return rc;
    *k = find_key(keys, count, s, n);
    if (*k >= 0) {
        if (*seen & (1u << *k)) return DECLINE;
        *seen |= 1u << *k;
    }
    return 0;
}

static int read_args(Cursor *c, Strings *t, Row *row) {
    if (c->p >= c->end || *c->p != '{') return DECLINE; /* args null or not an object */
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') {
        c->p++;
        return 0;
    }
    int count = row->phase == PH_INSTANT ? N_ALL_ARG_KEYS : N_ARG_KEYS;
    for (;;) {
        int k, rc = member_key(c, ARG_KEYS, count, &row->args_seen, &k);
        if (rc) return rc;
        if (k < 0) {
            rc = skip_value(c, 2);
        } else {
            if (k == 6) rc = value_string(c, t, &row->codes[S_COLL]);
            else if (k == 8) rc = value_string(c, t, &row->codes[S_PG]);
            else if (k < N_INT_ARG_KEYS) { /* text: the lenient reading of its chunk (see the top) */
                int i = k < 6 ? I_EXT + k : (k == 7 ? I_NELEMS : (k == 9 ? I_GROUP : I_SEQ));
                rc = value_id(c, &row->ints[i], &row->int_ok[i]);
            } else if (k < N_ARG_KEYS) {
                rc = value_dims(c, row->dims[k - N_INT_ARG_KEYS], &row->dims_ok[k - N_INT_ARG_KEYS]);
            } else {
                rc = value_id(c, &row->mem[k - N_ARG_KEYS], &row->mem_ok[k - N_ARG_KEYS]);
            }
        }
        int more;
        if (!rc) rc = after_item(c, '}', &more);
        if (rc || !more) return rc;
    }
}

/* The Chrome trace phases tracekit skips (tracekit.readers.kineto_decode.OTHER_PHASES). */
static const char OTHER_PHASES[] = "BECbneSTpFstfPONDMVvRc()";

static int read_phase(Cursor *c, Row *row) {
    const char *s;
    int escaped;
    if (c->p >= c->end || *c->p != '"') return DECLINE;
    int rc = scan_string(c, &s, &escaped);
    if (rc) return rc;
    if (escaped || c->p - 1 - s != 1) return DECLINE;
    if (*s == 'X') row->phase = PH_X;
    else if (*s == 'i' || *s == 'I') row->phase = PH_INSTANT;
    else if (memchr(OTHER_PHASES, *s, sizeof(OTHER_PHASES) - 1)) row->phase = PH_SKIP;
    else return DECLINE;
    return 0;
}

/* The rest of a skipped event's object, after its phase: any value, but no second phase. */
static int skip_members(Cursor *c) {
    for (;;) {
        int more, rc = after_item(c, '}', &more);
        if (rc || !more) return rc;
        skip_ws(c);
        const char *s;
        size_t n;
        rc = read_key(c, &s, &n);
        if (rc) return rc;
        if (n == 2 && s[0] == 'p' && s[1] == 'h') return DECLINE;
        rc = skip_value(c, 1);
        if (rc) return rc;
    }
}

enum { K_PH, K_CAT, K_NAME, K_PID, K_TID, K_TS, K_DUR, K_ARGS, N_KEYS };
static const Key EVENT_KEYS[N_KEYS] = {KEY("ph"), KEY("cat"), KEY("name"), KEY("pid"),
                                       KEY("tid"), KEY("ts"), KEY("dur"), KEY("args")};

static int read_event(Cursor *c, Strings *t, Row *row) {
    if (c->p >= c->end || *c->p != '{') return DECLINE;
    c->p++;
    memset(row, 0, sizeof(*row));
    skip_ws(c);
    if (c->p < c->end && *c->p == '}') return DECLINE; /* no phase */
    for (;;) {
        int k, rc = member_key(c, EVENT_KEYS, N_KEYS, &row->seen, &k);
        if (rc) return rc;
        switch (k) {
        case K_PH:
            rc = read_phase(c, row);
            if (!rc && row->phase == PH_SKIP) return skip_members(c);
            break;
        case K_CAT: rc = value_string(c, t, &row->codes[S_CAT]); break;
        case K_NAME: rc = value_string(c, t, &row->codes[S_NAME]); break;
        case K_PID: rc = value_id(c, &row->ints[I_PID], &row->int_ok[I_PID]); break;
        case K_TID: rc = value_id(c, &row->ints[I_TID], &row->int_ok[I_TID]); break;
        case K_TS: rc = value_float(c, &row->floats[F_TS], &row->float_ok[F_TS]); break;
        case K_DUR: rc = value_float(c, &row->floats[F_DUR], &row->float_ok[F_DUR]); break;
        case K_ARGS: rc = row->phase == PH_NONE ? DECLINE : read_args(c, t, row); break;
        default: rc = skip_value(c, 1);
        }
        int more;
        if (!rc) rc = after_item(c, '}', &more);
        if (rc) return rc;
        if (!more) return row->phase == PH_NONE ? DECLINE : 0;
    }
}

static inline void put_double(Valued *v, size_t i, double value, uint8_t ok) {
    ((double *)v->values)[i] = ok ? value : 0.0;
    v->ok[i] = ok;
}

static inline void put_int(Valued *v, size_t i, int64_t value, uint8_t ok) {
    ((int64_t *)v->values)[i] = ok ? value : 0;
    v->ok[i] = ok;
}

static int keep(Columns *cols, Strings *t, Row *row) {
    if (columns_room(cols) < 0) return FAIL;
    size_t i = cols->n++;
    cols->instant[i] = row->phase == PH_INSTANT;
    for (int k = 0; k < N_STR; k++) cols->codes[k][i] = row->codes[k];
    for (int k = 0; k < N_FLOAT; k++) put_double(&cols->floats[k], i, row->floats[k], row->float_ok[k]);
    launch_threads(row, &row->ints[I_THREADS], &row->int_ok[I_THREADS]);
    for (int k = 0; k < N_INT; k++) put_int(&cols->ints[k], i, row->ints[k], row->int_ok[k]);
    if (row->phase == PH_INSTANT && t->spans[row->codes[S_NAME]].memory) {
        if (memory_room(cols) < 0) return FAIL;
        size_t j = cols->m++;
        put_double(&cols->mem_ts, j, row->floats[F_TS], row->float_ok[F_TS]);
        for (int k = 0; k < N_MEM; k++) put_int(&cols->mem[k], j, row->mem[k], row->mem_ok[k]);
    }
    return 0;
}

/* ---------------------------------------------------------------- to Python */

static PyObject *bytes_of(const void *p, size_t n) {
    return PyBytes_FromStringAndSize(n ? (const char *)p : "", (Py_ssize_t)n);
}

/* (values, valid): valid is None when every value is there. */
static PyObject *pair(const Valued *column, size_t size, size_t n) {
    const uint8_t *ok = column->ok;
    PyObject *v = bytes_of(column->values, n * size);
    if (!v) return NULL;
    PyObject *valid;
    if (n && memchr(ok, 0, n)) {
        valid = bytes_of(ok, n);
        if (!valid) {
            Py_DECREF(v);
            return NULL;
        }
    } else {
        valid = Py_NewRef(Py_None);
    }
    PyObject *out = PyTuple_Pack(2, v, valid);
    Py_DECREF(v);
    Py_DECREF(valid);
    return out;
}

/* A tuple of the pairs of `count` columns of numbers. */
static PyObject *pairs(const Valued *columns, int count, size_t size, size_t n) {
    PyObject *out = PyTuple_New(count);
    for (int i = 0; out && i < count; i++) {
        PyObject *item = pair(&columns[i], size, n);
        if (item) PyTuple_SET_ITEM(out, i, item);
        else Py_CLEAR(out);
    }
    return out;
}

/* The columns as a tuple of bytes objects (see the module's comment), with the GIL held;
 * None when a string is no UTF-8. */
static PyObject *result(Columns *c, Strings *t) {
    size_t n = c->n, m = c->m;
    int rc = 0;
    PyObject *strings = uniques(t, &rc);
    if (!strings) return rc == DECLINE ? Py_NewRef(Py_None) : NULL;
    PyObject *codes = PyTuple_New(N_STR), *instant = bytes_of(c->instant, n);
    PyObject *floats = pairs(c->floats, N_FLOAT, sizeof(double), n), *ints = pairs(c->ints, N_INT, sizeof(int64_t), n);
    PyObject *mem_ints = pairs(c->mem, N_MEM, sizeof(int64_t), m), *mem_ts = pair(&c->mem_ts, sizeof(double), m);
    PyObject *out = NULL;
    int ok = codes && floats && ints && mem_ints && instant && mem_ts;
    for (int i = 0; ok && i < N_STR; i++) {
        PyObject *item = bytes_of(c->codes[i], n * sizeof(uint32_t));
        if (item) PyTuple_SET_ITEM(codes, i, item);
        ok = item != NULL;
    }
    if (ok)
        out = Py_BuildValue("(nOOOOO(nOO))", (Py_ssize_t)n, instant, strings, codes, floats, ints, (Py_ssize_t)m,
                            mem_ts, mem_ints);
    Py_DECREF(strings);
    Py_XDECREF(codes);
    Py_XDECREF(floats);
    Py_XDECREF(ints);
    Py_XDECREF(mem_ints);
    Py_XDECREF(instant);
    Py_XDECREF(mem_ts);
    return out;
}

/* The scan of the whole array, without the GIL: 0, DECLINE or FAIL (no memory). With
   ``prefix``, the array may be followed by any text: the cursor is left after its ']'. */
static int scan(Cursor *c, Strings *t, Columns *cols, int prefix) {
    Row row;
    int rc;
    skip_ws(c);
    if (c->p >= c->end || *c->p != '[') return DECLINE;
    c->p++;
    skip_ws(c);
    if (c->p < c->end && *c->p == ']') {
        c->p++;
    } else {
        for (;;) {
            skip_ws(c);
            int more;
            rc = read_event(c, t, &row);
            if (!rc && row.phase != PH_SKIP) rc = keep(cols, t, &row);
            if (!rc) rc = after_item(c, ']', &more);
            if (rc) return rc;
            if (!more) break;
        }
    }
    if (prefix) return 0;
    skip_ws(c);
    return c->p == c->end ? 0 : DECLINE; /* trailing characters */
}

static PyObject *decode(PyObject *self, PyObject *args) {
    (void)self;
    PyObject *arg;
    int prefix = 0;
    if (!PyArg_ParseTuple(args, "O|p", &arg, &prefix)) return NULL;
    Py_buffer view;
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) return NULL;
    Cursor c = {(const char *)view.buf, (const char *)view.buf + view.len};
    Strings t;
    Columns cols;
    memset(&cols, 0, sizeof(cols));
    int rc;
    Py_BEGIN_ALLOW_THREADS
    rc = strings_init(&t);
    /* room for the events a text of this size holds at 256 bytes each (profilers write 300 to 400) */
    size_t cap = (size_t)view.len / 256;
    if (!rc && columns_resize(&cols, cap > 4096 ? cap : 4096) < 0) rc = FAIL;
    if (!rc) rc = scan(&c, &t, &cols, prefix);
    Py_END_ALLOW_THREADS
    PyObject *out = NULL;
    if (!rc) out = result(&cols, &t);
    else if (rc == DECLINE) out = Py_NewRef(Py_None);
    else if (rc == TOO_LONG) PyErr_Format(PyExc_ValueError, "string of %zu bytes", t.too_long);
    else PyErr_NoMemory();
    if (out && prefix && out != Py_None) { /* (columns, the bytes read up to the array's ']') */
        PyObject *read = PyLong_FromSsize_t((Py_ssize_t)(c.p - (const char *)view.buf));
        PyObject *both = read ? PyTuple_Pack(2, out, read) : NULL;
        Py_XDECREF(read);
        Py_DECREF(out);
        out = both;
    }
    columns_free(&cols);
    strings_free(&t);
    PyBuffer_Release(&view);
    return out;
}

static PyMethodDef METHODS[] = {
    {"decode", decode, METH_VARARGS,
     "decode(text, prefix=False): a JSON array of Kineto events -> raw columns, or None (see the module);\n"
     "with prefix, the array may be followed by any text: (raw columns, the bytes up to its ']'), or None.\n"
     "Releases the GIL while it reads."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT, "_kineto_columns", "Kineto events -> raw columns, in one pass over the JSON text.", -1,
    METHODS, NULL, NULL, NULL, NULL,
};

PyMODINIT_FUNC PyInit__kineto_columns(void) {
#ifdef KINETO_STRTOD_L
    c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
    if (!c_locale) return PyErr_NoMemory();
#endif
    return PyModule_Create(&MODULE);
}
