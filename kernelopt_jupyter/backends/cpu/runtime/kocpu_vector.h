// CUDA's built-in vector types (char1 ... double4), dim3 and the make_* helpers, for CPU emulation.
// Alignments follow CUDA's vector_types.h so that reinterpret_cast<float4*> loads behave the same.
// No arithmetic operators: CUDA defines none, and candidates often define their own.
#pragma once

#define KOCPU_VECTOR_FAMILY(NAME, T, A1, A2, A3, A4)                                                  \
    struct __attribute__((aligned(A1))) NAME##1 { T x; };                                              \
    struct __attribute__((aligned(A2))) NAME##2 { T x, y; };                                           \
    struct __attribute__((aligned(A3))) NAME##3 { T x, y, z; };                                        \
    struct __attribute__((aligned(A4))) NAME##4 { T x, y, z, w; };                                     \
    static inline constexpr NAME##1 make_##NAME##1(T x) { return NAME##1{x}; }                        \
    static inline constexpr NAME##2 make_##NAME##2(T x, T y) { return NAME##2{x, y}; }                \
    static inline constexpr NAME##3 make_##NAME##3(T x, T y, T z) { return NAME##3{x, y, z}; }        \
    static inline constexpr NAME##4 make_##NAME##4(T x, T y, T z, T w) { return NAME##4{x, y, z, w}; }

KOCPU_VECTOR_FAMILY(char, signed char, 1, 2, 1, 4)
KOCPU_VECTOR_FAMILY(uchar, unsigned char, 1, 2, 1, 4)
KOCPU_VECTOR_FAMILY(short, short, 2, 4, 2, 8)
KOCPU_VECTOR_FAMILY(ushort, unsigned short, 2, 4, 2, 8)
KOCPU_VECTOR_FAMILY(int, int, 4, 8, 4, 16)
KOCPU_VECTOR_FAMILY(uint, unsigned int, 4, 8, 4, 16)
KOCPU_VECTOR_FAMILY(long, long, 8, 16, 8, 16)
KOCPU_VECTOR_FAMILY(ulong, unsigned long, 8, 16, 8, 16)
KOCPU_VECTOR_FAMILY(longlong, long long, 8, 16, 8, 16)
KOCPU_VECTOR_FAMILY(ulonglong, unsigned long long, 8, 16, 8, 16)
KOCPU_VECTOR_FAMILY(float, float, 4, 8, 4, 16)
KOCPU_VECTOR_FAMILY(double, double, 8, 16, 8, 16)

#undef KOCPU_VECTOR_FAMILY

struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
    constexpr operator uint3() const { return uint3{x, y, z}; }
};
