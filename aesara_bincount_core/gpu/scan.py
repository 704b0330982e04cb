"""Loops on the GPU: :class:`GpuScan`, an Aesara ``Scan`` whose arrays may live on the GPU.

The rewrite :mod:`aesara_bincount.gpu.scan` puts it in place of a ``Scan``
that reads GPU data (as Theano's ``local_gpua_scan_to_gpua`` made its
``GpuScan``): the sequences, states and non-sequences that the loop's body
uses on the GPU are GPU arrays outside and inside, so the loop's slices are
views of GPU arrays, the inner graph's GPU Ops read and write them on the
device, and each step's results are copied on the device into the stacked
outputs.  Nothing in the loop waits for the device, except:

- a ``while`` loop's condition, read on the host at every step (a wait when
  it is computed on the GPU);
- what the inner graph itself reads back (a host Op of GPU data; the host
  C code of ``GpuBincount`` and ``GpuScatterAdd``, which check their
  indices at each call).

The index and value checks of the inner GPU Ops (the gather's rows, the
cross-entropy's classes, the scatter-add of rows) write into the call's
status (:mod:`aesara_bincount_core.gpu.call_status`), which the rewrite
passes to the loop as a non-sequence: every step writes into the status of
the call that runs the loop, which the call reads once, at its end, with
its results (``GpuCallEnd``).
"""
from typing import List

import numpy as np
from aesara.link.utils import raise_with_op
from aesara.scan.op import Scan
from aesara.tensor.type import TensorType

from aesara_bincount_core.gpu.type import GpuArrayType, _is_cupy, cupy_module

__all__ = ["GpuScan"]


def _stacked_type(inner_type, shape):
    """The outer type of an inner output: on the GPU when the inner output is."""
    kind = GpuArrayType if isinstance(inner_type, GpuArrayType) else TensorType
    return kind(inner_type.dtype, shape=shape)


def _xp(a):
    return cupy_module() if _is_cupy(a) else np


def _row(a, i: int):
    """Row ``i`` of ``a`` as a view with one dimension less (a 0-d array for a vector)."""
    return a[i : i + 1].reshape(a.shape[1:])


class GpuScan(Scan):
    """Aesara's ``Scan`` whose sequences, states and outputs may be GPU arrays.

    Parameters
    ----------
    inputs, outputs, info, **kwargs
        As for :class:`aesara.scan.op.Scan`.  An inner input or output of
        :class:`~aesara_bincount_core.gpu.type.GpuArrayType` makes the
        matching outer input or output a GPU array (its static shape with the
        loop's dimension in front for sequences and stacked outputs); the
        others are host tensors, as in ``Scan``.

    Notes
    -----
    Outer inputs and outputs are those of ``Scan``: ``n_steps``, then the
    sequences (``(T, ...)``), the initial states, the lengths of the
    stacked outputs (host scalars) and the non-sequences; the outputs are
    the stacked states and results (``(T, ...)``, or the last few steps
    when Aesara's ``scan_save_mem`` keeps fewer).  Dtypes are the inner
    graph's.

    The inner graph is compiled without Aesara's scan rewrites (tag
    ``"scan"``): it comes rewritten, and they would remake a nested
    ``GpuScan`` as a host ``Scan``.

    The loop is this class's own ``perform`` (Python), written for arrays
    of either place: each step points the inner function's input cells at
    views of the sequences and states, calls it, and copies its results
    into the stacked outputs (``a[i] = value``, a copy on the device for GPU
    arrays, queued on CuPy's current stream).  The circular buffers that
    ``scan_save_mem`` makes are put back in order at the end, as ``Scan``
    does.  The states are computed in place of their initial values when
    ``scan_make_inplace`` says so (``destroy_map``).

    Raises
    ------
    IndexError
        A negative number of steps, as ``Scan``.
    ValueError
        A sequence shorter than the number of steps, as ``Scan``; a step
        whose result has another shape than the first step's.  The failed
        checks of the inner Ops (a bad index) are raised by the call, when
        it reads its status at its end.
    Exception
        Whatever an inner Op raises, with the inner node named (Aesara's
        ``raise_with_op``).  The inputs and shared variables are left as
        they were, except the initial states that ``destroy_map`` gives.
    """

    #: Why the loop takes some inputs that come from the GPU on the host (the
    #: rewrite found that its body reads them on the host only), for
    #: :func:`aesara_bincount.gpu.report`; empty when it takes none so.
    read_on_host = ""

    def __init__(self, inputs, outputs, info, **kwargs):
        super().__init__(inputs, outputs, info, **kwargs)
        self.output_types = self._placed_output_types()
        # The inner graph comes rewritten (the scan rewrites included); Aesara's scan
        # rewrites would remake a nested GpuScan as a Scan when the loop is compiled.
        self.mode_instance = self.mode_instance.excluding("scan")

    def _placed_output_types(self) -> List:
        """``Scan``'s outer output types, on the GPU where the inner output is."""
        info, outs = self.info, self.inner_outputs
        types, k = [], 0
        for slices in info.mit_mot_out_slices:
            types.append(_stacked_type(outs[k].type, (None,) + outs[k].type.shape))
            k += len(slices)
        n_stacked = info.n_mit_sot + info.n_sit_sot + info.n_nit_sot
        types += [_stacked_type(o.type, (None,) + o.type.shape) for o in outs[k : k + n_stacked]]
        k += n_stacked
        types += [o.type for o in outs[k : k + info.n_shared_outs]]
        return types

    def __str__(self):
        return "Gpu" + super().__str__().replace("cpu,", "gpu,", 1)

    def make_thunk(self, node, storage_map, compute_map, no_recycling, impl=None):
        # The loop is this class's perform (Aesara's Cython loop takes NumPy arrays only).
        return super().make_thunk(node, storage_map, compute_map, no_recycling, impl="py")

    def perform(self, node, inputs, output_storage, params=None):
        info = self.info
        n_steps = int(inputs[0])
        if n_steps < 0:
            raise IndexError(f"Scan was asked to run for negative number of step {n_steps}")
        seqs = inputs[1 : self.seqs_arg_offset]
        for k, seq in enumerate(seqs):
            if seq.shape[0] < n_steps:
                raise ValueError(
                    f"Sequence {k} has shape {seq.shape} but the Scan's required number of steps "
                    f"is {n_steps}"
                )
        n_rec = self.n_outs  # mit-mot, mit-sot, sit-sot: states with an initial value
        starts = inputs[self.seqs_arg_offset : self.shared_arg_offset]
        bufs = [s if k in self.destroy_map else s.copy() for k, s in enumerate(starts)]
        lengths = inputs[self.nit_sot_arg_offset : self.nit_sot_arg_offset + info.n_nit_sot]
        store = [b.shape[0] for b in bufs] + [int(n) for n in lengths]
        bufs += [None] * info.n_nit_sot
        shared = list(inputs[self.shared_arg_offset : self.nit_sot_arg_offset])
        fn = self.fn
        ins = [c.storage for c in fn.input_storage]
        outs = [c.storage for c in fn.output_storage]
        non_seqs = inputs[self.nit_sot_arg_offset + info.n_nit_sot :]
        for cell, value in zip(ins[len(ins) - len(non_seqs) :], non_seqs):
            cell[0] = value
        pos = [(-m) % s if s else 0 for m, s in zip(self.mintaps, store)]
        step = 0
        try:
            while step < n_steps:
                self._feed(seqs, bufs, shared, ins, outs, pos, store, step)
                try:
                    fn.vm()
                except Exception:
                    self._raise_inner(fn)
                stop = self._collect(node, bufs, shared, ins, outs, pos, store, step)
                pos = [(p + 1) % s if s else 0 for p, s in zip(pos, store)]
                step += 1
                if stop:
                    break
        finally:
            for cell in ins + outs:
                cell[0] = None
        if n_steps == 0:
            for j in range(n_rec, n_rec + info.n_nit_sot):
                out = node.outputs[j].type
                xp = cupy_module() if isinstance(out, GpuArrayType) else np
                bufs[j] = xp.empty((0,) * out.ndim, dtype=out.dtype)  # as Scan gives it
        else:
            self._put_in_order(bufs, pos, store, step, n_steps)
        for j, value in enumerate(bufs + shared):
            output_storage[j][0] = value

    def _feed(self, seqs, bufs, shared, ins, outs, pos, store, step):
        """Point the inner function's input cells at this step's slices; clear its outputs."""
        k = 0
        for seq in seqs:
            ins[k][0] = _row(seq, step)
            k += 1
        for j, taps in enumerate(self.info.tap_array):
            for t in taps:
                ins[k][0] = _row(bufs[j], (pos[j] + t) % store[j])
                k += 1
        for value in shared:
            ins[k][0] = value
            k += 1
        for cell in outs:
            cell[0] = None

    def _collect(self, node, bufs, shared, ins, outs, pos, store, step) -> bool:
        """Copy this step's results into the stacked outputs; whether a while loop stops."""
        info = self.info
        o, first_in = 0, info.n_seqs
        for j, (in_taps, out_taps) in enumerate(zip(info.mit_mot_in_slices, info.mit_mot_out_slices)):
            for t in out_taps:
                if self.mitmots_preallocated[o]:  # the inner function's update of its input cell
                    value = ins[first_in + in_taps.index(t)][0]
                else:
                    value = outs[o][0]
                self._store(bufs, j, (pos[j] + t) % store[j], value, step)
                o += 1
            first_in += len(in_taps)
        for j in range(info.n_mit_mot, self.n_outs + info.n_nit_sot):
            value = outs[o][0]
            o += 1
            if bufs[j] is None:  # a stacked result, made at the first step
                xp = _xp(value)
                bufs[j] = xp.empty((store[j],) + value.shape, dtype=node.outputs[j].type.dtype)
            self._store(bufs, j, pos[j], value, step)
        for s in range(info.n_shared_outs):
            shared[s] = outs[o][0]
            o += 1
        return bool(info.as_while and outs[o][0] != 0)

    def _store(self, bufs, j, i, value, step):
        buf = bufs[j]
        if tuple(value.shape) != tuple(buf.shape[1:]):
            raise ValueError(
                f"{self.name}: output {j} has shape {tuple(value.shape)} at step {step}, "
                f"the loop's stacked output rows {tuple(buf.shape[1:])}"
            )
        buf[i] = value

    def _put_in_order(self, bufs, pos, store, step, n_steps):
        """Unroll the circular buffers of ``scan_save_mem``; zero and trim what was not computed."""
        for j in range(self.info.n_mit_mot, self.n_outs + self.info.n_nit_sot):
            buf, done = bufs[j], step - self.mintaps[j]
            if store[j] < done and pos[j] != 0:  # wrapped round: the oldest row is at pos
                bufs[j] = _xp(buf).concatenate((buf[pos[j] :], buf[: pos[j]]))
            elif store[j] > done:  # truncated gradient, or a while loop that stopped early
                buf[done:] = 0
                if step < n_steps:
                    bufs[j] = buf[: -(n_steps - step)]

    @staticmethod
    def _raise_inner(fn):
        vm = fn.vm
        if hasattr(vm, "position_of_error") and hasattr(vm, "thunks"):
            k = vm.position_of_error
            raise_with_op(fn.maker.fgraph, vm.nodes[k], vm.thunks[k])
        raise
