"""Quoted figures of the training compilers' measurements (docs/training.md).
``QUOTES`` is checked by ``tests/project/test_docs.py``."""

from __future__ import annotations

import math
import re

from tests.project.quotes_results import CP_S
from tests.project.quotes_sim import KERN, KROW
from tests.project.quoting import RES, Cell, Quote, _load, get, num, span


QUOTES: list = []

TRAIN = RES + "train.json"
TR = lambda net, loss, backward: (lambda d: get(d, ("rows", {"network": net, "loss": loss,
                                                             "backward (layers 1..)": backward})))
CYC = "RUN cycles (measured = predicted)"
SEP128, AUTO128, FUSED128 = (TR("64-128-128-10", "softmax_ce", b) for b in ("separate: S/S", "auto: F/S", "fused: F/F"))
GC, GA = "GFLOPS/W compared scope", "GFLOPS/W everything"


def _step_change(sep, fus, tag):
    """``5370 -> 5412 (+0.8 %, softmax)`` from two train.json rows."""
    return lambda d: f"{sep(d)[CYC]} -> {fus(d)[CYC]} (+{(fus(d)[CYC] / sep(d)[CYC] - 1) * 100:.1f} %, {tag})"


def _epoch_row(r):
    return (f"{r['train_loss']:.4f}", f"{r['train_loss_float64']:.4f}", f"{r['test_accuracy'] * 100:.2f} %",
            f"{r['test_accuracy_float64'] * 100:.2f} %")


DIGITS, DIGITS_MSE = RES + "train_digits.json", RES + "train_digits_mse.json"
MB = RES + "train_mb.json"
MBR = lambda loss, b: (lambda d: get(d, ("rows", {"loss": loss, "batch": b})))
MB_DIGITS = lambda b: (lambda d: get(d, ("digits", {"batch": b})))


def _mb_epoch(d, b, epoch):
    e = MB_DIGITS(b)(d)["epochs"][epoch - 1]
    return (f"{e['test_accuracy'] * 100:.2f} % ({e['train_loss']:.4f})",
            f"{e['test_accuracy_float64'] * 100:.2f} % ({e['train_loss_float64']:.4f})")


QUOTES += [
    # one core: the fused backward step
    Quote("docs/training.md", r"never faster on a 4 x 4 core \(GEMV\^T (\S+) % and rank-1\s+(\d+) % vs (\S+) % fused",
          KERN, lambda d: (f"{KROW('gemv_t (tree, x diag)')(d)['MAC util %']:.1f}",
                           f"{KROW('rank1 (alpha, u/v diag)')(d)['MAC util %']:.0f}",
                           f"{KROW('fused gemv_t + rank1 (block 4)')(d)['MAC util %']:.1f}"), lambda v: v),
    Quote("docs/training.md", Cell("step cycles S -> F", "128 x 128 (64-128-128-10)", "step cycles S -> F"), TRAIN,
          _step_change(SEP128, AUTO128,
                       "softmax"), lambda v: v),
    Quote("docs/training.md", Cell("step cycles S -> F", "64 x 64 (64-64-64-10)", "step cycles S -> F"), TRAIN,
          _step_change(TR("64-64-64-10", "mse", "separate: S/S"), TR("64-64-64-10", "mse", "auto: F/S"), "MSE"),
          lambda v: v),
    Quote("docs/training.md", Cell("step cycles S -> F", "10 x 64 (64-64-10)", "step cycles S -> F"), TRAIN,
          _step_change(TR("64-64-10", "mse", "auto: S"), TR("64-64-10", "mse", "fused: F"), "MSE"), lambda v: v),
    Quote("docs/training.md", r"128 x 128 layer raises the step's figure from (\S+ to \S+)\s+\((\S+ to \S+)\) for (\d+) more",
          TRAIN, lambda d: (f"{SEP128(d)[GC]} to "
                            f"{AUTO128(d)[GC]}",
                            f"{SEP128(d)[GA]} to "
                            f"{AUTO128(d)[GA]}",
                            f"{AUTO128(d)[CYC] - SEP128(d)[CYC]}"),
          lambda v: v),
    Quote("docs/training.md", r"64 x 64 layer from (\S+ to \S+)\s+\((\S+ to \S+)\) for (\d+)\.", TRAIN,
          lambda d: (f"{TR('64-64-64-10', 'mse', 'separate: S/S')(d)[GC]} to {TR('64-64-64-10', 'mse', 'auto: F/S')(d)[GC]}",
                     f"{TR('64-64-64-10', 'mse', 'separate: S/S')(d)[GA]} to {TR('64-64-64-10', 'mse', 'auto: F/S')(d)[GA]}",
                     f"{TR('64-64-64-10', 'mse', 'auto: F/S')(d)[CYC] - TR('64-64-64-10', 'mse', 'separate: S/S')(d)[CYC]}"),
          lambda v: v),
    Quote("docs/training.md", r"\(64-64-10 with MSE: (\S+ to \S+) in the compared scope, (\S+ to \S+) counting\s+"
                              r"everything, for (\d+) more cycles\)", TRAIN,
          lambda d: (f"{TR('64-64-10', 'mse', 'auto: S')(d)[GC]} to {TR('64-64-10', 'mse', 'fused: F')(d)[GC]}",
                     f"{TR('64-64-10', 'mse', 'auto: S')(d)[GA]} to {TR('64-64-10', 'mse', 'fused: F')(d)[GA]}",
                     f"{TR('64-64-10', 'mse', 'fused: F')(d)[CYC] - TR('64-64-10', 'mse', 'auto: S')(d)[CYC]}"),
          lambda v: v),
    # one core: measured figures and digits
    Quote("docs/training.md", r"64-64-10 takes (\d+) cycles \((\S+) % MAC\s+utilization\), against (\d+) for MSE's", TRAIN,
          lambda d: (f"{TR('64-64-10', 'softmax_ce', 'auto: S')(d)[CYC]}",
                     f"{TR('64-64-10', 'softmax_ce', 'auto: S')(d)['MAC util. %']:.1f}",
                     f"{TR('64-64-10', 'mse', 'auto: S')(d)[CYC]}"), lambda v: v),
    Quote("docs/training.md", r"the leakage of its (\d+) cycles more than MSE's step", TRAIN,
          lambda d: TR("64-64-10", "softmax_ce", "auto: S")(d)[CYC] - TR("64-64-10", "mse", "auto: S")(d)[CYC]),
    Quote("docs/training.md", r"layer too\s+costs (\d+) more cycles", TRAIN,
          lambda d: FUSED128(d)[CYC] - AUTO128(d)[CYC]),
    Quote("docs/training.md", r"10 classes, (\d+)\s+train / (\d+) test samples", DIGITS,
          lambda d: tuple(re.search(r"(\d+) train / (\d+) test", d["data"]).groups()), lambda v: v),
    Quote("docs/training.md", r"`lr = 0\.03` \(stored as (\S+) in binary16\)", DIGITS, ("lr_stored",),
          lambda v: f"-{v:.3f}"),
    Quote("docs/training.md", r"the first (\d+) steps checked against `GoldenSGD` bit for bit", DIGITS,
          ("golden_checked_steps",)),
    *[Quote("docs/training.md", Cell("| epoch | train loss, array |", str(e), col), DIGITS,
            lambda d, e=e, i=i: _epoch_row(d["epochs"][e - 1])[i])
      for e in range(1, 11) for i, col in enumerate(("train loss, array", "train loss, float64",
                                                      "test accuracy, array", "test accuracy, float64"))],
    Quote("docs/training.md", r"Final test accuracy \*\*(\S+) %\*\* on the array \(float64 SGD: (\S+) %; the best epoch\s+(\S+) %\)",
          DIGITS, lambda d: (f"{d['epochs'][-1]['test_accuracy'] * 100:.2f}",
                             f"{d['epochs'][-1]['test_accuracy_float64'] * 100:.2f}",
                             f"{max(e['test_accuracy'] for e in d['epochs']) * 100:.2f}"), lambda v: v),
    Quote("docs/training.md", r"the train loss stays within (\d+) % of float64's", DIGITS,
          lambda d: max(abs(e["train_loss"] / e["train_loss_float64"] - 1) for e in d["epochs"]) * 100,
          lambda v: f"{math.ceil(v)}"),
    Quote("docs/training.md", r"Per step: one RUN of (\d+) cycles\s+with no host turnaround, (\d+) FLOPs, (\S+) % MAC",
          DIGITS, lambda d: (f"{d['step']['run_cycles']}", f"{d['step']['flops']}",
                             f"{d['step']['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"The (\d+) steps and the evaluations\s+took (\d+) s of wall time", DIGITS,
          lambda d: (f"{d['steps']}", f"{d['wall_s']:.0f}"), lambda v: v),
    Quote("docs/training.md", r"\(about (\d+) ms per step, `wall_s`\)", DIGITS,
          lambda d: d["wall_s"] / d["steps"] * 1000, "{:.0f}"),
    Quote("docs/training.md", r"one RUN per step of\s+(\d+) cycles, (\d+) steps golden-checked", DIGITS_MSE,
          lambda d: (f"{d['step']['run_cycles']}", f"{d['golden_checked_steps']}"), lambda v: v),
    Quote("docs/training.md", r"final test\s+accuracy \*\*(\S+) %\*\* on the array, (\S+) % for float64 SGD \(train loss\s+"
                              r"(\S+) vs (\S+)\); (\S+) % MAC utilization", DIGITS_MSE,
          lambda d: (f"{d['epochs'][-1]['test_accuracy'] * 100:.2f}", f"{d['epochs'][-1]['test_accuracy_float64'] * 100:.2f}",
                     f"{d['epochs'][-1]['train_loss']:.4f}", f"{d['epochs'][-1]['train_loss_float64']:.4f}",
                     f"{d['step']['mac_utilization'] * 100:.1f}"), lambda v: v),
    # minibatch GD on one core
    Quote("docs/training.md", r"At `b = 32` the step's (\d+) cycles are (\d+) in GEMMs, (\d+) in the four transposes,\s+"
                              r"(\d+) in loads/unloads and (\d+) in ReLU", MB,
          lambda d: (str(MBR("softmax_ce", 32)(d)["RUN cycles/step (measured = predicted)"]),
                     *MBR("softmax_ce", 32)(d)["cycles gemm/transpose/load+unload/other"].split("/")), lambda v: v),
    Quote("docs/training.md", r"the MAC utilization is close: (\d+-\d+) % vs (\d+) % with MSE", MB,
          lambda d: ("{0:.0f}-{1:.0f}".format(*span(MBR("mse", b)(d)["MAC util. %"] for b in (4, 16, 32))),
                     f"{MBR('mse', 1)(d)['MAC util. %']:.0f}"), lambda v: v),
    Quote("docs/training.md", r"compared scope is\s+(\S+)x SGD's \((\S+) against (\S+)\) and counting everything (\S+)x "
                              r"\((\S+) against (\S+)\)", MB,
          lambda d: (f"{MBR('mse', 32)(d)[GC] / MBR('mse', 1)(d)[GC]:.1f}", f"{MBR('mse', 32)(d)[GC]}",
                     f"{MBR('mse', 1)(d)[GC]}", f"{MBR('mse', 32)(d)[GA] / MBR('mse', 1)(d)[GA]:.2f}",
                     f"{MBR('mse', 32)(d)[GA]}", f"{MBR('mse', 1)(d)[GA]}"), lambda v: v),
    Quote("docs/training.md", r"at `b = 32`\s+the utilization is (\S+) % without the turnaround and (\S+) % with it", MB,
          lambda d: (f"{MBR('softmax_ce', 32)(d)['MAC util. %']:.1f}",
                     f"{MBR('softmax_ce', 32)(d)['MAC util. with host %']:.1f}"), lambda v: v),
    Quote("docs/training.md", r"the transposes cost\s+(\d+-\d+) % at every `b`", MB,
          lambda d: span(num(r["cycles gemm/transpose/load+unload/other"].split("/")[1])
                         / r["RUN cycles/step (measured = predicted)"] * 100 for r in d["rows"] if r["batch"] > 1),
          "{0:.0f}-{1:.0f}"),
    *[Quote("docs/training.md", Cell("| epoch | b = 16, lr 0.1: array |", str(e), col), MB,
            lambda d, e=e, b=b, i=i: _mb_epoch(d, b, e)[i])
      for e in range(1, 11) for b, cols in ((16, ("b = 16, lr 0.1: array", "b = 16: float64")),
                                            (32, ("b = 32, lr 0.2: array", "b = 32: float64")))
      for i, col in enumerate(cols)],
    Quote("docs/training.md", r"in 10 epochs with (\d+) / (\d+) steps instead of\s+(\d+),", MB,
          lambda d: (f"{MB_DIGITS(16)(d)['steps']}", f"{MB_DIGITS(32)(d)['steps']}", f"{_load(DIGITS)['steps']}"),
          lambda v: v),
    Quote("docs/training.md", r"`-lr/b` is\s+stored as (\S+) in binary16", MB, lambda d: MB_DIGITS(16)(d)["lr_over_b_stored"],
          "{:.6f}"),
    Quote("docs/training.md", r"Wall time: (\d+) s and (\d+) s", MB,
          lambda d: (f"{MB_DIGITS(16)(d)['wall_s']:.0f}", f"{MB_DIGITS(32)(d)['wall_s']:.0f}"), lambda v: v),
]

CHIP, CHIP_MB, CP, LARGE = (RES + f for f in ("train_chip.json", "train_chip_mb.json", "train_cp.json", "train_large.json"))
SMALL_NET, PAGED_NET = [784, 500, 500, 500, 10], [784, 1500, 1500, 1500, 10]
CASE = lambda **m: (lambda d: get(d, ("cases", m)))
LAST = lambda **m: (lambda d: get(d, ("cases", m))["steps"][-1])
SGD_S = LAST(preset="S", sizes=SMALL_NET, loss="softmax_ce", backward="auto")
SGD_PAGED = LAST(preset="S", sizes=PAGED_NET)
SGD_FUSED = LAST(preset="S", sizes=SMALL_NET, backward="fused")
PAGED_CASE = CASE(preset="S", sizes=PAGED_NET)
#: the breakdown category of the page swaps (benchmarks.bench_train_chip.SWAP)
SWAP = "page swap: update, store and the next page's load (scratchpad)"
GPW = lambda step, scope="compared": step["power_with_host"][f"gflops_per_w_{scope}"]


def _share(step, *keys, total=None):
    """Percent of a step's cycles (with the host turnaround when it has one) in breakdown categories."""
    b = step["cycle_breakdown"]
    return 100 * sum(b[k]["cycles"] for k in keys) / (total or (step["cycles"] + step.get("host_cycles", 0)))


#: the ring collectives of the default SGD step at S with nothing beside them
RING_APART = ("broadcast x (ring)", "broadcast of the output gradient (ring)", "reduce of the output layer's partials (ring)")
APART_S = lambda d: CASE(preset="S", sizes=SMALL_NET, loss="softmax_ce", backward="auto")(d)["collectives_apart"]


def _within(d, kind):
    return 100 * get(d, ("cases", {"preset": "S", "sizes": SMALL_NET, "loss": "softmax_ce", "backward": "auto"},
                         "mac_utilization_within_kernels", kind, "mac_utilization"))


def _weights_per_pe(error: str) -> int:
    """The padded weight words per PE of a compile error's ``W0 panel 80x784: 3920, ...``."""
    return sum(int(n) for n in re.findall(r"W\d panel \d+x\d+: (\d+)", error))


MBS = lambda b: LAST(preset="S", sizes=SMALL_NET, batch=b)
CPS = lambda **m: (lambda d: CP_S(d, **m))

QUOTES += [
    # SGD across the cores of a chip
    Quote("docs/training.md", r"takes \*\*(\d+) cycles, (\S+) % MAC utilization\*\* \(the", CHIP,
          lambda d: (f"{SGD_S(d)['cycles']}", f"{SGD_S(d)['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"and reaches (\d+) GFLOPS/W against its (\d+) for SGD \((\S+)x\)", CHIP,
          lambda d: (f"{GPW(SGD_S(d)):.0f}", f"{d['reference']['gflops_per_w']}",
                     f"{GPW(SGD_S(d)) / d['reference']['gflops_per_w']:.2f}"),
          lambda v: v),
    Quote("docs/training.md", r"The softmax on core 0 takes (\d+) cycles more than MSE's axpy \((\d+) against (\d+)\)",
          CHIP, lambda d: (f"{SGD_S(d)['cycles'] - LAST(preset='S', sizes=SMALL_NET, loss='mse')(d)['cycles']}",
                           f"{SGD_S(d)['cycles']}", f"{LAST(preset='S', sizes=SMALL_NET, loss='mse')(d)['cycles']}"),
          lambda v: v),
    Quote("docs/training.md", r"Where the\s+(\d+) cycles go \(from the benchmark's", CHIP, lambda d: SGD_S(d)["cycles"]),
    Quote("docs/training.md", r"forward\s+GEMVs (\d+) % \((\d+) % MAC utilization inside\), transposed GEMVs (\d+) % \((\d+) %:",
          CHIP, lambda d: (f"{_share(SGD_S(d), 'GEMV W x (forward)'):.0f}", f"{_within(d, 'gemv'):.0f}",
                           f"{_share(SGD_S(d), 'GEMV^T W^T d (backward)'):.0f}", f"{_within(d, 'gemv_t'):.0f}"),
          lambda v: v),
    Quote("docs/training.md", r"in their free slots (\d+) % \((\d+) cycles\), the other rank-1 updates (\d+) % \((\d+) %\)",
          CHIP, lambda d: (f"{_share(SGD_S(d), 'reduce-scatter with rank-1 rows in its free slots'):.0f}",
                           f"{SGD_S(d)['cycle_breakdown']['reduce-scatter with rank-1 rows in its free slots']['cycles']}",
                           f"{_share(SGD_S(d), 'rank-1 update'):.0f}", f"{_within(d, 'rank1'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"nothing beside them (\d+) % \(the broadcast of x's wait for the ring's latency (\d+), the\s+"
                              r"gradient's broadcast (\d+), the output layer's reduce (\d+):", CHIP,
          lambda d: (f"{_share(SGD_S(d), *RING_APART):.0f}",
                     *(f"{SGD_S(d)['cycle_breakdown'][k]['cycles']}" for k in RING_APART)), lambda v: v),
    Quote("docs/training.md", r"`ag_overlap=False,\s+bcast_overlap=False, out_reduce=\"chain\"`, below\) it takes (\d+) cycles "
                              r"\((\S+) %\)", CHIP,
          lambda d: (f"{APART_S(d)['cycles']}", f"{APART_S(d)['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"the all-gather costs nothing: at S each of the\s+two took (\d+) cycles on its own", CHIP,
          lambda d: (lambda c: c["ag1"] if c["ag1"] == c["ag2"] else f"{c['ag1']} and {c['ag2']}")(
              APART_S(d)["collectives"])),
    Quote("docs/training.md", r"The\s+broadcast of x costs the ring's latency, (\d+) cycles at S, instead of (\d+)\.", CHIP,
          lambda d: (f"{SGD_S(d)['cycle_breakdown']['broadcast x (ring)']['cycles']}",
                     f"{APART_S(d)['collectives']['bcast_x']}"), lambda v: v),
    Quote("docs/training.md", r"At S the default step takes (\d+) cycles against (\d+) with both switches off and the", CHIP,
          lambda d: (f"{SGD_S(d)['cycles']}", f"{APART_S(d)['cycles']}"), lambda v: v),
    Quote("docs/training.md", r"the softmax kernel (\d+) %, masks and gaps\s+(\d+) %, host I/O (\d+) %\.", CHIP,
          lambda d: (f"{_share(SGD_S(d), 'other (softmax)'):.0f}",
                     f"{_share(SGD_S(d), 'gaps (NOPs between ops)', 'elementwise (ReLU, mask, loss grad)'):.0f}",
                     f"{_share(SGD_S(d), *(k for k in SGD_S(d)['cycle_breakdown'] if k.startswith('host'))):.0f}"),
          lambda v: v),
    Quote("docs/training.md", r"Fusing every layer there costs (\S+) % cycles", CHIP,
          lambda d: (SGD_FUSED(d)["cycles"] / SGD_S(d)["cycles"] - 1) * 100,
          "{:.1f}"),
    Quote("docs/training.md", r"the GFLOPS/W in the compared scope (\S+)x \((\d+) against (\d+): each weight", CHIP,
          lambda d: (f"{GPW(SGD_FUSED(d)) / GPW(SGD_S(d)):.2f}",
                     f"{GPW(SGD_FUSED(d)):.0f}",
                     f"{GPW(SGD_S(d)):.0f}"), lambda v: v),
    Quote("docs/training.md", r"lowers it counting everything \((\S+) against (\S+): the", CHIP,
          lambda d: (f"{GPW(SGD_FUSED(d), 'all'):.1f}",
                     f"{GPW(SGD_S(d), 'all'):.1f}"), lambda v: v),
    Quote("docs/training.md", r"network at S \(([\d,]+) weight words per PE against (\d+) words of PE\s+memory\) pages "
                              r"W1 and W2 in (\d+) pages each", CHIP,
          lambda d: (f"{sum(-(-l['panel_rows_per_core'] // 4) * -(-l['panel_cols'] // 4) for l in PAGED_CASE(d)['layers']):,}",
                     f"{PAGED_CASE(d)['config']['mem_a_words'] + PAGED_CASE(d)['config']['mem_b_words']}",
                     *{str(v) for v in PAGED_CASE(d)["spad_pages"].values()}), lambda v: v),
    Quote("docs/training.md", r"\*\*([\d,]+) cycles per step, (\S+) % MAC\s+utilization\*\* \(one microcode image, no reload\)",
          CHIP, lambda d: (f"{SGD_PAGED(d)['cycles']:,}", f"{SGD_PAGED(d)['mac_utilization'] * 100:.1f}"), lambda v: v),
    Quote("docs/training.md", r"(\d+) % of the step is page traffic \(([\d,]+)\s+cycles: the forward loads, the "
                              r"backward updates' page swaps and the pages' own moves\),\s+(\d+) % the GEMVs and the "
                              r"updates outside the swaps", CHIP,
          lambda d: (f"{_share(SGD_PAGED(d), 'scratchpad page load/store', SWAP):.0f}",
                     f"{sum(SGD_PAGED(d)['cycle_breakdown'].get(k, {}).get('cycles', 0) for k in ('scratchpad page load/store', SWAP)):,}",
                     f"{_share(SGD_PAGED(d), 'GEMV W x (forward)', 'GEMV^T W^T d (backward)', 'rank-1 update'):.0f}"),
          lambda v: v),
    Quote("docs/training.md", r"reuses each paged weight `b` times \((\S+)\s+% at b = 8", CHIP_MB,
          lambda d: LAST(preset="S", sizes=PAGED_NET)(d)["mac_utilization"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"\(([\d,]+) padded weight words per PE\s+against", LARGE,
          lambda d: _weights_per_pe(get(d, ("compile_attempts", {"preset": "S", "method": "sgd"}, "error"))), "{:,}"),
    Quote("docs/training.md", r"the output gradient's broadcast inside the output layer's transposed GEMV\s+\((\d+) cycles", CHIP,
          lambda d: SGD_S(d)["cycle_breakdown"][RING_APART[1]]["cycles"]),
    Quote("docs/training.md", r"at S the reduce takes (\d+) cycles instead of the chain's (\d+)\.", CHIP,
          lambda d: (f"{SGD_S(d)['cycle_breakdown'][RING_APART[2]]['cycles']}", f"{APART_S(d)['collectives']['reduce_z']}"),
          lambda v: v),
    Quote("docs/training.md", r"minibatch step, ([\d,]+) cycles in two chip RUNs", LARGE,
          lambda d: d["cases"]["mbgd_L"]["steps"][-1]["cycles"], "{:,}"),
    # minibatch GD across the cores
    Quote("docs/training.md", r"takes (\d+) of (\d+) words per PE at `b = 16` \(MEM A (\d+), MEM B (\d+),", CHIP_MB,
          lambda d: (lambda c: (str(c["memory_words_per_pe"]["a"] + c["memory_words_per_pe"]["b"]),
                                str(c["config"]["mem_a_words"] + c["config"]["mem_b_words"]),
                                str(c["memory_words_per_pe"]["a"]), str(c["memory_words_per_pe"]["b"])))(
              CASE(preset="S", sizes=SMALL_NET, batch=16)(d)), lambda v: v),
    Quote("docs/training.md", r"Cycles per step at S: (\d+),\s+(\d+) and (\d+) \(\+ (\d+) host\) at `b` = 4, 8 and 16, "
                              r"(\S+), (\S+) and (\S+) % MAC", CHIP_MB,
          lambda d: (*(str(MBS(b)(d)["cycles"]) for b in (4, 8, 16)), str(MBS(16)(d)["host_cycles"]),
                     *(f"{MBS(b)(d)['mac_utilization'] * 100:.1f}" for b in (4, 8, 16))), lambda v: v),
    Quote("docs/training.md", r"\(3\s+pages\s+each\): ([\d,]+) \+ (\d+) cycles, (\S+) %; its programs take (\d+) microcode "
                              r"images \((\d+) words", CHIP_MB,
          lambda d: (lambda c, s: (f"{s['cycles']:,}", str(s["host_cycles"]), f"{s['mac_utilization'] * 100:.1f}",
                                   str(c["microcode_images"]), str(c["microcode_reload_words_per_step"])))(
              PAGED_CASE(d), LAST(preset="S", sizes=PAGED_NET)(d)), lambda v: v),
    Quote("docs/training.md", r"the host's LOADs between its RUNs are ([\d,]+) of those\s+cycles \((\d+) %\)", CHIP_MB,
          lambda d: (lambda s: (lambda lc: (f"{lc:,}", f"{lc / (s['cycles'] + s['host_cycles']) * 100:.0f}"))(
              sum(p["cycles"] for p in s["phases"] if p["kind"] == "load")))(LAST(preset="S", sizes=PAGED_NET)(d)),
          lambda v: v),
    Quote("docs/training.md", r"with W1 and W2 in the scratchpad \((\d) pages", CHIP_MB,
          lambda d: {str(v) for v in PAGED_CASE(d)["spad_pages"].values()}, lambda v: "/".join(v)),
    Quote("docs/training.md", r"one 16384-word microcode image: ([\d,]+) \+ (\d+)\s+cycles, \*\*(\S+) %\*\*", LARGE,
          lambda d: (lambda s: (f"{s['cycles']:,}", str(s["host_cycles"]), f"{s['mac_utilization'] * 100:.1f}"))(
              d["cases"]["mbgd_L"]["steps"][-1]), lambda v: v),
    Quote("docs/training.md", r"The utilization \((\d+) % at `b = 16`\)", CHIP_MB,
          lambda d: MBS(16)(d)["mac_utilization"] * 100, "{:.0f}"),
    Quote("docs/training.md", r"where the (\d+) \+ (\d+) cycles of `b = 16` go", CHIP_MB,
          lambda d: (str(MBS(16)(d)["cycles"]), str(MBS(16)(d)["host_cycles"])), lambda v: v),
    Quote("docs/training.md", r"GEMMs (\d+) % \(the broadcast of `X` and the all-gathers of\s+`A` and of `A\^T`'s column "
                              r"blocks run inside them\), the reduce-scatters of `dX\^T` (\d+) %", CHIP_MB,
          lambda d: (f"{_share(MBS(16)(d), 'GEMM forward W A', 'GEMM backward D^T W', 'GEMM update D A^T'):.0f}",
                     f"{_share(MBS(16)(d), 'reduce-scatter dX^T (ring)'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"the broadcasts of `X\^T` and the\s+gradient (\d+) %, host I/O (\d+) %", CHIP_MB,
          lambda d: (f"{_share(MBS(16)(d), 'broadcast X, X^T (ring)'):.0f}",
                     f"{_share(MBS(16)(d), 'host phase in', 'host phase logits', 'host phase g'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"transposes (\d+) %, the split output layer's reduce (\S+) %, the\s+softmax turnaround (\d+) %",
          CHIP_MB, lambda d: (f"{_share(MBS(16)(d), 'transposes'):.0f}", f"{_share(MBS(16)(d), 'other ring'):.1f}",
                              f"{_share(MBS(16)(d), 'host softmax turnaround (assumed)'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"broadcast of `X\^T`: (\d+) %\)", CHIP_MB,
          lambda d: _share(MBS(16)(d), "host phase in", "host phase logits", "host phase g", "broadcast X, X^T (ring)"),
          "{:.0f}"),
    # continuous propagation
    Quote("docs/training.md", r"784-500-500-500-10: fused, groups `(\[[\d, ]+\])` \(separate: `(\[[\d, ]+\])`\)", CP,
          lambda d: (str(CP_S(d)["groups"]), str(CP_S(d, backward="separate")["groups"])), lambda v: v),
    Quote("docs/training.md", r"design's CP figure \((\d+) at S\)", CP, ("reference", "gflops_per_w")),
    Quote("docs/training.md", r"a step takes (\d+) cycles with the fused backward\s+step \(groups `(\[[\d, ]+\])`; head (\d+), "
                              r"tail (\d+) of which chains (\d+), host (\d+)\), (\S+) %", CP,
          lambda d: (lambda c: (str(c["steps"][-1]["cycles"]), str(c["groups"]), *(str(c["runs"][k]) for k in
                                ("head", "tail", "chains", "host")), f"{c['steps'][-1]['mac_utilization'] * 100:.1f}"))(
              CP_S(d)), lambda v: v),
    Quote("docs/training.md", r"and (\d+) \((\S+) %\) with the separate one \(`(\[[\d, ]+\])`\); SGD across\s+all 32 cores "
                              r"takes (\d+) \((\S+) %\)", CP,
          lambda d: (lambda c: (str(c["steps"][-1]["cycles"]), f"{c['steps'][-1]['mac_utilization'] * 100:.1f}",
                                str(c["groups"]), str(SGD_S(_load(CHIP))["cycles"]),
                                f"{SGD_S(_load(CHIP))['mac_utilization'] * 100:.1f}"))(CP_S(d, backward="separate")),
          lambda v: v),
    Quote("docs/training.md", r"On chip-small, 64-64-64-10 with the softmax takes (\d+)\s+cycles \((\S+) %\)", CP,
          lambda d: (lambda s: (str(s["cycles"]), f"{s['mac_utilization'] * 100:.1f}"))(
              CP_S(d, preset="chip-small", sizes=(64, 64, 64, 10))["steps"][-1]), lambda v: v),
    Quote("docs/training.md", r"The fused backward step saves (\d+) cycles per step \((\S+) %\)", CP,
          lambda d: (lambda f, s: (str(s - f), f"{(s - f) / f * 100:.2f}"))(
              CP_S(d)["steps"][-1]["cycles"], CP_S(d, backward="separate")["steps"][-1]["cycles"]), lambda v: v),
    Quote("docs/training.md", r"Where the (\d+)\s+cycles go on the critical core \(a core of layer (\d), a (\d+) x (\d+)\s+panel",
          CP, lambda d: (lambda c: (str(c["steps"][-1]["cycles"]), str(c["critical_core_layer"]),
                                    str(c["panel_rows"][c["critical_core_layer"]]),
                                    str(c["panel_cols"][c["critical_core_layer"]])))(CP_S(d)), lambda v: v),
    Quote("docs/training.md", r"panel\): the fused `W\^T d` and update (\d+) %, the forward GEMV (\d+) %, the delta "
                              r"chains with\s+the GEMV's first rows merged (\d+) %,\s+the activation chains (\S+) %, "
                              r"the history copy (\S+) %, host I/O (\S+) %", CP,
          lambda d: (lambda b: tuple(f"{b[k]['share'] * 100:{f}}" for k, f in (
              ("W^T d + update, fused (backward)", ".0f"), ("GEMV W x (forward)", ".0f"),
              ("delta chains with forward GEMV rows (ring)", ".0f"), ("chains (ring)", ".1f"),
              ("history copies", ".1f"), ("host phases (x, t in; output out)", ".1f"))))(
              CP_S(d)["cycle_breakdown_critical_core"]), lambda v: v),
    Quote("docs/training.md", r"one\s+of layer (\d) \((\d+) x (\d+): GEMV (\d+) %, GEMV\^T (\d+) %, rank-1 (\d+) %\)", CP,
          lambda d: (lambda c, b: (str(c["critical_core_layer"]), str(c["panel_rows"][c["critical_core_layer"]]),
                                   str(c["panel_cols"][c["critical_core_layer"]]),
                                   *(f"{b[k]['share'] * 100:.0f}" for k in
                                     ("GEMV W x (forward)", "GEMV^T W^T d (backward)", "rank-1 update"))))(
              CP_S(d, backward="separate"), CP_S(d, backward="separate")["cycle_breakdown_critical_core"]), lambda v: v),
    Quote("docs/training.md", r"\(\[SGD's breakdown\]\(#sgd-across-the-cores-of-a-chip\):\s+(\d+) % ring collectives with "
                              r"nothing beside them, the transposed GEMVs at (\d+) %\)", CHIP,
          lambda d: (f"{_share(SGD_S(d), *RING_APART):.0f}", f"{_within(d, 'gemv_t'):.0f}"), lambda v: v),
    Quote("docs/training.md", r"the kernels the PEs: (\S+) %\), a ring-buffer", CP,
          lambda d: CP_S(d)["cycle_breakdown_critical_core"]["chains (ring)"]["share"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"persists across RUNs: (\S+) %\)", CP,
          lambda d: CP_S(d)["cycle_breakdown_critical_core"]["history copies"]["share"] * 100, "{:.1f}"),
    Quote("docs/training.md", r"groups `(\[[\d, ]+\])`, the\s+backward steps of layers 1 and 2 separate, pages every "
                              r"hidden layer \((\d), (\d) and (\d) pages per\s+core\) and swaps them in the updates "
                              r"\(below\): \*\*([\d,]+) cycles per step, (\S+) % MAC\s+utilization\*\* \(([\d,]+) with "
                              r"`page_swap=False`, each page's moves in their own loops\),\s+against paged SGD's ([\d,]+)", CP,
          lambda d: (lambda c, off: (str(c["groups"]), *(str(c["spad_pages"][k]) for k in ("0", "1", "2")),
                                     f"{c['steps'][-1]['cycles']:,}", f"{c['steps'][-1]['mac_utilization'] * 100:.1f}",
                                     f"{off['steps'][-1]['cycles']:,}", f"{SGD_PAGED(_load(CHIP))['cycles']:,}"))(
              CP_S(d, sizes=PAGED_NET), CP_S(d, sizes=PAGED_NET, swap=False)), lambda v: v),
    Quote("docs/training.md", r"network at S above,\s+([\d,]+) -> ([\d,]+) cycles per step\. At the reference", CP,
          lambda d: tuple(f"{CP_S(d, sizes=PAGED_NET, swap=w)['steps'][-1]['cycles']:,}" for w in (False, True)),
          lambda v: v),
    Quote("docs/training.md", r"minibatch-GD\s+\((\d+)\) and CP", CHIP_MB, ("reference", "gflops_per_w")),
    Quote("docs/training.md", r"(\d+) cycles at `b = 4` \(groups `(\[[\d, ]+\])`, (\S+) % MAC utilization\) and (\d+) at\s+"
                              r"`b = 8` \(`(\[[\d, ]+\])`: head (\d+), tail (\d+) including chains (\d+), host (\d+);\s+(\S+) %\)",
          CP, lambda d: (lambda c4, c8: (str(c4["steps"][-1]["cycles"]), str(c4["groups"]),
                                         f"{c4['steps'][-1]['mac_utilization'] * 100:.1f}", str(c8["steps"][-1]["cycles"]),
                                         str(c8["groups"]), *(str(c8["runs"][k]) for k in ("head", "tail", "chains", "host")),
                                         f"{c8['steps'][-1]['mac_utilization'] * 100:.1f}"))(
              CP_S(d, loss="mse", batch=4), CP_S(d, loss="mse", batch=8)), lambda v: v),
    Quote("docs/training.md", r"on chip-small, 64-64-64-10 at `b = 8` takes (\d+) \((\S+) %\)", CP,
          lambda d: (lambda s: (str(s["cycles"]), f"{s['mac_utilization'] * 100:.1f}"))(
              CP_S(d, preset="chip-small", sizes=(64, 64, 64, 10), loss="mse", batch=8)["steps"][-1]), lambda v: v),
    Quote("docs/training.md", r"Where the (\d+) cycles go on the\s+critical core \(layer (\d), a (\d+) x (\d+) panel\): "
                              r"forward GEMM (\d+) %, the update GEMM (\d+) %", CP,
          lambda d: (lambda c, b: (str(c["steps"][-1]["cycles"]), str(c["critical_core_layer"]),
                                   str(c["panel_rows"][c["critical_core_layer"]]),
                                   str(c["panel_cols"][c["critical_core_layer"]]),
                                   f"{b['GEMM (forward W A; backward D^T W)']['share'] * 100:.0f}",
                                   f"{b['GEMM update W += D A^T']['share'] * 100:.0f}"))(
              CP_S(d, loss="mse", batch=8), CP_S(d, loss="mse", batch=8)["cycle_breakdown_critical_core"]), lambda v: v),
    Quote("docs/training.md", r"words per chain\), transposes (\S+) %, chains (\S+) %, host I/O (\S+) %", CP,
          lambda d: (lambda c, b: tuple(f"{b[k]['cycles'] / c['steps'][-1]['cycles'] * 100:.1f}" for k in
                                        ("transposes (history, D)", "chains (ring)", "host phases (x, t in; output out)")))(
              CP_S(d, loss="mse", batch=8), CP_S(d, loss="mse", batch=8)["cycle_breakdown_critical_core"]), lambda v: v),
]

GRADE8 = ", LFE5UM5G-85F-8 (ecp55gevn)"
