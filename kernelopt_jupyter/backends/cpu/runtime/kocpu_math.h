// CUDA math functions and intrinsics that the host C library lacks, for CPU emulation.
// Fast-math intrinsics (__expf, __fdividef, ...) compute the accurate host result: results may
// differ from a GPU in the last bits, which validation tolerances absorb. Rounding-mode suffixes
// (_rz, _ru, _rd) are honoured for conversions to integers; arithmetic ones use round-to-nearest.
#pragma once

// CUDA's min/max accept mixed argument types and return the usual arithmetic conversion of both
// (min(int, unsigned) is unsigned, min(float, double) is double); floating point follows fmin/fmax.
template <class A, class B, class R = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>,
                                                       std::common_type_t<A, B>>>
KOCPU_INLINE R min(A a, B b) {
    if constexpr (std::is_floating_point_v<R>) return std::fmin(R(a), R(b));
    else return R(b) < R(a) ? R(b) : R(a);
}
template <class A, class B, class R = std::enable_if_t<std::is_arithmetic_v<A> && std::is_arithmetic_v<B>,
                                                       std::common_type_t<A, B>>>
KOCPU_INLINE R max(A a, B b) {
    if constexpr (std::is_floating_point_v<R>) return std::fmax(R(a), R(b));
    else return R(b) > R(a) ? R(b) : R(a);
}
KOCPU_INLINE unsigned int umin(unsigned int a, unsigned int b) { return a < b ? a : b; }
KOCPU_INLINE unsigned int umax(unsigned int a, unsigned int b) { return a > b ? a : b; }
KOCPU_INLINE long long llmin(long long a, long long b) { return a < b ? a : b; }
KOCPU_INLINE long long llmax(long long a, long long b) { return a > b ? a : b; }
KOCPU_INLINE unsigned long long ullmin(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
KOCPU_INLINE unsigned long long ullmax(unsigned long long a, unsigned long long b) { return a > b ? a : b; }

// --- single precision intrinsics and functions the C library does not have ---
// glibc declares these (C linkage, not exported); defining them inline with the same linkage and
// exception specification makes both its declarations and CUDA code that calls them work.
#define KOCPU_C_INLINE extern "C" inline
KOCPU_C_INLINE float __expf(float x) noexcept { return expf(x); }
KOCPU_C_INLINE float __exp10f(float x) noexcept { return exp10f(x); }
KOCPU_C_INLINE float __logf(float x) noexcept { return logf(x); }
KOCPU_C_INLINE float __log2f(float x) noexcept { return log2f(x); }
KOCPU_C_INLINE float __log10f(float x) noexcept { return log10f(x); }
KOCPU_C_INLINE float __sinf(float x) noexcept { return sinf(x); }
KOCPU_C_INLINE float __cosf(float x) noexcept { return cosf(x); }
KOCPU_C_INLINE float __tanf(float x) noexcept { return tanf(x); }
KOCPU_C_INLINE void __sincosf(float x, float* s, float* c) noexcept { sincosf(x, s, c); }
KOCPU_C_INLINE float __powf(float x, float y) noexcept { return powf(x, y); }
KOCPU_INLINE float __fdividef(float x, float y) { return x / y; }
KOCPU_INLINE float fdividef(float x, float y) { return x / y; }
KOCPU_INLINE float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }
KOCPU_INLINE float rsqrtf(float x) { return 1.0f / sqrtf(x); }
KOCPU_INLINE double rsqrt(double x) { return 1.0 / sqrt(x); }
KOCPU_INLINE float rcbrtf(float x) { return 1.0f / cbrtf(x); }
KOCPU_INLINE double rcbrt(double x) { return 1.0 / cbrt(x); }
KOCPU_INLINE float __frsqrt_rn(float x) { return 1.0f / sqrtf(x); }
KOCPU_INLINE float __fsqrt_rn(float x) { return sqrtf(x); }
KOCPU_INLINE float __frcp_rn(float x) { return 1.0f / x; }
KOCPU_INLINE double __drcp_rn(double x) { return 1.0 / x; }
KOCPU_INLINE double __dsqrt_rn(double x) { return sqrt(x); }
#define KOCPU_ROUNDED_ARITHMETIC(S)                                                             \
    KOCPU_INLINE float __fadd_##S(float a, float b) { return a + b; }                           \
    KOCPU_INLINE float __fsub_##S(float a, float b) { return a - b; }                           \
    KOCPU_INLINE float __fmul_##S(float a, float b) { return a * b; }                           \
    KOCPU_INLINE float __fdiv_##S(float a, float b) { return a / b; }                           \
    KOCPU_INLINE float __fmaf_##S(float a, float b, float c) { return fmaf(a, b, c); }          \
    KOCPU_INLINE double __dadd_##S(double a, double b) { return a + b; }                        \
    KOCPU_INLINE double __dsub_##S(double a, double b) { return a - b; }                        \
    KOCPU_INLINE double __dmul_##S(double a, double b) { return a * b; }                        \
    KOCPU_INLINE double __ddiv_##S(double a, double b) { return a / b; }                        \
    KOCPU_INLINE double __fma_##S(double a, double b, double c) { return fma(a, b, c); }
KOCPU_ROUNDED_ARITHMETIC(rn)
KOCPU_ROUNDED_ARITHMETIC(rz)
KOCPU_ROUNDED_ARITHMETIC(ru)
KOCPU_ROUNDED_ARITHMETIC(rd)
#undef KOCPU_ROUNDED_ARITHMETIC
KOCPU_INLINE float __fmaf_ieee_rn(float a, float b, float c) { return fmaf(a, b, c); }

namespace kocpu {
// sin(pi x) with an exact argument reduction, so sinpi(integer) is exactly 0 as in CUDA.
template <class T>
KOCPU_INLINE T reduce_half_turns(T x) { return x - T(2) * std::rint(x * T(0.5)); }
// Inverse error function: Newton's method on erf(x) = y, kept inside a shrinking bracket (bisecting
// whenever a step would leave it), so it converges for every y in (-1, 1).
template <class T>
KOCPU_INLINE T erfinv(T y) {
    if (!(y > T(-1) && y < T(1))) return y == T(1) ? T(INFINITY) : (y == T(-1) ? T(-INFINITY) : T(NAN));
    const double target = double(y), slope = 2.0 / std::sqrt(3.14159265358979323846);
    double lo = -6.0, hi = 6.0, x = 0.0;
    for (int i = 0; i < 100; ++i) {
        double f = std::erf(x) - target;
        if (f == 0.0) break;
        (f < 0.0 ? lo : hi) = x;
        double next = x - f / (slope * std::exp(-x * x));
        if (!(next > lo && next < hi)) next = 0.5 * (lo + hi);
        if (std::fabs(next - x) <= 1e-16 * std::fabs(next)) {
            x = next;
            break;
        }
        x = next;
    }
    return T(x);
}
}  // namespace kocpu

KOCPU_INLINE float sinpif(float x) { return sinf(float(M_PI) * ::kocpu::reduce_half_turns(x)); }
KOCPU_INLINE float cospif(float x) { return cosf(float(M_PI) * ::kocpu::reduce_half_turns(x)); }
KOCPU_INLINE double sinpi(double x) { return sin(M_PI * ::kocpu::reduce_half_turns(x)); }
KOCPU_INLINE double cospi(double x) { return cos(M_PI * ::kocpu::reduce_half_turns(x)); }
KOCPU_INLINE void sincospif(float x, float* s, float* c) { *s = sinpif(x); *c = cospif(x); }
KOCPU_INLINE void sincospi(double x, double* s, double* c) { *s = sinpi(x); *c = cospi(x); }
KOCPU_INLINE float erfinvf(float y) { return ::kocpu::erfinv(y); }
KOCPU_INLINE double erfinv(double y) { return ::kocpu::erfinv(y); }
KOCPU_INLINE float erfcinvf(float y) { return ::kocpu::erfinv(1.0f - y); }
KOCPU_INLINE double erfcinv(double y) { return ::kocpu::erfinv(1.0 - y); }
KOCPU_INLINE float normcdff(float x) { return 0.5f * erfcf(-x * float(M_SQRT1_2)); }
KOCPU_INLINE double normcdf(double x) { return 0.5 * erfc(-x * M_SQRT1_2); }
KOCPU_INLINE float normcdfinvf(float p) { return -float(M_SQRT2) * erfcinvf(2.0f * p); }
KOCPU_INLINE double normcdfinv(double p) { return -M_SQRT2 * erfcinv(2.0 * p); }
KOCPU_INLINE float rhypotf(float x, float y) { return 1.0f / hypotf(x, y); }
KOCPU_INLINE double rhypot(double x, double y) { return 1.0 / hypot(x, y); }
KOCPU_INLINE float norm3df(float a, float b, float c) { return float(sqrt(double(a) * a + double(b) * b + double(c) * c)); }
KOCPU_INLINE float rnorm3df(float a, float b, float c) { return 1.0f / norm3df(a, b, c); }
KOCPU_INLINE float norm4df(float a, float b, float c, float d) {
    return float(sqrt(double(a) * a + double(b) * b + double(c) * c + double(d) * d));
}
KOCPU_INLINE float rnorm4df(float a, float b, float c, float d) { return 1.0f / norm4df(a, b, c, d); }
KOCPU_INLINE double norm3d(double a, double b, double c) { return sqrt(a * a + b * b + c * c); }
KOCPU_INLINE double rnorm3d(double a, double b, double c) { return 1.0 / norm3d(a, b, c); }
KOCPU_INLINE float normf(int n, const float* a) {
    double s = 0;
    for (int i = 0; i < n; ++i) s += double(a[i]) * a[i];
    return float(sqrt(s));
}
KOCPU_INLINE float rnormf(int n, const float* a) { return 1.0f / normf(n, a); }
KOCPU_C_INLINE int __finitef(float x) noexcept { return std::isfinite(x); }
KOCPU_C_INLINE int __isinff(float x) noexcept { return std::isinf(x); }
KOCPU_C_INLINE int __isnanf(float x) noexcept { return std::isnan(x); }
KOCPU_C_INLINE int __finite(double x) noexcept { return std::isfinite(x); }
KOCPU_C_INLINE int __isinf(double x) noexcept { return std::isinf(x); }
KOCPU_C_INLINE int __isnan(double x) noexcept { return std::isnan(x); }

// --- bit reinterpretation and conversions ---
namespace kocpu {
template <class To, class From>
KOCPU_INLINE To bit_cast(From v) {
    static_assert(sizeof(To) == sizeof(From), "size mismatch");
    To out;
    memcpy(&out, &v, sizeof out);
    return out;
}
// CUDA's float-to-integer conversions saturate and map NaN to 0 (a plain C++ cast would be UB).
template <class I>
KOCPU_INLINE I saturate(double v) {
    if (std::isnan(v)) return I(0);
    if (v <= double(std::numeric_limits<I>::min())) return std::numeric_limits<I>::min();
    if (v >= double(std::numeric_limits<I>::max())) return std::numeric_limits<I>::max();
    return I(v);
}
}  // namespace kocpu

KOCPU_INLINE int __float_as_int(float x) { return ::kocpu::bit_cast<int>(x); }
KOCPU_INLINE unsigned int __float_as_uint(float x) { return ::kocpu::bit_cast<unsigned int>(x); }
KOCPU_INLINE float __int_as_float(int x) { return ::kocpu::bit_cast<float>(x); }
KOCPU_INLINE float __uint_as_float(unsigned int x) { return ::kocpu::bit_cast<float>(x); }
KOCPU_INLINE long long __double_as_longlong(double x) { return ::kocpu::bit_cast<long long>(x); }
KOCPU_INLINE double __longlong_as_double(long long x) { return ::kocpu::bit_cast<double>(x); }
KOCPU_INLINE int __double2hiint(double x) { return int(::kocpu::bit_cast<unsigned long long>(x) >> 32); }
KOCPU_INLINE int __double2loint(double x) { return int(::kocpu::bit_cast<unsigned long long>(x)); }
KOCPU_INLINE double __hiloint2double(int hi, int lo) {
    return ::kocpu::bit_cast<double>((static_cast<unsigned long long>(unsigned(hi)) << 32) | unsigned(lo));
}

#define KOCPU_TO_INTEGER(FROM, FNAME, I, INAME)                                                              \
    KOCPU_INLINE I __##FNAME##2##INAME##_rn(FROM x) { return ::kocpu::saturate<I>(double(std::nearbyint(x))); } \
    KOCPU_INLINE I __##FNAME##2##INAME##_rz(FROM x) { return ::kocpu::saturate<I>(double(std::trunc(x))); }     \
    KOCPU_INLINE I __##FNAME##2##INAME##_ru(FROM x) { return ::kocpu::saturate<I>(double(std::ceil(x))); }      \
    KOCPU_INLINE I __##FNAME##2##INAME##_rd(FROM x) { return ::kocpu::saturate<I>(double(std::floor(x))); }
KOCPU_TO_INTEGER(float, float, int, int)
KOCPU_TO_INTEGER(float, float, unsigned int, uint)
KOCPU_TO_INTEGER(float, float, long long, ll)
KOCPU_TO_INTEGER(float, float, unsigned long long, ull)
KOCPU_TO_INTEGER(double, double, int, int)
KOCPU_TO_INTEGER(double, double, unsigned int, uint)
KOCPU_TO_INTEGER(double, double, long long, ll)
KOCPU_TO_INTEGER(double, double, unsigned long long, ull)
#undef KOCPU_TO_INTEGER

#define KOCPU_CONVERT(FROM, FNAME, TO, TNAME)                                   \
    KOCPU_INLINE TO __##FNAME##2##TNAME##_rn(FROM x) { return TO(x); }          \
    KOCPU_INLINE TO __##FNAME##2##TNAME##_rz(FROM x) { return TO(x); }          \
    KOCPU_INLINE TO __##FNAME##2##TNAME##_ru(FROM x) { return TO(x); }          \
    KOCPU_INLINE TO __##FNAME##2##TNAME##_rd(FROM x) { return TO(x); }
KOCPU_CONVERT(double, double, float, float)
KOCPU_CONVERT(int, int, float, float)
KOCPU_CONVERT(unsigned int, uint, float, float)
KOCPU_CONVERT(long long, ll, float, float)
KOCPU_CONVERT(unsigned long long, ull, float, float)
KOCPU_CONVERT(int, int, double, double)
KOCPU_CONVERT(unsigned int, uint, double, double)
KOCPU_CONVERT(long long, ll, double, double)
KOCPU_CONVERT(unsigned long long, ull, double, double)
#undef KOCPU_CONVERT

// --- integer intrinsics ---
KOCPU_INLINE int __popc(unsigned int x) { return __builtin_popcount(x); }
KOCPU_INLINE int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
KOCPU_INLINE int __clz(int x) { return x == 0 ? 32 : __builtin_clz(unsigned(x)); }
KOCPU_INLINE int __clzll(long long x) { return x == 0 ? 64 : __builtin_clzll(static_cast<unsigned long long>(x)); }
KOCPU_INLINE int __ffs(int x) { return __builtin_ffs(x); }
KOCPU_INLINE int __ffsll(long long x) { return __builtin_ffsll(x); }
KOCPU_INLINE unsigned int __brev(unsigned int x) {
    unsigned int r = 0;
    for (int i = 0; i < 32; ++i, x >>= 1) r = (r << 1) | (x & 1u);
    return r;
}
KOCPU_INLINE unsigned long long __brevll(unsigned long long x) {
    return (static_cast<unsigned long long>(__brev(unsigned(x))) << 32) | __brev(unsigned(x >> 32));
}
KOCPU_INLINE unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
    unsigned long long bytes = (static_cast<unsigned long long>(y) << 32) | x;
    unsigned int r = 0;
    for (int i = 0; i < 4; ++i) r |= static_cast<unsigned int>((bytes >> (((s >> (4 * i)) & 7u) * 8)) & 0xffu) << (8 * i);
    return r;
}
KOCPU_INLINE unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned((v << (shift & 31u)) >> 32);
}
KOCPU_INLINE unsigned int __funnelshift_lc(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned((v << (shift < 32u ? shift : 32u)) >> 32);
}
KOCPU_INLINE unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned(v >> (shift & 31u));
}
KOCPU_INLINE unsigned int __funnelshift_rc(unsigned int lo, unsigned int hi, unsigned int shift) {
    unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
    return unsigned(v >> (shift < 32u ? shift : 32u));
}
KOCPU_INLINE int __mul24(int x, int y) { return int((long long)((x << 8) >> 8) * ((y << 8) >> 8)); }
KOCPU_INLINE unsigned int __umul24(unsigned int x, unsigned int y) { return (x & 0xffffffu) * (y & 0xffffffu); }
KOCPU_INLINE int __mulhi(int x, int y) { return int((static_cast<long long>(x) * y) >> 32); }
KOCPU_INLINE unsigned int __umulhi(unsigned int x, unsigned int y) {
    return unsigned((static_cast<unsigned long long>(x) * y) >> 32);
}
KOCPU_INLINE long long __mul64hi(long long x, long long y) { return (long long)((static_cast<__int128>(x) * y) >> 64); }
KOCPU_INLINE unsigned long long __umul64hi(unsigned long long x, unsigned long long y) {
    return (unsigned long long)((static_cast<unsigned __int128>(x) * y) >> 64);
}
KOCPU_INLINE unsigned int __sad(int x, int y, unsigned int z) { return unsigned(x > y ? x - y : y - x) + z; }
KOCPU_INLINE unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
KOCPU_INLINE int __hadd(int x, int y) { return int((static_cast<long long>(x) + y) >> 1); }
KOCPU_INLINE int __rhadd(int x, int y) { return int((static_cast<long long>(x) + y + 1) >> 1); }
KOCPU_INLINE unsigned int __uhadd(unsigned int x, unsigned int y) { return unsigned((static_cast<unsigned long long>(x) + y) >> 1); }
KOCPU_INLINE unsigned int __urhadd(unsigned int x, unsigned int y) {
    return unsigned((static_cast<unsigned long long>(x) + y + 1) >> 1);
}
KOCPU_INLINE int __dp4a(int a, int b, int c) {
    for (int i = 0; i < 4; ++i) c += int(static_cast<signed char>(a >> (8 * i))) * int(static_cast<signed char>(b >> (8 * i)));
    return c;
}
KOCPU_INLINE unsigned int __dp4a(unsigned int a, unsigned int b, unsigned int c) {
    for (int i = 0; i < 4; ++i) c += ((a >> (8 * i)) & 0xffu) * ((b >> (8 * i)) & 0xffu);
    return c;
}
