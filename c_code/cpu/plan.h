/*
 * cpu/plan.h -- the CPU plan: which of two equivalent loops a call
 * of the CPU Ops takes, where the faster one depends on the machine.
 *
 * The loops a plan chooses between add the same values in the same order,
 * so a plan changes the speed of a call, never its result (the test-suite
 * runs every loop against numpy.bincount).  Which one is faster depends on
 * the core: how many loads, stores and vector shuffles it issues a cycle.
 * aesara_bincount_core/cpu_plan.py picks the plan once per CPU model, by
 * timing the loops at first use (the idea of FFTW's planner and of cuDNN's
 * benchmark mode), caches it in Aesara's compile directory, and lets
 * AESARA_BINCOUNT_CPU_PLAN force one; docs/performance.rst has the figures.
 *
 * The plan reaches the C code as one word: the int attribute BC_PLAN_ATTR of
 * the Python package aesara_bincount_core, which cpu_plan.py sets and a call
 * reads once, under the GIL (bc_cpu_plan).  So the compiled modules hold no
 * plan of their own, and a new plan needs no new compile.  A bit that is
 * clear is the default loop; without the attribute (no plan made yet) every
 * loop is the default.
 *
 * The bits:
 *   BC_PLAN_SCALAR_WEIGHTS  weighted sums into a private histogram of few bins
 *       (Bincount, cpu/bincount_weighted.h) and the weights of FusedBincount
 *       (cpu/fused_bincount_loops.h): each weight is read, or computed, as it
 *       is added (a scalar load, or the scalar code, per element).  Clear:
 *       the eight weights of a group are read, or computed, as vectors, and
 *       taken out lane by lane (one vector load or operation a group, then a
 *       shuffle an element).
 *   BC_PLAN_AVX512_TEST  the range test and the running maximum of a group
 *       of eight 8-byte values of an x that FusedBincount reads in place take
 *       one AVX-512 vector, where the module is compiled for AVX-512.  Clear:
 *       two AVX2 vectors (the AMD EPYC of family 25, model 17, Zen 4, runs
 *       an AVX-512 instruction as two 256-bit halves; there the faster of the
 *       two changed from run to run, by up to 15%).
 *
 * Valid C99 and C++ on its own.
 */
#ifndef AESARA_BINCOUNT_CPU_PLAN_H
#define AESARA_BINCOUNT_CPU_PLAN_H

#include "common/host_helpers.h"

#define BC_PLAN_ATTR "_cpu_plan_v1"
#define BC_PLAN_PACKAGE "aesara_bincount_core"
#define BC_PLAN_SCALAR_WEIGHTS 0x1u
#define BC_PLAN_AVX512_TEST 0x2u
#define BC_PLAN_BITS 0x3u /* every bit defined above */

/* The process's plan word (0 when none is set).  Needs the GIL; leaves any
 * pending exception as it was. */
static unsigned bc_cpu_plan(void)
{
    PyObject *type, *value, *tb, *name, *mod, *word;
    unsigned long plan = 0;
    PyErr_Fetch(&type, &value, &tb);
    name = PyUnicode_FromString(BC_PLAN_PACKAGE);
    mod = name == NULL ? NULL : PyImport_GetModule(name);
    Py_XDECREF(name);
    word = mod == NULL ? NULL : PyObject_GetAttrString(mod, BC_PLAN_ATTR);
    if (word != NULL && PyLong_Check(word))
        plan = PyLong_AsUnsignedLong(word);
    Py_XDECREF(word);
    Py_XDECREF(mod);
    PyErr_Clear();
    PyErr_Restore(type, value, tb);
    return (unsigned)(plan & BC_PLAN_BITS);
}

#endif /* AESARA_BINCOUNT_CPU_PLAN_H */
