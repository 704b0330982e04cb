/*
 * cuda/scalar_preamble.cuh -- what the C code of Aesara's scalar ops needs
 * to compile as CUDA device code, under NVRTC (which has no C standard
 * headers and no NumPy) and under the host compiler of the test-suite's
 * emulation of CUDA (tests/gpu_emu/cuda_emu.h).
 *
 * The code generator (aesara_bincount_core/scalar_codegen.py) emits scalar
 * code that names NumPy's fixed-width C types (npy_int8 ... npy_float64,
 * npy_bool), the math functions of C99 (exp, log1p, floorf, ...), which CUDA
 * provides as device functions, and a few macros of <math.h> (M_PI, NAN,
 * INFINITY).  The device functions of some scalar ops' support code are
 * marked WITHIN_KERNEL (the macro of libgpuarray that Theano's GPU backend
 * defined; Aesara's support code still tests it).  The kernel template that
 * includes this file is c_code/cuda/elemwise_kernel.cu.
 *
 * The typedefs are those of NumPy on LP64 platforms (Linux), so that the
 * overloads the scalar code calls resolve as they do in Aesara's C code.
 */
#ifndef BC_SCALAR_CUDA_PREAMBLE_CUH
#define BC_SCALAR_CUDA_PREAMBLE_CUH

#ifndef __CUDACC_RTC__
#include <math.h> /* the emulation: the host's libm is the device's math */
#endif

typedef unsigned char npy_bool;
typedef signed char npy_int8;
typedef unsigned char npy_uint8;
typedef short npy_int16;
typedef unsigned short npy_uint16;
typedef int npy_int32;
typedef unsigned int npy_uint32;
typedef long npy_int64;
typedef unsigned long npy_uint64;
typedef float npy_float32;
typedef double npy_float64;
typedef long npy_intp;
typedef unsigned long npy_uintp;

#ifndef WITHIN_KERNEL
#define WITHIN_KERNEL __device__
#endif

#ifndef M_PI
#define M_PI 3.14159265358979323846
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000) /* float, as <math.h>'s NAN */
#endif
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif

#ifdef __CUDACC_RTC__
/* CUDA declares the math functions for float and double only, so a call with
 * an integer (Aesara's trunc of integers) is ambiguous; C++'s <cmath>, which
 * Aesara's C code gets, converts integers to double.  So does this. */
#define BC_INT_MATH1(f, T)                                                                         \
    static __device__ __forceinline__ double f(T x) { return f((double)x); }
#define BC_INT_MATH_ALL(M, f)                                                                      \
    M(f, signed char) M(f, unsigned char) M(f, short) M(f, unsigned short) M(f, int)               \
    M(f, unsigned int) M(f, long) M(f, unsigned long) M(f, long long) M(f, unsigned long long)
BC_INT_MATH_ALL(BC_INT_MATH1, floor)
BC_INT_MATH_ALL(BC_INT_MATH1, ceil)
BC_INT_MATH_ALL(BC_INT_MATH1, trunc)
BC_INT_MATH_ALL(BC_INT_MATH1, sqrt)
BC_INT_MATH_ALL(BC_INT_MATH1, exp)
BC_INT_MATH_ALL(BC_INT_MATH1, log)
#undef BC_INT_MATH_ALL
#undef BC_INT_MATH1
#endif

/* Functions of two arguments of other types than (float, float) and
 * (double, double): pow(long, signed char), pow(double, long), fmod(float,
 * double), fmod(unsigned long, long), as Aesara's scalar code calls them
 * for inputs of mixed dtypes.  C++'s <cmath> computes them in double (in
 * float only when both arguments are float: C++11 [c.math], the "additional
 * overloads").  CUDA declares float and double forms, which makes such calls
 * ambiguous, and pow(float, int), which computes in float what the CPU
 * computes in double.  bc_math2 computes in the type <cmath> would, on both
 * targets: the same-named templates below (NVRTC only) lose to an exact
 * float or double form, and pow goes through a macro (both targets) so that
 * CUDA's pow(float, int) is never chosen. */
template <typename A, typename B> struct bc_math2_type {
    typedef double type;
};
template <> struct bc_math2_type<float, float> {
    typedef float type;
};
#define BC_MATH2(name, f)                                                                          \
    template <typename A, typename B>                                                              \
    static __device__ __forceinline__ typename bc_math2_type<A, B>::type name(A x, B y)           \
    {                                                                                              \
        typedef typename bc_math2_type<A, B>::type T;                                              \
        return (f)((T)x, (T)y);                                                                    \
    }
BC_MATH2(bc_pow, pow)
#ifdef __CUDACC_RTC__ /* the host's <cmath> has these templates already */
BC_MATH2(fmod, fmod)
BC_MATH2(atan2, atan2)
BC_MATH2(hypot, hypot)
BC_MATH2(copysign, copysign)
BC_MATH2(fmax, fmax)
BC_MATH2(fmin, fmin)
BC_MATH2(fdim, fdim)
BC_MATH2(remainder, remainder)
#endif
#undef BC_MATH2
#define pow(x, y) bc_pow(x, y)

/* Casts of floats to integers (aesara_bincount_core/scalar_codegen.py,
 * DEVICE_CASTS), as x86-64 computes them, where NumPy and Aesara's C code
 * run: cvttsd2si gives the "integer indefinite" value, the most negative
 * int32 or int64, for NaN, infinities and values whose truncation does not
 * fit; narrower dtypes take the low bits of the int32 (so -1.0 is 255 in
 * uint8, NaN is 0 in int8).  CUDA's conversions saturate instead (NaN is 0),
 * so the range is tested here and no conversion out of range is made.  A
 * float converts to double exactly. */
static __device__ __forceinline__ int bc_x86_int32(double x)
{
    return (x > -2147483649.0 && x < 2147483648.0) ? (int)x : (-2147483647 - 1);
}
static __device__ __forceinline__ long long bc_x86_int64(double x)
{
    return (x >= -9223372036854775808.0 && x < 9223372036854775808.0) ? (long long)x
                                                                       : (-9223372036854775807LL - 1);
}
static __device__ __forceinline__ npy_int8 bc_float_to_int8(double x) { return (npy_int8)bc_x86_int32(x); }
static __device__ __forceinline__ npy_int16 bc_float_to_int16(double x) { return (npy_int16)bc_x86_int32(x); }
static __device__ __forceinline__ npy_int32 bc_float_to_int32(double x) { return (npy_int32)bc_x86_int32(x); }
static __device__ __forceinline__ npy_int64 bc_float_to_int64(double x) { return (npy_int64)bc_x86_int64(x); }
static __device__ __forceinline__ npy_uint8 bc_float_to_uint8(double x) { return (npy_uint8)bc_x86_int32(x); }
static __device__ __forceinline__ npy_uint16 bc_float_to_uint16(double x) { return (npy_uint16)bc_x86_int32(x); }

#endif /* BC_SCALAR_CUDA_PREAMBLE_CUH */
