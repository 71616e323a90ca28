// CUDA atomics for CPU emulation. Blocks run in parallel on host threads, so every atomic is a real
// host atomic (relaxed, as CUDA's are); float/double and min/max/inc/dec go through a CAS loop.
#pragma once

namespace kocpu {

template <class T, class F>
KOCPU_INLINE T cas_update(T* address, F update) {
    static_assert(sizeof(T) == 2 || sizeof(T) == 4 || sizeof(T) == 8, "atomic on an unsupported size");
    using Bits = std::conditional_t<sizeof(T) == 2, unsigned short,
                                    std::conditional_t<sizeof(T) == 4, unsigned int, unsigned long long>>;
    Bits* bits = reinterpret_cast<Bits*>(address);
    Bits seen = __atomic_load_n(bits, __ATOMIC_RELAXED);
    for (;;) {
        T old_value;
        memcpy(&old_value, &seen, sizeof(T));
        T new_value = update(old_value);
        Bits wanted;
        memcpy(&wanted, &new_value, sizeof(T));
        if (__atomic_compare_exchange_n(bits, &seen, wanted, true, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) return old_value;
    }
}

template <class T>
KOCPU_INLINE T cas(T* address, T compare, T value) {
    __atomic_compare_exchange_n(address, &compare, value, false, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return compare;
}

}  // namespace kocpu

#define KOCPU_ATOMIC_INTEGER(T)                                                                              \
    KOCPU_INLINE T atomicAdd(T* a, T v) { return __atomic_fetch_add(a, v, __ATOMIC_RELAXED); }             \
    KOCPU_INLINE T atomicExch(T* a, T v) { return __atomic_exchange_n(a, v, __ATOMIC_RELAXED); }           \
    KOCPU_INLINE T atomicAnd(T* a, T v) { return __atomic_fetch_and(a, v, __ATOMIC_RELAXED); }             \
    KOCPU_INLINE T atomicOr(T* a, T v) { return __atomic_fetch_or(a, v, __ATOMIC_RELAXED); }               \
    KOCPU_INLINE T atomicXor(T* a, T v) { return __atomic_fetch_xor(a, v, __ATOMIC_RELAXED); }             \
    KOCPU_INLINE T atomicCAS(T* a, T compare, T v) { return ::kocpu::cas(a, compare, v); }                 \
    KOCPU_INLINE T atomicMin(T* a, T v) { return ::kocpu::cas_update(a, [v](T o) { return v < o ? v : o; }); } \
    KOCPU_INLINE T atomicMax(T* a, T v) { return ::kocpu::cas_update(a, [v](T o) { return v > o ? v : o; }); }

KOCPU_ATOMIC_INTEGER(int)
KOCPU_ATOMIC_INTEGER(unsigned int)
KOCPU_ATOMIC_INTEGER(unsigned long long)
#undef KOCPU_ATOMIC_INTEGER

KOCPU_INLINE int atomicSub(int* a, int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
KOCPU_INLINE unsigned int atomicSub(unsigned int* a, unsigned int v) { return __atomic_fetch_sub(a, v, __ATOMIC_RELAXED); }
KOCPU_INLINE long long atomicMin(long long* a, long long v) {
    return ::kocpu::cas_update(a, [v](long long o) { return v < o ? v : o; });
}
KOCPU_INLINE long long atomicMax(long long* a, long long v) {
    return ::kocpu::cas_update(a, [v](long long o) { return v > o ? v : o; });
}
KOCPU_INLINE unsigned short atomicCAS(unsigned short* a, unsigned short compare, unsigned short v) {
    return ::kocpu::cas(a, compare, v);
}
KOCPU_INLINE float atomicAdd(float* a, float v) { return ::kocpu::cas_update(a, [v](float o) { return o + v; }); }
KOCPU_INLINE double atomicAdd(double* a, double v) { return ::kocpu::cas_update(a, [v](double o) { return o + v; }); }
KOCPU_INLINE float atomicExch(float* a, float v) { return ::kocpu::cas_update(a, [v](float) { return v; }); }
KOCPU_INLINE unsigned int atomicInc(unsigned int* a, unsigned int limit) {
    return ::kocpu::cas_update(a, [limit](unsigned int o) { return o >= limit ? 0u : o + 1u; });
}
KOCPU_INLINE unsigned int atomicDec(unsigned int* a, unsigned int limit) {
    return ::kocpu::cas_update(a, [limit](unsigned int o) { return (o == 0u || o > limit) ? limit : o - 1u; });
}

#define KOCPU_SCOPED_ATOMIC(NAME) \
    template <class... A>         \
    KOCPU_INLINE auto NAME##_block(A... a) { return NAME(a...); } \
    template <class... A>         \
    KOCPU_INLINE auto NAME##_system(A... a) { return NAME(a...); }
KOCPU_SCOPED_ATOMIC(atomicAdd)
KOCPU_SCOPED_ATOMIC(atomicSub)
KOCPU_SCOPED_ATOMIC(atomicExch)
KOCPU_SCOPED_ATOMIC(atomicMin)
KOCPU_SCOPED_ATOMIC(atomicMax)
KOCPU_SCOPED_ATOMIC(atomicInc)
KOCPU_SCOPED_ATOMIC(atomicDec)
KOCPU_SCOPED_ATOMIC(atomicCAS)
KOCPU_SCOPED_ATOMIC(atomicAnd)
KOCPU_SCOPED_ATOMIC(atomicOr)
KOCPU_SCOPED_ATOMIC(atomicXor)
#undef KOCPU_SCOPED_ATOMIC
