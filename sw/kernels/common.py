"""What every kernel generator shares: errors, scalars, the result record, helpers."""

from __future__ import annotations

from dataclasses import dataclass, field

from sw.collectives import CollectiveError, Frag, Region


class KernelError(CollectiveError):
    """A kernel cannot be generated for these arguments (memory map, shapes, config)."""


@dataclass(frozen=True)
class Scalar:
    """A scalar stored at ``addr`` of ``bank`` in every PE."""

    bank: str
    addr: int

    @property
    def region(self) -> Region:
        return Region(self.bank, self.addr)


@dataclass
class KernelInfo:
    """What a kernel generator produced.

    ``instructions``: instructions the kernel issues (its cycles; a program made of the
    kernel and a HALT runs ``instructions + cfg.run_overhead`` cycles);
    ``useful_macs``: the workload's multiply-adds (``m * n`` for a GEMV);
    ``params``: the blocking it chose.
    """

    name: str
    instructions: int
    useful_macs: int = 0
    params: dict = field(default_factory=dict)

    def cycles_standalone(self, cfg) -> int:
        return self.instructions + cfg.run_overhead


def _finish(b, f: Frag):
    if isinstance(b, Frag):
        b.extend(f)
    else:
        f.emit(b)


def _need(cond, msg):
    if not cond:
        raise KernelError(msg)


def _lat(cfg):
    """(F, A): issue distance for a driver/operand read of an FMA result, for a late c read."""
    return cfg.fpu_latency - 1, cfg.acc_reuse_distance
