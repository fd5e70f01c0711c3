// The graph updater on the device (DCSM's GU): resolves raw updates against the device
// multi-version graph in arrival order and builds the new neighbour-array versions there,
// so the host hands over raw updates only and copies nothing per batch.
//
// It is the host updater (gpu/_graph_kernels.py::apply_batch, copy-on-write mode) moved
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

// meta words (kept in device memory between launches; the host reads them back)
enum { M_NV = 0, M_POOL_USED, M_TICK, M_BATCH, M_WATERMARK, M_NEDGES, M_GARBAGE,
       M_MAXLEN, M_RESUME, M_NOUT, M_CODE, M_LAUNCH, M_SIZE };

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

// Copy the entries of [src, src + n) that a reader can still see (dt > w) to dst on, in
// order; returns how many. dst <= src is safe: each chunk is read before it is written.
__device__ long long copy_live(const Dev& g, long long src, long long n, long long dst,
                               long long w, int lane) {
    long long m = 0;
    for (long long c = 0; c < n; c += 32) {
        long long i = c + lane;
        bool ok = false;
        long long k = 0, t0 = 0, t1 = 0;
        int el = 0;
        if (i < n) {
            t1 = g.dt[src + i];
            ok = t1 > w;
            if (ok) { k = g.key[src + i]; t0 = g.ct[src + i]; el = g.elab[src + i]; }
        }
        unsigned mk = __ballot_sync(FULL, ok);
        __syncwarp();
        if (ok) {
            long long d = dst + m + __popc(mk & lanes_below(lane));
            g.key[d] = k; g.ct[d] = t0; g.dt[d] = t1; g.elab[d] = el;
        }
        m += __popc(mk);
        __syncwarp();
    }
    return m;
}

struct State {   // the meta words, in registers (identical in every lane)
    long long nv, pool_used, tick, batch, watermark, nedges, garbage, maxlen, launch;
    int touched;
};

__device__ __forceinline__ void touch(int v, int* touched, State& s, int lane) {
    if (lane == 0) touched[s.touched] = v;
    ++s.touched;
}

// Pool entries inserting into v may take (gpu/_graph_kernels.py::_need, copy-on-write).
__device__ __forceinline__ long long need(const Dev& g, int v, const State& s) {
    if (g.vbatch[v] != s.batch) {
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
        g.off[v] = dst; g.len[v] = (int)m; g.cap[v] = (int)c; g.vbatch[v] = s.batch;
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
    return v;   // its word is still 0 (an empty version): nothing to publish yet
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
    State s{meta[M_NV], meta[M_POOL_USED], meta[M_TICK], meta[M_BATCH], meta[M_WATERMARK],
            meta[M_NEDGES], meta[M_GARBAGE], meta[M_MAXLEN], meta[M_LAUNCH] + 1, 0};
    long long n_out = n_out0;
    long long i = i0;
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
    // publish: entries first (fence), then the words that point at them
    __threadfence();
    for (int q = lane; q < s.touched; q += 32) {
        int v = touched[q];
        seg[v] = (off[v] << SEG_BITS) | (long long)len[v];
    }
    __threadfence();
    if (lane == 0) {
        meta[M_NV] = s.nv; meta[M_POOL_USED] = s.pool_used; meta[M_TICK] = s.tick;
        meta[M_NEDGES] = s.nedges; meta[M_GARBAGE] = s.garbage; meta[M_MAXLEN] = s.maxlen;
        meta[M_RESUME] = i; meta[M_NOUT] = n_out; meta[M_CODE] = code;
        meta[M_LAUNCH] = s.launch;
    }
}

// Compaction (nothing in flight): copy every vertex's live entries (dt > watermark) into a
// fresh pool at new_off (an exclusive prefix sum of the current lengths), one warp per
// vertex, and publish the new words. The old pool is freed by the caller afterwards.
extern "C" __global__ void compact_pool(
    long long nv, const long long* new_off,
    const long long* key, const int* elab, const long long* ct, const long long* dt,
    long long* nkey, int* nelab, long long* nct, long long* ndt,
    long long* off, int* len, int* cap, long long* seg, long long watermark,
    unsigned long long* live) {
    int lane = threadIdx.x & 31;
    long long warp = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    long long warps = ((long long)gridDim.x * blockDim.x) >> 5;
    for (long long v = warp; v < nv; v += warps) {
        long long src = off[v], n = len[v], dst = new_off[v], m = 0;
        for (long long c = 0; c < n; c += 32) {
            long long i = c + lane;
            bool ok = i < n && dt[src + i] > watermark;
            unsigned mk = __ballot_sync(FULL, ok);
            if (ok) {
                long long d = dst + m + __popc(mk & lanes_below(lane));
                nkey[d] = key[src + i]; nelab[d] = elab[src + i];
                nct[d] = ct[src + i]; ndt[d] = dt[src + i];
            }
            m += __popc(mk);
        }
        if (lane == 0) {
            off[v] = dst; len[v] = (int)m; cap[v] = (int)n;
            seg[v] = (dst << SEG_BITS) | m;
            atomicAdd(live, (unsigned long long)m);
        }
    }
}
