"""Host side of the core's AXI4-Stream protocol (``docs/core.md``, "Host interface"):
build command beat streams and decode what the core sends back."""

from __future__ import annotations

from arch.host import Cmd
from arch.counters import counter_names
from arch.isa import instr_layout
from arch.errors import InputError

__all__ = ["header", "load_beats", "load_beat_count", "load_plan", "load_plan_cycles", "load_plan_writes",
           "steady_reload", "run_beats", "counters_beats", "clear_beats", "decode_counters", "ProtocolError"]


class ProtocolError(InputError):
    """A command does not fit the protocol, or a reply is malformed."""


def header(cmd: int, arg0: int = 0, arg1: int = 0) -> int:
    if not 0 <= arg0 < (1 << 16) or not 0 <= arg1 < (1 << 12):
        raise ProtocolError(f"header arguments out of range: arg0={arg0} (16 bits), arg1={arg1} (12 bits)")
    return (cmd & 0xF) | (arg0 << 4) | (arg1 << 20)


#: the most words one LOAD command carries (its length field: 12 bits, 0 meaning 4096)
LOAD_CHUNK = 4096


def _beats_per_word(cfg) -> int:
    return -(-instr_layout(cfg).size // cfg.host_width)


def load_beats(cfg, words, addr: int = 0) -> list[int]:
    """LOAD commands for microcode ``words`` (ints) at ``addr`` (split into
    <= :data:`LOAD_CHUNK`-word chunks)."""
    words = [int(w) for w in words]
    bits = instr_layout(cfg).size
    hw = cfg.host_width
    bpw = _beats_per_word(cfg)
    if addr < 0 or addr + len(words) > cfg.ucode_depth:
        raise ProtocolError(f"program of {len(words)} words at {addr} does not fit the "
                            f"{cfg.ucode_depth}-word microcode memory")
    out = []
    for start in range(0, len(words), LOAD_CHUNK):
        chunk = words[start:start + LOAD_CHUNK]
        out.append(header(Cmd.LOAD, addr + start, len(chunk) % LOAD_CHUNK))
        for wd in chunk:
            if not 0 <= wd < (1 << bits):
                raise ProtocolError(f"microcode word {wd:#x} is wider than {bits} bits")
            out += [(wd >> (k * hw)) & ((1 << hw) - 1) for k in range(bpw)]
    return out


def load_beat_count(cfg, n_words: int) -> int:
    """Beats (host stream cycles, one beat per cycle) of :func:`load_beats` for
    ``n_words`` words: one header per <=4096-word chunk, ``ceil(instr_bits /
    host_width)`` beats per word."""
    return -(-n_words // LOAD_CHUNK) + n_words * _beats_per_word(cfg)


def _same(a, b) -> bool:
    return a is b or (a is not None and b is not None and list(a) == list(b))


def load_plan(cfg, images, loaded) -> list:
    """The LOAD streams that take every core ``k`` from microcode ``loaded[k]`` (None:
    unknown) to ``images[k]`` (loaded at address 0): ``[(dest, words)]``, ``dest`` a
    core or None for a broadcast (``tdest`` all ones, ``docs/chip.md``). The cores share
    one host stream, so the streams go one after another. A broadcast of an image
    writes every core; it is used when it needs fewer beats than loading each changed
    core on its own (the cores it overwrites with another image then load theirs)."""
    n = len(images)
    need = [k for k in range(n) if not _same(loaded[k], images[k])]
    if not need:
        return []
    uni = [(k, list(images[k])) for k in need]
    best, best_cost = uni, load_plan_cycles(cfg, uni)
    groups: dict = {}
    for k in need:
        groups.setdefault(tuple(images[k]), []).append(k)
    for key, ks in groups.items():
        if len(ks) < 2:
            continue
        rest = [(k, list(images[k])) for k in range(n) if tuple(images[k]) != key]
        cost = load_beat_count(cfg, len(key)) + load_plan_cycles(cfg, rest)
        if cost < best_cost:
            best, best_cost = [(None, list(key))] + rest, cost
    return best


def load_plan_cycles(cfg, plan) -> int:
    """Host stream cycles of a :func:`load_plan` (one beat per cycle)."""
    return sum(load_beat_count(cfg, len(w)) for _, w in plan)


def load_plan_writes(plan, cores: int) -> int:
    """Microcode words a :func:`load_plan` writes, summed over the cores (a broadcast
    writes every core)."""
    return sum(len(w) * (cores if dest is None else 1) for dest, w in plan)


def steady_reload(cfg, runs) -> tuple[int, int]:
    """``(host stream cycles, microcode words written summed over the cores)`` of the
    LOADs of one step in steady state: ``runs`` are the per-core images of the step's
    RUNs in order, and the step after it starts where this one ends (so the last RUN's
    images are loaded when the first RUN begins)."""
    cycles = words = 0
    loaded = list(runs[-1]) if runs else []
    for imgs in runs:
        plan = load_plan(cfg, imgs, loaded)
        cycles += load_plan_cycles(cfg, plan)
        words += load_plan_writes(plan, len(imgs))
        loaded = list(imgs)
    return cycles, words


def run_beats(pc: int = 0, data=()) -> list[int]:
    """A RUN command followed by the data beats its ``hin`` instructions consume."""
    return [header(Cmd.RUN, pc)] + [int(d) for d in data]


def counters_beats() -> list[int]:
    return [header(Cmd.COUNTERS)]


def clear_beats() -> list[int]:
    return [header(Cmd.CLEAR)]


def decode_counters(cfg, beats) -> dict:
    """Counter values from the beats of a COUNTERS reply (ints or (data, last) pairs)."""
    names = counter_names(cfg)
    hw = cfg.host_width
    per = -(-64 // hw)
    data = [b[0] if isinstance(b, (tuple, list)) else int(getattr(b, "data", b)) for b in beats]
    if len(data) != per * len(names):
        raise ProtocolError(f"expected {per * len(names)} counter beats, got {len(data)}")
    out = {}
    for i, name in enumerate(names):
        v = 0
        for k in range(per):
            v |= data[i * per + k] << (k * hw)
        out[name] = v & ((1 << 64) - 1)
    return out
