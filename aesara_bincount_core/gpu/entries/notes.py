"""What the documentation page lists beside the table: Ops served by rewrites of their own, and Ops that stay on the host.

Nothing here changes what runs where; :func:`~aesara_bincount_core.gpu.table.note`
only records the text, which ``docs/_ext/gpu_table.py`` prints.
"""
from aesara_bincount_core.gpu.table import note

GPU, HOST = "GPU", "host"

note("Elemwise (and fused Composite)", GPU,
     "GpuElemwise, a kernel generated from the scalar ops' C code (its own lifter); integer // and % "
     "by a value that may be zero, float16 and complex stay on the host")
note("Bincount, FusedBincount", GPU, "GpuBincount, GpuFusedBincount (their own rewrites); a count waits once "
     "(its length is max(x) + 1); the scatter-add form (n bins) checks its indices into the call's status "
     "and does not wait, unless a GpuElemwise computes them inside its kernel")
note("ScatterAdd (AdvancedIncSubtensor1 onto zeros or onto a GPU base)", GPU,
     "GpuScatterAdd (its own rewrite)")
note("Shape, Shape_i", HOST, "the shape is read on the host from the GPU array, with no copy of the data")
note("ScatterSet (AdvancedIncSubtensor1 and AdvancedIncSubtensor set, integer index arrays, of a GPU base)",
     GPU, "GpuScatterSet (its own rewrite): the last of duplicate indices wins, as in numpy")
note("AdvancedSubtensor, AdvancedIncSubtensor (several index arrays on the leading axes)", GPU,
     "LinearIndex (its entry: the indices checked on the device) and the gather, scatter-add or set of "
     "the rows of the reshaped GPU array (GpuAdvancedSubtensor1, GpuScatterAdd, GpuScatterSet)")
note("GpuCallStatus, GpuIndexCheck, GpuCallEnd", GPU,
     "the call's status: checks on the device, read once with the results for the host (one wait)")
note("Scan", GPU, "GpuScan (its own lifter, aesara_bincount.gpu.scan): the inner graph through the same "
     "rewrites, the loop's GPU inputs, states and stacked results on the GPU; a while loop's condition is "
     "read on the host at every step")
note("LogSoftmaxGrad", "-", "not an Op in Aesara 2.9.4: LogSoftmax's gradient is Softmax and Elemwise nodes")
note("Clip", GPU, "an Elemwise of the scalar Clip in Aesara 2.9.4: GpuElemwise")
note("SearchsortedOp with a sorter", HOST, "CuPy's take would wrap a sorter index out of range where "
     "NumPy raises ValueError")
note("TopKOp, Unique, FillDiagonal, linear algebra (MatrixInverse, Det, Eig...)", HOST, "no entry")
note("Expm, ExpmGrad (aesara.tensor.slinalg.expm)", HOST,
     "CuPy 13's cupyx.scipy.linalg.expm reads its norm and trace on the host (two or three waits a "
     "call), and its Pade term had an error fixed in May 2025 (cupy/cupy#9142), after several CuPy 13 "
     "releases; ExpmGrad needs a general eigendecomposition, which CuPy lacks")
note("mrg_uniform (MRG_RandomStream), RandomVariable (RandomStream)", HOST,
     "the draws follow the host's generators (MRG31k3p, NumPy's Generator), which CuPy does not have: "
     "one copy of the draws per call")
note("Any Op on float16 or complex data", HOST,
     "float16 arithmetic differs between CuPy/cuBLAS (float32 inside) and NumPy; GPU arrays hold no complex")
