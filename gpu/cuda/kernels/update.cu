// The graph updater on the device (DCSM's GU): resolves raw updates against the device
// multi-version graph in arrival order and builds the new neighbour-array versions there,
// so the host hands over raw updates only and copies nothing per batch.
//
// It is the host updater (gpu/graph/_kernels.py::apply_batch, copy-on-write mode) moved
// line for line onto one warp: the same statuses, reasons, internal ids, ticks and version
// contents, which is what the parity test checks. Sequential semantics need one resolver;
// the warp parallelises inside each update: 32-way searches (one memory round trip per
// 32x narrowing), ballot-compacted copies, chunked shifts.
//
// Visibility (DCSM Property 3). Matching of earlier batches may run while this kernel
// runs, reading the published per-vertex words `seg`. New versions go to fresh pool space
// and stay private until the end of the launch, when their words are published after a
// fence; deletions only end lifetimes in place (dt = a tick later than every reader's). So
// a reader sees either the old version or a complete new one, both exact for its tick.
//
// Ids: the host maps external ids to dense *slots* (one per external id, forever);
// `slot_vid[slot]` is the slot's current internal id (-1: none). A deleted or relabelled
// vertex gets a fresh internal id, so an internal id's label never changes.

#define FULL 0xffffffffu
#define INF 0x7fffffffffffffffLL
#define WILD (-2147483647 - 1)
#define SEG_BITS 24

// op codes (gpu/_types.py UpdateOp), statuses, reasons, return codes
#define OP_INS_E 0
#define OP_DEL_E 1
#define OP_INS_V 2
#define OP_DEL_V 3
#define ST_APPLIED 0
#define ST_IGNORED 1
#define ST_REJECTED 2
#define R_NONE 0
#define R_LOOP 1
#define R_RELABEL 2
#define R_WILD 3
#define DONE 0
#define NEED_POOL 1
#define NEED_OUT 2
#define NEED_VERTEX 3
// the grid's barrier timed out (its blocks could not all run at once): the graph is in doubt
#define FAULT 5
// launch_front's: the range does not fit there (the tiles resolve it); never a launch's code
#define DECLINED 6

// meta words (kept in device memory between launches; the host reads them back)
enum { M_NV = 0, M_POOL_USED, M_TICK, M_BATCH, M_WATERMARK, M_NEDGES, M_GARBAGE,
       M_MAXLEN, M_RESUME, M_NOUT, M_CODE, M_LAUNCH, M_RECLAIMED, M_SIZE };

struct Dev {
    // entry pool (read by the matching kernels)
    long long* key; int* elab; long long* ct; long long* dt;
    // published per-vertex words (read by the matching kernels)
    long long* seg; int* vlabel;
    // the updater's own per-vertex state
    long long* off; int* len; int* cap; long long* vbatch; int* vdeg; unsigned char* valive;
    int* vslot; long long* vext;
    long long* vpub;   // the last launch that listed the vertex for publishing
    // slots
    int* slot_vid; const long long* slot_ext;
    long long pool_cap; long long vcap;
};

struct Out {
    int* raw; signed char* op; int* a; int* b; long long* src; long long* dst; int* el;
    long long* tick; signed char* status; signed char* reason; long long cap;
};

__device__ __forceinline__ unsigned lanes_below(int lane) { return (1u << lane) - 1u; }

__device__ __forceinline__ long long make_key(int label, int v) {
    return ((long long)label << 32) | (long long)(unsigned)v;
}

// First index in [lo, hi) with a[i] >= x: 32 probes per round, so a round trip narrows
// the range 32x.
__device__ long long warp_lower_bound(const long long* a, long long lo, long long hi,
                                      long long x, int lane) {
    while (hi - lo > 32) {
        long long step = (hi - lo + 31) / 32;
        long long p = lo + lane * step;
        bool less = p < hi && a[p] < x;
        int c = __popc(__ballot_sync(FULL, less));   // the probes below x are a prefix
        if (c == 0) return lo;
        long long nlo = lo + (long long)(c - 1) * step + 1;
        long long nhi = min(hi, lo + (long long)c * step);
        lo = nlo;
        hi = nhi;
    }
    long long p = lo + lane;
    bool less = p < hi && a[p] < x;
    return lo + __popc(__ballot_sync(FULL, less));
}

// The alive entry with key k in [off, off + n), or -1 (equal keys are contiguous).
__device__ long long find_alive(const Dev& g, long long off, long long n, long long k,
                                int lane) {
    long long end = off + n;
    long long i = warp_lower_bound(g.key, off, end, k, lane);
    while (i < end) {
        long long p = i + lane;
        bool in = p < end && g.key[p] == k;
        unsigned hit = __ballot_sync(FULL, in && g.dt[p] == INF);
        if (hit) return i + __ffs(hit) - 1;
        if (__ballot_sync(FULL, in) != FULL) return -1;
        i += 32;
    }
    return -1;
}

#define UNROLL 4

// UNROLL rounds of 32 entries of a version: entries [s0, s1) of the one at src, all loads
// issued before any is used; ok: a reader can still see it (dt > w).
struct Run {
    long long k[UNROLL], t0[UNROLL], t1[UNROLL];
    int el[UNROLL];
    bool ok[UNROLL];
};

__device__ __forceinline__ void load_run(const Dev& g, long long src, long long s0,
                                         long long s1, long long w, int lane, Run& r) {
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
        long long i = s0 + 32 * u + lane;
        r.ok[u] = false; r.k[u] = 0; r.t0[u] = 0; r.t1[u] = 0; r.el[u] = 0;
        if (i < s1) {
            r.t1[u] = g.dt[src + i];
            r.k[u] = g.key[src + i]; r.t0[u] = g.ct[src + i]; r.el[u] = g.elab[src + i];
            r.ok[u] = r.t1[u] > w;
        }
    }
}

__device__ __forceinline__ void store_entry(const Dev& g, long long d, const Run& r, int u) {
    g.key[d] = r.k[u]; g.ct[d] = r.t0[u]; g.dt[d] = r.t1[u]; g.elab[d] = r.el[u];
}

// Copy the entries of [src, src + n) that a reader can still see (dt > w) to dst on, in
// order; returns how many. dst <= src is safe: each chunk is read before it is written.

// Copies keep UNROLL chunks of 32 loads in flight before any store: the source and the
// destination are the same arrays, so the compiler cannot hoist the next chunk's loads
// above this chunk's stores, and a hub's version would cost one memory latency per 32
// entries.
__device__ long long copy_live(const Dev& g, long long src, long long n, long long dst,
                               long long w, int lane) {
    long long m = 0;
    for (long long c = 0; c < n; c += 32 * UNROLL) {
        Run r;
        load_run(g, src, c, n, w, lane, r);
        __syncwarp();
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            unsigned mk = __ballot_sync(FULL, r.ok[u]);
            if (r.ok[u]) store_entry(g, dst + m + __popc(mk & lanes_below(lane)), r, u);
            m += __popc(mk);
        }
        __syncwarp();
    }
    return m;
}

struct State {   // the meta words, in registers (identical in every lane)
    long long nv, pool_used, tick, batch, watermark, nedges, garbage, maxlen, launch;
    int touched;
};

struct Tail {   // a resolve's end: its meta words, where to resume, the output rows
    State s;
    long long resume, n_out;
};

__device__ __forceinline__ void touch(int v, int* touched, State& s, int lane) {
    if (lane == 0) touched[s.touched] = v;
    ++s.touched;
}

// Pool entries inserting into v may take (gpu/graph/_kernels.py::_need, copy-on-write).
// A version may be written in place only if this launch built it: anything older has been
// published and may be read by matching in flight.
__device__ __forceinline__ long long need(const Dev& g, int v, const State& s) {
    if (g.vbatch[v] != s.launch) {
        long long n = g.len[v];
        return n + max(4LL, n >> 3);
    }
    if (g.len[v] == g.cap[v]) return 2LL * g.cap[v] + 2;
    return 0;
}

// A new version of v (copy-on-write); drops entries no reader can see. Each vertex enters
// the publish list once per launch.
__device__ void relocate(const Dev& g, int v, long long c, State& s, int* touched, int lane) {
    bool first = g.vpub[v] != s.launch;
    long long dst = s.pool_used;
    long long m = copy_live(g, g.off[v], g.len[v], dst, s.watermark, lane);
    s.garbage += g.cap[v];
    s.pool_used = dst + c;
    if (lane == 0) {
        g.off[v] = dst; g.len[v] = (int)m; g.cap[v] = (int)c; g.vbatch[v] = s.launch;
        g.vpub[v] = s.launch;
    }
    __syncwarp();
    if (first) touch(v, touched, s, lane);
}

__device__ void insert_entry(const Dev& g, int v, long long k, int el, long long t,
                             State& s, int* touched, int lane) {
    long long c = need(g, v, s);
    if (c > 0) relocate(g, v, c, s, touched, lane);
    long long off = g.off[v], n = g.len[v];
    // upper bound of k: equal keys keep creation order
    long long lo = warp_lower_bound(g.key, off, off + n, k + 1, lane);
    // shift [lo, off + n) one to the right, top chunk first (read all, then write)
    for (long long top = off + n; top > lo; top -= 32) {
        long long i = top - 32 + lane;
        bool mine = i >= lo;
        long long k0 = 0, t0 = 0, t1 = 0;
        int e0 = 0;
        if (mine) { k0 = g.key[i]; t0 = g.ct[i]; t1 = g.dt[i]; e0 = g.elab[i]; }
        __syncwarp();
        if (mine) { g.key[i + 1] = k0; g.ct[i + 1] = t0; g.dt[i + 1] = t1; g.elab[i + 1] = e0; }
        __syncwarp();
    }
    if (lane == 0) {
        g.key[lo] = k; g.elab[lo] = el; g.ct[lo] = t; g.dt[lo] = INF;
        g.len[v] = (int)(n + 1);
    }
    __syncwarp();
    s.maxlen = max(s.maxlen, n + 1);
}

__device__ int new_vertex(const Dev& g, int slot, int label, State& s, int lane) {
    int v = (int)s.nv;
    s.nv += 1;
    if (lane == 0) {
        g.vlabel[v] = label; g.vext[v] = g.slot_ext[slot]; g.vslot[v] = slot; g.valive[v] = 1;
        g.vdeg[v] = 0; g.off[v] = 0; g.len[v] = 0; g.cap[v] = 0; g.vbatch[v] = -1;
        g.slot_vid[slot] = v;
    }
    __syncwarp();
    return v;   // its word still has length 0 (an empty version): nothing to publish yet
}

// End the alive edge a-b (entry e in a's version) at a new tick.
__device__ long long end_edge(const Dev& g, long long e, int a, int b, State& s, int lane) {
    long long f = find_alive(g, g.off[b], g.len[b], make_key(g.vlabel[a], a), lane);
    long long t = ++s.tick;
    if (lane == 0) {
        g.dt[e] = t; g.dt[f] = t;
        g.vdeg[a] -= 1; g.vdeg[b] -= 1;
    }
    __syncwarp();
    s.nedges -= 1;
    return t;
}

__device__ __forceinline__ void put(const Out& o, long long j, int raw, int op, int a, int b,
                                   long long src, long long dst, int el, long long tick,
                                   int status, int reason, int lane) {
    if (lane == 0) {
        o.raw[j] = raw; o.op[j] = (signed char)op; o.a[j] = a; o.b[j] = b; o.src[j] = src;
        o.dst[j] = dst; o.el[j] = el; o.tick[j] = tick; o.status[j] = (signed char)status;
        o.reason[j] = (signed char)reason;
    }
}

// The sequential resolver (one warp, all lanes): updates [i, n) in order, exactly as the
// host updater. Returns DONE, or the code of what is full, with i at the update to resume
// from (nothing of it written).
__device__ int seq_resolve(const Dev& g, const Out& o, const int* ops, const int* sx,
                           const int* sy, const int* lab, long long& i, long long n,
                           long long& n_out, State& s, int* touched, int* nbr,
                           long long* nbr_ext, int* order, int lane) {
    int* slot_vid = g.slot_vid;
    const long long* slot_ext = g.slot_ext;
    long long out_cap = o.cap, vcap = g.vcap, pool_cap = g.pool_cap;
    long long *key = g.key, *dt = g.dt, *off = g.off, *vext = g.vext;
    int *elab = g.elab, *len = g.len, *vlabel = g.vlabel, *vdeg = g.vdeg;
    unsigned char* valive = g.valive;
    int code = DONE;
    for (; i < n; ++i) {
        int op = ops[i], x = sx[i], y = sy[i], lb = lab[i];
        long long xe = slot_ext[x], ye = y >= 0 ? slot_ext[y] : -1;
        if (n_out >= out_cap) { code = NEED_OUT; break; }
        long long j = n_out;
        if (op == OP_INS_E || op == OP_DEL_E) {
            if (x == y) {
                put(o, j, (int)i, op, -1, -1, xe, ye, lb, 0, ST_REJECTED, R_LOOP, lane);
                ++n_out;
                continue;
            }
            if (op == OP_INS_E && lb == WILD) {
                put(o, j, (int)i, op, -1, -1, xe, ye, lb, 0, ST_REJECTED, R_WILD, lane);
                ++n_out;
                continue;
            }
            int a = slot_vid[x], b = slot_vid[y];
            if (op == OP_DEL_E) {
                long long e = -1;
                if (a >= 0 && b >= 0) e = find_alive(g, off[a], len[a], make_key(vlabel[b], b), lane);
                if (e < 0) {
                    put(o, j, (int)i, op, -1, -1, xe, ye, lb, 0, ST_IGNORED, R_NONE, lane);
                    ++n_out;
                    continue;
                }
                int el = elab[e];
                long long t = end_edge(g, e, a, b, s, lane);
                put(o, j, (int)i, op, a, b, xe, ye, el, t, ST_APPLIED, R_NONE, lane);
                ++n_out;
                continue;
            }
            if (s.nv + (a < 0) + (b < 0) > vcap) { code = NEED_VERTEX; break; }
            // a new vertex's first version takes 4 entries (need() of an empty version)
            long long need_new = (a < 0 ? 4 : 0) + (b < 0 ? 4 : 0);
            if (a >= 0 && b >= 0 &&
                find_alive(g, off[a], len[a], make_key(vlabel[b], b), lane) >= 0) {
                put(o, j, (int)i, op, -1, -1, xe, ye, lb, 0, ST_IGNORED, R_NONE, lane);
                ++n_out;
                continue;
            }
            long long c = (a >= 0 ? need(g, a, s) : 0) + (b >= 0 ? need(g, b, s) : 0) + need_new;
            if (s.pool_used + c > pool_cap) { code = NEED_POOL; break; }
            if (a < 0) a = new_vertex(g, x, 0, s, lane);
            if (b < 0) b = new_vertex(g, y, 0, s, lane);
            long long t = ++s.tick;
            insert_entry(g, a, make_key(vlabel[b], b), lb, t, s, touched, lane);
            insert_entry(g, b, make_key(vlabel[a], a), lb, t, s, touched, lane);
            if (lane == 0) { vdeg[a] += 1; vdeg[b] += 1; }
            __syncwarp();
            s.nedges += 1;
            put(o, j, (int)i, op, a, b, xe, ye, lb, t, ST_APPLIED, R_NONE, lane);
            ++n_out;
            continue;
        }
        // vertex operations
        int a = slot_vid[x];
        if (op == OP_INS_V) {
            if (lb == WILD) {
                put(o, j, (int)i, op, -1, -1, xe, -1, lb, 0, ST_REJECTED, R_WILD, lane);
            } else if (a >= 0 && vlabel[a] == lb) {
                put(o, j, (int)i, op, a, -1, xe, -1, lb, 0, ST_IGNORED, R_NONE, lane);
            } else if (a >= 0 && vdeg[a] > 0) {
                put(o, j, (int)i, op, a, -1, xe, -1, lb, 0, ST_REJECTED, R_RELABEL, lane);
            } else {
                if (s.nv + 1 > vcap) { code = NEED_VERTEX; break; }
                if (a >= 0 && lane == 0) valive[a] = 0;
                a = new_vertex(g, x, lb, s, lane);
                long long t = ++s.tick;
                put(o, j, (int)i, op, a, -1, xe, -1, lb, t, ST_APPLIED, R_NONE, lane);
            }
            ++n_out;
            continue;
        }
        // DELETE_VERTEX: its edges first, ascending external neighbour id, one tick each
        if (a < 0) {
            put(o, j, (int)i, op, -1, -1, xe, -1, lb, 0, ST_IGNORED, R_NONE, lane);
            ++n_out;
            continue;
        }
        long long d = vdeg[a];
        if (n_out + d + 1 > out_cap) { code = NEED_OUT; break; }
        long long ao = off[a], an = len[a];
        long long m = 0;
        for (long long c0 = 0; c0 < an; c0 += 32) {   // alive neighbours, in version order
            long long e = ao + c0 + lane;
            bool ok = c0 + lane < an && dt[e] == INF;
            unsigned mk = __ballot_sync(FULL, ok);
            if (ok) {
                int w = (int)(key[e] & 0xffffffffLL);
                long long r = m + __popc(mk & lanes_below(lane));
                nbr[r] = w;
                nbr_ext[r] = vext[w];
            }
            m += __popc(mk);
        }
        __syncwarp();
        for (long long r = lane; r < m; r += 32) {   // rank by external id (ids distinct)
            long long xr = nbr_ext[r];
            long long rank = 0;
            for (long long q = 0; q < m; ++q) rank += nbr_ext[q] < xr;
            order[rank] = nbr[r];
        }
        __syncwarp();
        for (long long r = 0; r < m; ++r) {
            int w = order[r];
            long long e = find_alive(g, ao, an, make_key(vlabel[w], w), lane);
            int el = elab[e];
            long long t = end_edge(g, e, a, w, s, lane);
            put(o, n_out, (int)i, OP_DEL_E, a, w, xe, vext[w], el, t, ST_APPLIED, R_NONE, lane);
            ++n_out;
        }
        long long t = ++s.tick;
        put(o, n_out, (int)i, OP_DEL_V, a, -1, xe, -1, lb, t, ST_APPLIED, R_NONE, lane);
        if (lane == 0) { valive[a] = 0; slot_vid[x] = -1; }
        __syncwarp();
        ++n_out;
    }
    return code;
}

// Call after every writer has fenced and passed a barrier with the publishers: entries
// first, then the words that point at them.
__device__ void publish_touched(const Dev& g, const int* touched, int count, int t, int step) {
    for (int q = t; q < count; q += step) {
        int v = touched[q];
        g.seg[v] = (g.off[v] << SEG_BITS) | (long long)g.len[v];
    }
    __threadfence();
}

__device__ void store_meta(long long* meta, const State& s, long long i, long long n_out,
                           int code) {
    meta[M_NV] = s.nv; meta[M_POOL_USED] = s.pool_used; meta[M_TICK] = s.tick;
    meta[M_NEDGES] = s.nedges; meta[M_GARBAGE] = s.garbage; meta[M_MAXLEN] = s.maxlen;
    meta[M_RESUME] = i; meta[M_NOUT] = n_out; meta[M_CODE] = code;
    meta[M_LAUNCH] = s.launch;
}

__device__ State load_meta(const long long* meta) {
    return State{meta[M_NV], meta[M_POOL_USED], meta[M_TICK], meta[M_BATCH], meta[M_WATERMARK],
                 meta[M_NEDGES], meta[M_GARBAGE], meta[M_MAXLEN], meta[M_LAUNCH] + 1, 0};
}

// One warp resolves updates i0.. of the batch; resumable: on a full pool, output or vertex
// array it stops before update i (nothing of it written) and records where to resume.
// `nbr` / `nbr_ext` / `order` are scratch of at least max-degree entries (vertex deletion).
extern "C" __global__ void apply_updates(
    long long i0, long long n_out0, long long n, const int* ops, const int* sx,
    const int* sy, const int* lab,
    long long* key, int* elab, long long* ct, long long* dt, long long* seg, int* vlabel,
    long long* off, int* len, int* cap, long long* vbatch, int* vdeg, unsigned char* valive,
    int* vslot, long long* vext, long long* vpub, int* slot_vid, const long long* slot_ext,
    long long pool_cap, long long vcap,
    int* o_raw, signed char* o_op, int* o_a, int* o_b, long long* o_src, long long* o_dst,
    int* o_el, long long* o_tick, signed char* o_status, signed char* o_reason,
    long long out_cap, int* touched, int* nbr, long long* nbr_ext, int* order,
    long long* meta) {
    int lane = threadIdx.x & 31;
    if (threadIdx.x >= 32 || blockIdx.x > 0) return;
    Dev g{key, elab, ct, dt, seg, vlabel, off, len, cap, vbatch, vdeg, valive, vslot, vext,
          vpub, slot_vid, slot_ext, pool_cap, vcap};
    Out o{o_raw, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick, o_status, o_reason, out_cap};
    State s = load_meta(meta);
    long long n_out = n_out0;
    long long i = i0;
    int code = seq_resolve(g, o, ops, sx, sy, lab, i, n, n_out, s, touched, nbr, nbr_ext,
                           order, lane);
    __threadfence();
    __syncwarp();
    publish_touched(g, touched, s.touched, lane, 32);
    if (lane == 0) store_meta(meta, s, i, n_out, code);
}


// ---------------------------------------------------------------------------------------
// The parallel resolver (DCSM's GU with Fig. 43's idea: build each touched version once
// from its live entries and the batch's new ones). One block of TILE threads takes the
// batch a tile at a time, in order. A tile with a vertex operation goes to the sequential
// resolver above (warp 0): vertex deletions expand by neighbour order and are rare. A tile
// of edge operations only is resolved in parallel with the same outcome as one at a time:
//   1. endpoints without a vertex get one at their first valid insertion, ids in the
//      order (update, src before dst), as the host hands them out;
//   2. updates are grouped by unordered endpoint pair (a sort in shared memory); one
//      thread per group replays the group in arrival order from the pair's current state:
//      each update's status follows from the previous one's alone;
//   3. ticks go to the applied updates in arrival order (a block scan);
//   4. deletions of edges older than the tile end their entries in place; every applied
//      insertion makes two new entries (their dt is the tick of a deletion later in the
//      tile, if any);
//   5. each touched vertex gets one new version, built by one warp: its live entries are
//      compacted into fresh pool space and its new entries (sorted by key, then creation)
//      merged in, old before new on equal keys, as the host's upper-bound insertion
//      places them; its word is published after a fence.
// Capacities are checked before the tile writes anything (bounds), so a full pool, output
// or vertex array returns with the tile untouched.
#define TILE 1024
#define NWARPS (TILE / 32)
// Edge-only tiles resolved one after another gather their new entries, and their touched
// vertices get one new version for all of them (a build), not one a tile: a hub named in
// every tile of a launch is copied once. A build holds at most BUILD_TILES tiles; the grid
// builds when it is full, before a tile with a vertex operation, before a tile that does
// not fit, and at the end. A pair seen in an earlier tile of the build is looked up in the
// pair table (its state after that tile), not in its version, which the build has not
// rewritten yet.
#define BUILD_TILES 32
// A vertex's new entries are ranked in O(k^2 / 32) loads, shared by the warps of its old
// version's chunks (one warp for a short version): a build ends after the tile that gives
// one vertex more than BUILD_KCAP of them, so k is at most 2 x TILE.
#define BUILD_KCAP TILE
#define PT_BITS 17   // the pair table: 4 x the updates of a build
#define PT_SIZE (1 << PT_BITS)
static_assert(PT_SIZE == 4 * BUILD_TILES * TILE, "the pair table: four slots an update of a build");

struct Scratch {   // device memory the host allocates with the graph
    int* slot_first;     // per slot: first (2 * update + side) creating it (INT_MAX: none)
    long long* vtile;    // per vertex: the last build stamp that counted or claimed it
    int* vcnt;           // per vertex: new entries this build (back to 0 after)
    int* owners;         // 2 * BUILD_TILES * TILE (the build's)
    int* bucket;         // 2 * BUILD_TILES * TILE + 1: owner q's entries start at bucket[q]
    // the build's new entries, 2 an update (index 2 x (update - build's first) + side)
    int* e_owner; long long* e_key; int* e_lab; long long* e_ct; long long* e_dt;
    long long* b_key; int* b_lab; long long* b_ct; long long* b_dt;   // bucketed
    long long* s_key; int* s_lab; long long* s_ct; long long* s_dt;   // sorted
    // step 5 on the grid: owner q's old version, new one and items (chunks of its old
    // version), the live entries of each item, finished chunks per owner
    long long* own_src; int* own_n0; long long* own_dst; int* own_cap;
    int* own_item;       // owner q's items start at own_item[q]
    int* own_done;
    int* item_owner; int* cnt;   // ITEMS
    // the pair table (PT_SIZE): unordered slot pair, the build's stamp that wrote it, and
    // the pair's state after the last tile that named it (pt_pack)
    unsigned long long* pt_key; long long* pt_stamp; long long* pt_val;
    unsigned long long* gw;      // the grid's words (W_*)
    long long* blk;      // 3 a block: its owners' space, packed items and entries, capacity
    // the launch front (launch_front): a table of the range's unordered slot pairs (0:
    // empty), each pair's members so far and their updates (LF_GMAX a pair), and each
    // update's status, label and link (an insertion's deletion, a deletion's insertion)
    unsigned long long* lf_key; int* lf_cnt; int* lf_list; int* lf_st; int* lf_el;
    int* lf_link;
    int* slot_tally;     // per slot: the range's insertions naming it (back to 0 after)
};
// items per build at most: the chunk grows with the build's version lengths to keep it
#define ITEMS ((64 + 2 * BUILD_TILES) * TILE)
#define MAX_LONG_ITEMS (64 * TILE)
// the grid's words: the tile's state for every block (two, by the parity of the round: a
// round without step 5 has one barrier, and block 0 writes the next round's state while
// the others may still read this one's), step 5's sizes, the longest version built, the
// watermark, the barrier; the host's least chunk (entries, rounded up to SUB); the fault
// flag (sticky: set when a barrier waited longer than the host's W_TIMEOUT nanoseconds;
// 0: no limit); the new entries the grid puts into buckets (0: block 0 did); the owners
// whose space and items the grid sets (0: block 0 did), and the pool's fill before them
enum { W_STATE = 0, W_STATE_ODD, W_ITEMS, W_CHUNK, W_MAXLEN, W_WM, W_ARRIVED, W_GEN,
       W_MINCHUNK, W_FAULT, W_TIMEOUT, W_NE, W_NO, W_BASE, W_SIZE };
// the launch front's words, after the probes': what block 0 hands the grid (the range,
// the build's stamp, the state before it) and the grid's sums
#define W_LF 66
enum { L_I0 = 0, L_N, L_STAMP, L_NV, L_TICK, L_NOUT, L_POOL, L_S, L_NINS, L_FLAG, L_NOWN,
       L_DEDGES, L_WORDS };
// pairs named by more updates of a range than this leave it to the tiles
#define LF_GMAX 32
// CSM_CUDA_NO_LAUNCH_FRONT=1 (gpu/cuda/kernels/__init__.py) compiles it out: the A/B switch
#ifdef CSM_NO_LAUNCH_FRONT
#define LAUNCH_FRONT false
#else
#define LAUNCH_FRONT true
#endif
// Diagnostic probes (compiled in with CSM_CUDA_PROBES=1, gpu/cuda/kernels/__init__.py):
// thread 0 of block 0 adds the nanoseconds since its previous mark to word W_PROBE + k and
// counts the mark at W_PROBE + P_MAX + k (bench/probe_resolver.py reads them). Off, a mark
// compiles to nothing.
#define W_PROBE 16
#define P_MAX 24
static_assert(W_LF == W_PROBE + 2 * P_MAX + 2, "the launch front's words follow the probes'");
enum { P_ENTRY = 0, P_RAW, P_META, P_BOUND, P_SORT, P_REPLAY, P_LIFE, P_BUCKET, P_FRONT,
       P_SEQ, P_SYNC1, P_COUNT, P_BUILD, P_STOP, P_TAIL, P_MAPPED, P_LANES, P_OWNERS,
       P_SCATTER, P_GRIDOWN, P_LAUNCH, P_LF_REPLAY, P_LF_IDS, P_LF_ROWS, P_MARKS };
static_assert(P_MARKS <= P_MAX, "the probes fit their words");
#ifdef CSM_PROBES
__device__ __forceinline__ void probe(unsigned long long* gw, int k, bool start = false) {
    if (threadIdx.x != 0 || blockIdx.x != 0) return;
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    unsigned long long* last = gw + W_PROBE + 2 * P_MAX;
    if (!start) {
        gw[W_PROBE + k] += now - *last;
        gw[W_PROBE + P_MAX + k] += 1;
    }
    *last = now;
}
// A mark once `dep` has arrived (a load's value: the mark waits for it, not its issue).
__device__ __forceinline__ void probe_after(unsigned long long* gw, int k, long long dep) {
    long long sink;
    asm volatile("mov.b64 %0, %1;" : "=l"(sink) : "l"(dep));
    if (threadIdx.x == 0 && blockIdx.x == 0) gw[W_PROBE + 2 * P_MAX + 1] = sink;
    probe(gw, k);
}
// The build's items (probes only, words W_BST on): per phase (0: sort_and_count, 1:
// build_chunk) the warps' summed and longest nanoseconds in it, then the items, and the
// slowest item packed (ns << 32 | k << 16 | chunks).
#define W_BST (W_LF + 16)
enum { B_SUM = 0, B_MAX = 2, B_ITEMS = 4, B_SLOW = 6, B_WORDS = 8 };
__device__ __forceinline__ unsigned long long gtime() {
    unsigned long long now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    return now;
}
__device__ __forceinline__ void probe_warp(unsigned long long* gw, int phase,
                                           unsigned long long t0, int lane) {
    if (lane != 0) return;
    unsigned long long d = gtime() - t0;
    atomicAdd(gw + W_BST + B_SUM + phase, d);
    atomicMax(gw + W_BST + B_MAX + phase, d);
}
// An item's time, k and chunks packed (the slowest item a warp goes to B_SLOW once).
__device__ __forceinline__ unsigned long long item_mark(unsigned long long t0, int k, int nch) {
    unsigned long long d = gtime() - t0;
    return (min(d, 0xffffffffULL) << 32) | ((unsigned long long)min(k, 0xffff) << 16) |
           (unsigned long long)min(nch, 0xffff);
}
__device__ __forceinline__ void probe_items(unsigned long long* gw, int items,
                                            unsigned long long slow, int lane) {
    if (lane != 0 || items == 0) return;
    atomicAdd(gw + W_BST + B_ITEMS, (unsigned long long)items);
    atomicMax(gw + W_BST + B_SLOW, slow);
}
#else
__device__ __forceinline__ void probe(unsigned long long*, int, bool = false) {}
__device__ __forceinline__ void probe_after(unsigned long long*, int, long long) {}
__device__ __forceinline__ unsigned long long gtime() { return 0; }
__device__ __forceinline__ void probe_warp(unsigned long long*, int, unsigned long long, int) {}
__device__ __forceinline__ unsigned long long item_mark(unsigned long long, int, int) {
    return 0;
}
__device__ __forceinline__ void probe_items(unsigned long long*, int, unsigned long long, int) {}
#endif
enum { T_BUILD = 0, T_NEXT, T_STOP, T_LAUNCH };

struct Shared {
    unsigned long long skey[TILE];
    int sidx[TILE];
    long long tk[TILE];
    int el[TILE];
    int delof[TILE];
    int delprev[TILE];   // a deletion's pending insertion from an earlier tile (its entry)
    signed char st[TILE];
    signed char inpl[TILE];
    signed char sop[TILE];   // the tile's ops, and its ends' internal ids once new vertices
    int sa[TILE], sb[TILE];  // have theirs (-1: none), for the replay's group leaders
    int wsum[NWARPS];
    long long wsum_ll[NWARPS];
    State s;
    unsigned long long pool_used, garbage;
    long long lensum, maxlen;
    long long reserved;   // pool the build's tiles may take once built (their bounds)
    int n_owners, code, vertex_ops, range_ops;
    int build_due;   // build before the next tile: a vertex has more than BUILD_KCAP new
                     // entries, or a tile fell short of pool only by the reservations
    int builds;    // builds so far in this launch (their stamps)
};

template <typename T>
__device__ T block_scan(T v, T* wsum, T* total) {
    int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    T x = v;
    for (int d = 1; d < 32; d <<= 1) {
        T y = __shfl_up_sync(FULL, x, d);
        if (lane >= d) x += y;
    }
    if (lane == 31) wsum[w] = x;
    __syncthreads();
    if (w == 0) {
        T y = lane < NWARPS ? wsum[lane] : 0;
        for (int d = 1; d < 32; d <<= 1) {
            T z = __shfl_up_sync(FULL, y, d);
            if (lane >= d) y += z;
        }
        if (lane < NWARPS) wsum[lane] = y;
    }
    __syncthreads();
    T excl = x - v + (w > 0 ? wsum[w - 1] : 0);
    *total = wsum[NWARPS - 1];
    __syncthreads();
    return excl;
}

// a[u] += d for every lane of the (converged) warp with `on`, one atomic per distinct u:
// a hub named by many updates of a tile costs one atomic per warp, not one per update
// (same-address atomics serialise). Where the lanes of a group add the same d, returns
// what single atomics in lane order would have: a[u] just before this lane's.
__device__ __forceinline__ int group_add(int* a, int u, int d, bool on, int lane) {
    unsigned m = __ballot_sync(FULL, on);
    if (!on) return 0;
    unsigned grp = __match_any_sync(m, u);
    int leader = __ffs(grp) - 1, sum = __reduce_add_sync(grp, d);
    int old = 0;
    if (lane == leader) old = atomicAdd(a + u, sum);
    return __shfl_sync(grp, old, leader) + d * __popc(grp & lanes_below(lane));
}

// The alive entry with key k in v's version (one thread), or -1.
__device__ long long find_alive_1(const Dev& g, int v, long long k) {
    long long lo = g.off[v], hi = lo + g.len[v], end = hi;
    while (lo < hi) {
        long long mid = (lo + hi) >> 1;
        if (g.key[mid] < k) lo = mid + 1; else hi = mid;
    }
    for (; lo < end && g.key[lo] == k; ++lo)
        if (g.dt[lo] == INF) return lo;
    return -1;
}

// Entries of [lo, hi) with (key, ct) below (k, c) (sorted by key, then ct).
__device__ __forceinline__ int count_below(const long long* key, const long long* ct, int lo,
                                           int hi, long long k, long long c, bool strict_key) {
    int a = lo, b = hi;
    while (a < b) {
        int mid = (a + b) >> 1;
        bool less = strict_key ? key[mid] < k : (key[mid] < k || (key[mid] == k && ct[mid] < c));
        if (less) a = mid + 1; else b = mid;
    }
    return a - lo;
}

// Step 5 runs on every block of the grid (DCSM Fig. 43 with the copies spread wide): the
// front lists each owner's old version in chunks of `chunk` entries (items); phase A sorts
// each owner's new entries (the warps of its items) and counts the live entries of
// every chunk of a version longer than one chunk; phase B writes each chunk's live entries
// and the new entries that fall in it straight to their final places in the new version:
//   old entry i: (live entries before i) + (new entries with a smaller key)
//   new entry j: j + (live entries with key <= its key)
// so old entries come before new ones on equal keys, as the host's upper-bound insertion
// places them, and a hub's version is built by many warps, one pass over its entries.
#define SUB (32 * UNROLL)

// The owner and the chunk of item it.
__device__ __forceinline__ void item_of(const Scratch& x, int it, int& q, int& ci, int& nch) {
    q = x.item_owner[it];
    int first = x.own_item[q];
    ci = it - first;
    nch = x.own_item[q + 1] - first;
}

// Phase A for item it (one warp).
__device__ void sort_and_count(const Dev& g, const Scratch& x, long long chunk, long long w,
                               int it, int lane) {
    int q, ci, nch;
    item_of(x, it, q, ci, nch);
    {   // rank the owner's new entries by (key, creation tick): each of its items a share
        // (a hub's k new entries cost k^2 / 32 loads on one warp, which the grid waited for)
        int e0 = x.bucket[q], k = x.bucket[q + 1] - e0;
        if (ci == 0 && lane == 0) x.vcnt[x.owners[q]] = 0;   // the build front's scatter left e0
        for (int j = 32 * ci + lane; j < k; j += 32 * nch) {
            long long kj = x.b_key[e0 + j], cj = x.b_ct[e0 + j];
            int rk = 0;
            for (int m = 0; m < k; ++m) {
                long long km = x.b_key[e0 + m];
                rk += km < kj || (km == kj && x.b_ct[e0 + m] < cj);
            }
            x.s_key[e0 + rk] = kj; x.s_lab[e0 + rk] = x.b_lab[e0 + j];
            x.s_ct[e0 + rk] = cj; x.s_dt[e0 + rk] = x.b_dt[e0 + j];
        }
    }
    if (nch == 1) return;
    long long src = x.own_src[q], n0 = x.own_n0[q];
    long long cs = (long long)ci * chunk, ce = min(n0, cs + chunk);
    int c = 0;
    for (long long s0 = cs; s0 < ce; s0 += SUB) {
        long long t1[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            long long i = s0 + 32 * u + lane;
            t1[u] = i < ce ? g.dt[src + i] : w;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) c += t1[u] > w;
    }
    c = __reduce_add_sync(FULL, c);
    if (lane == 0) x.cnt[it] = c;
}

// Publish v's new version (one lane): entries first (the caller fenced), then the words.
// The longest version goes to W_MAXLEN once a warp (build_chunk's caller): an atomic an
// owner on one word, beside the barrier's, was some 25,000 a launch.
__device__ __forceinline__ void publish_built(const Dev& g, int v, long long dst, long long m,
                                              int c, long long& maxlen) {
    g.off[v] = dst; g.len[v] = (int)m; g.cap[v] = c;
    g.vbatch[v] = -1;   // published now: later writes need a fresh copy
    maxlen = max(maxlen, m);
    g.seg[v] = (dst << SEG_BITS) | m;
}

// Phase B for item it (one warp). Registers are scarce (1,024 threads a block: 64 each): a
// sub-chunk's keys and visibility stay in them, its other columns are read again to be
// stored (L1 hits), and positions within a version are int. On its own at 1,024 threads it
// spilled 120 bytes (the whole Run in registers, 64-bit positions); now 4.
__device__ unsigned long long build_chunk(const Dev& g, const Scratch& x, long long chunk,
                                         long long w, int it, int lane, long long& maxlen) {
    unsigned long long t_i = gtime();
    int q, ci, nch;
    item_of(x, it, q, ci, nch);
    int v = x.owners[q], e0 = x.bucket[q], k = x.bucket[q + 1] - e0;
    long long src = x.own_src[q], dst = x.own_dst[q];
    int n0 = x.own_n0[q];   // positions within one version: int
    int cs = ci * (int)chunk, ce = min(n0, cs + (int)chunk);
    int prefix = 0;   // live entries of the chunks before this one
    if (nch > 1) {
        int p = 0;
        for (int r = x.own_item[q] + lane; r < it; r += 32) p += x.cnt[r];
        prefix = __reduce_add_sync(FULL, p);
    }
    // the new entries whose upper bound lies in this chunk: key >= key[cs - 1] (not the
    // first chunk) and key < key[ce - 1] (not the last)
    int jc = 0;
    if (ci > 0) {
        long long kb = g.key[src + cs - 1];
        int a = 0, b = k;
        while (a < b) {
            int mid = (a + b) >> 1;
            if (x.s_key[e0 + mid] < kb) a = mid + 1; else b = mid;
        }
        jc = a;
    }
    bool last_chunk = ci == nch - 1;
    int run = 0;
    for (int s0 = cs;; s0 += SUB) {
        int s1 = min(ce, s0 + SUB);
        bool last_sub = s1 >= ce;
        long long rk[UNROLL];   // keys and visibility only: the rest is read again to store
        bool rok[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            int i = s0 + 32 * u + lane;
            rk[u] = 0; rok[u] = false;
            if (i < s1) { rk[u] = g.key[src + i]; rok[u] = g.dt[src + i] > w; }
        }
        // new entries placed in this sub-chunk
        int jend = k;
        if (!(last_sub && last_chunk)) {
            long long lim = g.key[src + s1 - 1];
            int a = jc, b = k;
            while (a < b) {
                int mid = (a + b) >> 1;
                if (x.s_key[e0 + mid] < lim) a = mid + 1; else b = mid;
            }
            jend = a;
        }
        for (; jc < jend; ++jc) {
            long long kj = x.s_key[e0 + jc];
            int c = 0;
#pragma unroll
            for (int u = 0; u < UNROLL; ++u) c += rok[u] && rk[u] <= kj;
            c = __reduce_add_sync(FULL, c);
            if (lane == 0) {
                long long d = dst + (jc + prefix + run + c);
                g.key[d] = kj; g.elab[d] = x.s_lab[e0 + jc];
                g.ct[d] = x.s_ct[e0 + jc]; g.dt[d] = x.s_dt[e0 + jc];
            }
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            unsigned mk = __ballot_sync(FULL, rok[u]);
            if (rok[u]) {
                int up = k ? count_below(x.s_key, x.s_ct, e0, e0 + k, rk[u], 0, true) : 0;
                long long i = src + s0 + 32 * u + lane;
                long long d = dst + (prefix + run + __popc(mk & lanes_below(lane)) + up);
                long long c0 = g.ct[i], t1 = g.dt[i];
                int el = g.elab[i];
                g.key[d] = rk[u]; g.ct[d] = c0; g.dt[d] = t1; g.elab[d] = el;
            }
            run += __popc(mk);
        }
        if (last_sub) break;
    }
    __threadfence();   // every lane's entries before the word that points at them
    __syncwarp();
    if (nch == 1) {
        if (lane == 0) publish_built(g, v, dst, run + k, x.own_cap[q], maxlen);
    } else {
        int done = 0;
        if (lane == 0) done = atomicAdd(x.own_done + q, 1) == nch - 1;
        done = __shfl_sync(FULL, done, 0);
        if (done) {   // the last chunk to finish publishes: every chunk has fenced
            __threadfence();
            int p = 0;
            for (int r = x.own_item[q] + lane; r < x.own_item[q] + nch; r += 32) p += x.cnt[r];
            long long m = __reduce_add_sync(FULL, p) + k;
            if (lane == 0) publish_built(g, v, dst, m, x.own_cap[q], maxlen);
        }
    }
    __syncwarp();
    return item_mark(t_i, k, nch);
}

// Every block's threads wait here for the other `blocks` - 1 blocks' (the grid holds at
// most one block per SM and each SM fits one, so all are resident once other kernels'
// blocks retire). Stores before it are visible after it on every block (cooperative
// groups' grid sync: block barrier, fence, arrive, spin, fence, block barrier). Returns
// false once the grid has faulted: where fewer blocks can run at once (an MPS share,
// another grid holding SMs for good) the waiting ones would spin for ever, so a wait
// longer than W_TIMEOUT sets the sticky fault flag, every block leaves, and the launch
// reports FAULT instead of hanging.
__device__ bool grid_sync(unsigned long long* gw, int blocks) {
    __shared__ int faulted;
    __syncthreads();
    if (blocks == 1) return true;
    if (threadIdx.x == 0) {
        volatile unsigned long long* gen = gw + W_GEN;
        volatile unsigned long long* fault = gw + W_FAULT;
        unsigned long long g0 = *gen;
        __threadfence();
        if (atomicAdd(gw + W_ARRIVED, 1ULL) == (unsigned long long)blocks - 1) {
            atomicExch(gw + W_ARRIVED, 0ULL);
            __threadfence();
            atomicAdd(gw + W_GEN, 1ULL);
        } else {
            unsigned long long t0, now;
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
            while (*gen == g0 && !*fault) {
                __nanosleep(20);
                asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
                if (gw[W_TIMEOUT] && now - t0 > gw[W_TIMEOUT]) atomicExch(gw + W_FAULT, 1ULL);
            }
        }
        __threadfence();
        faulted = *fault != 0;
    }
    __syncthreads();
    return !faulted;
}

// Two stamps per build, above every earlier build's (vtile starts at 0): its count of a
// vertex's version (step 1) and its claim of the vertex as an owner (step 4). `build`: the
// launch's builds so far (a count, not a position: stamps stay distinct however builds end).
__device__ __forceinline__ long long build_stamp(long long launch, long long build) {
    return (launch << 24) + build * 2 + 2;
}

// The pair table: a pair's state after the last tile of the build that named it.
__device__ __forceinline__ long long pt_pack(bool alive, int label, long long entry) {
    return ((long long)(unsigned)label << 32) | ((entry + 1) << 1) | (alive ? 1 : 0);
}
__device__ __forceinline__ int pt_slot(unsigned long long key) {
    return (int)((key * 0x9E3779B97F4A7C15ULL) >> (64 - PT_BITS));
}
// The slot holding `key` for this build, or -1.
__device__ int pt_find(const Scratch& x, unsigned long long key, long long stamp) {
    for (int h = pt_slot(key);; h = (h + 1) & (PT_SIZE - 1)) {
        if (x.pt_stamp[h] != stamp) return -1;
        if (x.pt_key[h] == key) return h;
    }
}
// Write `key`'s state: at `at` (found there before this tile) or in a free slot (slots
// of older builds are free; threads of one tile write distinct keys).
__device__ void pt_put(const Scratch& x, unsigned long long key, long long stamp, int at,
                       long long val) {
    for (int h = pt_slot(key); at < 0; h = (h + 1) & (PT_SIZE - 1)) {
        unsigned long long old = (unsigned long long)x.pt_stamp[h];
        while (old != (unsigned long long)stamp) {   // free: claim it, unless another
            unsigned long long got = atomicCAS((unsigned long long*)(x.pt_stamp + h), old,
                                               (unsigned long long)stamp);
            if (got == old) {                         // thread of this tile just did
                at = h;
                x.pt_key[h] = key;
                break;
            }
            old = got;
        }
    }
    x.pt_val[at] = val;
}

// What the parallel fronts (par_tile, launch_front) read of one raw update: its op, slots
// and label, whether it is a candidate (no self-loop, no wildcard insertion), and its ends'
// current vertices (-1: none yet).
struct Raw {
    int op, xs, ys, lb, a0, b0;
    bool loop, wild, cand, ins;
};
__device__ __forceinline__ Raw read_raw(const Dev& g, const int* ops, const int* sx,
                                        const int* sy, const int* lab, long long i, bool mine) {
    Raw r;
    r.op = mine ? ops[i] : -1; r.xs = mine ? sx[i] : 0; r.ys = mine ? sy[i] : 0;
    r.lb = mine ? lab[i] : 0;
    r.loop = mine && r.xs == r.ys;
    r.wild = mine && r.op == OP_INS_E && r.lb == WILD;
    r.cand = mine && !r.loop && !r.wild;
    r.ins = r.cand && r.op == OP_INS_E;
    r.a0 = mine ? g.slot_vid[r.xs] : -1;
    r.b0 = mine && !r.loop ? g.slot_vid[r.ys] : -1;
    return r;
}

// Front 1 of an insertion: an unknown end's first insertion is marked (code: 2 x the
// update's index in its range, + 1 on the b side), and a vertex's first insertion in the
// build counts its version (stamps only grow: a build's are above every earlier one's, and
// its owner mark stamp + 1 above its count). Returns the lengths counted; they load
// alongside the atomics, not after them.
__device__ __forceinline__ long long first_touch(const Dev& g, const Scratch& x, const Raw& r,
                                                 int code, long long stamp) {
    if (r.ins && r.a0 < 0) atomicMin(x.slot_first + r.xs, code);
    if (r.ins && r.b0 < 0) atomicMin(x.slot_first + r.ys, code + 1);
    long long la = r.ins && r.a0 >= 0 ? g.len[r.a0] : 0;
    long long lb = r.ins && r.b0 >= 0 ? g.len[r.b0] : 0;
    long long lsum = 0;
    if (r.ins && r.a0 >= 0 &&
        atomicMax((unsigned long long*)(x.vtile + r.a0), (unsigned long long)stamp) < (unsigned long long)stamp)
        lsum += la;
    if (r.ins && r.b0 >= 0 &&
        atomicMax((unsigned long long*)(x.vtile + r.b0), (unsigned long long)stamp) < (unsigned long long)stamp)
        lsum += lb;
    return lsum;
}

// The new vertex v of a slot, empty.
__device__ __forceinline__ void new_vertex_row(const Dev& g, int v, int slot) {
    g.vlabel[v] = 0; g.vext[v] = g.slot_ext[slot]; g.vslot[v] = slot; g.valive[v] = 1;
    g.vdeg[v] = 0; g.off[v] = 0; g.len[v] = 0; g.cap[v] = 0; g.vbatch[v] = -1;
    g.slot_vid[slot] = v;
}

// An applied insertion's two entries (at e, e + 1; their dt too unless `dt_later`: the
// deletion that ends it writes it), and its ends claimed for the build: the first lane
// naming a vertex on a side in each warp (m: the warp's applied insertions) claims it and
// adds the side's new entries of it to its count (both sides' atomics in flight together).
// new_a / new_b: the vertex was not yet an owner of the build; ca / cb: its count after.
__device__ __forceinline__ void put_entries(const Dev& g, const Scratch& x, long long e, int a,
                                            int b, int lb, long long tk, long long dt,
                                            bool dt_later, unsigned m, long long stamp,
                                            int lane, bool& new_a, bool& new_b, int& ca,
                                            int& cb) {
    int la = g.vlabel[a], lbv = g.vlabel[b];
    x.e_owner[e] = a; x.e_key[e] = make_key(lbv, b); x.e_lab[e] = lb; x.e_ct[e] = tk;
    x.e_owner[e + 1] = b; x.e_key[e + 1] = make_key(la, a); x.e_lab[e + 1] = lb;
    x.e_ct[e + 1] = tk;
    if (!dt_later) { x.e_dt[e] = dt; x.e_dt[e + 1] = dt; }
    unsigned ga = __match_any_sync(m, a), gb = __match_any_sync(m, b);
    bool ha = lane == __ffs(ga) - 1, hb = lane == __ffs(gb) - 1;
    const unsigned long long mark = (unsigned long long)(stamp + 1);
    int ka = __popc(ga), kb = __popc(gb);
    unsigned long long oa = ha ? atomicMax((unsigned long long*)(x.vtile + a), mark) : mark;
    unsigned long long ob = hb ? atomicMax((unsigned long long*)(x.vtile + b), mark) : mark;
    ca = ha ? atomicAdd(x.vcnt + a, ka) + ka : 0;
    cb = hb ? atomicAdd(x.vcnt + b, kb) + kb : 0;
    new_a = oa < mark;
    new_b = ob < mark;
}

// A raw update's primitive update, row j of the output.
__device__ __forceinline__ void put_row(const Dev& g, const Out& o, long long j, long long i,
                                        const Raw& r, bool ok, int a, int b, int el,
                                        long long tk, int st) {
    int reason = r.loop ? R_LOOP : r.wild ? R_WILD : R_NONE;
    o.raw[j] = (int)i; o.op[j] = (signed char)r.op; o.a[j] = ok ? a : -1;
    o.b[j] = ok ? b : -1; o.src[j] = g.slot_ext[r.xs]; o.dst[j] = g.slot_ext[r.ys];
    o.el[j] = el; o.tick[j] = tk; o.status[j] = (signed char)st;
    o.reason[j] = (signed char)reason;
}

// Resolve the edge-only tile [t0, t0 + nt) in parallel, the tile of a build that started
// at update bs (its entries, owners and pool bounds are added to the build's; the grid
// builds them later): returns DONE or what is full.
__device__ int par_tile(const Dev& g, const Out& o, const Scratch& x, Shared& sh,
                        const int* ops, const int* sx, const int* sy, const int* lab,
                        long long t0, int nt, long long n_out, long long bs) {
    int t = threadIdx.x, lane = t & 31;
    long long stamp = build_stamp(sh.s.launch, sh.builds);
    long long eb = 2 * (t0 - bs);   // the build's entries before this tile
    bool mine = t < nt;
    long long i = t0 + t;
    const Raw r = read_raw(g, ops, sx, sy, lab, i, mine);
    const int op = r.op, xs = r.xs, ys = r.ys, lb = r.lb, a0 = r.a0, b0 = r.b0;
    const bool loop = r.loop, wild = r.wild, cand = r.cand, ins = r.ins;
    // 1. new vertices (first valid insertion of an unknown slot) and the pool bound
    long long lsum = first_touch(g, x, r, 2 * t, stamp);
    if (t == 0) sh.code = DONE;
    long long S = 0;   // (a 64-bit shared atomic per vertex would serialise the block)
    block_scan(lsum, sh.wsum_ll, &S);   // also orders the atomicMins above before the reads
    int c0 = ins && a0 < 0 && x.slot_first[xs] == 2 * t;
    int c1 = ins && b0 < 0 && x.slot_first[ys] == 2 * t + 1;
    int n_new_v = 0, n_ins = 0;
    int rank = block_scan(c0 + c1, sh.wsum, &n_new_v);
    block_scan(ins ? 1 : 0, sh.wsum, &n_ins);
    if (t == 0) {
        long long bound = S + S / 8 + 11LL * n_ins + 64;
        if (n_out + nt > o.cap) sh.code = NEED_OUT;
        else if (sh.s.nv + n_new_v > g.vcap) sh.code = NEED_VERTEX;
        else if (sh.s.pool_used + sh.reserved + bound > g.pool_cap) sh.code = NEED_POOL;
        else { sh.reserved += bound; sh.lensum += S; }
    }
    __syncthreads();
    if (ins && a0 < 0) x.slot_first[xs] = 0x7fffffff;   // scratch back to empty
    if (ins && b0 < 0) x.slot_first[ys] = 0x7fffffff;
    if (sh.code != DONE) return sh.code;
    probe(x.gw, P_BOUND);
    long long nv0 = sh.s.nv;
    for (int side = 0; side < 2; ++side) {
        if (!(side == 0 ? c0 : c1)) continue;
        int slot = side == 0 ? xs : ys;
        new_vertex_row(g, (int)(nv0 + rank + (side == 1 ? c0 : 0)), slot);
    }
    __syncthreads();
    if (t == 0) sh.s.nv = nv0 + n_new_v;
    // the ends' ids, new vertices' too (a slot another update of the tile created is
    // read again after the barrier above)
    int a = a0 >= 0 || !mine ? a0 : g.slot_vid[xs];
    int b = b0 >= 0 || !mine || loop ? b0 : g.slot_vid[ys];
    sh.sa[t] = a; sh.sb[t] = b; sh.sop[t] = (signed char)op;
    // 2. group by unordered endpoint pair; replay each group in arrival order
    sh.skey[t] = cand ? ((unsigned long long)min(xs, ys) << 32) | (unsigned)max(xs, ys)
                      : ~0ULL;
    sh.sidx[t] = t;
    sh.st[t] = loop || wild ? ST_REJECTED : ST_IGNORED;
    sh.el[t] = lb;
    sh.delof[t] = -1;
    sh.delprev[t] = -1;
    sh.inpl[t] = 0;
    sh.tk[t] = 0;
    __syncthreads();
    int span = 2;   // sort the next power of two above nt: the rest holds ~0 keys
    while (span < nt) span <<= 1;
    {   // bitonic, in registers: steps within a warp by shuffles, only wider ones through
        // shared memory (15 block barriers for a full tile instead of 55)
        unsigned long long key = sh.skey[t];
        int idx = t;
        for (int k = 2; k <= span; k <<= 1) {
            for (int j = k >> 1; j > 0; j >>= 1) {
                unsigned long long pk;
                int pi;
                if (j >= 32) {
                    __syncthreads();
                    sh.skey[t] = key; sh.sidx[t] = idx;
                    __syncthreads();
                    pk = sh.skey[t ^ j]; pi = sh.sidx[t ^ j];
                } else {
                    pk = __shfl_xor_sync(FULL, key, j); pi = __shfl_xor_sync(FULL, idx, j);
                }
                bool less = pk < key || (pk == key && pi < idx);   // the partner's is smaller
                // the lower of the pair keeps the smaller in an ascending run (t & k == 0)
                if (t < span && less == (((t & j) == 0) == ((t & k) == 0))) {
                    key = pk; idx = pi;
                }
            }
        }
        __syncthreads();
        sh.skey[t] = key; sh.sidx[t] = idx;
        __syncthreads();
    }
    probe(x.gw, P_SORT);
    unsigned long long kh = sh.skey[t];
    bool lead = kh != ~0ULL && (t == 0 || sh.skey[t - 1] != kh);
    // the pair's state: from the table if an earlier tile of the build named it (all finds
    // before any write), else from its version
    int at = lead && eb > 0 ? pt_find(x, kh, stamp) : -1;
    __syncthreads();
    if (lead) {
        int first = sh.sidx[t];
        bool alive;
        int cur;
        long long prev = -1;   // the pair's pending insertion of an earlier tile (its entry)
        if (at >= 0) {
            long long v = x.pt_val[at];
            alive = v & 1; cur = (int)(v >> 32); prev = ((v >> 1) & 0x7fffffff) - 1;
        } else {
            int pa = sh.sa[first], pb = sh.sb[first];
            long long e = pa >= 0 && pb >= 0 ? find_alive_1(g, pa, make_key(g.vlabel[pb], pb))
                                             : -1;
            alive = e >= 0;
            cur = alive ? g.elab[e] : 0;
        }
        int pending = -1;
        for (int q = t; q < TILE && sh.skey[q] == kh; ++q) {
            int oi = sh.sidx[q];
            int opq = sh.sop[oi];
            if (opq == OP_INS_E) {
                if (!alive) {
                    sh.st[oi] = ST_APPLIED; alive = true; cur = sh.el[oi]; pending = oi;
                    prev = -1;
                }
            } else if (alive) {
                sh.st[oi] = ST_APPLIED; alive = false; sh.el[oi] = cur;
                if (pending >= 0) sh.delof[pending] = oi;
                else if (prev >= 0) sh.delprev[oi] = (int)prev;
                else sh.inpl[oi] = 1;
                pending = -1;
                prev = -1;
            }
        }
        pt_put(x, kh, stamp, at, pt_pack(alive, cur, pending >= 0 ? eb + 2 * pending : prev));
    }
    __syncthreads();
    probe(x.gw, P_REPLAY);
    // 3. ticks in arrival order
    bool applied = mine && sh.st[t] == ST_APPLIED;
    int n_app = 0;
    int ar = block_scan(applied ? 1 : 0, sh.wsum, &n_app);
    if (applied) sh.tk[t] = sh.s.tick + ar + 1;
    __syncthreads();
    // 4. lifetimes: in-place ends, new entries, degrees
    int de = 0;
    bool insa = applied && op == OP_INS_E;
    if (!insa) {
        x.e_owner[eb + 2 * t] = -1;
        x.e_owner[eb + 2 * t + 1] = -1;
    }
    if (applied && op == OP_DEL_E) {
        de = -1;
        if (sh.delprev[t] >= 0) {   // ends an insertion of an earlier tile, still unbuilt
            x.e_dt[sh.delprev[t]] = sh.tk[t];
            x.e_dt[sh.delprev[t] + 1] = sh.tk[t];
        } else if (sh.inpl[t]) {
            long long e = find_alive_1(g, a, make_key(g.vlabel[b], b));
            long long f = find_alive_1(g, b, make_key(g.vlabel[a], a));
            g.dt[e] = sh.tk[t];
            g.dt[f] = sh.tk[t];
        }
    }
    if (insa) de = 1;
    if (applied) {   // no return value: reductions the issuing thread does not wait for
        atomicAdd(g.vdeg + a, de);
        atomicAdd(g.vdeg + b, de);
    }
    long long end = insa && sh.delof[t] >= 0 ? sh.tk[sh.delof[t]] : INF;
    unsigned m = __ballot_sync(FULL, insa);
    if (insa) {
        bool new_a, new_b;
        int ca, cb;
        put_entries(g, x, eb + 2 * t, a, b, lb, sh.tk[t], end, false, m, stamp, lane, new_a,
                    new_b, ca, cb);
        if (new_a) x.owners[atomicAdd(&sh.n_owners, 1)] = a;
        if (new_b) x.owners[atomicAdd(&sh.n_owners, 1)] = b;
        if (ca > BUILD_KCAP || cb > BUILD_KCAP) sh.build_due = 1;
    }
    int d_edges = 0;
    block_scan(de, sh.wsum, &d_edges);   // also orders the writes above before the scan
    probe(x.gw, P_LIFE);
    // 6. the tile's primitive updates, one per raw update
    if (mine) put_row(g, o, n_out + t, i, r, sh.st[t] == ST_APPLIED, a, b, sh.el[t], sh.tk[t],
                      sh.st[t]);
    __syncthreads();
    if (t == 0) {
        sh.s.tick += n_app;
        sh.s.nedges += d_edges;
    }
    __syncthreads();
    probe(x.gw, P_FRONT);
    return DONE;
}

// Each new entry e = first, first + stride, ... below ne into its owner's bucket, by one
// atomic on the owner's count (build_front set it to the bucket's end). The stride is a
// multiple of 32, so every lane takes each turn (group_add).
__device__ void scatter_entries(const Scratch& x, long long ne, long long first,
                                long long stride, int lane) {
    for (long long e = first; e - lane < ne; e += stride) {
        int u = e < ne ? x.e_owner[e] : -1;
        int p = group_add(x.vcnt, u, -1, u >= 0, lane) - 1;
        if (u < 0) continue;
        x.b_key[p] = x.e_key[e]; x.b_lab[p] = x.e_lab[e];
        x.b_ct[p] = x.e_ct[e]; x.b_dt[p] = x.e_dt[e];
    }
}

// Owner v's values for its new version: its old length n0, new entries c, old capacity
// cap, the space it takes cq (an eighth of slack, at least 4), and pk = (its items << 32) |
// c, items being its old version's chunks (at least one).
__device__ __forceinline__ void owner_vals(const Dev& g, const Scratch& x, int v,
                                           long long chunk, long long& n0, int& c,
                                           long long& cap, long long& cq, long long& pk) {
    n0 = g.len[v]; c = x.vcnt[v]; cap = g.cap[v];
    long long ub = n0 + c;
    long long nq = n0 > chunk ? (n0 + chunk - 1) / chunk : 1;
    cq = ub + max(4LL, ub >> 3);
    pk = (nq << 32) | c;
}

// Owner q (vertex v) placed: its bucket and first item from the packed prefix pb, its
// count set to the bucket's end (scatter_entries counts down from it), its new version at
// dst, its items named.
__device__ __forceinline__ void owner_place(const Dev& g, const Scratch& x, int q, int v,
                                            long long n0, int c, long long cq, long long pk,
                                            long long pb, long long dst) {
    int e0 = (int)(pb & 0xffffffffLL), first = (int)(pb >> 32);
    x.bucket[q] = e0;
    x.vcnt[v] = e0 + c;
    x.own_src[q] = g.off[v]; x.own_n0[q] = (int)n0; x.own_dst[q] = dst;
    x.own_cap[q] = (int)cq; x.own_item[q] = first; x.own_done[q] = 0;
    for (int r = 0; r < (int)(pk >> 32); ++r) x.item_owner[first + r] = q;
}

// A build with more owners than OWN_GRID has its owners' pass on the grid (one SM's
// scattered loads and nine stores an owner took 28 us of a 4,096-update launch on block 0):
// each block takes a range of owners; phase 1 sums its range into x.blk, phase 2 (after
// a barrier) places each owner from the sums of the blocks before it and a scan of its own.
#define OWN_GRID 1024

__device__ __forceinline__ void own_range(int no, int blocks, int& lo, int& hi) {
    int k = (no + blocks - 1) / blocks;
    lo = min(no, (int)blockIdx.x * k);
    hi = min(no, lo + k);
}

__device__ void owners_sums(const Dev& g, const Scratch& x, Shared& sh, int no, int blocks,
                            long long chunk) {
    int lo, hi;
    own_range(no, blocks, lo, hi);
    long long s_cq = 0, s_pk = 0, s_cap = 0;
    for (int q = lo + (int)threadIdx.x; q < hi; q += TILE) {
        long long n0, cap, cq, pk;
        int c;
        owner_vals(g, x, x.owners[q], chunk, n0, c, cap, cq, pk);
        s_cq += cq; s_pk += pk; s_cap += cap;
    }
    long long t_cq = 0, t_pk = 0, t_cap = 0;
    block_scan(s_cq, sh.wsum_ll, &t_cq);
    block_scan(s_pk, sh.wsum_ll, &t_pk);
    block_scan(s_cap, sh.wsum_ll, &t_cap);
    if (threadIdx.x == 0) {
        long long* b = x.blk + 3 * blockIdx.x;
        b[0] = t_cq; b[1] = t_pk; b[2] = t_cap;
    }
}

// Phase 2; block 0 also takes the totals into its state (the pool's fill, garbage, the
// items) and closes the bucket and item lists.
__device__ void owners_place(const Dev& g, const Scratch& x, Shared& sh, int no, int blocks,
                             long long chunk, long long base) {
    __shared__ long long pre[6];   // the blocks before this one, and all: cq, pk, cap
    int t = threadIdx.x, lane = t & 31;
    if (t < 32) {
        long long v[6] = {0, 0, 0, 0, 0, 0};
        for (int j = lane; j < blocks; j += 32) {
            const long long* b = x.blk + 3 * j;
            for (int k = 0; k < 3; ++k) {
                v[3 + k] += b[k];
                if (j < (int)blockIdx.x) v[k] += b[k];
            }
        }
        for (int k = 0; k < 6; ++k) {
            for (int d = 16; d > 0; d >>= 1) v[k] += __shfl_down_sync(FULL, v[k], d);
        }
        if (lane == 0) for (int k = 0; k < 6; ++k) pre[k] = v[k];
    }
    __syncthreads();
    int lo, hi;
    own_range(no, blocks, lo, hi);
    long long c_carry = pre[0], p_carry = pre[1];
    for (int q0 = lo; q0 < hi; q0 += TILE) {   // every thread each turn (the scans)
        int q = q0 + t;
        bool on = q < hi;
        int v = on ? x.owners[q] : -1, c = 0;
        long long n0 = 0, cap = 0, cq = 0, pk = 0;
        if (on) owner_vals(g, x, v, chunk, n0, c, cap, cq, pk);
        long long c_tot = 0, p_tot = 0;
        long long cb = c_carry + block_scan(cq, sh.wsum_ll, &c_tot);
        long long pb = p_carry + block_scan(pk, sh.wsum_ll, &p_tot);
        if (on) owner_place(g, x, q, v, n0, c, cq, pk, pb, base + cb);
        c_carry += c_tot;
        p_carry += p_tot;
    }
    if (blockIdx.x == 0 && t == 0) {
        x.bucket[no] = (int)(pre[4] & 0xffffffffLL);
        x.own_item[no] = (int)(pre[4] >> 32);
        sh.pool_used += (unsigned long long)pre[3];
        sh.garbage += (unsigned long long)pre[5];
        x.gw[W_ITEMS] = pre[4] >> 32;
    }
}

// 5. The build's front (block 0, after its last tile): bucket its new entries (ne) by
//    owner; list each owner's old version in chunks and give it fresh space (the grid
//    sorts, counts and builds after this: step 5 above). One pass over the owners: the
//    chunk size comes from sh.lensum (front 1's lengths of the build's vertices named by
//    insertions, at least the owners'), and an owner's bucket and first item are one
//    packed scan. Each entry then takes its place by one atomic on its owner's count,
//    set to the bucket's end (scatter_entries; the grid's sort sets it back to 0).
__device__ void build_front(const Dev& g, const Scratch& x, Shared& sh, long long ne) {
    int t = threadIdx.x, lane = t & 31;
    int no = sh.n_owners;
    const long long per = (long long)SUB * MAX_LONG_ITEMS;
    long long least = ((long long)x.gw[W_MINCHUNK] + SUB - 1) / SUB;
    long long chunk = SUB * max(max(1LL, least), (sh.lensum + per - 1) / per);
    bool grid = no > OWN_GRID;   // the owners' pass on the grid (owners_sums, owners_place)
    long long c_carry = 0, p_carry = 0;   // space; (first item << 32) | first entry
    for (int q0 = 0; !grid && q0 < no; q0 += 2 * TILE) {
        int v[2], c[2] = {0, 0};
        long long n0[2] = {0, 0}, cq[2] = {0, 0}, pk[2] = {0, 0};
        long long gsum = 0;   // the old versions' capacity: garbage (summed by warp first)
#pragma unroll
        for (int side = 0; side < 2; ++side) {
            int q = q0 + 2 * t + side;
            v[side] = q < no ? x.owners[q] : -1;
        }
#pragma unroll
        for (int side = 0; side < 2; ++side) {
            if (v[side] < 0) continue;
            long long cap;
            owner_vals(g, x, v[side], chunk, n0[side], c[side], cap, cq[side], pk[side]);
            gsum += cap;
        }
        long long c_tot = 0, p_tot = 0;
        long long cbase = c_carry + block_scan(cq[0] + cq[1], sh.wsum_ll, &c_tot);
        long long pbase = p_carry + block_scan(pk[0] + pk[1], sh.wsum_ll, &p_tot);
        for (int side = 0; side < 2; ++side) {
            if (v[side] < 0) continue;
            owner_place(g, x, q0 + 2 * t + side, v[side], n0[side], c[side], cq[side],
                        pk[side], pbase + (side ? pk[0] : 0),
                        (long long)sh.pool_used + cbase + (side ? cq[0] : 0));
        }
        for (int d = 16; d > 0; d >>= 1) gsum += __shfl_down_sync(FULL, gsum, d);
        if (lane == 0 && gsum) atomicAdd(&sh.garbage, (unsigned long long)gsum);
        c_carry += c_tot;
        p_carry += p_tot;
    }
    __syncthreads();   // the counts set above, before their atomics
    probe(x.gw, P_OWNERS);
    // one SM's stores are the bound of a large build's scatter (7 us per 2,048 entries):
    // beyond two turns of the block the grid does it, after the barrier
    bool here = !grid && ne <= 2 * TILE;
    if (here) scatter_entries(x, ne, t, TILE, lane);
    if (t == 0) {
        if (!grid) {
            x.bucket[no] = (int)(p_carry & 0xffffffffLL);
            x.own_item[no] = (int)(p_carry >> 32);
            x.gw[W_ITEMS] = p_carry >> 32;
        }
        x.gw[W_BASE] = sh.pool_used;   // before the grid's owners (owners_place adds them)
        sh.pool_used += (unsigned long long)c_carry;
        sh.reserved = 0;
        sh.lensum = 0;
        sh.build_due = 0;
        sh.n_owners = 0;
        ++sh.builds;
        x.gw[W_CHUNK] = chunk;
        x.gw[W_NE] = here ? 0 : ne;
        x.gw[W_NO] = grid ? no : 0;
    }
    __syncthreads();
    probe(x.gw, P_BUCKET);
}

// The launch front (stage 2b): an edge-only range of more than one tile resolved by the
// whole grid at once, one thread an update, instead of tile after tile on block 0 (each
// tile's steps are latency chains or one SM's memory pipe while the grid waits). The result
// is what the tiles of one build would have left: the same statuses, ticks, new vertices
// (in the order of their first valid insertion), in-place ends, new entries, owners and
// output rows, then the grid builds as after tiles. Each unordered slot pair is one group
// (a hash table over the range), replayed in arrival order by one of its members from the
// pair's current version; ticks and new vertices' ids are scans over the range, the blocks
// in order. Nothing of the graph is written before every block knows the range fits (the
// tiles' bounds: output, vertices, pool; no pair in more than LF_GMAX updates, no vertex
// named by more than BUILD_KCAP insertions); otherwise the scratch is put back and the
// tiles resolve the range. Four barriers. Returns DONE, DECLINED or FAULT (terminal: the
// scratch may be left dirty, and the updater raises from then on); block 0 then takes the
// totals into its state.
__device__ long long lf_blocks_before(const Scratch& x, int k, int blocks_before) {
    long long s = 0;
    for (int j = 0; j < blocks_before; ++j) s += x.blk[3 * j + k];
    return s;
}

__device__ int launch_front(const Dev& g, const Out& o, const Scratch& x, Shared& sh,
                            const int* ops, const int* sx, const int* sy, const int* lab,
                            int blocks) {
    volatile unsigned long long* vw = x.gw;
    volatile unsigned long long* lw = x.gw + W_LF;   // words other blocks add to
    int t = threadIdx.x, lane = t & 31;
    long long i0 = (long long)vw[W_LF + L_I0], N = (long long)vw[W_LF + L_N];
    long long stamp = (long long)vw[W_LF + L_STAMP];
    int nblk = (int)((N + TILE - 1) / TILE);
    bool work = (int)blockIdx.x < nblk;   // the block holds updates (uniform in a block)
    long long u = (long long)blockIdx.x * TILE + t;
    bool mine = work && u < N;
    long long i = i0 + u;
    const Raw r = read_raw(g, ops, sx, sy, lab, i, mine);
    const int op = r.op, xs = r.xs, ys = r.ys, lb = r.lb, a0 = r.a0, b0 = r.b0;
    const bool loop = r.loop, cand = r.cand, ins = r.ins;
    int h = -1, pos = 0;
    // 1. new vertices' first insertions, the versions' lengths (the pool bound), crowding,
    //    and each pair's group
    if (work) {
        long long lsum = first_touch(g, x, r, 2 * (int)u, stamp);
        int ka = group_add(x.slot_tally, xs, 1, ins, lane) + 1;
        int kb = group_add(x.slot_tally, ys, 1, ins, lane) + 1;
        bool flag = ins && (ka > BUILD_KCAP || kb > BUILD_KCAP);
        if (cand) {
            unsigned long long key = ((unsigned long long)min(xs, ys) << 32) | (unsigned)max(xs, ys);
            for (h = pt_slot(key);; h = (h + 1) & (PT_SIZE - 1)) {
                unsigned long long got = atomicCAS(x.lf_key + h, 0ULL, key);
                if (got == 0ULL || got == key) break;
            }
            pos = atomicAdd(x.lf_cnt + h, 1);
            if (pos < LF_GMAX) x.lf_list[h * LF_GMAX + pos] = (int)u;
            else flag = true;
        }
        for (int d = 16; d > 0; d >>= 1) lsum += __shfl_down_sync(FULL, lsum, d);
        int n_ins = __popc(__ballot_sync(FULL, ins));
        bool any = __any_sync(FULL, flag);
        if (lane == 0) {
            if (lsum) atomicAdd(x.gw + W_LF + L_S, (unsigned long long)lsum);
            if (n_ins) atomicAdd(x.gw + W_LF + L_NINS, (unsigned long long)n_ins);
            if (any) atomicExch(x.gw + W_LF + L_FLAG, 1ULL);
        }
    }
    if (!grid_sync(x.gw, blocks)) return FAULT;
    probe(x.gw, P_LAUNCH);
    // 2. which insertions make vertices (ranked within the block); each pair's replay
    int c0 = 0, c1 = 0, vrank = 0;
    bool crowded = vw[W_LF + L_FLAG] != 0;
    if (work) {
        c0 = ins && a0 < 0 && x.slot_first[xs] == 2 * (int)u;
        c1 = ins && b0 < 0 && x.slot_first[ys] == 2 * (int)u + 1;
        int nvb = 0;
        vrank = block_scan(c0 + c1, sh.wsum, &nvb);
        if (t == 0) x.blk[3 * blockIdx.x] = nvb;
        if (ins) { x.slot_tally[xs] = 0; x.slot_tally[ys] = 0; }
        if (cand && pos == 0 && !crowded) {   // the group's replay, from the pair's version
            int k = x.lf_cnt[h];
            long long e = a0 >= 0 && b0 >= 0 ? find_alive_1(g, a0, make_key(g.vlabel[b0], b0)) : -1;
            bool alive = e >= 0;
            int cur = alive ? g.elab[e] : 0;
            int pending = -1, last = -1;
            for (int rr = 0; rr < k; ++rr) {   // members in arrival order
                int m = (int)u;
                if (k > 1) {
                    m = 0x7fffffff;
                    for (int q = 0; q < k; ++q) {
                        int c = x.lf_list[h * LF_GMAX + q];
                        if (c > last && c < m) m = c;
                    }
                }
                last = m;
                int opm = m == (int)u ? op : ops[i0 + m], lm = m == (int)u ? lb : lab[i0 + m];
                int st = ST_IGNORED, el = lm, link = -1;
                if (opm == OP_INS_E) {
                    if (!alive) { st = ST_APPLIED; alive = true; cur = lm; pending = m; }
                } else if (alive) {
                    st = ST_APPLIED; alive = false; el = cur;
                    if (pending >= 0) { link = pending; x.lf_link[pending] = m; }
                    pending = -1;
                }
                x.lf_st[m] = st; x.lf_el[m] = el; x.lf_link[m] = link;
            }
        }
    }
    if (!grid_sync(x.gw, blocks)) return FAULT;
    probe(x.gw, P_LF_REPLAY);
    // 3. the verdict (every block alike); the scratch back to empty either way
    long long S = (long long)lw[L_S], n_ins = (long long)lw[L_NINS];
    long long n_new = lf_blocks_before(x, 0, nblk), nv0 = (long long)lw[L_NV];
    long long n_out0 = (long long)lw[L_NOUT];
    long long bound = S + S / 8 + 11 * n_ins + 64;
    bool ok = !crowded && n_out0 + N <= o.cap && nv0 + n_new <= g.vcap &&
              (long long)lw[L_POOL] + bound <= g.pool_cap;
    if (work) {
        if (ins && a0 < 0) x.slot_first[xs] = 0x7fffffff;
        if (ins && b0 < 0) x.slot_first[ys] = 0x7fffffff;
        if (cand) { x.lf_key[h] = 0ULL; x.lf_cnt[h] = 0; }
    }
    if (!ok) {
        if (!grid_sync(x.gw, blocks)) return FAULT;   // put back before the tiles start
        return DECLINED;
    }
    int st = mine ? (cand ? x.lf_st[i - i0] : ST_REJECTED) : ST_IGNORED;
    bool applied = mine && st == ST_APPLIED;
    int arank = 0;
    if (work) {
        long long v0 = nv0 + lf_blocks_before(x, 0, blockIdx.x) + vrank;
        for (int side = 0; side < 2; ++side) {
            if (!(side == 0 ? c0 : c1)) continue;
            int slot = side == 0 ? xs : ys;
            new_vertex_row(g, (int)(v0 + (side == 1 ? c0 : 0)), slot);
        }
        int nab = 0;
        arank = block_scan(applied ? 1 : 0, sh.wsum, &nab);
        if (t == 0) x.blk[3 * blockIdx.x + 1] = nab;
    }
    if (!grid_sync(x.gw, blocks)) return FAULT;
    probe(x.gw, P_LF_IDS);
    // 4. ticks in arrival order, lifetimes, new entries, owners, degrees, output rows
    if (work) {
        int a = a0 >= 0 || !mine ? a0 : g.slot_vid[xs];
        int b = b0 >= 0 || !mine || loop ? b0 : g.slot_vid[ys];
        long long tk = applied ? (long long)lw[L_TICK] + lf_blocks_before(x, 1, blockIdx.x) + arank + 1
                               : 0;
        int el = cand ? x.lf_el[u] : lb, link = cand ? x.lf_link[u] : -1;
        int de = 0;
        bool insa = applied && op == OP_INS_E;
        if (mine && !insa) {
            x.e_owner[2 * u] = -1;
            x.e_owner[2 * u + 1] = -1;
        }
        if (applied && op == OP_DEL_E) {
            de = -1;
            if (link >= 0) {   // ends an insertion of the range: its entries' lifetimes
                x.e_dt[2 * (long long)link] = tk;
                x.e_dt[2 * (long long)link + 1] = tk;
            } else {           // ends an entry of the version in place
                long long e = find_alive_1(g, a, make_key(g.vlabel[b], b));
                long long f = find_alive_1(g, b, make_key(g.vlabel[a], a));
                g.dt[e] = tk;
                g.dt[f] = tk;
            }
        }
        if (insa) de = 1;
        if (applied) {
            atomicAdd(g.vdeg + a, de);
            atomicAdd(g.vdeg + b, de);
        }
        unsigned m = __ballot_sync(FULL, insa);
        if (insa) {   // as the tiles' front 4 (the deletion that ends it sets dt)
            bool new_a, new_b;
            int ca, cb;
            put_entries(g, x, 2 * u, a, b, lb, tk, INF, link >= 0, m, stamp, lane, new_a,
                        new_b, ca, cb);
            if (new_a) x.owners[atomicAdd(x.gw + W_LF + L_NOWN, 1ULL)] = a;
            if (new_b) x.owners[atomicAdd(x.gw + W_LF + L_NOWN, 1ULL)] = b;
        }
        for (int d = 16; d > 0; d >>= 1) de += __shfl_down_sync(FULL, de, d);
        if (lane == 0 && de) atomicAdd(x.gw + W_LF + L_DEDGES, (unsigned long long)(long long)de);
        if (mine) put_row(g, o, n_out0 + u, i, r, applied, a, b, el, tk, st);
    }
    if (!grid_sync(x.gw, blocks)) return FAULT;
    if (blockIdx.x == 0 && t == 0) {   // block 0's state, as after the tiles of a build
        sh.s.nv = nv0 + n_new;
        sh.s.tick += lf_blocks_before(x, 1, nblk);
        sh.s.nedges += (long long)lw[L_DEDGES];
        sh.n_owners = (int)lw[L_NOWN];
        sh.reserved += bound;
        sh.lensum += S;
    }
    __syncthreads();
    probe(x.gw, P_LF_ROWS);
    return DONE;
}

// The resolver's scratch (Scratch, in its order) as kernel parameters, one a pointer: read
// from the parameter bank where used. Loaded from a device array of pointers they took 76
// registers of a 1,024-thread block's 64, and their spills (a 424-byte stack frame a
// thread, more than an SM's L1 holds for 1,024 threads) went to L2 on every use.
#define SCRATCH_ARGS \
    int* x_slot_first, long long* x_vtile, int* x_vcnt, int* x_owners, int* x_bucket, \
    int* x_e_owner, long long* x_e_key, int* x_e_lab, long long* x_e_ct, long long* x_e_dt, \
    long long* x_b_key, int* x_b_lab, long long* x_b_ct, long long* x_b_dt, \
    long long* x_s_key, int* x_s_lab, long long* x_s_ct, long long* x_s_dt, \
    long long* x_own_src, int* x_own_n0, long long* x_own_dst, int* x_own_cap, \
    int* x_own_item, int* x_own_done, int* x_item_owner, int* x_cnt, \
    unsigned long long* x_pt_key, long long* x_pt_stamp, long long* x_pt_val, \
    unsigned long long* x_gw, long long* x_blk, unsigned long long* x_lf_key, \
    int* x_lf_cnt, int* x_lf_list, int* x_lf_st, int* x_lf_el, int* x_lf_link, \
    int* x_slot_tally
#define SCRATCH_PASS \
    x_slot_first, x_vtile, x_vcnt, x_owners, x_bucket, x_e_owner, x_e_key, x_e_lab, x_e_ct, \
    x_e_dt, x_b_key, x_b_lab, x_b_ct, x_b_dt, x_s_key, x_s_lab, x_s_ct, x_s_dt, x_own_src, \
    x_own_n0, x_own_dst, x_own_cap, x_own_item, x_own_done, x_item_owner, x_cnt, x_pt_key, \
    x_pt_stamp, x_pt_val, x_gw, x_blk, x_lf_key, x_lf_cnt, x_lf_list, x_lf_st, x_lf_el, \
    x_lf_link, x_slot_tally

#define APPLY_ARGS \
    long long* key, int* elab, long long* ct, long long* dt, long long* seg, int* vlabel, \
    long long* off, int* len, int* cap, long long* vbatch, int* vdeg, unsigned char* valive, \
    int* vslot, long long* vext, long long* vpub, int* slot_vid, const long long* slot_ext, \
    long long pool_cap, long long vcap, \
    int* o_raw, signed char* o_op, int* o_a, int* o_b, long long* o_src, long long* o_dst, \
    int* o_el, long long* o_tick, signed char* o_status, signed char* o_reason, \
    long long out_cap, int* touched, int* nbr, long long* nbr_ext, int* order, \
    long long* meta, SCRATCH_ARGS
#define APPLY_PASS key, elab, ct, dt, seg, vlabel, off, len, cap, vbatch, vdeg, valive, \
    vslot, vext, vpub, slot_vid, slot_ext, pool_cap, vcap, o_raw, o_op, o_a, o_b, o_src, \
    o_dst, o_el, o_tick, o_status, o_reason, out_cap, touched, nbr, nbr_ext, order, meta, \
    SCRATCH_PASS

// The resolver of apply_batch and apply_step; returns the code (every thread of block 0).
// Block 0 resolves each tile (the front); once a build of up to `build_tiles` edge-only tiles
// is due, every block builds their new versions (step 5), with grid barriers between the
// phases (apply_batch, the host path, builds `build_tiles` at most). `hold` >= 0: the
// pipeline's watermark, min(tick before the batch, hold - 1): matching of earlier batches
// has finished in stream order, so only a host hold keeps older entries. Only the first
// `blocks` blocks take part (active_blocks); the others have returned.
template <bool WHOLE>
__device__ int resolve_grid(long long i0, long long n_out0, long long n, const int* ops,
                            const int* sx, const int* sy, const int* lab, long long hold,
                            int blocks, int build_tiles, const State* pre, Tail* fin,
                            APPLY_ARGS) {
    __shared__ Shared sh;
    int t = threadIdx.x, lane = t & 31;
    bool lead = blockIdx.x == 0;
    Dev g{key, elab, ct, dt, seg, vlabel, off, len, cap, vbatch, vdeg, valive, vslot, vext,
          vpub, slot_vid, slot_ext, pool_cap, vcap};
    Out o{o_raw, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick, o_status, o_reason, out_cap};
    Scratch x{x_slot_first, x_vtile, x_vcnt, x_owners, x_bucket, x_e_owner, x_e_key,
              x_e_lab, x_e_ct, x_e_dt, x_b_key, x_b_lab, x_b_ct, x_b_dt, x_s_key, x_s_lab,
              x_s_ct, x_s_dt, x_own_src, x_own_n0, x_own_dst, x_own_cap, x_own_item,
              x_own_done, x_item_owner, x_cnt, x_pt_key, x_pt_stamp, x_pt_val, x_gw, x_blk,
              x_lf_key, x_lf_cnt, x_lf_list, x_lf_st, x_lf_el, x_lf_link, x_slot_tally};
    volatile unsigned long long* vw = x.gw;
    if (lead && t == 0) {
        sh.s = pre != nullptr ? *pre : load_meta(meta);
        if (hold >= 0) {
            sh.s.watermark = min(sh.s.tick, hold - 1);
            meta[M_WATERMARK] = sh.s.watermark;
        }
        sh.pool_used = (unsigned long long)sh.s.pool_used;
        sh.garbage = (unsigned long long)sh.s.garbage;
        sh.maxlen = sh.s.maxlen;
        sh.n_owners = 0;
        sh.reserved = 0;
        sh.lensum = 0;
        sh.build_due = 0;
        sh.builds = 0;
        x.gw[W_MAXLEN] = 0;
    }
    __syncthreads();
    probe(x.gw, P_META);
    long long i = i0, n_out = n_out0;
    // a grid that faulted before (sticky) changes nothing more, however few its blocks
    bool faulted = vw[W_FAULT] != 0;
    int code = faulted ? FAULT : DONE;
    int gwarp = blockIdx.x * NWARPS + (t >> 5), nwarps = blocks * NWARPS;
    long long bs = i;   // the first update of the build being gathered
    int tiles = 0, stop = DONE;
    // a fresh build of more than a tile goes to launch_front, except a range it declined
    // (or that holds a vertex operation), which the tiles resolve
    long long tiles_until = i;
    for (int round = 0; !faulted; ++round) {
        if (lead) {   // resolve tiles until the build is due (or a vertex operation's tile)
            int state = T_STOP;
            for (;;) {
                int nt = (int)min((long long)TILE, n - i);
                if (t == 0) sh.vertex_ops = 0;
                __syncthreads();
                if (t < nt && ops[i + t] >= OP_INS_V) sh.vertex_ops = 1;
                __syncthreads();
                long long take = min(n - i, (long long)build_tiles * TILE);
                if (WHOLE && i >= tiles_until && tiles == 0 && stop == DONE && !sh.vertex_ops &&
                    !sh.build_due && take > TILE && (long long)blocks * TILE >= take) {
                    if (t == 0) sh.range_ops = 0;
                    __syncthreads();
                    for (long long j = i + TILE + t; j < i + take; j += TILE)
                        if (ops[j] >= OP_INS_V) sh.range_ops = 1;
                    __syncthreads();
                    if (!sh.range_ops) {   // the grid resolves [i, i + take) at once
                        if (t == 0) {
                            unsigned long long* lw = x.gw + W_LF;
                            lw[L_I0] = i; lw[L_N] = take;
                            lw[L_STAMP] = build_stamp(sh.s.launch, sh.builds);
                            lw[L_NV] = sh.s.nv; lw[L_TICK] = sh.s.tick; lw[L_NOUT] = n_out;
                            lw[L_POOL] = sh.pool_used + sh.reserved;
                            lw[L_S] = 0; lw[L_NINS] = 0; lw[L_FLAG] = 0; lw[L_NOWN] = 0;
                            lw[L_DEDGES] = 0;
                        }
                        state = T_LAUNCH;
                        break;
                    }
                    tiles_until = i + take;
                }
                if (stop == DONE && i < n && !sh.vertex_ops && tiles < build_tiles &&
                    !sh.build_due) {
                    if (t == 0) sh.s.pool_used = (long long)sh.pool_used;
                    __syncthreads();
                    int c = par_tile(g, o, x, sh, ops, sx, sy, lab, i, nt, n_out, bs);
                    if (c == DONE) {
                        i += nt;
                        n_out += nt;
                        ++tiles;
                    } else if (!(c == NEED_POOL && tiles > 0)) {
                        stop = c;   // the tile is untouched: build what the build holds
                    }   // else: the earlier tiles' bounds held the pool; built, it may fit
                    if (t == 0 && c == NEED_POOL && tiles > 0) sh.build_due = 1;   // then retry
                    continue;   // (the loop's first barrier orders it before its read)
                }
                if (tiles > 0 && sh.n_owners == 0) {   // no new entries (deletions end
                    // theirs in place, ignored insertions add none): nothing to build, so
                    // no grid round; the next tiles start a build of their own
                    __syncthreads();   // every thread has read build_due above
                    if (t == 0) {
                        sh.reserved = 0;
                        sh.lensum = 0;
                        sh.build_due = 0;
                        ++sh.builds;
                    }
                    bs = i;
                    tiles = 0;
                    continue;   // (the loop's first barrier orders it before its reads)
                }
                if (tiles > 0) {   // the grid builds the gathered tiles' versions
                    build_front(g, x, sh, 2 * (i - bs));
                    bs = i;
                    tiles = 0;
                    state = T_BUILD;
                } else if (stop == DONE && i < n) {   // the sequential resolver, on warp 0
                    if (t < 32) {
                        State s = sh.s;
                        s.pool_used = (long long)sh.pool_used;
                        s.garbage = (long long)sh.garbage;
                        s.maxlen = max(s.maxlen, sh.maxlen);
                        long long ii = i, no = n_out;
                        int c = seq_resolve(g, o, ops, sx, sy, lab, ii, i + nt, no, s, touched,
                                            nbr, nbr_ext, order, lane);
                        if (lane == 0) {
                            sh.s = s;
                            sh.pool_used = (unsigned long long)s.pool_used;
                            sh.garbage = (unsigned long long)s.garbage;
                            sh.maxlen = s.maxlen;
                            sh.code = c;
                            sh.skey[0] = (unsigned long long)ii;
                            sh.skey[1] = (unsigned long long)no;
                        }
                    }
                    __syncthreads();
                    stop = sh.code;
                    i = (long long)sh.skey[0];
                    n_out = (long long)sh.skey[1];
                    bs = i;
                    __syncthreads();
                    state = stop == DONE ? T_NEXT : T_STOP;
                    probe(x.gw, P_SEQ);
                }
                break;
            }
            code = stop;
            if (t == 0) {
                vw[W_STATE + (round & 1)] = state;
                vw[W_WM] = sh.s.watermark;
            }
        }
        if (!grid_sync(x.gw, blocks)) {
            code = FAULT;
            break;
        }
        int state = (int)vw[W_STATE + (round & 1)];
        if (state == T_STOP) {
            probe(x.gw, P_STOP);
            break;
        }
        probe(x.gw, P_SYNC1);
        if (state == T_NEXT) continue;
        if (WHOLE && state == T_LAUNCH) {
            int c = launch_front(g, o, x, sh, ops, sx, sy, lab, blocks);
            if (c == FAULT) {
                code = FAULT;
                break;
            }
            if (lead) {
                long long take = (long long)vw[W_LF + L_N];
                if (c == DONE) {   // as after its tiles: the next round builds it, and no
                    i += take;     // tile joins the build (the front wrote no pair table)
                    n_out += take;
                    tiles = (int)((take + TILE - 1) / TILE);
                    if (t == 0) sh.build_due = 1;
                } else {           // DECLINED: the tiles take it, with a stamp of their own
                    tiles_until = i + take;
                    if (t == 0) ++sh.builds;
                }
                __syncthreads();
            }
            continue;
        }
        long long chunk = (long long)vw[W_CHUNK], w = (long long)vw[W_WM];
        int no = (int)vw[W_NO];
        if (no > 0) {   // the build's owners' space and items (build_front)
            owners_sums(g, x, sh, no, blocks, chunk);
            if (!grid_sync(x.gw, blocks)) {
                code = FAULT;
                break;
            }
            owners_place(g, x, sh, no, blocks, chunk, (long long)vw[W_BASE]);
            if (!grid_sync(x.gw, blocks)) {
                code = FAULT;
                break;
            }
            probe(x.gw, P_GRIDOWN);
        }
        long long ne = (long long)vw[W_NE];
        if (ne > 0) {   // the build's new entries into their owners' buckets (build_front)
            scatter_entries(x, ne, (long long)gwarp * 32 + lane, (long long)nwarps * 32, lane);
            if (!grid_sync(x.gw, blocks)) {
                code = FAULT;
                break;
            }
            probe(x.gw, P_SCATTER);
        }
        int items = (int)vw[W_ITEMS];
        unsigned long long t_w = gtime();
        for (int it = gwarp; it < items; it += nwarps) sort_and_count(g, x, chunk, w, it, lane);
        probe_warp(x.gw, 0, t_w, lane);
        if (!grid_sync(x.gw, blocks)) {
            code = FAULT;
            break;
        }
        probe(x.gw, P_COUNT);
        t_w = gtime();
        long long maxlen = 0;
        unsigned long long slow = 0;
        int mine = 0;
        for (int it = gwarp; it < items; it += nwarps, ++mine) {
            slow = max(slow, build_chunk(g, x, chunk, w, it, lane, maxlen));
        }
        if (lane == 0 && maxlen > 0) atomicMax(x.gw + W_MAXLEN, (unsigned long long)maxlen);
        probe_warp(x.gw, 1, t_w, lane);
        probe_items(x.gw, mine, slow, lane);
        if (!grid_sync(x.gw, blocks)) {
            code = FAULT;
            break;
        }
        probe(x.gw, P_BUILD);
    }
    if (lead) {
        __threadfence();
        __syncthreads();
        if (code != FAULT) publish_touched(g, touched, sh.s.touched, t, TILE);
        if (t == 0) {
            sh.s.pool_used = (long long)sh.pool_used;
            sh.s.garbage = (long long)sh.garbage;
            sh.s.maxlen = max(max(sh.s.maxlen, sh.maxlen), (long long)vw[W_MAXLEN]);
            store_meta(meta, sh.s, i, n_out, code);
            if (fin != nullptr) *fin = Tail{sh.s, i, n_out};   // meta is mapped host memory
        }
    }
    probe(x.gw, P_TAIL);
    return code;
}

// Blocks a resolve of n updates takes part with: one per UPDATES_PER_BLOCK, at least one,
// at most the grid. A small batch meets at its barriers only the blocks it can use, and
// needs only that many free SMs (a resolver block fills one) while other streams' matching
// holds the rest.
#define UPDATES_PER_BLOCK 8
__device__ __forceinline__ int active_blocks(long long n) {
    return (int)max(1LL, min((long long)gridDim.x, (n + UPDATES_PER_BLOCK - 1) / UPDATES_PER_BLOCK));
}

extern "C" __global__ void __launch_bounds__(TILE, 1) apply_batch(
    long long i0, long long n_out0, long long n, const int* ops, const int* sx,
    const int* sy, const int* lab, int build_tiles, APPLY_ARGS) {
    int blocks = active_blocks(n - i0);
    if ((int)blockIdx.x >= blocks) return;
    probe(x_gw, P_ENTRY, true);
    resolve_grid<LAUNCH_FRONT>(i0, n_out0, n, ops, sx, sy, lab, -1, blocks,
                               min(max(build_tiles, 1), BUILD_TILES), nullptr, nullptr, APPLY_PASS);
}

// ---- The pipeline (gpu/cuda/_pipeline.py): one batch = apply_step, build_units,
// match.cu::match_step, collect_step on one stream, captured once as a CUDA graph. Every
// per-batch value lives in the batch's control block (mapped pinned host memory: the
// host writes the raw updates there and reads the results back without a copy) or in
// `dims` (device words), so the same graph serves every batch.

// control block words; must equal gpu/cuda/_pipeline.py
// C_RSEQ: the launch's sequence number again, written by the host after the region's three
// words (it takes the region once the front is launched: apply_step waits for this word)
enum { C_N = 0, C_HOLD, C_SEQ, C_CODE, C_RESUME, C_NOUT, C_NTASK, C_NPAIRS, C_NUNITS,
       C_TICK0, C_TICK1, C_MAXLEN, C_DONE, C_POOL0, C_POOL1, C_RBASE, C_RROWS, C_RROW0,
       C_RSEQ, C_HDR = 24 };
// device words: match_step's unit counts and queue epoch, and the stall flag (a batch
// that stopped on a full pool or output makes every later one skip, so none is resolved
// out of order before the host has finished it); what a step hands the next without a
// round trip through mapped memory: the rows to build tasks from and the sequence number
// (apply_step to build_units, in the front's words), the tasks and the sequence number
// (build_units to collect_step, in the lane's)
// (and the launch's result region: its device address, rows and first row, apply_step to
// build_units to collect_step)
enum { D_PAIRS = 0, D_UNITS, D_EPOCH, D_STALL, D_NOUT, D_SEQ_LO, D_SEQ_HI, D_NTASK, D_RB_LO,
       D_RB_HI, D_RROWS, D_RROW0, D_SIZE };
#define SKIPPED 4

// Raw updates: op, slot x, slot y, label (in_cap int32 each, after the header).
// lane_tick[l]: the tick before the last batch matched on lane l (match lanes run
// concurrently, each on its own stream; this batch's lane has finished its previous one,
// the others may still run theirs). The watermark keeps every entry their ticks can see.
// The launch's result region into the front's words, for build_units and collect_step: the
// host takes it after launching the front (a region cost its submit 10-150 us of Python) and
// publishes it under the launch's number, C_RSEQ written after the three words; by the end
// of the resolve it is there, so this costs two round trips to mapped memory. False (the
// launch faults) if it has not come within the barriers' timeout.
__device__ bool take_region(long long* ctrl, int* dims, long long seq, unsigned long long* gw) {
    volatile long long* c = ctrl;
    if (c[C_RSEQ] != seq) {
        unsigned long long t0, now;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
        while (c[C_RSEQ] != seq) {
            __nanosleep(100);
            asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
            if (gw[W_TIMEOUT] && now - t0 > gw[W_TIMEOUT]) return false;
        }
    }
    __threadfence_system();   // the three words after the number that follows them
    long long rb = c[C_RBASE], rrows = c[C_RROWS], rrow0 = c[C_RROW0];
    dims[D_RB_LO] = (int)(rb & 0xffffffff);
    dims[D_RB_HI] = (int)(rb >> 32);
    dims[D_RROWS] = (int)rrows;
    dims[D_RROW0] = (int)rrow0;
    return true;
}

#define STEP_ARGS long long* ctrl, int* dims, int* in, long long in_cap, long long* lane_tick, \
    int lane, int lanes, APPLY_ARGS
template <bool WHOLE>
__device__ __forceinline__ void apply_step_body(STEP_ARGS) {
    __shared__ int skip;
    __shared__ long long n, hold, seq;
    __shared__ State s0;
    __shared__ Tail fin;
    int t = threadIdx.x;
    unsigned long long* gw = x_gw;
    probe(gw, P_ENTRY, true);
    // Reads of mapped host memory cost a PCIe round trip each (about 2.5 us on an H100)
    // unless issued together: every word this launch needs from it is loaded at once here,
    // the raw updates in one more round, and the results go back from registers.
    if (t == 0) {
        long long c_n = ctrl[C_N], c_hold = ctrl[C_HOLD], c_seq = ctrl[C_SEQ];
        State m = blockIdx.x == 0 ? load_meta(meta) : State{};
        probe_after(gw, P_MAPPED, c_n + c_hold + c_seq + m.nv + m.tick + m.launch);
        if (blockIdx.x == 0) {
            dims[D_NOUT] = 0;   // (skipped: no rows)
            dims[D_SEQ_LO] = (int)(c_seq & 0xffffffff);
            dims[D_SEQ_HI] = (int)(c_seq >> 32);
        }
        seq = c_seq;
        skip = *(volatile int*)(dims + D_STALL);
        n = c_n;
        if (blockIdx.x == 0) {
            s0 = m;
            lane_tick[lane] = m.tick;
            hold = c_hold;
            for (int l = 0; l < lanes; ++l) hold = min(hold, lane_tick[l] + 1);
            probe_after(gw, P_LANES, hold);
        }
    }
    __syncthreads();
    int blocks = active_blocks(n);
    if ((int)blockIdx.x >= blocks) return;
    if (skip) {
        if (t == 0 && blockIdx.x == 0) ctrl[C_CODE] = SKIPPED;
        return;
    }
    probe(gw, P_ENTRY);
    const int* h = (const int*)(ctrl + C_HDR);
    if (blockIdx.x == 0) {   // only block 0 reads the raw updates (the fronts)
        for (long long j0 = 0; j0 < n; j0 += 4 * TILE) {   // 16 loads in flight per thread
            int r[16];
#pragma unroll
            for (int u = 0; u < 16; ++u) {
                long long j = j0 + (u >> 2) * TILE + t;
                r[u] = j < n ? h[(u & 3) * in_cap + j] : 0;
            }
#pragma unroll
            for (int u = 0; u < 16; ++u) {
                long long j = j0 + (u >> 2) * TILE + t;
                if (j < n) in[(u & 3) * in_cap + j] = r[u];
            }
        }
    }
    __syncthreads();
    probe(gw, P_RAW);
    int code = resolve_grid<WHOLE>(0, 0, n, in, in + in_cap, in + 2 * in_cap, in + 3 * in_cap,
                                   hold, blocks, BUILD_TILES, &s0, &fin, APPLY_PASS);
    if (t == 0 && blockIdx.x == 0) {
        if (!take_region(ctrl, dims, seq, gw)) code = FAULT;
        ctrl[C_CODE] = code; ctrl[C_RESUME] = fin.resume; ctrl[C_NOUT] = fin.n_out;
        ctrl[C_TICK0] = s0.tick; ctrl[C_TICK1] = fin.s.tick; ctrl[C_MAXLEN] = fin.s.maxlen;
        ctrl[C_POOL0] = s0.pool_used; ctrl[C_POOL1] = fin.s.pool_used;   // what it took
        if (code != DONE) dims[D_STALL] = 1;
        else dims[D_NOUT] = (int)fin.n_out;
    }
}

// The full grid's step (launches of up to LAUNCH_CAP updates: the launch front), and the
// small grids' (launches of up to 128: the tiles alone, a kernel without the launch front's
// registers and spills)
extern "C" __global__ void __launch_bounds__(TILE, 1) apply_step(STEP_ARGS) {
    apply_step_body<LAUNCH_FRONT>(ctrl, dims, in, in_cap, lane_tick, lane, lanes, APPLY_PASS);
}
extern "C" __global__ void __launch_bounds__(TILE, 1) apply_step_small(STEP_ARGS) {
    apply_step_body<false>(ctrl, dims, in, in_cap, lane_tick, lane, lanes, APPLY_PASS);
}

// plan table fields (must equal kernels/match.cu and gpu/planning/_planner.py)
#define PM 12
#define PNF 12
enum { PF_LABEL = 1, PF_DEGREE = 2, PF_GT = 6, PF_LT = 7, PF_MISC = 11 };
#define SEG_MASK ((1LL << SEG_BITS) - 1)

__device__ __forceinline__ int plan_at(const int* pl, int p, int f, int L) {
    return pl[(p * PNF + f) * PM + L];
}

// gpu/cpu/_kernels.py::_root_fits: the cheap root checks (no neighbour array is read)
__device__ __forceinline__ bool root_fits(const int* pl, int p, int a, int b, int el, int va,
                                          int vb, long long la, long long lb) {
    int l0 = plan_at(pl, p, PF_LABEL, 0), l1 = plan_at(pl, p, PF_LABEL, 1);
    int rl = plan_at(pl, p, PF_MISC, 1);
    return (l0 == WILD || l0 == va) && (l1 == WILD || l1 == vb) && (rl == WILD || rl == el)
        && la >= plan_at(pl, p, PF_DEGREE, 0) && lb >= plan_at(pl, p, PF_DEGREE, 1)
        && (!(plan_at(pl, p, PF_GT, 1) & 1) || b > a) && (!(plan_at(pl, p, PF_LT, 1) & 1) || b < a);
}

// gpu/cuda/_executor.py::GpuExecutor._units: level-2 slices of a live pair
__device__ __forceinline__ int slices(const int* pl, const int* l2src, int p, long long la,
                                      long long lb, int slice, int max_slices) {
    if (plan_at(pl, p, PF_MISC, 0) < 4) return 1;
    long long est = 1LL << 40;
    int src = l2src[p];
    if (src & 1) est = min(est, la);
    if (src & 2) est = min(est, lb);
    return (int)max(1LL, min((long long)max_slices, (est + slice - 1) / slice));
}

// A launch's result region (mapped pinned host memory the host hands out as the batch's
// result columns, gpu/cuda/_arena.py): `rows` rows of tick, src, dst, counts (nq an row;
// int64), a, b, label (int32), op, status, reason (int8), one column after the other.
struct Region {
    long long *tick, *src, *dst, *counts;
    int *a, *b, *label;
    signed char *op, *status, *reason;
    long long row0;
};

__device__ __forceinline__ Region region_at(const int* w, int nq) {
    char* base = (char*)(((unsigned long long)(unsigned)w[D_RB_HI] << 32) | (unsigned)w[D_RB_LO]);
    long long rows = w[D_RROWS];
    Region r;
    r.tick = (long long*)base; r.src = r.tick + rows; r.dst = r.src + rows;
    r.counts = r.dst + rows;
    r.a = (int*)(r.counts + rows * nq); r.b = r.a + rows; r.label = r.b + rows;
    r.op = (signed char*)(r.label + rows); r.status = r.op + rows; r.reason = r.status + rows;
    r.row0 = w[D_RROW0];
    return r;
}

// A pipelined launch's words for each query, Q_EACH a query (match.cu Q_EACH: its items,
// those done, whether collected); build_units sums the first QSUM_MAX queries' units a block
// in shared memory before adding them there
#define Q_EACH (3 * 32)
#define QE_COLLECTED (2 * 32)
#define QSUM_MAX 64

// One tile's share of build_units: its rows' columns into the result region (`out` set,
// the first pass), or its tasks and (task, plan) pairs at the running offsets (ce, cp,
// cu: tasks' edge updates, pairs, units; the second pass); the offsets advance either way.
__device__ __forceinline__ void unit_tile(
    long long base, long long n, bool write, const Region& out, const signed char* o_op,
    const int* o_a, const int* o_b, const long long* o_src, const long long* o_dst,
    const int* o_el, const long long* o_tick, const signed char* o_status,
    const signed char* o_reason, const long long* seg, const int* vlabel, const int* pl,
    const int* q_lo, const int* q_hi, const int* l2src, int nq, int slice, int max_slices,
    int* t_a, int* t_b, int* t_el, long long* t_k, unsigned long long* t_count, int* t_row,
    int* u_task, int* u_plan, int* u_first, int* u_nchunk, int* wsum, int& ce, int& cp,
    int& cu, unsigned* qsum, unsigned* q_each) {
    long long i = base + threadIdx.x;
    bool edge = false;
    int a = 0, b = 0, el = 0;
    long long k = 0;
    if (i < n) {
        a = o_a[i]; b = o_b[i]; el = o_el[i]; k = o_tick[i];
        signed char op = o_op[i], st = o_status[i];
        if (!write) {
            long long r = out.row0 + i;
            out.tick[r] = k; out.src[r] = o_src[i]; out.dst[r] = o_dst[i];
            for (int j = 0; j < nq; ++j) out.counts[r * nq + j] = 0;
            out.a[r] = a; out.b[r] = b; out.label[r] = el;
            out.op[r] = op; out.status[r] = st; out.reason[r] = o_reason[i];
        }
        edge = st == ST_APPLIED && op <= OP_DEL_E;
    }
    int tot;
    int e = ce + block_scan(edge ? 1 : 0, wsum, &tot);
    ce += tot;
    if (write && edge) t_row[e] = (int)(i << 1) | (o_op[i] == OP_DEL_E);
    int np = 0, nu = 0;
    long long la = 0, lb = 0;
    int va = 0, vb = 0;
    if (edge) {
        la = seg[a] & SEG_MASK; lb = seg[b] & SEG_MASK; va = vlabel[a]; vb = vlabel[b];
        for (int j = 0; j < nq; ++j) {
            if (write) {
                long long task = (long long)e * nq + j;
                t_a[task] = a; t_b[task] = b; t_el[task] = el; t_k[task] = k;
                t_count[task] = 0;
            }
            for (int p = q_lo[j]; p < q_hi[j]; ++p)
                if (root_fits(pl, p, a, b, el, va, vb, la, lb)) {
                    ++np;
                    nu += slices(pl, l2src, p, la, lb, slice, max_slices);
                }
        }
    }
    int ptot, utot;
    int pe = cp + block_scan(np, wsum, &ptot);
    int ue = cu + block_scan(nu, wsum, &utot);
    if (write && np) {
        for (int j = 0; j < nq; ++j) {
            int uj = ue;
            for (int p = q_lo[j]; p < q_hi[j]; ++p)
                if (root_fits(pl, p, a, b, el, va, vb, la, lb)) {
                    int s = slices(pl, l2src, p, la, lb, slice, max_slices);
                    u_task[pe] = e * nq + j; u_plan[pe] = p; u_first[pe] = ue;
                    u_nchunk[pe] = s;
                    ++pe;
                    ue += s;
                }
            if (ue > uj)   // the query's units, for its delivery (match.cu collect_query)
                atomicAdd(j < QSUM_MAX ? qsum + j : q_each + j * Q_EACH, (unsigned)(ue - uj));
        }
    }
    cp += ptot;
    cu += utot;
}

// The batch's tasks (one per applied edge update and query, in op order) and its live
// (task, plan) pairs with their level-2 slices, as match_step reads them; the primitive
// updates' columns go to the launch's result region (its counts zeroed: collect_step
// writes the applied updates'), and each task's row and sign to t_row. Pairs keep task
// order (no heaviest-first sort: T-DFS splitting takes care of stragglers).
// The grid shares the tiles, consecutive runs in block order (one block, one tile, on
// the whole grid of a big launch: one block alone took 140 us for Enron's 18,383 rows, a
// tile after the other with three block scans each). A block counts its tiles' tasks,
// pairs and units (writing their region rows), publishes the sums in `scan` (after its
// first word, four words a block: the launch's sequence number, written after the three
// sums), adds those of the blocks before it, then writes its tasks and pairs from there.
// Blocks take their order from a counter as they start (scan's first word, reset by the
// last), so a block only waits for blocks already running, never for one that the SMs
// cannot hold yet. Every launch's build_units runs on the updater's stream: one `scan`
// serves every lane.
extern "C" __global__ void __launch_bounds__(TILE, 1) build_units(
    int* dims, const int* front, const signed char* o_op, const int* o_a, const int* o_b,
    const long long* o_src, const long long* o_dst, const int* o_el, const long long* o_tick,
    const signed char* o_status, const signed char* o_reason,
    const long long* seg, const int* vlabel, const int* pl, const int* q_lo, const int* q_hi,
    const int* l2src, int nq, int slice, int max_slices,
    int* t_a, int* t_b, int* t_el, long long* t_k, unsigned long long* t_count, int* t_row,
    int* u_task, int* u_plan, int* u_first, int* u_nchunk, unsigned int* q_ctr,
    long long* scan, unsigned int* q_each) {
    __shared__ int wsum[NWARPS];
    __shared__ unsigned qsum[QSUM_MAX];
    __shared__ long long n, seq, pre[3];
    __shared__ int blk;
    int t = threadIdx.x, lane = t & 31, G = gridDim.x;
    long long* ctr = scan;
    if (t == 0) {
        blk = (int)atomicAdd((unsigned long long*)ctr, 1ULL);
        if (blk == G - 1) *ctr = 0;   // every block has its number: ready for the next launch
        n = front[D_NOUT];   // 0 unless apply_step finished (DONE)
        seq = ((long long)front[D_SEQ_HI] << 32) | (unsigned)front[D_SEQ_LO];
        if (blk == 0)
            for (int w = D_SEQ_LO; w < D_SIZE; ++w)
                if (w != D_NTASK) dims[w] = front[w];   // sequence number and region: collect_step's
    }
    __syncthreads();
    int b = blk;
    long long tiles = (n + TILE - 1) / TILE, per = (tiles + G - 1) / G;
    long long lo = (long long)b * per, hi = min(tiles, lo + per);
    long long last = tiles == 0 ? 0 : (tiles - 1) / per;   // the block of the last tile
    if (b == 0)
        for (int i = t; i < 7 * 32; i += TILE) q_ctr[i] = 0;
    if (b > last) return;
    for (int j = t; j < QSUM_MAX; j += TILE) qsum[j] = 0;   // (a barrier in unit_tile follows)
    Region out = region_at(front, nq);
    int ce = 0, cp = 0, cu = 0;
    for (long long tl = lo; tl < hi; ++tl)   // first pass: the region rows, the sums
        unit_tile(tl * TILE, n, false, out, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick,
                  o_status, o_reason, seg, vlabel, pl, q_lo, q_hi, l2src, nq, slice,
                  max_slices, t_a, t_b, t_el, t_k, t_count, t_row, u_task, u_plan, u_first,
                  u_nchunk, wsum, ce, cp, cu, qsum, q_each);
    if (t == 0 && b < last) {   // (read by the blocks after it only; a launch without
        // rows, skipped or stopped, publishes nothing: the host may launch it again under
        // the same number, and a record of its first run would pass for this one's)
        volatile long long* rec = scan + 1 + 4 * b;
        rec[1] = ce; rec[2] = cp; rec[3] = cu;
        __threadfence();
        rec[0] = seq;
    }
    if (t < 32) {   // the sums of the blocks before this one
        long long s0 = 0, s1 = 0, s2 = 0;
        for (int j = lane; j < b; j += 32) {
            volatile long long* rec = scan + 1 + 4 * j;
            while (rec[0] != seq) __nanosleep(32);
            __threadfence();
            s0 += rec[1]; s1 += rec[2]; s2 += rec[3];
        }
        for (int d = 16; d > 0; d >>= 1) {
            s0 += __shfl_down_sync(FULL, s0, d);
            s1 += __shfl_down_sync(FULL, s1, d);
            s2 += __shfl_down_sync(FULL, s2, d);
        }
        if (lane == 0) { pre[0] = s0; pre[1] = s1; pre[2] = s2; }
    }
    __syncthreads();
    ce = (int)pre[0]; cp = (int)pre[1]; cu = (int)pre[2];
    for (long long tl = lo; tl < hi; ++tl)   // second pass: tasks and pairs in place
        unit_tile(tl * TILE, n, true, out, o_op, o_a, o_b, o_src, o_dst, o_el, o_tick,
                  o_status, o_reason, seg, vlabel, pl, q_lo, q_hi, l2src, nq, slice,
                  max_slices, t_a, t_b, t_el, t_k, t_count, t_row, u_task, u_plan, u_first,
                  u_nchunk, wsum, ce, cp, cu, qsum, q_each);
    __syncthreads();
    for (int j = t; j < min(nq, QSUM_MAX); j += TILE)   // the block's units of each query
        if (qsum[j]) atomicAdd(q_each + j * Q_EACH, qsum[j]);
    if (b == last && t == 0) {
        u_first[cp] = cu;
        dims[D_PAIRS] = cp; dims[D_UNITS] = cu; dims[D_EPOCH] += 1;
        dims[D_NTASK] = ce * nq;
    }
}

// The end of a launch: match.cu's match_step has written every query's signed, scaled
// counts into the result region and its ready word (a query once its last item was done,
// collect_query; one without items before it, ready_idle), so this only zeroes the lane's
// per-query words for its next launch (whose build_units adds to them: stream order puts
// it after this) and writes the sequence number into the control block: the host may read
// the region once C_DONE equals C_SEQ (or the stream's event has fired). A query's ready
// word left unwritten (none should be) is written here, so no reader waits for ever.
extern "C" __global__ void collect_step(long long* ctrl, const int* dims, int nq,
                                        unsigned int* q_each, long long* ready) {
    long long seq = ((long long)dims[D_SEQ_HI] << 32) | (unsigned)dims[D_SEQ_LO];
    for (int q = threadIdx.x; q < nq; q += blockDim.x) {
        unsigned* w = q_each + q * Q_EACH;
        if (!w[QE_COLLECTED]) ready[q] = seq;
        w[0] = 0; w[32] = 0; w[QE_COLLECTED] = 0;   // items, done, collected
    }
    __threadfence_system();
    __syncthreads();
    if (threadIdx.x == 0) ctrl[C_DONE] = seq;
}

// Compaction (nothing in flight): every vertex's live entries (dt > watermark) into a fresh
// pool, and the new words. The old pool is freed by the caller afterwards, or kept as the
// next compaction's target. With `wm_word` (not null) the watermark is the one the last
// resolve used (a compaction in stream order after every match lane's work: the
// pipeline's), from its copy in device memory (the grid's W_WM; meta is mapped host memory,
// and a read per block would cross PCIe thousands of times).
// A block takes COMPACT_RANGE vertices at a time: it counts their live entries (a thread a
// vertex of up to COMPACT_SMALL entries, a warp a larger one, every warp of the block a
// slice of a hub of over COMPACT_HUB), claims room for all of them with one atomic on
// words[0] (the pool's new fill), and copies. So the new pool holds no dead space and the
// kernel needs no prefix sum from the host: one launch, where the lengths' prefix sums, an
// atomic a vertex on one word and a warp walking each vertex one chunk at a time took 0.3
// ms of device time and 0.4-1 ms of the host's Python (the 1.2M-edge generated graph's
// pool); a hub of 12,856 entries kept one warp 0.28 ms.
#define COMPACT_RANGE 256
#define COMPACT_WARPS (COMPACT_RANGE / 32)
#define COMPACT_SMALL 16
#define COMPACT_HUB 2048
#define COMPACT_MAXHUB 16
#define COMPACT_UNROLL 8
// A warp's walk over the live entries of src[0..n) of one pool, COMPACT_UNROLL chunks a
// round (their loads issued together): their count, and with COPY the entries themselves
// to dst[0..) of another pool, in order (the resolver's copy_live stays in one pool).
template <bool COPY>
__device__ __forceinline__ long long walk_live(
    const long long* __restrict__ key, const int* __restrict__ elab,
    const long long* __restrict__ ct, const long long* __restrict__ dt,
    long long* __restrict__ nkey, int* __restrict__ nelab, long long* __restrict__ nct,
    long long* __restrict__ ndt, long long src, long long n, long long dst,
    long long watermark, int lane) {
    long long m = 0;
    for (long long c = 0; c < n; c += 32 * COMPACT_UNROLL) {
        long long d_t[COMPACT_UNROLL];
#pragma unroll
        for (int j = 0; j < COMPACT_UNROLL; ++j) {
            long long i = c + 32 * j + lane;
            d_t[j] = i < n ? dt[src + i] : watermark;
        }
#pragma unroll
        for (int j = 0; j < COMPACT_UNROLL; ++j) {
            long long i = c + 32 * j + lane;
            bool ok = d_t[j] > watermark;
            unsigned mk = __ballot_sync(FULL, ok);
            if (COPY && ok) {
                long long d = dst + m + __popc(mk & lanes_below(lane));
                nkey[d] = key[src + i]; nelab[d] = elab[src + i];
                nct[d] = ct[src + i]; ndt[d] = d_t[j];
            }
            m += __popc(mk);
        }
    }
    return m;
}

extern "C" __global__ void __launch_bounds__(COMPACT_RANGE) compact_pool(
    long long nv,
    const long long* __restrict__ key, const int* __restrict__ elab,
    const long long* __restrict__ ct, const long long* __restrict__ dt,
    long long* __restrict__ nkey, int* __restrict__ nelab, long long* __restrict__ nct,
    long long* __restrict__ ndt,
    long long* off, int* len, int* cap, long long* seg, long long watermark,
    unsigned long long* words, const long long* wm_word) {
    __shared__ long long s_src[COMPACT_RANGE], s_dst[COMPACT_RANGE];
    __shared__ int s_n[COMPACT_RANGE], s_live[COMPACT_RANGE], s_big[COMPACT_RANGE];
    __shared__ int s_hub[COMPACT_MAXHUB], s_slice[COMPACT_MAXHUB][COMPACT_WARPS];
    __shared__ int s_warp[COMPACT_WARPS], s_nbig, s_nhub;
    __shared__ unsigned long long s_base;
    if (wm_word != nullptr) watermark = *wm_word;
    int t = threadIdx.x, lane = t & 31, w = t >> 5;
    for (long long r0 = (long long)blockIdx.x * COMPACT_RANGE; r0 < nv;
         r0 += (long long)gridDim.x * COMPACT_RANGE) {
        long long v = r0 + t, src = 0;
        int n = 0, m = 0;
        if (v < nv) { src = off[v]; n = len[v]; }
        s_src[t] = src; s_n[t] = n;
        if (t == 0) s_nbig = s_nhub = 0;
        __syncthreads();
        if (n <= COMPACT_SMALL) {
            for (int i = 0; i < n; ++i) m += dt[src + i] > watermark;
        } else if (n <= COMPACT_HUB) {
            s_big[atomicAdd(&s_nbig, 1)] = t;
        } else {   // the block's hubs past COMPACT_MAXHUB: a warp each
            int h = atomicAdd(&s_nhub, 1);
            if (h < COMPACT_MAXHUB) s_hub[h] = t;
            else s_big[atomicAdd(&s_nbig, 1)] = t;
        }
        s_live[t] = m;
        __syncthreads();
        int nbig = s_nbig, nhub = min(s_nhub, COMPACT_MAXHUB);
        for (int k = w; k < nbig; k += COMPACT_WARPS) {
            int b = s_big[k];
            int bm = (int)walk_live<false>(key, elab, ct, dt, nkey, nelab, nct, ndt, s_src[b],
                                           s_n[b], 0, watermark, lane);
            if (lane == 0) s_live[b] = bm;
        }
        for (int h = 0; h < nhub; ++h) {   // warp w: the hub's w-th slice
            long long hn = s_n[s_hub[h]], lo = hn * w / COMPACT_WARPS;
            long long hi = hn * (w + 1) / COMPACT_WARPS;
            int c = (int)walk_live<false>(key, elab, ct, dt, nkey, nelab, nct, ndt,
                                          s_src[s_hub[h]] + lo, hi - lo, 0, watermark, lane);
            if (lane == 0) s_slice[h][w] = c;
        }
        __syncthreads();
        for (int h = 0; h < nhub; ++h)
            if (s_hub[h] == t) {
                m = 0;
                for (int k = 0; k < COMPACT_WARPS; ++k) m += s_slice[h][k];
                s_live[t] = m;
            }
        m = s_live[t];   // the block's exclusive prefix sum of the live counts
        int x = m;
#pragma unroll
        for (int d = 1; d < 32; d <<= 1) {
            int y = __shfl_up_sync(FULL, x, d);
            if (lane >= d) x += y;
        }
        if (lane == 31) s_warp[w] = x;
        __syncthreads();
        int before = 0, total = 0;
#pragma unroll
        for (int k = 0; k < COMPACT_WARPS; ++k) {
            before += k < w ? s_warp[k] : 0;
            total += s_warp[k];
        }
        if (t == 0) s_base = total ? atomicAdd(words, (unsigned long long)total) : 0;
        __syncthreads();
        long long dst = (long long)s_base + before + x - m;
        s_dst[t] = dst;
        if (n <= COMPACT_SMALL) {
            long long d = dst;
            for (int i = 0; i < n; ++i) {
                long long x_t = dt[src + i];
                if (x_t > watermark) {
                    nkey[d] = key[src + i]; nelab[d] = elab[src + i];
                    nct[d] = ct[src + i]; ndt[d] = x_t;
                    ++d;
                }
            }
        }
        if (v < nv) {
            off[v] = dst; len[v] = m; cap[v] = m;
            seg[v] = (dst << SEG_BITS) | m;
        }
        __syncthreads();
        for (int k = w; k < nbig; k += COMPACT_WARPS) {
            int b = s_big[k];
            walk_live<true>(key, elab, ct, dt, nkey, nelab, nct, ndt, s_src[b], s_n[b],
                            s_dst[b], watermark, lane);
        }
        for (int h = 0; h < nhub; ++h) {
            int b = s_hub[h];
            long long hn = s_n[b], lo = hn * w / COMPACT_WARPS;
            long long hi = hn * (w + 1) / COMPACT_WARPS, d = s_dst[b];
            for (int k = 0; k < w; ++k) d += s_slice[h][k];
            walk_live<true>(key, elab, ct, dt, nkey, nelab, nct, ndt, s_src[b] + lo, hi - lo,
                            d, watermark, lane);
        }
        __syncthreads();   // the range's shared words are the next range's
    }
}

// After a compaction: the pool's new fill (words[0], all of it live), what was freed (meta
// words the host reads), and words[0] back to zero for the next compaction.
extern "C" __global__ void compact_done(long long* meta, unsigned long long* words) {
    long long before = meta[M_POOL_USED], kept = (long long)words[0];
    meta[M_POOL_USED] = kept;
    meta[M_GARBAGE] = 0;
    meta[M_RECLAIMED] += before - kept;
    words[0] = 0;
}
