/*
 * cpu/bincount_acc.h -- the accumulator type BC_ACC_T of one instantiation of
 * the CPU bincount loops: the output's float type (BC_OUT_T), or the unsigned
 * integer of the output's width (ITEMSIZE_OUTPUT_0), so that integer sums
 * wrap as the output dtype does, without undefined behaviour.
 *
 * Included by cpu/bincount_defs.h (Bincount) and cpu/fused_bincount_loops.h
 * (FusedBincount) once per instantiation, after they define BC_OUT_T and
 * BC_OUT_FLOAT; their drivers (cpu/bincount.c, cpu/fused_bincount.c)
 * undefine BC_ACC_T at their end.  No include guard, on purpose: a
 * per-instantiation header, not listed in an Op's c_sources (hashed through
 * the include closure).
 *
 * Valid C99 and C++ on its own (it only defines a macro; without the Op's
 * macros, npy_uint64).
 */
#if BC_OUT_FLOAT
#define BC_ACC_T BC_OUT_T
#elif ITEMSIZE_OUTPUT_0 == 1
#define BC_ACC_T npy_uint8
#elif ITEMSIZE_OUTPUT_0 == 2
#define BC_ACC_T npy_uint16
#elif ITEMSIZE_OUTPUT_0 == 4
#define BC_ACC_T npy_uint32
#else
#define BC_ACC_T npy_uint64
#endif
