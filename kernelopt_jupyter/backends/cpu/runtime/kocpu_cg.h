// The block- and warp-level part of CUDA's cooperative groups, for CPU emulation: this_thread_block,
// tiled_partition<N> (N <= 32), coalesced_threads, and cg::reduce / inclusive_scan / exclusive_scan.
// Grid-wide groups need a cooperative launch and are refused by the translator.
// Members take the caller's line through __builtin_LINE() so deadlock reports can name it.
#pragma once

namespace cooperative_groups {

struct thread_block {
    void sync(int line = __builtin_LINE()) const { kocpu_rt_barrier(line, KOCPU_BAR_SYNC, 0); }
    unsigned long long thread_rank() const { return kocpu_tls_thread->linear; }
    unsigned long long size() const { return num_threads(); }
    unsigned long long num_threads() const {
        uint3 d = kocpu_tls_block->block_dim;
        return (unsigned long long)d.x * d.y * d.z;
    }
    dim3 group_index() const { return dim3(kocpu_tls_block->block_idx); }
    dim3 thread_index() const { return dim3(kocpu_tls_thread->tid); }
    dim3 group_dim() const { return dim3(kocpu_tls_block->block_dim); }
    dim3 dim_threads() const { return group_dim(); }
};

inline thread_block this_thread_block() { return thread_block{}; }
inline void sync(const thread_block& group, int line = __builtin_LINE()) { group.sync(line); }

template <unsigned N>
struct thread_block_tile {
    static_assert(N >= 1 && N <= 32 && (N & (N - 1)) == 0,
                  "CPU emulation: tiled_partition supports power-of-two tiles of at most 32 threads");
    static unsigned lane() { return kocpu_tls_thread->linear & 31u; }
    static unsigned mask() { return N == 32 ? 0xffffffffu : ((1u << N) - 1u) << (lane() & ~(N - 1u)); }
    void sync(int line = __builtin_LINE()) const { kocpu_rt_warp(line, KOCPU_WARP_SYNC, mask(), 0, 0, 32); }
    unsigned long long thread_rank() const { return kocpu_tls_thread->linear & (N - 1u); }
    unsigned long long meta_group_rank() const { return kocpu_tls_thread->linear / N; }
    unsigned long long meta_group_size() const { return (this_thread_block().num_threads() + N - 1) / N; }
    static constexpr unsigned long long size() { return N; }
    static constexpr unsigned long long num_threads() { return N; }
    template <class T>
    T shfl(T v, int src, int line = __builtin_LINE()) const { return ::kocpu::Site{line}.shfl_sync(mask(), v, src, N); }
    template <class T>
    T shfl_down(T v, unsigned d, int line = __builtin_LINE()) const {
        return ::kocpu::Site{line}.shfl_down_sync(mask(), v, d, N);
    }
    template <class T>
    T shfl_up(T v, unsigned d, int line = __builtin_LINE()) const {
        return ::kocpu::Site{line}.shfl_up_sync(mask(), v, d, N);
    }
    template <class T>
    T shfl_xor(T v, int m, int line = __builtin_LINE()) const {
        return ::kocpu::Site{line}.shfl_xor_sync(mask(), v, m, N);
    }
    int any(int p, int line = __builtin_LINE()) const { return ::kocpu::Site{line}.any_sync(mask(), p); }
    int all(int p, int line = __builtin_LINE()) const { return ::kocpu::Site{line}.all_sync(mask(), p); }
    unsigned ballot(int p, int line = __builtin_LINE()) const {
        return (::kocpu::Site{line}.ballot_sync(mask(), p) & mask()) >> (lane() & ~(N - 1u));
    }
};

template <unsigned N>
inline thread_block_tile<N> tiled_partition(const thread_block&) {
    return thread_block_tile<N>{};
}

// The lanes of a warp that are here together (as __activemask() sees them).
struct coalesced_group {
    unsigned lanes;
    unsigned long long size() const { return unsigned(__builtin_popcount(lanes)); }
    unsigned long long num_threads() const { return size(); }
    unsigned long long thread_rank() const {
        return unsigned(__builtin_popcount(lanes & ((1u << (kocpu_tls_thread->linear & 31u)) - 1u)));
    }
    unsigned lane_of(unsigned rank) const {
        unsigned m = lanes;
        for (unsigned i = 0; i < rank && m; ++i) m &= m - 1;
        return m ? unsigned(__builtin_ctz(m)) : 0u;
    }
    void sync(int line = __builtin_LINE()) const { kocpu_rt_warp(line, KOCPU_WARP_SYNC, lanes, 0, 0, 32); }
    template <class T>
    T shfl(T v, unsigned rank, int line = __builtin_LINE()) const {
        return ::kocpu::Site{line}.shfl_sync(lanes, v, int(lane_of(rank)), 32);
    }
    int any(int p, int line = __builtin_LINE()) const { return ::kocpu::Site{line}.any_sync(lanes, p); }
    int all(int p, int line = __builtin_LINE()) const { return ::kocpu::Site{line}.all_sync(lanes, p); }
};

inline coalesced_group coalesced_threads(int line = __builtin_LINE()) {
    return coalesced_group{kocpu_rt_activemask(line)};
}

template <class T> struct plus { T operator()(T a, T b) const { return a + b; } };
template <class T> struct less { T operator()(T a, T b) const { return b < a ? b : a; } };
template <class T> struct greater { T operator()(T a, T b) const { return a < b ? b : a; } };
template <class T> struct bit_and { T operator()(T a, T b) const { return a & b; } };
template <class T> struct bit_or { T operator()(T a, T b) const { return a | b; } };
template <class T> struct bit_xor { T operator()(T a, T b) const { return a ^ b; } };

// Every rank combines every rank's value in rank order, so all ranks get the same result.
template <class Group, class T, class Op>
T reduce(const Group& group, T value, Op op, int line = __builtin_LINE()) {
    T acc = group.shfl(value, 0, line);
    for (unsigned r = 1; r < group.size(); ++r) acc = op(acc, group.shfl(value, r, line));
    return acc;
}

// Scans: every rank takes part in every shuffle, and keeps the values of the ranks up to its own.
template <class Group, class T, class Op>
T scan_upto(const Group& group, T value, Op op, bool inclusive, int line) {
    T acc{};
    bool have = false;
    unsigned rank = unsigned(group.thread_rank());
    for (unsigned r = 0; r < group.size(); ++r) {
        T other = group.shfl(value, r, line);
        if (r < rank || (inclusive && r == rank)) {
            acc = have ? op(acc, other) : other;
            have = true;
        }
    }
    return acc;
}

template <class Group, class T, class Op = plus<T>>
T inclusive_scan(const Group& group, T value, Op op = Op(), int line = __builtin_LINE()) {
    return scan_upto(group, value, op, true, line);
}

template <class Group, class T, class Op = plus<T>>
T exclusive_scan(const Group& group, T value, Op op = Op(), int line = __builtin_LINE()) {
    return scan_upto(group, value, op, false, line);
}

}  // namespace cooperative_groups
