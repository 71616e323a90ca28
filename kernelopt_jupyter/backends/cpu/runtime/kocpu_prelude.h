// Prelude of kernelopt's CPU emulation: included before a candidate's CUDA C++ source so that the
// host C++ compiler accepts it. CUDA's qualifiers become nothing, its built-in variables read the
// current fiber through TLS, and barriers and warp collectives call into the fiber runtime.
// The system headers come first, before any CUDA macro exists, so a candidate's own #include of
// them is a no-op and cannot be broken by these macros.
#pragma once
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cassert>
#include <cfloat>
#include <climits>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>
#include <utility>

#include "kocpu_abi.h"

#ifdef KOCPU_MEMCHECK_BUILD
// Runtime bookkeeping must not be checked as if it were the kernel's own memory accesses.
#define KOCPU_NO_CHECK __attribute__((no_sanitize_address))
#define KOCPU_RT_INLINE inline KOCPU_NO_CHECK
#else
#define KOCPU_NO_CHECK
#define KOCPU_RT_INLINE inline __attribute__((always_inline))
#endif
#define KOCPU_INLINE static inline

#define __CUDACC__ 1
#define __CUDACC_RTC__ 1
#define __CUDA_ARCH__ 700
#define __CUDACC_VER_MAJOR__ 12
#define __CUDACC_VER_MINOR__ 0
#define KERNELOPT_CPU_EMULATION 1

#define __global__
#define __device__
#define __host__
#define __constant__
#define __managed__
#define __grid_constant__
#define __forceinline__ inline
#define __noinline__
#define __launch_bounds__(...)
#define __maxnreg__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __builtin_assume(x) ((void)0)
#define CUDART_CB

#define CUDART_INF_F (__builtin_inff())
#define CUDART_NAN_F (__builtin_nanf(""))
#define CUDART_PI_F 3.141592654f
#define CUDART_PIO2_F 1.570796327f
#define CUDART_2_OVER_PI_F 0.636619772f
#define CUDART_SQRT_HALF_F 0.707106781f
#define CUDART_L2E_F 1.442695041f
#define CUDART_LN2_F 0.693147181f
#define CUDART_MAX_NORMAL_F 3.40282347e+38f
#define CUDART_MIN_DENORM_F 1.40129846e-45f
#define CUDART_INF (__builtin_inf())
#define CUDART_NAN (__builtin_nan(""))
#define CUDART_PI 3.1415926535897931e+0
#define CUDART_PIO2 1.5707963267948966e+0
#define CUDART_SQRT_2PI 2.5066282746310002e+0
#define CUDART_LN2 6.9314718055994529e-1
#define CUDART_L2E 1.4426950408889634e+0

typedef unsigned int uint;
typedef unsigned short ushort;
typedef unsigned long ulong;
typedef unsigned char uchar;

// --- built-in variables: one TLS load each ---
namespace kocpu {
KOCPU_RT_INLINE uint3 thread_idx() { return kocpu_tls_thread->tid; }
KOCPU_RT_INLINE uint3 block_idx() { return kocpu_tls_block->block_idx; }
KOCPU_RT_INLINE dim3 block_dim() { return dim3(kocpu_tls_block->block_dim); }
KOCPU_RT_INLINE dim3 grid_dim() { return dim3(kocpu_tls_block->grid_dim); }
}  // namespace kocpu
#define threadIdx (::kocpu::thread_idx())
#define blockIdx (::kocpu::block_idx())
#define blockDim (::kocpu::block_dim())
#define gridDim (::kocpu::grid_dim())
static constexpr int warpSize = 32;

// --- synchronization: a Site carries the call's line so a deadlock report can name it ---
namespace kocpu {
template <class T>
inline unsigned long long to_bits(T value) {
    static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8,
                  "CPU emulation: warp collectives take scalar values of at most 8 bytes");
    unsigned long long bits = 0;
    memcpy(&bits, &value, sizeof(T));
    return bits;
}
template <class T>
inline T from_bits(unsigned long long bits) {
    T value;
    memcpy(&value, &bits, sizeof(T));
    return value;
}

struct Site {
    int line;
    void syncthreads() const { kocpu_rt_barrier(line, KOCPU_BAR_SYNC, 0); }
    int syncthreads_count(int p) const { return kocpu_rt_barrier(line, KOCPU_BAR_COUNT, p != 0); }
    int syncthreads_and(int p) const { return kocpu_rt_barrier(line, KOCPU_BAR_AND, p != 0); }
    int syncthreads_or(int p) const { return kocpu_rt_barrier(line, KOCPU_BAR_OR, p != 0); }
    void syncwarp(unsigned mask = 0xffffffffu) const { kocpu_rt_warp(line, KOCPU_WARP_SYNC, mask, 0, 0, 32); }
    template <class T>
    T shfl_sync(unsigned mask, T var, int src, int width = 32) const {
        return from_bits<T>(kocpu_rt_warp(line, KOCPU_WARP_SHFL_IDX, mask, to_bits(var), src, width));
    }
    template <class T>
    T shfl_up_sync(unsigned mask, T var, unsigned delta, int width = 32) const {
        return from_bits<T>(kocpu_rt_warp(line, KOCPU_WARP_SHFL_UP, mask, to_bits(var), int(delta), width));
    }
    template <class T>
    T shfl_down_sync(unsigned mask, T var, unsigned delta, int width = 32) const {
        return from_bits<T>(kocpu_rt_warp(line, KOCPU_WARP_SHFL_DOWN, mask, to_bits(var), int(delta), width));
    }
    template <class T>
    T shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = 32) const {
        return from_bits<T>(kocpu_rt_warp(line, KOCPU_WARP_SHFL_XOR, mask, to_bits(var), lane_mask, width));
    }
    unsigned ballot_sync(unsigned mask, int p) const { return unsigned(kocpu_rt_warp(line, KOCPU_WARP_BALLOT, mask, p != 0, 0, 32)); }
    int any_sync(unsigned mask, int p) const { return int(kocpu_rt_warp(line, KOCPU_WARP_ANY, mask, p != 0, 0, 32)); }
    int all_sync(unsigned mask, int p) const { return int(kocpu_rt_warp(line, KOCPU_WARP_ALL, mask, p != 0, 0, 32)); }
    template <class T>
    unsigned match_any_sync(unsigned mask, T value) const {
        return unsigned(kocpu_rt_warp(line, KOCPU_WARP_MATCH_ANY, mask, to_bits(value), 0, 32));
    }
    template <class T>
    unsigned match_all_sync(unsigned mask, T value, int* pred) const {
        unsigned r = unsigned(kocpu_rt_warp(line, KOCPU_WARP_MATCH_ALL, mask, to_bits(value), 0, 32));
        *pred = r != 0;
        return r;
    }
    unsigned reduce_add_sync(unsigned mask, unsigned v) const { return reduce(KOCPU_WARP_REDUCE_ADD, mask, v, 0); }
    int reduce_add_sync(unsigned mask, int v) const { return int(reduce(KOCPU_WARP_REDUCE_ADD, mask, unsigned(v), 1)); }
    unsigned reduce_min_sync(unsigned mask, unsigned v) const { return reduce(KOCPU_WARP_REDUCE_MIN, mask, v, 0); }
    int reduce_min_sync(unsigned mask, int v) const { return int(reduce(KOCPU_WARP_REDUCE_MIN, mask, unsigned(v), 1)); }
    unsigned reduce_max_sync(unsigned mask, unsigned v) const { return reduce(KOCPU_WARP_REDUCE_MAX, mask, v, 0); }
    int reduce_max_sync(unsigned mask, int v) const { return int(reduce(KOCPU_WARP_REDUCE_MAX, mask, unsigned(v), 1)); }
    unsigned reduce_and_sync(unsigned mask, unsigned v) const { return reduce(KOCPU_WARP_REDUCE_AND, mask, v, 0); }
    unsigned reduce_or_sync(unsigned mask, unsigned v) const { return reduce(KOCPU_WARP_REDUCE_OR, mask, v, 0); }
    unsigned reduce_xor_sync(unsigned mask, unsigned v) const { return reduce(KOCPU_WARP_REDUCE_XOR, mask, v, 0); }
    unsigned activemask() const { return kocpu_rt_activemask(line); }
    [[noreturn]] void trap() const { kocpu_rt_trap(line, "__trap()"); }
    [[noreturn]] void assert_fail(const char* what) const { kocpu_rt_trap(line, what); }

  private:
    unsigned reduce(int op, unsigned mask, unsigned v, int is_signed) const {
        return unsigned(kocpu_rt_warp(line, op, mask, v, is_signed, 32));
    }
};
}  // namespace kocpu

#define __syncthreads ::kocpu::Site{__LINE__}.syncthreads
#define __syncthreads_count ::kocpu::Site{__LINE__}.syncthreads_count
#define __syncthreads_and ::kocpu::Site{__LINE__}.syncthreads_and
#define __syncthreads_or ::kocpu::Site{__LINE__}.syncthreads_or
#define __syncwarp ::kocpu::Site{__LINE__}.syncwarp
#define __shfl_sync ::kocpu::Site{__LINE__}.shfl_sync
#define __shfl_up_sync ::kocpu::Site{__LINE__}.shfl_up_sync
#define __shfl_down_sync ::kocpu::Site{__LINE__}.shfl_down_sync
#define __shfl_xor_sync ::kocpu::Site{__LINE__}.shfl_xor_sync
#define __ballot_sync ::kocpu::Site{__LINE__}.ballot_sync
#define __any_sync ::kocpu::Site{__LINE__}.any_sync
#define __all_sync ::kocpu::Site{__LINE__}.all_sync
#define __match_any_sync ::kocpu::Site{__LINE__}.match_any_sync
#define __match_all_sync ::kocpu::Site{__LINE__}.match_all_sync
#define __reduce_add_sync ::kocpu::Site{__LINE__}.reduce_add_sync
#define __reduce_min_sync ::kocpu::Site{__LINE__}.reduce_min_sync
#define __reduce_max_sync ::kocpu::Site{__LINE__}.reduce_max_sync
#define __reduce_and_sync ::kocpu::Site{__LINE__}.reduce_and_sync
#define __reduce_or_sync ::kocpu::Site{__LINE__}.reduce_or_sync
#define __reduce_xor_sync ::kocpu::Site{__LINE__}.reduce_xor_sync
#define __activemask ::kocpu::Site{__LINE__}.activemask
#define __trap ::kocpu::Site{__LINE__}.trap
#define __brkpt ::kocpu::Site{__LINE__}.trap
#undef assert
#define assert(e) ((e) ? (void)0 : ::kocpu::Site{__LINE__}.assert_fail("device-side assertion failed: " #e))

KOCPU_RT_INLINE unsigned int __lanemask_lt() { return (1u << (kocpu_tls_thread->linear & 31)) - 1u; }
KOCPU_RT_INLINE unsigned int __lanemask_le() { return (2u << (kocpu_tls_thread->linear & 31)) - 1u; }
KOCPU_RT_INLINE unsigned int __lanemask_gt() { return ~__lanemask_le(); }
KOCPU_RT_INLINE unsigned int __lanemask_ge() { return ~__lanemask_lt(); }
KOCPU_INLINE void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
KOCPU_INLINE void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
// The threads of a block share one host thread: a compiler barrier orders them.
KOCPU_INLINE void __threadfence_block() { __atomic_signal_fence(__ATOMIC_SEQ_CST); }
KOCPU_INLINE void __nanosleep(unsigned int) {}
KOCPU_INLINE long long clock64() {
#if defined(__x86_64__)
    return (long long)__builtin_ia32_rdtsc();
#else
    return (long long)clock();
#endif
}

// --- memory access hints: plain loads and stores ---
#define KOCPU_LOAD_HINT(NAME) \
    template <class T>        \
    KOCPU_INLINE T NAME(const T* p) { return *p; }
KOCPU_LOAD_HINT(__ldg)
KOCPU_LOAD_HINT(__ldcg)
KOCPU_LOAD_HINT(__ldca)
KOCPU_LOAD_HINT(__ldcs)
KOCPU_LOAD_HINT(__ldlu)
KOCPU_LOAD_HINT(__ldcv)
#undef KOCPU_LOAD_HINT
#define KOCPU_STORE_HINT(NAME) \
    template <class T>         \
    KOCPU_INLINE void NAME(T* p, T v) { *p = v; }
KOCPU_STORE_HINT(__stwb)
KOCPU_STORE_HINT(__stcg)
KOCPU_STORE_HINT(__stcs)
KOCPU_STORE_HINT(__stwt)
#undef KOCPU_STORE_HINT

// --- __shared__ declarations, rewritten by the translator into references to block storage ---
namespace kocpu {
template <class T, size_t Align = 0>
KOCPU_RT_INLINE T& shared_static(kocpu_shared_key& key, int line) {
    constexpr size_t align = Align > alignof(T) ? Align : alignof(T);
    return *static_cast<T*>(kocpu_rt_shared_static(&key, sizeof(T), align, line));
}
template <class T>
KOCPU_RT_INLINE T& shared_dynamic() {
    return *static_cast<T*>(kocpu_rt_shared_dynamic());
}

// --- the entry point a kernel library exports ---
// Taking the kernel through a void(*)(P...) parameter picks the void overload, so a kernel may share
// its name with a C library function (div, index, ...) that CUDA code never sees.
template <class... P>
constexpr auto pick_kernel(void (*kernel)(P...)) {
    return kernel;
}
template <class... P, size_t... I>
KOCPU_RT_INLINE void invoke_with(void (*fn)(P...), void** args, std::index_sequence<I...>) {
    fn(*static_cast<std::remove_cv_t<std::remove_reference_t<P>>*>(args[I])...);
}
template <class... P>
KOCPU_RT_INLINE void invoke(void (*fn)(P...), void** args) {
    invoke_with(fn, args, std::index_sequence_for<P...>{});
}
template <class P>
constexpr int param_kind() {
    using T = std::remove_cv_t<P>;
    if constexpr (std::is_pointer_v<T>) return 'p';
    else if constexpr (std::is_same_v<T, bool>) return 'b';
    else if constexpr (std::is_floating_point_v<T>) return 'f';
    else if constexpr (std::is_enum_v<T>) return std::is_signed_v<std::underlying_type_t<T>> ? 'i' : 'u';
    else if constexpr (std::is_integral_v<T>) return std::is_signed_v<T> ? 'i' : 'u';
    else return 'o';
}
template <class... P>
KOCPU_NO_CHECK int signature(void (*)(P...), int* kinds, int* sizes, int capacity) {
    const int k[] = {param_kind<P>()..., 0};
    const int s[] = {int(sizeof(P))..., 0};
    for (int i = 0; i < int(sizeof...(P)) && i < capacity; ++i) {
        kinds[i] = k[i];
        sizes[i] = s[i];
    }
    return int(sizeof...(P));
}
}  // namespace kocpu

#define KOCPU_DEFINE_ENTRY(FN)                                                                                \
    KOCPU_EXPORT KOCPU_NO_CHECK void kocpu_kernel_main(void** args) { ::kocpu::invoke(FN, args); }           \
    KOCPU_EXPORT KOCPU_NO_CHECK int kocpu_kernel_signature(int* kinds, int* sizes, int capacity) {            \
        return ::kocpu::signature(FN, kinds, sizes, capacity);                                                \
    }                                                                                                         \
    KOCPU_EXPORT int kocpu_kernel_abi(void) { return KOCPU_ABI_VERSION; }

#include "kocpu_atomic.h"
#include "kocpu_cg.h"
#include "kocpu_math.h"
