// The floor of a persistent kernel's hand-off (bench/ring_probe.py): the host rings a
// doorbell word in mapped pinned memory, a resident grid sees it, every block checks in,
// and block 0 answers in another mapped word. No launch per round: what a persistent
// pipeline would pay per batch before doing any work, against a captured graph's launch
// and event (the pipeline's per-launch cost today).
//
// bell[0]: the round the host asks for (rounds count from 1); ack[0]: the last round the
// device finished; ack[1]: -1 once the device gave up waiting (self-timeout: a host that
// stops ringing never leaves the grid spinning). gw: device words, zeroed: [0] the round
// block 0 broadcast, [1] check-ins, [2] the stop flag.

#define LIMIT_CYCLES (4LL * 1000 * 1000 * 1000)   // about 2 s at 2 GHz

__device__ __forceinline__ bool wait_at_least(volatile long long* w, long long v,
                                              volatile long long* stop) {
    long long t0 = clock64();
    while (*w < v) {
        if (*stop) return false;
        if (clock64() - t0 > LIMIT_CYCLES) { *stop = 1; return false; }
    }
    return true;
}

extern "C" __global__ void ring_echo(volatile long long* bell, volatile long long* ack,
                                     long long* gw, long long rounds) {
    volatile long long* g = gw;
    for (long long s = 1; s <= rounds; ++s) {
        if (threadIdx.x == 0) {
            if (blockIdx.x == 0) {
                if (!wait_at_least(bell, s, g + 2)) { ack[1] = -1; return; }
                g[0] = s;   // broadcast
            }
            if (!wait_at_least(g, s, g + 2)) return;
            atomicAdd((unsigned long long*)(gw + 1), 1ULL);
            if (blockIdx.x == 0) {
                if (!wait_at_least(g + 1, s * gridDim.x, g + 2)) { ack[1] = -1; return; }
                __threadfence_system();
                ack[0] = s;
            }
        }
        __syncthreads();
    }
}

extern "C" __global__ void ring_empty(long long* out) {
    if (threadIdx.x == 0 && blockIdx.x == 0) out[0] += 1;
}
