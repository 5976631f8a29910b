"""The stale-read checker (sim/hazards.py): directed boundaries and the kernel audit.

* Directed micro-programs (``sw.asm``) put one writer and one reader at issue distance
  ``d`` on a 2 x 2 core, for both PE timings and two sets of FP latencies: every read
  source (FMA a/b/late c, move src/msk, drivers, SRAM write sources, SRAM reads) against
  every write kind (move, ``wa``/``wb``, FMA write-back into the RF and into SRAM), with
  predicated-off, gated and unselected readers and writers, at every distance from 1 to
  past the longest hazard. Each run is checked against the model's values: the reader's
  result, dumped to the host, differs from the program-order result (the same program
  with the reader far from the writer) exactly on the PEs the checker reports; the
  boundary (reported at ``need - 1``, not at ``need``) is the documented distance where
  ``ArchConfig`` documents one. Also: writes overwritten or dropped by an older FMA
  write-back, loops, host input, the API and the command line.
* Kernel audit: every case of ``tests/sw/test_kernels.py``'s ``rtl_sessions`` (on
  test_other_latencies_model's configuration) is hazard-free when compiled for its
  timing; with the execute stage, every case whose results come out wrong on the model
  has hazards (nothing but the distances changes, so a wrong result without a stale read
  would be a checker miss). ``python tests/sim/test_hazards.py`` prints the execute-stage
  audit (:func:`audit_kernels`).
"""

from __future__ import annotations

import functools

import numpy as np
import pytest

from arch.config import ArchConfig
from sim.core_model import CoreModel
from sim.hazards import Hazard, HazardError, check_program, find_hazards, main, pe_timing, summarize
from sw.asm import Builder, assemble

NR = 2
ALL = frozenset((r, c) for r in range(NR) for c in range(NR))


def _col(c):
    return frozenset((r, c) for r in range(NR))


def _row(r):
    return frozenset((r, c) for c in range(NR))


def _cfg(exec_stage, ml=2, al=3):
    """``exec_stage``: 0 / False (default timing), 1 / True (execute stage), 2 (execute
    and bus stages), 3 (execute, bus and receive stages)."""
    return ArchConfig(nr=NR, mem_a_words=64, mem_b_words=64, exec_stage=bool(exec_stage),
                      bus_stage=exec_stage >= 2, rx_stage=exec_stage == 3, mul_latency=ml, add_latency=al)


_TIMING_IDS = {0: "noexec", 1: "exec", 2: "bus", 3: "rx"}
TIMINGS = [pytest.param(e, ml, al, id=f"{_TIMING_IDS[e]}-fp{ml}{al}")
           for e in (0, 1) for ml, al in ((2, 3), (4, 5))] + [pytest.param(e, 4, 5, id=f"{_TIMING_IDS[e]}-fp45")
                                                              for e in (2, 3)]


# ======================================================================================
# directed programs
# ======================================================================================
# documented distances (None: no ArchConfig property gives it; the model decides)
def _need_mv(cfg):
    return cfg.mv_read_distance


def _need_drv(cfg):
    return cfg.mv_drive_distance


def _need_sram(cfg):
    return cfg.sram_read_distance


def _need_fma(cfg):
    return None if cfg.exec_stage else cfg.fpu_latency - 1


def _need_acc(cfg):
    return cfg.acc_reuse_distance


def _need_fma_sram(cfg):
    return None if cfg.exec_stage else cfg.fpu_latency


#: name: (setup, writer, reader, observe, dumped register, need(cfg), kind, loc, field,
#:        PEs with the stale read, PEs whose dumped value then differs (None: the same))
#: ``need`` None: never stale (the reader does not read what the writer writes); else the
#: documented distance (returning None when there is no documented one).
SETUP_AR = "ar0 = 5\nar1 = 6\n@col=1 | ar1 = 5"
OBS_A = "rda [ar0] | mov r2 = mema"
OBS_B = "rdb [ar0] | mov r2 = memb"
CASES = {
    # move -> every RF source
    "mv-mv.src": ("", "mov r1 = 1", "mov r2 = r1", "", 2, _need_mv, "mv", 1, "mv.src", ALL, None),
    "mv-fma.a": ("", "mov r1 = 1", "mul r2 = r1 * 1", "", 2, _need_mv, "mv", 1, "fma.a", ALL, None),
    "mv-fma.b": ("", "mov r1 = 1", "mul r2 = 1 * r1", "", 2, _need_mv, "mv", 1, "fma.b", ALL, None),
    "mv-fma.ab": ("", "mov r1 = 1", "mul r2 = r1 * r1", "", 2, _need_mv, "mv", 1, "fma.a,fma.b", ALL, None),
    "mv-mv.msk": ("", "mov r1 = 1", "mask r2 = 1 if r1", "", 2, _need_mv, "mv", 1, "mv.msk", ALL, None),
    "mv-rdrv.src": ("", "mov r1 = 1", "rdrv r1 @col=1 | mov r2 = row", "", 2, _need_drv, "mv", 1, "rdrv.src",
                    _col(1), ALL),
    "mv-cdrv.src": ("", "mov r1 = 1", "cdrv r1 @row=0 | mov r2 = col", "", 2, _need_drv, "mv", 1, "cdrv.src",
                    _row(0), ALL),
    "mv-wa.src": ("ar0 = 5", "mov r1 = 1", "wra [ar0] = r1", OBS_A, 2, _need_mv, "mv", 1, "wa.src", ALL, None),
    "mv-wb.src": ("ar0 = 5", "mov r1 = 1", "wrb [ar0] = r1", OBS_B, 2, _need_mv, "mv", 1, "wb.src", ALL, None),
    # FMA write-back into the RF -> operand-stage and late reads
    "fma-mv.src": ("", "mul r1 = 1 * 1", "mov r2 = r1", "", 2, _need_fma, "fma", 1, "mv.src", ALL, None),
    "fma-fma.a": ("", "mul r1 = 1 * 1", "mul r2 = r1 * 1", "", 2, _need_fma, "fma", 1, "fma.a", ALL, None),
    "fma-rdrv.src": ("", "mul r1 = 1 * 1", "rdrv r1 @col=0 | mov r2 = row", "", 2, _need_fma, "fma", 1, "rdrv.src",
                     _col(0), ALL),
    "fma-wb.src": ("ar0 = 5", "mul r1 = 1 * 1", "wrb [ar0] = r1", OBS_B, 2, _need_fma, "fma", 1, "wb.src", ALL,
                   None),
    "mac-chain": ("", "mac r1 += 1 * 1", "mac r1 += 1 * 1", "", 1, _need_acc, "fma", 1, "fma.c", ALL, None),
    "fma-late-c": ("", "mul r1 = 1 * 1", "add r2 = 1 + r1", "", 2, _need_acc, "fma", 1, "fma.c", ALL, None),
    # SRAM writes -> SRAM reads
    "wa-ra": ("ar0 = 5", "wra [ar0] = 1", OBS_A, "", 2, _need_sram, "sram", ("a", 5), "ra", ALL, None),
    "wb-rb": ("ar0 = 5", "wrb [ar0] = 1", OBS_B, "", 2, _need_sram, "sram", ("b", 5), "rb", ALL, None),
    "wa-ra-per-pe-address": (SETUP_AR, "wra [ar0] = 1", "rda [ar1] | mov r2 = mema", "", 2, _need_sram, "sram",
                             ("a", 5), "ra", _col(1), None),
    "wa-ra-offset": ("ar0 = 4", "wra [ar0 + 1] = 1", "rda [ar0 + 1] | mov r2 = mema", "", 2, _need_sram, "sram",
                     ("a", 5), "ra", ALL, None),
    "fma-sram-a": ("ar0 = 5", "rda [ar0] noread | mul mema = 1 * 1", OBS_A, "", 2, _need_fma_sram, "sram",
                   ("a", 5), "ra", ALL, None),
    "fma-sram-b": ("ar0 = 5", "rdb [ar0] noread | mul memb = 1 * 1", OBS_B, "", 2, _need_fma_sram, "sram",
                   ("b", 5), "rb", ALL, None),
    "mac-sram": ("ar0 = 5", "rda [ar0] | mac mema += 1 * 1", "rda [ar0] | mac mema += 1 * 1", OBS_A, 2,
                 _need_fma_sram, "sram", ("a", 5), "ra", ALL, None),
    # predicated, gated and unselected readers / writers
    "pred-off-reader": ("", "mov r1 = 1", "@col=1 | mov r2 = r1", "", 2, _need_mv, "mv", 1, "mv.src", _col(1),
                        None),
    "pred-off-writer": ("", "@row=1 | mov r1 = 1", "mov r2 = r1", "", 2, _need_mv, "mv", 1, "mv.src", _row(1),
                        None),
    "pred-off-fma-reader": ("", "mul r1 = 1 * 1", "@col=0 | mul r2 = r1 * 1", "", 2, _need_fma, "fma", 1, "fma.a",
                            _col(0), None),
    "pred-off-mac-chain": ("", "mac r1 += 1 * 1", "@row=0 | mac r1 += 1 * 1", "", 1, _need_acc, "fma", 1, "fma.c",
                           _row(0), None),
    "pred-off-wa-writer": ("ar0 = 5", "@col=0 | wra [ar0] = 1", OBS_A, "", 2, _need_sram, "sram", ("a", 5), "ra",
                           _col(0), None),
    "pred-off-wa-reader": ("ar0 = 5\nmov r1 = 1", "mul r1 = 1 * -0", "@row=1 | wra [ar0] = r1", OBS_A, 2,
                           _need_fma, "fma", 1, "wa.src", _row(1), None),
    "gate-pred": ("ar0 = 5", "wra [ar0] = 1", "@col=0 | rda [ar0] gate=pred | mov r2 = mema", "", 2, _need_sram,
                  "sram", ("a", 5), "ra", _col(0), None),
    "gate-rdrv": ("ar0 = 5", "wra [ar0] = 1", "rda [ar0] gate=rdrv | rdrv mema @col=1 | mov r2 = row", "", 2,
                  _need_sram, "sram", ("a", 5), "ra", _col(1), ALL),
    "gate-cdrv": ("ar0 = 5", "wrb [ar0] = 1", "rdb [ar0] gate=cdrv | cdrv memb @row=1 | mov r2 = col", "", 2,
                  _need_sram, "sram", ("b", 5), "rb", _row(1), ALL),
    # never stale: the reader does not use the written location
    "unused-fields": ("", "mov r1 = 1",
                      "raw fpu_a=1 fpu_b=1 fpu_c=1 mv_src=1 mv_msk=1 rdrv_src=1 cdrv_src=1 wa_src=1 wb_src=1",
                      "", 2, None, None, None, None, frozenset(), None),
    "mov-ignores-msk": ("", "mov r1 = 1", "mov r2 = 1 | raw mv_msk=1", "", 2, None, None, None, None, frozenset(),
                        None),
    "noread": ("ar0 = 5", "wra [ar0] = 1", "rda [ar0] noread | mov r2 = 1", "", 2, None, None, None, None,
               frozenset(), None),
    "other-address": ("ar0 = 5", "wra [ar0] = 1", "rda [ar0 + 1] | mov r2 = mema", "", 2, None, None, None, None,
                      frozenset(), None),
    "other-bank": ("ar0 = 5", "wra [ar0] = 1", "rdb [ar0] | mov r2 = memb", "", 2, None, None, None, None,
                   frozenset(), None),
    "same-instruction": ("", "nop", "mov r1 = 1 | mul r2 = r1 * 1", "", 2, None, None, None, None, frozenset(),
                         None),
}


def _pad(cfg):
    return "nop\n" * (cfg.fpu_latency + 2)


def _dump(cfg, reg):
    """``reg`` of every PE to the host: one beat per column, lane r = row r."""
    return "".join(f"rdrv r{reg} @col={c} | hout row{' last' if c == NR - 1 else ''}\n" for c in range(NR))


def _program(cfg, case, d):
    """The case's program with the reader ``d`` micro-ops after the writer; the words
    and the reader's pc."""
    setup, writer, reader, observe, reg = case[:5]
    pre = (setup + "\n" if setup else "") + _pad(cfg)
    src = pre + writer + "\n" + "nop\n" * (d - 1) + reader + "\n" + _pad(cfg)
    if observe:
        src += observe + "\n" + _pad(cfg)
    src += _dump(cfg, reg) + "halt\n"
    words = assemble(src, cfg).words()
    return words, pre.count("\n") + d


def _values(cfg, words):
    """What the program's dump sends: ``{(row, col): value}``."""
    m = CoreModel(cfg)
    m.load(words)
    out = m.run().out
    assert len(out) == NR
    w = cfg.fmt.width
    return {(r, c): (out[c].data >> (r * w)) & ((1 << w) - 1) for r in range(NR) for c in range(NR)}


@pytest.mark.parametrize("exec_stage,ml,al", TIMINGS)
@pytest.mark.parametrize("name", list(CASES))
def test_directed_boundary(name, exec_stage, ml, al):
    """At every distance d from 1 up: the checker reports the read on exactly the PEs
    whose dumped value differs from program order; reported below a boundary ``need``,
    not from it on; ``need`` is the documented distance where there is one."""
    cfg = _cfg(exec_stage, ml, al)
    case = CASES[name]
    need_f, kind, loc, field, stale, differ = case[5:]
    far = cfg.fpu_latency + 3
    ref_words, _ = _program(cfg, case, far)
    assert find_hazards(cfg, ref_words) == []
    ref = _values(cfg, ref_words)
    reported, needs = [], set()
    for d in range(1, max(pe_timing(cfg).need.values()) + 2):
        words, pc = _program(cfg, case, d)
        hz = find_hazards(cfg, words, limit=None)
        vals = _values(cfg, words)
        diff = {p for p in ALL if vals[p] != ref[p]}
        reported.append(bool(hz))
        if not hz:
            assert diff == set(), f"distance {d}: no hazard, but values differ from program order on {diff}"
            continue
        assert need_f is not None, [str(h) for h in hz]
        assert {h.pe for h in hz} == stale and len(hz) == len(stale), [str(h) for h in hz]
        for h in hz:
            assert (h.kind, h.pc, h.loc, h.field, h.distance) == (kind, pc, loc, field, d), str(h)
            assert h.writer_pc == pc - d and h.writer_cycle == h.cycle - d and h.distance < h.need
            needs.add(h.need)
        # the model agrees: exactly the stale PEs (and, for a bus driver, its bus) read the old value
        assert diff == set(differ if differ is not None else stale), (d, diff, [str(h) for h in hz])
    if need_f is None:
        assert not any(reported)
        return
    need = reported.index(False) + 1
    assert reported == [d < need for d in range(1, len(reported) + 1)], reported
    assert needs == ({need} if need > 1 else set())
    if need_f(cfg) is not None:
        assert need == need_f(cfg)


def test_measured_distances():
    """pe_timing measures what docs/architecture.md and ArchConfig state."""
    for e in (0, 1, 2, 3):
        for ml, al in ((2, 3), (4, 5), (3, 7)):
            cfg = _cfg(e, ml, al)
            t = pe_timing(cfg).need
            drv = ("rdrv.src", "cdrv.src")
            assert {d for (w, r), d in t.items() if w == "mv" and r not in drv + ("fma.c",)} == {cfg.mv_read_distance}
            assert t[("mv", "rdrv.src")] == t[("mv", "cdrv.src")] == cfg.mv_drive_distance == max(1, e)
            assert t[("mv", "fma.c")] == 1          # the late c read comes after any earlier move
            assert t[("wa", "ra")] == t[("wb", "rb")] == cfg.sram_read_distance
            assert t[("fma", "fma.c")] == cfg.acc_reuse_distance
            op = {d for (w, r), d in t.items() if w == "fma" and r not in ("fma.c", "ra", "rb")}
            assert len(op) == 1 and t[("fma", "ra")] == t[("fma", "rb")]
            if not e:
                assert op == {cfg.fpu_latency - 1} and t[("fma", "ra")] == cfg.fpu_latency
            else:   # the SRAM bypass takes a write-back landing in the read's cycle
                assert t[("fma", "ra")] == cfg.fpu_latency - 1
            assert "fma -> fma.c: " in pe_timing(cfg).table() and "fma -> late c " in pe_timing(cfg).summary()


@pytest.mark.parametrize("exec_stage", [False, True], ids=["noexec", "exec"])
def test_overwritten_by_an_older_write(exec_stage):
    """A move landing before an older FMA to the same register: a read after both
    landed gets the FMA's value, not the move's (reported against the move, although
    its distance is enough); and an ``wa`` write dropped by an FMA write-back into the
    same bank (``mem_conflict``) is never seen."""
    cfg = _cfg(exec_stage)
    src = _pad(cfg) + "mul r1 = 1 * 1\nmov r1 = -0\n" + "nop\n" * cfg.fpu_latency + "mov r2 = r1\n" + _pad(cfg)
    src += _dump(cfg, 2) + "halt\n"
    words = assemble(src, cfg).words()
    hz = find_hazards(cfg, words)
    assert len(hz) == NR * NR
    p = cfg.fpu_latency + 2
    assert all((h.kind, h.writer_unit, h.writer_pc, h.pc) == ("mv", "mv", p + 1, p + 2 + cfg.fpu_latency)
               for h in hz)
    assert "overwritten" in str(hz[0])
    assert set(_values(cfg, words).values()) == {cfg.fmt.one}        # the FMA's 1.0, not -0
    # wa displaced: the FMA write-back into A lands in the same cycle as the wa of A[6]
    lat = pe_timing(cfg).fma_lag["a"]
    src = "ar0 = 5\n" + _pad(cfg) + "rda [ar0] noread | mul mema = 1 * 1\n" + "nop\n" * (lat - 1)
    src += "wra [ar0 + 1] = 1\n" + _pad(cfg) + "rda [ar0 + 1] | mov r2 = mema\n" + _pad(cfg) + _dump(cfg, 2)
    src += "halt\n"
    words = assemble(src, cfg).words()
    m = CoreModel(cfg)
    m.load(words)
    assert m.run().counters["mem_conflict"] == NR * NR
    hz = find_hazards(cfg, words)
    assert len(hz) == NR * NR and all((h.kind, h.writer_unit, h.loc) == ("sram", "wa", ("a", 6)) for h in hz)
    assert set(_values(cfg, words).values()) == {0}


def test_loops_hazard_per_iteration():
    """In a loop the hazard repeats every iteration (the sequencer decides the cycles);
    ``limit`` keeps the first ones in issue order."""
    cfg = _cfg(False)

    def words(gap):
        b = Builder(cfg)
        with b.loop("i", 5):
            b.emit("mul r1 = 1 * 1")
            for _ in range(gap):
                b.nop()
            b.emit("mov r2 = r1")
        b.halt()
        return b.build().words()

    hz = find_hazards(cfg, words(0), limit=None)
    assert len(hz) == 5 * NR * NR and {(h.pc, h.writer_pc, h.distance) for h in hz} == {(2, 1, 1)}
    cyc = [h.cycle for h in hz]
    assert cyc == sorted(cyc) and len(set(cyc)) == 5
    assert [h.pe for h in hz[:NR * NR]] == sorted(ALL)
    assert find_hazards(cfg, words(0), limit=6) == hz[:6]
    assert find_hazards(cfg, words(cfg.fpu_latency - 3), limit=None) != []
    assert find_hazards(cfg, words(cfg.fpu_latency - 2), limit=None) == []


def test_host_input_and_api():
    cfg = _cfg(False)
    src = "hin row | mul r1 = row * 1\n{}wra [ar0] = r1\nhalt\n"
    words = assemble(src.format(""), cfg).words()
    hz = find_hazards(cfg, words, host_in=[3])
    assert summarize(hz) == {"mv": 0, "fma": 4, "sram": 0, "pcs": 1}
    h = hz[0]
    assert isinstance(h, Hazard) and h.where() == "r1" and h.distance == 1 and h.need == cfg.fpu_latency - 1
    with pytest.raises(AttributeError):
        h.kind = "x"                                 # frozen
    assert str(h) == ("fma: pc 1 (cycle 2) PE(0, 0) reads r1 (wa.src) before the fma write of pc 0 (cycle 1): "
                      f"distance 1 < {cfg.fpu_latency - 1}")
    with pytest.raises(HazardError, match=r"4 stale read\(s\), first 2:\n  fma: pc 1") as e:
        check_program(cfg, words, host_in=[3], shown=2)
    assert isinstance(e.value, ValueError) and len(e.value.hazards) == 4
    check_program(cfg, assemble(src.format("nop\n" * (cfg.fpu_latency - 2)), cfg).words(), host_in=[3])
    prog = assemble(src.format(""), cfg)           # a Program works too
    assert find_hazards(cfg, prog, host_in=[3]) == hz


def test_command_line(tmp_path, capsys):
    cfg = '{"nr": 2, "mem_a_words": 64, "mem_b_words": 64}'
    p = tmp_path / "p.s"
    p.write_text("mul r1 = 1 * 1\n" + "nop\n" * 5 + "mov r2 = r1\nhalt\n")
    assert main([str(p), "--config", cfg]) == 0
    assert "0 stale read(s)" in capsys.readouterr().out
    assert main([str(p), "--config", cfg, "--exec-stage"]) == int(pe_timing(_cfg(True)).need[("fma", "mv.src")] > 6)
    p.write_text("mul r1 = 1 * 1\nmov r2 = r1\nhalt\n")
    assert main([str(p), "--config", cfg, "--limit", "1"]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-2].startswith("fma: pc 1") and out[-1].startswith("4 stale read(s): mv 0, fma 4, sram 0")


# ======================================================================================
# kernel audit
# ======================================================================================
#: the configuration of test_kernels.test_other_latencies_model (fpu_latency 11)
AUDIT_CFG = ArchConfig(nr=3, mem_a_words=256, mem_b_words=256, mul_latency=4, add_latency=5)


@functools.lru_cache(maxsize=None)
def kernel_sessions(cfg=AUDIT_CFG, seed=0):
    """``tests/sw/test_kernels.py``'s RTL-session cases: a list of sessions (lists of cases)."""
    from tests.sw.test_kernels import rtl_sessions
    return rtl_sessions(cfg, np.random.default_rng(seed))


def kernel_words(cfg, case):
    """The microcode of a case's kernel phase (as ``sw.kernels.run_kernel`` builds it),
    compiled for ``cfg`` (the compilers take the default timing only)."""
    b = Builder(cfg)
    case.kernel(b)
    b.halt()
    return b.build().words()


def _case_ids():
    return [c.name for s in kernel_sessions() for c in s]


@pytest.mark.parametrize("timing", ["default", "exec", "bus", "rx"])
@pytest.mark.parametrize("name", _case_ids())
def test_kernels_hazard_free(name, timing):
    """Every kernel case compiled for its timing: the default one, the execute stage
    (when the compilers take it), the execute and bus stages (whose drivers see a move
    only two micro-ops later) and the receive stage on top (drivers three micro-ops
    later, SRAM reads a write three later) on the same configuration."""
    cfg = AUDIT_CFG
    if timing != "default":
        if not _compilers_take_exec_stage():
            pytest.skip("the compilers refuse exec_stage")
        cfg = cfg.replace(exec_stage=True, bus_stage=timing in ("bus", "rx"), rx_stage=timing == "rx")
    case = {c.name: c for s in kernel_sessions(cfg) for c in s}[name]
    check_program(cfg, kernel_words(cfg, case))


def test_transfers_hazard_free_both_timings():
    """Loads and unloads (sw.transfer) keep the execute-stage distances too."""
    from tests.sw.test_transfer import _roundtrip_job
    for ex in (0, 1, 2, 3):
        cfg = ArchConfig(nr=3, mem_a_words=64, mem_b_words=64, exec_stage=bool(ex), bus_stage=ex >= 2,
                         rx_stage=ex == 3)
        words, data, _, _ = _roundtrip_job(cfg, 4, np.random.default_rng(0))
        check_program(cfg, words, host_in=data)


def _compilers_take_exec_stage(cfg=AUDIT_CFG) -> bool:
    """Whether the kernel compilers accept ``exec_stage`` (older trees refuse it)."""
    try:
        kernel_words(cfg.replace(exec_stage=True), kernel_sessions(cfg.replace(exec_stage=True))[0][0])
    except ValueError as e:          # sw.timing.TimingError
        if "exec_stage" in str(e):
            return False
        raise
    return True


def run_exec_stage(cfg=AUDIT_CFG, seed=0, *, compile_for="default"):
    """Each session's cases run on the model with the execute stage, compiled for
    ``cfg`` (``compile_for="default"``: the default-timing schedules unchanged) or for
    the execute-stage configuration itself (``"exec"``):
    ``[(case, words, hazards, error or None)]``."""
    from sim.core_run import run_kernel
    cx = cfg.replace(exec_stage=True)
    ccfg = cx if compile_for == "exec" else cfg
    out = []
    for cases in kernel_sessions(ccfg, seed):
        loads = [ld for c in cases for ld in c.loads]
        unloads = [u for c in cases for u in c.unloads]
        outs, res = run_kernel(cx, loads, [c.kernel for c in cases], unloads)
        pos = 0
        for c, r in zip(cases, res):
            k = len(c.unloads)
            try:
                c.verify(cx, outs[pos:pos + k], r)
                err = None
            except AssertionError as e:
                err = str(e).splitlines()[0]
            pos += k
            words = kernel_words(ccfg, c)
            out.append((c, words, find_hazards(cx, words, limit=None), err))
    return out


@pytest.mark.parametrize("compile_for", ["default", "exec"])
def test_exec_stage_wrong_results_have_hazards(compile_for):
    """With the execute stage every case whose results come out wrong on the model must
    have stale reads (nothing else changes: the FMA, moves and SRAM writes act one cycle
    later, conflicts and reads of later writes keep their distances); the others may
    have some that read an equal value by chance."""
    if compile_for == "exec" and not _compilers_take_exec_stage():
        pytest.skip("the compilers refuse exec_stage")
    for c, _, hz, err in run_exec_stage(compile_for=compile_for):
        assert not (err and not hz), f"{c.name} is wrong with the execute stage but has no hazard: {err}"


def audit_kernels(cfg=AUDIT_CFG, seed=0, file=None):
    """Print, per kernel case, its stale reads with the execute stage by kind, the first
    one, and whether the model's result is right: the default-timing programs, then
    (when the compilers take the execute stage) the programs compiled for it."""
    modes = ["default"] + (["exec"] if _compilers_take_exec_stage(cfg) else [])
    print(f"exec_stage audit: {cfg.replace(exec_stage=True).to_json()}", file=file)
    print(f"distances: {pe_timing(cfg.replace(exec_stage=True)).summary()}", file=file)
    rows = {}
    for mode in modes:
        rows[mode] = run_exec_stage(cfg, seed, compile_for=mode)
        print(f"\nprograms compiled for the {'default timing' if mode == 'default' else 'execute stage'}:",
              file=file)
        print(f"{'case':34s} {'words':>5s} {'mv':>4s} {'fma':>4s} {'sram':>4s} {'pcs':>4s}  result", file=file)
        for c, words, hz, err in rows[mode]:
            s = summarize(hz)
            print(f"{c.name:34s} {len(words):5d} {s['mv']:4d} {s['fma']:4d} {s['sram']:4d} {s['pcs']:4d}  "
                  f"{'ok' if err is None else 'WRONG'}", file=file)
            if hz:
                print(f"    first: {hz[0]}", file=file)
    return rows


if __name__ == "__main__":
    audit_kernels()


# ======================================================================================
# training programs with the FPGA timing
# ======================================================================================
@pytest.mark.parametrize("rx", [False, True], ids=["bus", "rx"])
@pytest.mark.parametrize("trainer,loss", [("sgd-fused", "softmax_ce"), ("sgd-separate", "mse"),
                                          ("mbgd", "softmax_ce")])
def test_training_programs_hazard_free_fpga_timing(trainer, loss, rx):
    """Every RUN of a training step compiled for the FPGA PE timing (execute and bus
    stages: drivers see a move two micro-ops later; with the receive stage three, and an
    SRAM read a write three later) has no stale read, whether or not the stale value would
    have differed (the training tests compare values)."""
    from sw.train import MLP, compile_sgd, init_weights
    from sim.sessions import CoreSession
    from sw.train_mb import compile_mbgd

    cfg = ArchConfig(nr=2, mem_a_words=1024, mem_b_words=1024, exec_stage=True, bus_stage=True, dist_stage=True,
                     fetch_stage=True, addr_stage=True, read_stage=True, rx_stage=rx, mul_latency=4, add_latency=5)
    mlp = MLP((11, 7, 4), loss, 0.0625, batch=3) if trainer == "mbgd" else MLP((11, 7, 4), loss, 0.0625)
    rng = np.random.default_rng(3)
    if trainer == "mbgd":
        tp = compile_mbgd(cfg, mlp)
        args = (rng.uniform(-1, 1, (11, 3)), rng.integers(0, 4, 3))
    else:
        tp = compile_sgd(cfg, mlp, backward=trainer.split("-")[1])
        args = (rng.standard_normal(11).astype(np.float32), np.eye(4, dtype=np.float32)[1])
    sess = CoreSession(cfg, "fast", record=True)
    tp.init(sess, init_weights(mlp, cfg.fmt, 3))
    tp.run_step(sess, *args)
    assert len(sess.phases) > 1
    for ph in sess.phases:
        hz = find_hazards(cfg, ph.words, ph.start, ph.data, limit=None)
        assert not hz, f"{ph.name}: {len(hz)} stale reads, first {hz[0]}"
