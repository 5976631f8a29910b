"""The PE's issue-stage decisions (:func:`pe.pe.issue_decode`) against the PE model.

:func:`issue_decode` is the logic a PE, or with the distribution stage the core beside
each PE's distribution register, uses for the predicate, the bus-driver selects and the
SRAM read enables and the address-register updates. Here every PE of a core is compared with
:class:`pe.pe_model.PEModel`'s ``predicate`` / ``row_driver`` / ``col_driver`` / read
gates and ``_update_ars`` on the same micro-op words (Amaranth's simulator, no HDL simulator): every
predicate mode, segment and index exhaustively on the fields the decision reads, then
random whole words. The core's registered copy is covered by ``test_core``'s
preset-``fpga`` cores, which compare with the core model cycle by cycle.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from amaranth.hdl import Module, Signal
from amaranth.sim import Simulator

from arch.microop import SEG_BITS, ArOp, Gate, PredMode, uop_fields
from pe.layouts import uop_layout
from pe.pe import AR_SLOTS, issue_decode, issue_layout, issue_nop
from pe.pe_model import PEModel, decode_uop
from arch.config import ArchConfig


def _model_decode(pe: PEModel, word: int) -> dict:
    u = decode_uop(word, *pe.cfg.uop_key)
    pred = pe.predicate(u)

    def per_ar(f):      # the AR updates of PEModel._update_ars, one bit per AR
        return sum(int(bool(f(i))) << i for i in range(AR_SLOTS))

    return {"pred": int(pred or bool(u.wp_en)), **({"wpred": int(pred)} if pe.cfg.uop_key[2] else {}),
            "rsel": int(pe.row_driver(u)), "csel": int(pe.col_driver(u)),
            "ra_en": int(bool(u.ra_en) and pe._gate(u.ra_gate, u, pred)),
            "rb_en": int(bool(u.rb_en) and pe._gate(u.rb_gate, u, pred)),
            "ar_inc": per_ar(lambda i: pe.post_increments(u, i)),
            "ar_add": per_ar(lambda i: u.ar_op == ArOp.ADD and u.ar_idx == i),
            "ar_set": per_ar(lambda i: u.ar_op == ArOp.SET and u.ar_idx == i),
            "ar_stride": per_ar(lambda i: u.ar_op == ArOp.STRIDE and u.ar_idx == i)}


def _words(cfg, rng, n_random):
    """Micro-op words: every value of the fields the decisions read (predicate, both
    drivers, both read enables and gates) one field group at a time over a random
    background, then ``n_random`` random words."""
    fields = {name: (off, width) for name, off, width in uop_fields(*cfg.uop_key)}
    total = sum(w for _, w in fields.values())

    def put(word, **vals):
        for name, v in vals.items():
            off, width = fields[name]
            word = (word & ~(((1 << width) - 1) << off)) | ((v & ((1 << width) - 1)) << off)
        return word

    def rnd():
        return int.from_bytes(rng.bytes((total + 7) // 8), "little") & ((1 << total) - 1)

    kmax = 1 << fields["pred_k"][1]
    wps = (0, 1) if "wp_en" in fields else (0,)
    for mode, seg, k, wp in itertools.product(PredMode, range(1 << SEG_BITS), range(kmax), wps):
        yield put(rnd(), pred_mode=mode, pred_seg=seg, pred_k=k, **({"wp_en": wp} if wp else {}))
    for bus in ("rdrv", "cdrv"):
        for en, seg, diag, k in itertools.product((0, 1), range(1 << SEG_BITS), (0, 1),
                                                  range(1 << fields[f"{bus}_k"][1])):
            yield put(rnd(), **{f"{bus}_en": en, f"{bus}_seg": seg, f"{bus}_diag": diag, f"{bus}_k": k})
    for port in ("ra", "rb"):
        for en, gate, mode, k in itertools.product((0, 1), Gate, PredMode, range(min(kmax, 4))):
            yield put(rnd(), **{f"{port}_en": en, f"{port}_gate": gate}, pred_mode=mode, pred_k=k)
    for op, idx in itertools.product(ArOp, range(AR_SLOTS)):
        yield put(rnd(), ar_op=op, ar_idx=idx)
    for port in ("ra", "rb", "wa", "wb"):
        for inc, ar in itertools.product((0, 1), range(AR_SLOTS)):
            vals = {f"{p}_inc": 0 for p in ("ra", "rb", "wa", "wb")}
            vals.update({f"{port}_inc": inc, f"{port}_ar": ar})
            yield put(rnd(), **vals)
    for _ in range(n_random):
        yield rnd()


@pytest.mark.parametrize("nr", [2, 4, pytest.param(8, marks=pytest.mark.slow)])
def test_issue_decode_matches_model(nr):
    cfg = ArchConfig(nr=nr, spad_kib=4 if nr == 4 else 0)     # nr = 4: with the write predicate
    seed = 6100 + nr
    print(f"seed {seed}")
    rng = np.random.default_rng(seed)
    m = Module()
    uop = Signal(uop_layout(*cfg.uop_key))
    lay = issue_layout(cfg.uop_key[2])
    decs = {}
    for r, c in itertools.product(range(nr), repeat=2):
        d = Signal(lay, name=f"dec_{r}_{c}")
        m.d.comb += d.eq(issue_decode(m, cfg, r, c, uop))
        decs[r, c] = d
    models = {rc: PEModel(cfg, *rc) for rc in decs}
    words = list(_words(cfg, rng, 300))
    seen = {name: set() for name, _ in lay}

    async def tb(ctx):
        for word in words:
            ctx.set(uop.as_value(), word)
            for rc, d in decs.items():
                want = _model_decode(models[rc], word)
                got = {name: ctx.get(getattr(d, name)) for name, _ in lay}
                assert got == want, (rc, hex(word), got, want)
                for name, v in got.items():
                    seen[name] |= {(bit, v >> bit & 1) for bit in range(len(getattr(d, name)))}

    sim = Simulator(m)
    sim.add_testbench(tb)
    sim.run()
    # every decision (every bit of the per-AR ones) took both values
    assert all(v == {(bit, b) for bit in range(len(getattr(decs[0, 0], name))) for b in (0, 1)}
               for name, v in seen.items()), seen
    # the power-up value of the registered copy is the decode of the all-zero micro-op
    assert issue_nop(cfg.uop_key[2]) == _model_decode(models[0, 0], 0)
