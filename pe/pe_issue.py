"""The PE's issue stage: the issue-stage decisions, the address registers and the
operand-stage register (``docs/architecture.md``, "The PE micro-operation")."""

from __future__ import annotations

from dataclasses import dataclass
from functools import reduce

from amaranth.hdl import Array, Cat, Const, Mux, Signal
from amaranth.lib import data

from arch.microop import SEG_BITS, ArOp, Gate, PredMode
from pe.layouts import uop_layout

__all__ = ["AR_SLOTS", "issue_layout", "issue_nop", "issue_decode", "AddressRegs", "OperandStage",
           "issue_stage"]

#: Address registers a micro-op can name (its 2-bit AR indices).
AR_SLOTS = 4

#: A PE's issue-stage decisions about the micro-op it issues: ``pred``, its predicate for
#: the FMA, the move and the AR updates (always true with ``wp.en``); ``wpred``, for its
#: SRAM writes (and a read gated by ``PRED``; only in the layout of cores with the write
#: predicate, :func:`issue_layout`); ``rsel`` / ``csel``, it drives its row / column bus; ``ra_en`` / ``rb_en``, it reads SRAM
#: bank A / B (the read's enable and its gate); per address register ``i`` (bit ``i``,
#: applied only under the predicate): ``ar_inc``, a port post-increments it by its stride;
#: ``ar_add``, ``AR += imm``; ``ar_set``, ``AR = imm``; ``ar_stride``, ``STRIDE = imm``.
#: Each is a function of the micro-op and of the PE's coordinates only
#: (:func:`issue_decode`).
def issue_layout(wp: bool) -> data.StructLayout:
    """The issue-stage decisions' layout; ``wp``: of a core with the write predicate
    (``cfg.uop_key[2]``)."""
    return data.StructLayout({"pred": 1, **({"wpred": 1} if wp else {}), "rsel": 1, "csel": 1, "ra_en": 1,
                              "rb_en": 1, "ar_inc": AR_SLOTS, "ar_add": AR_SLOTS, "ar_set": AR_SLOTS,
                              "ar_stride": AR_SLOTS})


def issue_nop(wp: bool) -> dict:
    """:func:`issue_decode` of the all-zero micro-op (a NOP: every PE's predicate holds,
    nothing is driven, read or updated), for registers that hold a decoded NOP after reset."""
    return {"pred": 1, **({"wpred": 1} if wp else {}), "rsel": 0, "csel": 0, "ra_en": 0, "rb_en": 0,
            "ar_inc": 0, "ar_add": 0, "ar_set": 0, "ar_stride": 0}



def issue_decode(m, cfg, row: int, col: int, u):
    """The issue-stage decisions (:func:`issue_layout`) of PE ``(row, col)`` about
    micro-op ``u``: combinational logic added to module ``m``; returns a value of
    :func:`issue_layout`'s shape. The predicate selects by column, row or diagonal
    offset, modulo ``2**seg`` when segmented; a bus driver is the PE at offset ``k`` of
    its (segment of the) row / column, or on diagonal ``k``; an SRAM read is made if
    enabled and its gate (:class:`~arch.microop.Gate`) holds; an AR is post-incremented
    when any port with ``inc`` names it."""
    diag = (col - row) % cfg.nr

    def seg_index(index: int, seg):
        """``index`` (an elaboration constant) modulo 2**seg; seg = 0: unchanged."""
        return Array([Const(index if g == 0 else index % (1 << g), 8)
                      for g in range(1 << SEG_BITS)])[seg]

    pred = Signal(name="dec_pred")
    with m.Switch(u.pred.mode):
        with m.Case(PredMode.ALL):
            m.d.comb += pred.eq(1)
        with m.Case(PredMode.COL):
            m.d.comb += pred.eq(u.pred.k == seg_index(col, u.pred.seg))
        with m.Case(PredMode.ROW):
            m.d.comb += pred.eq(u.pred.k == seg_index(row, u.pred.seg))
        with m.Case(PredMode.DIAG):
            m.d.comb += pred.eq(u.pred.k == seg_index(diag, u.pred.seg))

    rsel = u.rdrv.en & Mux(u.rdrv.seg != 0, u.rdrv.k == seg_index(col, u.rdrv.seg),
                           Mux(u.rdrv.diag, u.rdrv.k == diag, u.rdrv.k == col))
    csel = u.cdrv.en & Mux(u.cdrv.seg != 0, u.cdrv.k == seg_index(row, u.cdrv.seg),
                           Mux(u.cdrv.diag, u.cdrv.k == diag, u.cdrv.k == row))

    gates = {Gate.ALL: Const(1, 1), Gate.PRED: pred, Gate.RDRV: rsel, Gate.CDRV: csel}

    def gate_ok(gate):
        return Array([gates[g] for g in sorted(Gate)])[gate]

    def per_ar(f):
        return Cat(*(f(i) for i in range(AR_SLOTS)))

    ports = (u.ra, u.rb, u.wa, u.wb)
    wp = cfg.uop_key[2]
    dec = {"pred": (pred | u.wp.en) if wp else pred, "wpred": pred, "rsel": rsel, "csel": csel,
           "ra_en": u.ra.en & gate_ok(u.ra.gate), "rb_en": u.rb.en & gate_ok(u.rb.gate),
           "ar_inc": per_ar(lambda i: reduce(lambda x, y: x | y, [p.inc & (p.ar == i) for p in ports])),
           "ar_add": per_ar(lambda i: (u.ar.op == ArOp.ADD) & (u.ar.idx == i)),
           "ar_set": per_ar(lambda i: (u.ar.op == ArOp.SET) & (u.ar.idx == i)),
           "ar_stride": per_ar(lambda i: (u.ar.op == ArOp.STRIDE) & (u.ar.idx == i))}
    return Cat(*(dec[name] for name, _ in issue_layout(wp)))


class AddressRegs:
    """The address registers ``ar0..`` and their strides ``stride0..`` (flip-flops).

    Parameters
    ----------
    cfg : arch.config.ArchConfig
        ``n_ar`` registers of ``addr_bits`` bits each.
    """

    def __init__(self, cfg):
        self.ab = ab = cfg.addr_bits
        self.n_ar = n_ar = cfg.n_ar
        self.ar = [Signal(ab, name=f"ar{i}") for i in range(n_ar)]
        self.stride = [Signal(ab, name=f"stride{i}") for i in range(n_ar)]

    def value(self, m, idx):
        """AR[idx] before this micro-op's updates (combinational); nonexistent ARs read 0."""
        v = Signal(self.ab)
        with m.Switch(idx):
            for i in range(self.n_ar):
                with m.Case(i):
                    m.d.comb += v.eq(self.ar[i])
        return v

    def update(self, m, dec, u):
        """The AR / stride updates of micro-op ``u`` at the end of its issue cycle, under
        its predicate: AR + (imm if ADD) + (stride if a port increments it), modulo
        2**addr_bits, as one carry-save step (sum and carry bits, one LUT level) and one
        carry chain instead of two chained adders; ``SET`` / ``STRIDE`` load ``imm``."""
        ab = self.ab
        with m.If(dec.pred):
            for i in range(self.n_ar):
                x = self.ar[i]
                y = Mux(dec.ar_add[i], u.ar.imm, 0)[:ab]
                z = Mux(dec.ar_inc[i], self.stride[i], 0)
                cs_sum = x ^ y ^ z
                cs_carry = Cat(Const(0, 1), ((x & y) | (x & z) | (y & z))[:ab - 1])
                with m.If(dec.ar_set[i]):
                    m.d.sync += self.ar[i].eq(u.ar.imm)
                with m.Else():
                    m.d.sync += self.ar[i].eq(cs_sum + cs_carry)
                with m.If(dec.ar_stride[i]):
                    m.d.sync += self.stride[i].eq(u.ar.imm)


@dataclass
class OperandStage:
    """The operand-stage register: the micro-op issued last cycle and what its issue
    decided (``dec`` is the issue stage's decisions, of the micro-op issued now)."""

    dec: object             #: issue-stage decisions (:func:`issue_layout`), this cycle
    s1: Signal              #: the micro-op in the operand stage
    s1_pred: Signal         #: its predicate (FMA, move)
    s1_wpred: Signal        #: its SRAM writes' predicate
    s1_rsel: Signal         #: it drives the row bus
    s1_csel: Signal         #: it drives the column bus
    s1_wa_addr: Signal      #: its SRAM write addresses (A, B)
    s1_wb_addr: Signal
    s1_ra_addr: Signal      #: its SRAM read addresses (A, B; FMA write-back addresses)
    s1_rb_addr: Signal


def issue_stage(m, cfg, pe, ars, sram):
    """Build the issue stage (cycle ``t``) and the operand-stage register.

    The issue-stage decisions come from :func:`issue_decode` of ``pe.uop`` or, with
    ``pe.issue_in``, from ``pe.issue``; the SRAM read ports of ``sram`` get their address
    ``AR[ar] + off`` and enable now (synchronous reads: data at ``t+1``), the address
    registers ``ars`` update at the end of ``t``, and the operand-stage register loads the
    micro-op, its predicate, bus-driver selects and SRAM addresses (valid at ``t+1``).

    Returns
    -------
    OperandStage
    """
    u = pe.uop
    rd_a, rd_b, wr_a, wr_b = sram.rd_a, sram.rd_b, sram.wr_a, sram.wr_b
    # The predicate, the bus-driver selection, the SRAM read enables and the AR
    # update selects: decoded here from the micro-op, or (``issue_in``) decoded by the
    # core one cycle earlier, from the micro-op the distribution register loads, into
    # flip-flops beside it.
    if pe.issue_in:
        dec = pe.issue
    else:
        dec = Signal(issue_layout(cfg.uop_key[2]), name="issue_dec")
        m.d.comb += dec.eq(issue_decode(m, cfg, pe.row, pe.col, u))
    pred, rsel, csel = dec.pred, dec.rsel, dec.csel

    # synchronous reads: address = (AR + off) mod depth (assignment truncates)
    m.d.comb += [
        rd_a.addr.eq(ars.value(m, u.ra.ar) + u.ra.off),
        rd_a.en.eq(dec.ra_en),
        rd_b.addr.eq(ars.value(m, u.rb.ar) + u.rb.off),
        rd_b.en.eq(dec.rb_en),
    ]
    ars.update(m, dec, u)

    # ---- operand stage register ------------------------------------------------------
    s1 = Signal(uop_layout(*cfg.uop_key), name="s1")
    s1_pred = Signal(name="s1_pred")
    # the SRAM writes' predicate: the predicate itself without the write predicate
    s1_wpred = Signal(name="s1_wpred") if cfg.uop_key[2] else s1_pred
    s1_rsel = Signal(name="s1_rsel")
    s1_csel = Signal(name="s1_csel")
    s1_wa_addr = Signal.like(wr_a.addr, name="s1_wa_addr")
    s1_wb_addr = Signal.like(wr_b.addr, name="s1_wb_addr")
    s1_ra_addr = Signal.like(rd_a.addr, name="s1_ra_addr")   # FMA write-back address (fpu.wb = MEMA)
    s1_rb_addr = Signal.like(rd_b.addr, name="s1_rb_addr")
    m.d.sync += [
        s1_ra_addr.eq(rd_a.addr),
        s1_rb_addr.eq(rd_b.addr),
        s1.eq(u),
        s1_pred.eq(pred),
        *([s1_wpred.eq(dec.wpred)] if cfg.uop_key[2] else []),
        s1_rsel.eq(rsel),
        s1_csel.eq(csel),
        s1_wa_addr.eq(ars.value(m, u.wa.ar) + u.wa.off),
        s1_wb_addr.eq(ars.value(m, u.wb.ar) + u.wb.off),
    ]
    return OperandStage(dec, s1, s1_pred, s1_wpred, s1_rsel, s1_csel, s1_wa_addr, s1_wb_addr, s1_ra_addr, s1_rb_addr)
