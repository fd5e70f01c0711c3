// Incremental matching on the GPU: one warp per work unit, stack-based backtracking.
//
// A work unit is (task, plan, chunk); the host sends (task, plan) pairs and their chunk
// counts, and warps expand them. A task is one updated directed edge a -> b at tick k;
// its plan binds f(level 0) = a, f(level 1) = b and extends level by level (GCSM Fig. 15).
// Level 2's candidate set is split into `nchunk` slices so that one heavy update spreads
// over many warps, and idle warps take the next unit from a global counter (DCSM dynamic
// scheduling). A unit still running after `split_cycles` while some warp has run out of
// work gives away the rest of its shallowest unfinished level as sub-tasks in a lock-free
// queue (T-DFS timeout splitting, on demand so that busy GPUs pay nothing for it):
// a sub-task is (task, plan, level, candidate index range, the prefix f[2..level-1]), and
// the warp that takes it recomputes the candidate rows of that prefix (they depend only on
// the prefix and the task's tick) and searches its range; sub-tasks split again. Every neighbour entry is read as of the task's tick:
// it counts iff ct < k <= dt (DCSM Property 2), so tasks of different graph versions run
// side by side.
//
// Each warp keeps its DFS state in shared memory (all lanes write identical values) and
// one candidate row per level in global memory, `stride` keys long, where `stride` is the
// longest neighbour-array version in the graph: a level's candidates are a subset of one
// neighbour array, so rows never overflow. One more row per warp stages host-resident
// neighbour arrays (out-of-core mode).
//
// The logic mirrors gpu/cpu/_kernels.py line for line (loop-invariant code motion with
// stamps, result reuse, neighbour-label filter, counting two independent tail levels);
// the two executors must produce identical counts.

#define M 12
#define NF 12
#define WILD (-2147483647 - 1)
#define FULL 0xffffffffu
#define LOW32 0xffffffffLL
#define WARPS_PER_BLOCK 4
#define SEG_BITS 24
#define SEG_MASK ((1LL << SEG_BITS) - 1)

enum { F_VERTEX = 0, F_LABEL, F_DEGREE, F_REUSE, F_NBOFF, F_NBCNT, F_GT, F_LT, F_DEP,
       F_NLFOFF, F_NLFCNT, F_MISC };

// Out-of-core mode (GCSM section 2.5): the entry pool may live in mapped pinned host
// memory (`host`), read over PCIe by zero-copy; a per-batch DCSR cache on the device holds
// copies of the neighbour arrays the batch is expected to read most (rowidx sorted, rows
// [rowptr[j], rowptr[j+1]) of the packed key / elab / ct / dt columns). Every neighbour
// array is looked up in the cache first. Host arrays are read warp-cooperatively in
// contiguous spans (coalesced 128-byte transactions); a host list that meets a small
// candidate set is binary-searched directly instead, whichever moves fewer bytes.
struct Graph {
    const long long* key;
    const int* elab;
    const long long* ct;
    const long long* dt;
    // per vertex: current version as (offset << 24 | length), one 64-bit word so that a
    // reader never sees the offset of one version with the length of another while the
    // updater installs the next batch
    const long long* seg;
    const int* vlabel;
    int host;                  // the pool above is host memory
    const int* c_row;          // cache: sorted vertex ids
    const long long* c_ptr;    // cache: c_n + 1 offsets
    const long long* c_key;
    const int* c_elab;
    const long long* c_ct;
    const long long* c_dt;
    int c_n;
    __device__ __forceinline__ long long off(int v) const { return seg[v] >> SEG_BITS; }
    __device__ __forceinline__ int len(int v) const { return (int)(seg[v] & SEG_MASK); }
};

// Where one vertex's current neighbour array is: its columns and its range in them.
struct Adj {
    const long long* key;
    const int* elab;
    const long long* ct;
    const long long* dt;
    long long lo, hi;
    bool host;
};

// Host-memory traffic and cache lookups of one lane (summed over the warp at the end).
struct Io {
    unsigned long long bytes, hits, misses;
};

__device__ __forceinline__ unsigned long long sectors(long long bytes) {
    return (unsigned long long)((bytes + 31) / 32 * 32);
}

__device__ __forceinline__ Adj adj(const Graph& g, int v, Io& io, bool count) {
    if (g.c_n > 0) {
        int lo = 0, hi = g.c_n;
        while (lo < hi) {
            int mid = (lo + hi) >> 1;
            if (g.c_row[mid] < v) lo = mid + 1; else hi = mid;
        }
        if (lo < g.c_n && g.c_row[lo] == v) {
            if (count) ++io.hits;
            return Adj{g.c_key, g.c_elab, g.c_ct, g.c_dt, g.c_ptr[lo], g.c_ptr[lo + 1], false};
        }
    }
    if (count && g.host) ++io.misses;
    long long sg = g.seg[v];
    long long o = sg >> SEG_BITS;
    return Adj{g.key, g.elab, g.ct, g.dt, o, o + (sg & SEG_MASK), g.host != 0};
}

struct Plans {
    const int* pl;
    const int* nb_level;
    const int* nb_label;
    __device__ __forceinline__ int at(int p, int f, int L) const {
        return pl[(p * NF + f) * M + L];
    }
};

struct WarpState {
    int f[M];
    int rrow[M];
    int rlo[M];
    int rhi[M];
    int ilo[M];
    int ihi[M];
    int pos[M];
    int st_set[M];    // when f[L] was set
    int st_prep[M];   // when level L's candidates were computed
    int mbase[M];     // cached ballot window of level L (-1: none)
    unsigned mask[M];
    int chunk;        // this unit's slice of level 2 (debug access counts: slice 0 only)
};

__device__ __forceinline__ long long lower_bound(const long long* a, long long lo, long long hi,
                                                 long long x) {
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (a[mid] < x) lo = mid + 1; else hi = mid;
    }
    return lo;
}

__device__ __forceinline__ bool visible(const Adj& d, long long i, long long k, int el) {
    return d.ct[i] < k && k <= d.dt[i] && (el == WILD || d.elab[i] == el);
}

__device__ __forceinline__ unsigned lanes_below(int lane) { return (1u << lane) - 1u; }

__device__ __forceinline__ long long warp_sum(long long v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(FULL, v, o);
    return __shfl_sync(FULL, v, 0);
}

// First index in [lo, hi) of key >= x, the whole warp searching one sorted array (the
// same answer in every lane; the warp converged): 32 probes per round instead of one, so a
// hub's 1,383 entries take three dependent loads, not eleven (a lane's binary search is
// a chain of dependent loads, and the match kernel is latency bound), and a 1,000-entry
// host array two PCIe latencies, not ten. HOST: count the bytes read (zero-copy arrays).
template <bool HOST>
__device__ long long warp_lower_bound(const long long* key, long long lo, long long hi,
                                      long long x, int lane, Io& io) {
    while (hi - lo > 32) {
        long long step = (hi - lo + 31) / 32;
        long long i = lo + lane * step;
        bool below = i < hi && key[i] < x;
        int c = __popc(__ballot_sync(FULL, below));
        if (HOST && lane == 0) io.bytes += 32 * 32;
        if (c == 0) return lo;
        long long nlo = lo + (long long)(c - 1) * step + 1;
        hi = min(hi, lo + (long long)c * step);
        lo = nlo;
    }
    long long i = lo + lane;
    bool below = i < hi && key[i] < x;
    if (HOST && lane == 0) io.bytes += sectors((hi - lo) * 8);
    return lo + __popc(__ballot_sync(FULL, below));
}

// d.lo/d.hi narrowed to label `lab` (keys are label << 32 | id); warp-uniform d
__device__ __forceinline__ void label_range(Adj& d, int lab, int lane, Io& io) {
    if (lab == WILD) return;
    long long base = ((long long)lab) << 32;
    if (d.host) {
        long long lo = warp_lower_bound<true>(d.key, d.lo, d.hi, base, lane, io);
        d.hi = warp_lower_bound<true>(d.key, lo, d.hi, base + (1LL << 32), lane, io);
        d.lo = lo;
    } else {
        long long lo = warp_lower_bound<false>(d.key, d.lo, d.hi, base, lane, io);
        d.hi = warp_lower_bound<false>(d.key, lo, d.hi, base + (1LL << 32), lane, io);
        d.lo = lo;
    }
}

// out[0:n] = visible entries of d[lo:hi) (one per key: lifetimes of one edge are disjoint)
__device__ int warp_scan(const Adj& d, long long lo, long long hi, long long k, int el,
                         long long* out, int lane, Io& io) {
    int w = 0;
    if (d.host && lane == 0 && hi > lo)
        io.bytes += 3 * sectors((hi - lo) * 8) + (el == WILD ? 0 : sectors((hi - lo) * 4));
    for (long long base = lo; base < hi; base += 32) {
        long long i = base + lane;
        bool ok = i < hi && visible(d, i, k, el);
        unsigned m = __ballot_sync(FULL, ok);
        if (ok) out[w + __popc(m & lanes_below(lane))] = d.key[i];
        w += __popc(m);
    }
    __syncwarp();
    return w;
}

// Candidates a lane searches at once in warp_intersect (device arrays): U binary searches
// interleaved step by step, so each step has U loads in flight instead of one (the kernel
// waits on dependent loads: a search in a hub's range is about 10 of them, and a level's
// rounds of 32 candidates ran one after the other). CSM_CUDA_INTERSECT_ILP=U sets it (2
// when unset: stops 51-52 measured 3-5 vertex saturation +6-9% and the 300,000/s p99 down
// a tenth, Enron even; 4 spills); 1 keeps the one-search loop. Only lists of more than
// ILP_MIN candidates take it (CSM_CUDA_ILP_MIN): a list of one round gains nothing.
#ifndef INTERSECT_ILP
#define INTERSECT_ILP 2
#endif
#ifndef ILP_MIN
#define ILP_MIN 32
#endif
#if INTERSECT_ILP > 1
// warp_intersect for a neighbour array in device memory, U = INTERSECT_ILP rounds of 32
// candidates at a time (same result, same order).
__device__ int warp_intersect_ilp(const long long* src, int slo, int shi, const Adj& d,
                                  long long lo, long long hi, long long k, int el,
                                  long long* out, int lane) {
    constexpr int U = INTERSECT_ILP;
    const long long* key = d.key;
    int w = 0;
    for (int base = slo; base < shi; base += 32 * U) {
        long long x[U], l[U], h[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {   // every read of src before any write to out
            int i = base + u * 32 + lane;
            bool in = i < shi;
            x[u] = in ? src[i] : 0;
            l[u] = lo;
            h[u] = in ? hi : lo;   // past shi: an empty search
        }
        bool more = true;
        while (more) {
            more = false;
#pragma unroll
            for (int u = 0; u < U; ++u) {
                if (l[u] < h[u]) {
                    long long mid = (l[u] + h[u]) >> 1;
                    if (key[mid] < x[u]) l[u] = mid + 1; else h[u] = mid;
                    more = true;
                }
            }
        }
        bool found[U];
#pragma unroll
        for (int u = 0; u < U; ++u) {
            int i = base + u * 32 + lane;
            long long q = l[u];
            bool eq = i < shi && q < hi && key[q] == x[u];
            found[u] = eq && visible(d, q, k, el);
            if (eq && !found[u]) {   // an earlier lifetime of the edge: a later one may be visible
                for (++q; q < hi && key[q] == x[u]; ++q)
                    if (visible(d, q, k, el)) { found[u] = true; break; }
            }
        }
#pragma unroll
        for (int u = 0; u < U; ++u) {
            unsigned m = __ballot_sync(FULL, found[u]);   // also orders reads before writes
            if (found[u]) out[w + __popc(m & lanes_below(lane))] = x[u];
            w += __popc(m);
        }
        // src is sorted: the next rounds' keys sit at or after the last lane's search
        lo = __shfl_sync(FULL, l[U - 1], 31);
        __syncwarp();
    }
    return w;
}
#endif

// out[0:n] = src[slo:shi] ∩ visible(d[lo:hi)); out may alias src when slo == 0. A host
// array is either copied (visible entries only) into `scratch` with coalesced reads and
// searched there, or searched in place when the candidates are few: fewer bytes wins.
__device__ int warp_intersect(const long long* src, int slo, int shi, const Adj& d,
                              long long lo, long long hi, long long k, int el, long long* out,
                              long long* scratch, int lane, Io& io) {
    int w = 0;
    if (shi <= slo || hi <= lo) return 0;
#if INTERSECT_ILP > 1
    if (!d.host && shi - slo > ILP_MIN)
        return warp_intersect_ilp(src, slo, shi, d, lo, hi, k, el, out, lane);
#endif
    const long long* key = d.key;
    bool staged = false;
    if (d.host) {
        long long n = hi - lo;
        long long probes = (long long)(shi - slo) * (66 - __clzll(n));
        if (probes * 32 * 2 >= n * 28) {
            hi = warp_scan(d, lo, hi, k, el, scratch, lane, io);
            lo = 0;
            key = scratch;
            staged = true;
        }
    }
    for (int base = slo; base < shi; base += 32) {
        int i = base + lane;
        bool found = false;
        long long x = 0, q0 = lo;
        if (i < shi) {
            x = src[i];
            long long q = q0 = lower_bound(key, lo, hi, x);
            if (staged) {
                found = q < hi && key[q] == x;
            } else {
                if (d.host) io.bytes += 32 * (66 - __clzll(hi - lo));
                while (q < hi && key[q] == x) {
                    if (d.host) io.bytes += 64;
                    if (visible(d, q, k, el)) { found = true; break; }
                    ++q;
                }
            }
        }
        unsigned m = __ballot_sync(FULL, found);   // also orders reads before writes
        if (found) out[w + __popc(m & lanes_below(lane))] = x;
        w += __popc(m);
        // src is sorted: the next round's keys sit at or after this round's last
        // position (the last lane's search before its duplicates; a lane past shi
        // ends the loop anyway)
        lo = __shfl_sync(FULL, q0, 31);
        __syncwarp();
    }
    return w;
}

// Debug: count one read of w's neighbour array (exact access counts for the estimator).
__device__ __forceinline__ void note_access(unsigned int* acc, bool on, int w, int lane) {
    if (acc != nullptr && on && lane == 0) atomicAdd(acc + w, 1u);
}

// Candidates of level L into row rrow[L], range [rlo, rhi); iteration bounds [ilo, ihi).
__device__ void prepare(int L, int p, long long k, WarpState& s, const Plans& P,
                        const Graph& g, long long* raw, long long stride, long long* scratch,
                        int lane, Io& io, unsigned int* acc) {
    int lab = P.at(p, F_LABEL, L);
    int src = P.at(p, F_REUSE, L);
    int off = P.at(p, F_NBOFF, L);
    int cnt = P.at(p, F_NBCNT, L);
    long long* out = raw + (long long)L * stride;
    bool counted = L > 2 || s.chunk == 0;
    int rrow, rlo, rhi;
    if (src >= 0) {
        const long long* sbuf = raw + (long long)s.rrow[src] * stride;
        int lo = s.rlo[src], hi = s.rhi[src];
        if (lab != WILD && P.at(p, F_LABEL, src) == WILD) {
            long long base = ((long long)lab) << 32;
            int lo2 = (int)warp_lower_bound<false>(sbuf, lo, hi, base, lane, io);
            hi = (int)warp_lower_bound<false>(sbuf, lo2, hi, base + (1LL << 32), lane, io);
            lo = lo2;
        }
        if (cnt == 0) {
            rrow = s.rrow[src]; rlo = lo; rhi = hi;
        } else {
            int n = hi - lo;
            for (int j = 0; j < cnt; ++j) {
                int w = s.f[P.nb_level[off + j]];
                note_access(acc, counted, w, lane);
                Adj d = adj(g, w, io, lane == 0);
                label_range(d, lab, lane, io);
                if (j == 0) n = warp_intersect(sbuf, lo, hi, d, d.lo, d.hi, k, P.nb_label[off + j], out, scratch, lane, io);
                else n = warp_intersect(out, 0, n, d, d.lo, d.hi, k, P.nb_label[off + j], out, scratch, lane, io);
                if (n == 0) break;
            }
            rrow = L; rlo = 0; rhi = n;
        }
    } else {
        Adj d[M];
        int best = 0;
        for (int j = 0; j < cnt; ++j) {
            int w = s.f[P.nb_level[off + j]];
            note_access(acc, counted, w, lane);
            d[j] = adj(g, w, io, lane == 0);
            label_range(d[j], lab, lane, io);
            if (d[j].hi - d[j].lo < d[best].hi - d[best].lo) best = j;
        }
        int n = warp_scan(d[best], d[best].lo, d[best].hi, k, P.nb_label[off + best], out, lane, io);
        for (int j = 0; j < cnt; ++j)
            if (j != best && n > 0)
                n = warp_intersect(out, 0, n, d[j], d[j].lo, d[j].hi, k, P.nb_label[off + j], out, scratch, lane, io);
        rrow = L; rlo = 0; rhi = n;
    }
    // symmetry conditions narrow a labelled level to one key interval
    int lo = rlo, hi = rhi;
    if (lab != WILD && hi > lo) {
        const long long* buf = raw + (long long)rrow * stride;
        int gm = P.at(p, F_GT, L), lm = P.at(p, F_LT, L);
        long long lb = ((long long)lab) << 32;
        for (int j = 0; j < L; ++j) {
            if ((gm >> j) & 1)
                lo = max(lo, (int)warp_lower_bound<false>(buf, lo, hi, (lb | s.f[j]) + 1, lane, io));
            if ((lm >> j) & 1)
                hi = min(hi, (int)warp_lower_bound<false>(buf, lo, hi, lb | s.f[j], lane, io));
        }
        if (hi < lo) hi = lo;
    }
    __syncwarp();   // every lane has read the state it needed before anyone writes
    s.rrow[L] = rrow; s.rlo[L] = rlo; s.rhi[L] = rhi;
    s.ilo[L] = lo; s.ihi[L] = hi;
    __syncwarp();
}

// Degree and neighbour-label counts of x can cover level L's needs (upper bounds: safe).
// Each lane checks its own x; a neighbour array left in host memory is not read for this
// (the filter only prunes, so skipping it keeps results exact).
__device__ __forceinline__ bool label_filter(int x, int L, int p, const Plans& P, const Graph& g,
                                             Io& io) {
    if (g.len(x) < P.at(p, F_DEGREE, L)) return false;
    int off = P.at(p, F_NLFOFF, L);
    int cnt = P.at(p, F_NLFCNT, L);
    if (cnt == 0) return true;
    Adj d = adj(g, x, io, false);
    if (d.host) return true;
    for (int j = 0; j < cnt; ++j) {
        int lab = P.nb_level[off + j];
        long long base = ((long long)lab) << 32;
        long long lo = lower_bound(d.key, d.lo, d.hi, base);
        long long hi = lower_bound(d.key, lo, d.hi, base + (1LL << 32));
        if (hi - lo < P.nb_label[off + j]) return false;
    }
    return true;
}

// x differs from f[0:upto] and meets level L's symmetry masks
__device__ __forceinline__ bool valid(int x, int L, int upto, int p, const WarpState& s,
                                      const Plans& P) {
    for (int j = 0; j < upto; ++j)
        if (s.f[j] == x) return false;
    int gm = P.at(p, F_GT, L), lm = P.at(p, F_LT, L);
    if (gm | lm) {
        for (int j = 0; j < upto; ++j) {
            if (((gm >> j) & 1) && x <= s.f[j]) return false;
            if (((lm >> j) & 1) && x >= s.f[j]) return false;
        }
    }
    return true;
}

__device__ long long count_level(int L, int upto, int p, const WarpState& s, const Plans& P,
                                 const long long* raw, long long stride, int lane) {
    const long long* buf = raw + (long long)s.rrow[L] * stride;
    long long c = 0;
    for (int i = s.ilo[L] + lane; i < s.ihi[L]; i += 32)
        if (valid((int)(buf[i] & LOW32), L, upto, p, s, P)) ++c;
    return warp_sum(c);
}

// Reserve listing slots for the lanes in `m`; returns this lane's slot (or -1 if past the cap)
__device__ __forceinline__ long long reserve(unsigned m, bool mine, unsigned long long* slots,
                                             long long want, int lane) {
    unsigned long long base = 0;
    if (lane == 0 && m) base = atomicAdd(slots, (unsigned long long)__popc(m));
    base = __shfl_sync(FULL, base, 0);
    if (!mine) return -1;
    long long slot = (long long)base + __popc(m & lanes_below(lane));
    return slot < want ? slot : -1;
}

// The sub-task queue of one launch. Records are 16 ints: ready flag (= this launch's
// epoch, so the buffer is never cleared), task, plan, level, lo, hi, f[2..M-1]. Counters,
// each on its own 128-byte line (idle warps poll one while others update the rest): next
// unit, queue head, queue tail (reservations), records pushed, items done, finished, and
// warps that stayed on as consumers (at most max_consumers; the others exit as soon as the
// units run out, so that the next batches' kernels get their SMs). Every
// item (unit or record) is done once; the warp whose item makes done == n_units + pushed
// sets finished (pushes happen before their item is done, so nothing can follow).
struct Queue {
    int* rec;
    int cap;
    int epoch;
    long long split_cycles;   // 0: never split
    unsigned int* ctr;
    unsigned int* each;       // a pipelined launch's per-query words (Q_EACH), or null
    int nq;
};
#define Q_REC 16
#define Q_LINE 32
#define Q_NEXT (0 * Q_LINE)
#define Q_HEAD (1 * Q_LINE)
#define Q_TAIL (2 * Q_LINE)
#define Q_PUSHED (3 * Q_LINE)
#define Q_DONE (4 * Q_LINE)
#define Q_FINISHED (5 * Q_LINE)
#define Q_CONSUMERS (6 * Q_LINE)
#define Q_PIECES 16
// A pipelined launch's words for each query (match_step's `q_each`, Q_EACH a query, each
// counter on a line of its own; build_units adds the query's units, collect_step zeroes
// them for the lane's next launch): its items (units, and sub-tasks as they are pushed),
// those done, and whether the warp that finished its last item has collected its counts
#define Q_EACH (3 * Q_LINE)
#define QE_ITEMS 0
#define QE_DONE Q_LINE
#define QE_COLLECTED (2 * Q_LINE)

__device__ __forceinline__ int ld_volatile(const int* p) { return *(const volatile int*)p; }
__device__ __forceinline__ unsigned ld_volatile(const unsigned* p) {
    return *(const volatile unsigned*)p;
}

// Give away the unsearched rest of the shallowest level in [base, L] that has one, cut into
// up to `pieces` records (one per waiting warp, at most Q_PIECES); the warp then finishes only the subtree it is in. Returns whether
// it split (false when nothing is left or the queue is full: the warp just goes on).
__device__ bool split(int base, int L, int t, int p, int pieces, WarpState& s, const Queue& q,
                      int lane) {
    int lx = base;
    while (lx <= L && s.pos[lx] >= s.ihi[lx]) ++lx;
    if (lx > L) return false;
    int lo = s.pos[lx], r = s.ihi[lx] - lo;
    int want = min(r, pieces);
    int got = 0, first = 0;
    if (lane == 0) {
        first = (int)atomicAdd(q.ctr + Q_TAIL, (unsigned)want);
        got = max(0, min(want, q.cap - first));
        if (got > 0) {   // before anyone can finish one
            if (q.each != nullptr)
                atomicAdd(q.each + (t % q.nq) * Q_EACH + QE_ITEMS, (unsigned)got);
            atomicAdd(q.ctr + Q_PUSHED, (unsigned)got);
        }
        __threadfence();
    }
    got = __shfl_sync(FULL, got, 0);
    first = __shfl_sync(FULL, first, 0);
    if (got == 0) return false;
    if (lane < got) {
        int* rec = q.rec + (long long)(first + lane) * Q_REC;
        rec[1] = t; rec[2] = p; rec[3] = lx;
        rec[4] = lo + (int)((long long)r * lane / got);
        rec[5] = lo + (int)((long long)r * (lane + 1) / got);
        for (int j = 2; j < M; ++j) rec[4 + j] = j < lx ? s.f[j] : 0;
        __threadfence();
        *(volatile int*)rec = q.epoch;
    }
    __syncwarp();
    s.ihi[lx] = lo;
    __syncwarp();
    return true;
}

// T-DFS timeout splitting, on demand only: once this unit has run split_cycles and some
// warp waits for a sub-task, the rest of its shallowest unfinished level goes away.
__device__ __forceinline__ void maybe_split(int base, int L, int t, int p, WarpState& s,
                                            const Queue& q, int lane, long long& t0) {
    if (q.split_cycles <= 0) return;
    int due = 0;
    if (lane == 0 && clock64() - t0 > q.split_cycles) {
        int tail = (int)ld_volatile(q.ctr + Q_TAIL);
        int idle = (int)ld_volatile(q.ctr + Q_HEAD) - tail;
        due = tail < q.cap && idle > 0 ? idle : 0;
    }
    due = __shfl_sync(FULL, due, 0);
    if (due && split(base, L, t, p, min(due, Q_PIECES), s, q, lane)) t0 = clock64();
}

__device__ long long search(int t, int base, int clock, int n, int p, long long k, int nchunk,
                            WarpState& s, const Plans& P, const Graph& g, long long* raw,
                            long long stride, long long* scratch, int lane, int* rows,
                            long long row0, long long want, unsigned long long* slots, Io& io,
                            unsigned int* acc, const Queue& q, long long t0);

// Matches of unit (task, plan, chunk). Count mode when `rows` is null; otherwise writes up
// to want[task] tuples (internal ids by query vertex) at row_off[task] + slot.
// A sub-task (`sub`; the caller has set f[2..base-1]) starts at level `base` and searches
// its candidates [blo, bhi) only; its root checks passed when it was cut off.
__device__ long long run_unit(int t, int a, int b, int el, long long k, int p, int chunk,
                              int nchunk, bool sub, int base, int blo, int bhi,
                              WarpState& s, const Plans& P, const Graph& g, long long* raw,
                              long long stride, long long* scratch, int lane, int* rows,
                              long long row0, long long want, unsigned long long* slots, Io& io,
                              unsigned int* acc, const Queue& q) {
    int n = P.at(p, F_MISC, 0);
    bool listing = rows != nullptr;
    long long t0 = clock64();
    if (sub) {
        int clock = 1;
        __syncwarp();
        s.f[0] = a; s.f[1] = b;
        for (int j = 0; j < base; ++j) s.st_set[j] = 1;
        for (int L = base + 1; L < n; ++L) { s.st_prep[L] = 0; s.mbase[L] = -1; }
        __syncwarp();
        for (int L = 2; L <= base; ++L) {
            ++clock;
            __syncwarp();
            s.st_prep[L] = clock;
            prepare(L, p, k, s, P, g, raw, stride, scratch, lane, io, acc);
        }
        __syncwarp();
        s.pos[base] = blo; s.ihi[base] = bhi; s.mbase[base] = -1;
        __syncwarp();
        return search(t, base, clock, n, p, k, 1, s, P, g, raw, stride, scratch, lane, rows,
                      row0, want, slots, io, acc, q, t0);
    }
    int la = P.at(p, F_LABEL, 0), lb = P.at(p, F_LABEL, 1), rl = P.at(p, F_MISC, 1);
    if (!((la == WILD || la == g.vlabel[a]) && (lb == WILD || lb == g.vlabel[b]) &&
          (rl == WILD || rl == el) && label_filter(a, 0, p, P, g, io) && label_filter(b, 1, p, P, g, io)))
        return 0;
    int m01 = P.at(p, F_GT, 1), l01 = P.at(p, F_LT, 1);
    if (((m01 & 1) && b <= a) || ((l01 & 1) && b >= a)) return 0;
    __syncwarp();
    s.f[0] = a; s.f[1] = b;
    if (n == 2) {
        if (chunk != 0) return 0;
        if (listing) {
            long long slot = reserve(1u, lane == 0, slots, want, lane);
            if (slot >= 0) {
                rows[(row0 + slot) * M + P.at(p, F_VERTEX, 0)] = a;
                rows[(row0 + slot) * M + P.at(p, F_VERTEX, 1)] = b;
            }
        }
        return 1;
    }
    __syncwarp();
    s.st_set[0] = 1; s.st_set[1] = 1;
    for (int L = 2; L < n; ++L) { s.st_prep[L] = 0; s.mbase[L] = -1; }
    return search(t, 2, 1, n, p, k, nchunk, s, P, g, raw, stride, scratch, lane, rows, row0,
                  want, slots, io, acc, q, t0);
}

// The backtracking loop from level `base` (2 for a unit, deeper for a sub-task).
__device__ long long search(int t, int base, int clock, int n, int p, long long k, int nchunk,
                            WarpState& s, const Plans& P, const Graph& g, long long* raw,
                            long long stride, long long* scratch, int lane, int* rows,
                            long long row0, long long want, unsigned long long* slots, Io& io,
                            unsigned int* acc, const Queue& q, long long t0) {
    bool listing = rows != nullptr;
    long long total = 0;   // per-lane partial sums, reduced at the end
    int last = n - 1;
    bool pair_tail = !listing && last >= 3 && P.at(p, F_DEP, last) < last - 1;
    int L = base;
    while (L >= base) {
        if (s.st_prep[L] <= s.st_set[P.at(p, F_DEP, L)]) {
            ++clock;
            __syncwarp();
            s.st_prep[L] = clock;
            prepare(L, p, k, s, P, g, raw, stride, scratch, lane, io, acc);
            if (L == 2 && nchunk > 1) {   // this unit's slice of level 2
                int lo = s.ilo[2], span = s.ihi[2] - lo;
                int per = (span + nchunk - 1) / nchunk;
                __syncwarp();
                s.ilo[2] = lo + min(span, s.chunk * per);
                s.ihi[2] = lo + min(span, (s.chunk + 1) * per);
            }
            __syncwarp();
            s.pos[L] = s.ilo[L];
            s.mbase[L] = -1;
        }
        const long long* buf = raw + (long long)s.rrow[L] * stride;
        if (L == last) {
            if (listing) {
                for (int i0 = s.ilo[L]; i0 < s.ihi[L]; i0 += 32) {
                    int i = i0 + lane;
                    int x = 0;
                    bool ok = false;
                    if (i < s.ihi[L]) { x = (int)(buf[i] & LOW32); ok = valid(x, L, L, p, s, P); }
                    unsigned m = __ballot_sync(FULL, ok);
                    if (ok) ++total;
                    long long slot = reserve(m, ok, slots, want, lane);
                    if (slot >= 0) {
                        int* r = rows + (row0 + slot) * M;
                        for (int j = 0; j < L; ++j) r[P.at(p, F_VERTEX, j)] = s.f[j];
                        r[P.at(p, F_VERTEX, L)] = x;
                    }
                }
            } else {
                long long c = count_level(L, L, p, s, P, raw, stride, lane);
                if (lane == 0) total += c;
            }
            --L;
            continue;
        }
        if (pair_tail && L == last - 1) {
            if (s.st_prep[last] <= s.st_set[P.at(p, F_DEP, last)]) {
                ++clock;
                __syncwarp();
                s.st_prep[last] = clock;
                prepare(last, p, k, s, P, g, raw, stride, scratch, lane, io, acc);
            }
            long long base = count_level(last, L, p, s, P, raw, stride, lane);
            if (base > 0) {
                const long long* tb = raw + (long long)s.rrow[last] * stride;
                int tlo = s.ilo[last], thi = s.ihi[last];
                int tlab = P.at(p, F_LABEL, last);
                int deg = P.at(p, F_DEGREE, L);
                for (int i = s.ilo[L] + lane; i < s.ihi[L]; i += 32) {
                    long long kx = buf[i];
                    int x = (int)(kx & LOW32);
                    if (!valid(x, L, L, p, s, P) || g.len(x) < deg) continue;
                    long long q = lower_bound(tb, tlo, thi, kx);
                    bool both = q < thi && tb[q] == kx && (tlab != WILD || valid(x, last, L, p, s, P));
                    total += both ? base - 1 : base;
                }
            }
            --L;
            continue;
        }
        // next candidate of level L: 32 checked at once, the ballot cached per level
        bool moved = false;
        while (s.pos[L] < s.ihi[L]) {
            int pos = s.pos[L];
            unsigned m;
            int mb = s.mbase[L];
            if (mb >= 0 && pos >= mb && pos < mb + 32) {
                m = s.mask[L] & (FULL << (pos - mb));
            } else {
                int i = pos + lane;
                bool ok = false;
                if (i < s.ihi[L]) {
                    int x = (int)(buf[i] & LOW32);
                    ok = valid(x, L, L, p, s, P) && label_filter(x, L, p, P, g, io);
                }
                m = __ballot_sync(FULL, ok);   // also: every lane has read pos/mbase
                mb = pos;
                s.mbase[L] = mb;
                s.mask[L] = m;
            }
            __syncwarp();
            if (m) {
                int j = __ffs(m) - 1;
                s.f[L] = (int)(buf[mb + j] & LOW32);
                s.pos[L] = mb + j + 1;
                ++clock;
                s.st_set[L] = clock;
                moved = true;
                break;
            }
            s.pos[L] = mb + 32;
        }
        __syncwarp();
        if (!moved) { --L; continue; }
        maybe_split(base, L, t, p, s, q, lane, t0);
        ++L;
        __syncwarp();
        s.mbase[L] = -1;
        if (s.st_prep[L] > s.st_set[P.at(p, F_DEP, L)]) s.pos[L] = s.ilo[L];
    }
    return warp_sum(total);
}

#define MATCH_ARGS \
    /* (task, plan) pairs in scheduling order, each cut into u_nchunk level-2 slices; \
       u_first: exclusive prefix sum of the slices (n_pairs + 1 entries); unit u is slice \
       u - u_first[j] of the pair j with u_first[j] <= u < u_first[j + 1] */ \
    const int* u_task, const int* u_plan, const int* u_first, const int* u_nchunk, int n_pairs, \
    int n_units, \
    /* tasks */ \
    const int* t_a, const int* t_b, const int* t_el, const long long* t_k, \
    /* plans */ \
    const int* pl, const int* nb_level, const int* nb_label, \
    /* graph: pool (device or mapped host memory), per-vertex words, this batch's cache */ \
    const long long* key, const int* elab, const long long* ct, const long long* dt, \
    const long long* seg, const int* vlabel, int host, const long long* cache, int c_n, \
    long long c_e, \
    /* per-warp candidate rows (levels + 1 each: the last is scratch) and the scheduler */ \
    long long* stack, long long stride, long long levels, long long n_warps, \
    /* the sub-task queue: records, capacity, this launch's epoch, timeout (0: no \
       splitting), counters (zero at launch), how many warps may wait for sub-tasks */ \
    int* q_rec, int q_cap, int q_epoch, long long split_cycles, unsigned int* q_ctr, \
    int max_consumers, \
    /* outputs: counts per task; listing (rows may be null for count mode) */ \
    unsigned long long* t_count, int* rows, const long long* t_row_off, \
    const long long* t_want, unsigned long long* t_slots, \
    /* host bytes read, cache hits, misses; per-vertex reads of neighbour arrays (debug, \
       or null) */ \
    unsigned long long* io_total, unsigned int* acc
#define MATCH_PASS(np, nu, ep) u_task, u_plan, u_first, u_nchunk, np, nu, t_a, t_b, t_el, \
    t_k, pl, nb_level, nb_label, key, elab, ct, dt, seg, vlabel, host, cache, c_n, c_e, stack, \
    stride, levels, n_warps, q_rec, q_cap, ep, split_cycles, q_ctr, max_consumers, t_count, \
    rows, t_row_off, t_want, t_slots, io_total, acc

// device words of a pipelined launch (update.cu D_*; tests/gpu/test_kernel_flags.py
// checks the two lists agree)
enum { D_PAIRS = 0, D_UNITS, D_EPOCH, D_STALL, D_NOUT, D_SEQ_LO, D_SEQ_HI, D_NTASK, D_RB_LO,
       D_RB_HI, D_RROWS, D_RROW0, D_SIZE };

// Per-query delivery (design.md 2u): the warp that finishes a query's last item writes that
// query's signed, scaled counts into the launch's result region (update.cu collect_step's
// loop, for one query; counts already zero there are not written again), then the launch's
// sequence number into the query's ready word (mapped host memory, read by the host's
// BatchTicket.ready_set), so the query's deltas need not wait for the other queries' units.
// The region's counts column, as update.cu region_at lays it out: tick, src, dst, then the
// counts, `rows` rows each.
#define COLLECT_UNROLL 8
__device__ __forceinline__ void collect_query(int qi, int nq, const int* dims,
                                           const unsigned long long* t_count, const int* t_row,
                                           const long long* scale, long long* ready,
                                           unsigned int* each, int lane) {
    long long ne = dims[D_NTASK] / nq;   // the launch's edge updates (tasks per query)
    char* base = (char*)(((unsigned long long)(unsigned)dims[D_RB_HI] << 32)
                         | (unsigned)dims[D_RB_LO]);
    long long* counts = (long long*)base + 3 * (long long)dims[D_RROWS];
    long long row0 = dims[D_RROW0], num = scale[qi], den = scale[nq + qi];
    __threadfence();   // every lane: the items' counts before its loads (lane 0 saw them done)
    for (long long e0 = 0; e0 < ne; e0 += 32 * COLLECT_UNROLL) {
        unsigned long long c[COLLECT_UNROLL];
#pragma unroll
        for (int u = 0; u < COLLECT_UNROLL; ++u) {   // the loads first, all in flight
            long long e = e0 + 32 * u + lane;
            c[u] = e < ne ? __ldcg(t_count + e * nq + qi) : 0ULL;   // (atomics: L2's)
        }
#pragma unroll
        for (int u = 0; u < COLLECT_UNROLL; ++u) {
            if (c[u] == 0) continue;
            int rc = t_row[e0 + 32 * u + lane];
            long long v = (long long)c[u] * num / den;
            counts[(row0 + (rc >> 1)) * nq + qi] = (rc & 1) ? -v : v;
        }
    }
    __threadfence_system();   // every lane's counts before the ready word
    __syncwarp();
    if (lane == 0) {
        each[qi * Q_EACH + QE_COLLECTED] = 1u;   // collect_step leaves it alone
        ready[qi] = ((long long)dims[D_SEQ_HI] << 32) | (unsigned)dims[D_SEQ_LO];
    }
}

// The matching loop of one launch: warps take units, then sub-tasks, until all are done.
// With `q_each` (the pipeline's launches), each query's counts are delivered as soon as its
// own items are done (collect_query).
__device__ __forceinline__ void match_body(MATCH_ARGS, const int* dims, unsigned int* q_each,
                                           int nq, const int* t_row, const long long* scale,
                                           long long* ready) {
    __shared__ WarpState states[WARPS_PER_BLOCK];
    int lane = threadIdx.x & 31;
    int wib = threadIdx.x >> 5;
    WarpState& s = states[wib];
    long long warp = (long long)blockIdx.x * WARPS_PER_BLOCK + wib;
    if (warp >= n_warps) return;   // the stack holds rows for n_warps warps only
    long long* raw = stack + warp * (levels + 1) * stride;   // rows 0..levels-1, then scratch
    long long* scratch = raw + levels * stride;
    // cache buffer: rowidx (int32, padded to 8 bytes), rowptr, key, ct, dt, elab (int32)
    const long long* c_ptr = cache + (c_n + 1) / 2;
    const long long* c_key = c_ptr + c_n + 1;
    Graph g{key, elab, ct, dt, seg, vlabel, host, (const int*)cache, c_ptr, c_key,
            (const int*)(c_key + 3 * c_e), c_key + c_e, c_key + 2 * c_e, c_n};
    Plans P{pl, nb_level, nb_label};
    Queue q{q_rec, q_cap, q_epoch, split_cycles, q_ctr, q_each, nq};
    Io io{0, 0, 0};
    bool units = true;
    while (true) {
        int j = 0, chunk = 0, t = 0, plan = 0, base = 2, blo = 0, bhi = 0;
        bool sub = !units;
        if (units) {
            unsigned int u = 0;
            if (lane == 0) u = atomicAdd(q_ctr + Q_NEXT, 1u);
            u = __shfl_sync(FULL, u, 0);
            if (u >= (unsigned int)n_units) {
                int stay = 0;
                if (lane == 0) stay = (int)atomicAdd(q_ctr + Q_CONSUMERS, 1u) < max_consumers;
                if (!__shfl_sync(FULL, stay, 0)) break;
                units = false;
                continue;
            }
            int lo = 0, hi = n_pairs - 1;   // last pair j with u_first[j] <= u
            while (lo < hi) {
                int mid = (lo + hi + 1) >> 1;
                if ((unsigned int)u_first[mid] <= u) lo = mid; else hi = mid - 1;
            }
            j = lo; chunk = (int)u - u_first[lo]; t = u_task[j]; plan = u_plan[j];
        } else {   // units all taken: sub-tasks, until every item is done
            int h = -1;
            if (lane == 0) {
                h = (int)atomicAdd(q_ctr + Q_HEAD, 1u);
                const int* rec = q_rec + (long long)h * Q_REC;
                unsigned nap = 128;
                while (h < q_cap && ld_volatile(rec) != q_epoch) {
                    if (ld_volatile(q_ctr + Q_FINISHED)) { h = q_cap; break; }
                    __nanosleep(nap);
                    nap = min(nap * 2, 4096u);
                }
                __threadfence();
            }
            h = __shfl_sync(FULL, h, 0);
            if (h >= q_cap) break;
            const int* rec = q_rec + (long long)h * Q_REC;
            int v = lane < Q_REC ? ld_volatile(rec + lane) : 0;
            t = __shfl_sync(FULL, v, 1); plan = __shfl_sync(FULL, v, 2);
            base = __shfl_sync(FULL, v, 3); blo = __shfl_sync(FULL, v, 4);
            bhi = __shfl_sync(FULL, v, 5);
            __syncwarp();
            if (lane >= 6 && lane < Q_REC && lane - 4 < base) s.f[lane - 4] = v;   // f[2..]
        }
        long long want = 0, row0 = 0;
        bool skip = false;
        if (rows != nullptr) {
            want = t_want[t];
            row0 = t_row_off[t];
            skip = want <= 0;
        }
        if (!skip) {
            __syncwarp();
            s.chunk = sub ? 1 : chunk;
            __syncwarp();
            long long c = run_unit(t, t_a[t], t_b[t], t_el[t], t_k[t], plan, chunk,
                                   sub ? 1 : u_nchunk[j], sub, base, blo, bhi, s, P, g,
                                   raw, stride, scratch, lane, rows, row0, want, t_slots + t,
                                   io, acc, q);
            if (lane == 0 && c && rows == nullptr) atomicAdd(t_count + t, (unsigned long long)c);
        }
        __syncwarp();
        if (lane == 0) {
            __threadfence();
            unsigned done = atomicAdd(q_ctr + Q_DONE, 1u) + 1;
            __threadfence();
            if (done == (unsigned)n_units + ld_volatile(q_ctr + Q_PUSHED))
                atomicExch(q_ctr + Q_FINISHED, 1u);
        }
        if (q_each != nullptr) {   // the item's query: was it its last?
            int qi = t % nq, last = 0;
            if (lane == 0) {
                unsigned* qc = q_each + qi * Q_EACH;
                unsigned d = atomicAdd(qc + QE_DONE, 1u) + 1;
                __threadfence();
                last = d == ld_volatile(qc + QE_ITEMS);
            }
            if (__shfl_sync(FULL, last, 0))
                collect_query(qi, nq, dims, t_count, t_row, scale, ready, q_each, lane);
        }
    }
    if (io_total != nullptr) {
        long long b = warp_sum((long long)io.bytes), h = warp_sum((long long)io.hits),
                  m = warp_sum((long long)io.misses);
        if (lane == 0 && (b | h | m)) {
            atomicAdd(io_total, (unsigned long long)b);
            atomicAdd(io_total + 1, (unsigned long long)h);
            atomicAdd(io_total + 2, (unsigned long long)m);
        }
    }
}


// 5 blocks of 4 warps per SM: 96 registers, no spills (unbounded, ptxas takes 109 and only
// 4 blocks fit, which cost the Yeast batch about a fifth of its speed). MATCH_BLOCKS (the
// loader's CSM_CUDA_MATCH_BLOCKS) trades registers for resident warps: 6 blocks at 80
// registers spill 120 bytes, 8 at 64 spill 496 (ptxas, sm_90)
#ifndef MATCH_BLOCKS
#define MATCH_BLOCKS 5
#endif
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, MATCH_BLOCKS) match_units(
    MATCH_ARGS) {
    match_body(MATCH_PASS(n_pairs, n_units, q_epoch), nullptr, nullptr, 0, nullptr, nullptr,
               nullptr);
}

// The pipeline's launch (gpu/cuda/_pipeline.py): the unit counts and the queue epoch come from
// the device (kernels/update.cu::build_units wrote them), so one captured graph serves
// every batch; n_pairs, n_units and q_epoch are ignored. Each query's counts go into the
// result region once its items are done (`q_each`, `ready`: collect_query); a query
// without items was made ready by ready_idle before it.
extern "C" __global__ void __launch_bounds__(32 * WARPS_PER_BLOCK, MATCH_BLOCKS) match_step(
    const int* dims, MATCH_ARGS, unsigned int* q_each, int nq, const int* t_row,
    const long long* scale, long long* ready) {
    int nu = dims[D_UNITS];
    if (nu == 0) return;   // no unit: nothing would end the wait for sub-tasks
    match_body(MATCH_PASS(dims[D_PAIRS], nu, dims[D_EPOCH]), dims, q_each, nq, t_row, scale,
               ready);
}

// Before a pipelined launch's match_step (one warp, its own kernel: in match_step the few
// lines cost its loop 100 bytes of spills): queries without items in the launch (no unit
// passed their roots' checks) are ready at once, since their rows' counts are
// build_units' zeros and nothing can add items to them.
extern "C" __global__ void ready_idle(const int* dims, unsigned int* q_each, int nq,
                                      long long* ready) {
    int lane = threadIdx.x;
    for (int q0 = 0; q0 < nq; q0 += 32) {
        int q = q0 + lane;
        bool none = q < nq && q_each[q * Q_EACH + QE_ITEMS] == 0;
        if (none) q_each[q * Q_EACH + QE_COLLECTED] = 1u;
        __threadfence_system();
        __syncwarp();
        if (none) ready[q] = ((long long)dims[D_SEQ_HI] << 32) | (unsigned)dims[D_SEQ_LO];
    }
}

// Graph updater, in two launches on one stream: install_entries writes the entries of new
// neighbour-array versions (fresh pool space) and in-place lifetime ends; install_vertices
// then publishes each touched vertex's version word and label. Stream order makes every
// entry visible before the word that points at it, so kernels of earlier batches still
// running read either the old version or the complete new one (both exact for their tick).
// The host sends one packed int64 buffer: dst, key, ct, dt, elab per entry, then id, seg
// word, label per vertex.
extern "C" __global__ void install_entries(const long long* buf, long long n_entries,
                                           long long* key, int* elab, long long* ct,
                                           long long* dt) {
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    for (long long i = tid; i < n_entries; i += step) {
        long long d = buf[i];
        key[d] = buf[n_entries + i];
        ct[d] = buf[2 * n_entries + i];
        elab[d] = (int)buf[4 * n_entries + i];
        dt[d] = buf[3 * n_entries + i];
    }
}

extern "C" __global__ void install_vertices(const long long* buf, long long n_entries,
                                            long long n_vertices, long long* seg, int* vlabel) {
    long long tid = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    long long step = (long long)gridDim.x * blockDim.x;
    const long long* v = buf + 5 * n_entries;
    for (long long i = tid; i < n_vertices; i += step) {
        int x = (int)v[i];
        vlabel[x] = (int)v[2 * n_vertices + i];
        seg[x] = v[n_vertices + i];
    }
}
