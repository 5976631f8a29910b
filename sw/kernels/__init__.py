"""Linear-algebra kernels of MLP training as microprogram generators.

Each ``emit_*`` function takes the configuration, the shapes and a memory map (a
:class:`~sw.collectives.Region` per operand: SRAM bank and base address, the same on
every PE; matrices in the 2D round-robin layout of :mod:`sw.layout`, vectors in the
layout named by the argument), appends the kernel to a :class:`~sw.asm.Builder` (or a
:class:`~sw.collectives.Frag`) and returns a :class:`KernelInfo` with the exact
instruction count, the useful MAC count and the blocking it chose. :mod:`sw.golden` has a
bit-exact numpy model of each kernel (same operations in the same order). The mapping
of every kernel onto the array, its cycle-cost formula and measured utilization are in
``docs/kernels.md``.

Kernels:

* :func:`emit_gemv` ``y = W x`` and, with ``trans=True``, ``y = W^T x`` (``W`` used in
  place): output-stationary MAC chains in registers, the reused ``x`` element in a
  register, ``W`` streamed from SRAM, partial sums reduced along the buses by the tree
  (or sequential) reduction of :mod:`sw.collectives`;
* :func:`emit_rank1` ``W += alpha u v^T`` with the FMA writing back into SRAM in place;
  :func:`emit_rank1_swap` the same update stored to the scratchpad as it is computed,
  the next page loaded in its place;
* :func:`emit_gemm` ``Y = W X`` for a minibatch ``X`` (``n x b``): a sequence of rank-1
  updates of register-resident blocks of ``Y``, ``W`` and ``X`` elements broadcast over
  the row and column buses; ``accumulate=True``: ``Y += alpha W X`` (the minibatch
  weight update, with :func:`sw.collectives.emit_transpose` supplying ``X^T``);
* elementwise :func:`emit_relu`, :func:`emit_relu_mask` (``delta * relu'(z)``),
  :func:`emit_axpy` (``y += a x``) and :func:`emit_scale` (``x *= a``).

Conventions (shared with :mod:`sw.collectives` and :mod:`sw.transfer`): ``ar0`` is 0
(its reset value; nothing changes it); kernels are emitted at the top level of a
program (they use loop levels 0..2 and AGUs ``g0``..``g3``); kernels may use every
register. Scalars (``alpha``) are words stored at the same address in every PE
(:class:`Scalar`).

:func:`sim.core_run.run_kernel` runs a kernel between a load phase and an unload phase
on the core model or the RTL (used by the tests and the benchmark).

Modules: :mod:`~sw.kernels.common` (errors, scalars, :class:`KernelInfo`),
:mod:`~sw.kernels.gemv`, :mod:`~sw.kernels.gemv_t_rank1`, :mod:`~sw.kernels.rank1`,
:mod:`~sw.kernels.rank1_swap`,
:mod:`~sw.kernels.gemm` and :mod:`~sw.kernels.elementwise` (each kernel with its cost
model).
"""

from __future__ import annotations

from sw.collectives import Region
from sw.kernels.common import KernelError, KernelInfo, Scalar, _finish  # noqa: F401 (_finish: for sw.softmax)
from sw.kernels.elementwise import elementwise_cost, emit_axpy, emit_copy, emit_relu, emit_relu_mask, emit_scale
from sw.kernels.gemm import emit_gemm, gemm_cost, gemm_page_load_why_not
from sw.kernels.gemv import emit_gemv, gemv_cost, page_load_why_not
from sw.kernels.gemv_t_rank1 import emit_gemv_t_rank1, gemv_t_rank1_cost
from sw.kernels.rank1 import emit_rank1, rank1_cost, rank1_lines
from sw.kernels.rank1_swap import emit_rank1_swap, rank1_swap_cost, rank1_swap_why_not

__all__ = [
    "KernelError", "KernelInfo", "Scalar", "Region",
    "emit_gemv", "emit_gemv_t_rank1", "emit_rank1", "rank1_lines", "emit_gemm", "emit_relu", "emit_copy", "emit_relu_mask", "emit_axpy", "emit_scale",
    "emit_rank1_swap", "rank1_swap_cost", "rank1_swap_why_not",
    "gemv_cost", "page_load_why_not", "gemm_page_load_why_not", "gemv_t_rank1_cost", "rank1_cost", "gemm_cost", "elementwise_cost",
]
