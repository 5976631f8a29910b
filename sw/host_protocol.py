"""Host side of the core's AXI4-Stream protocol (``docs/core.md``, "Host interface"):
build command beat streams and decode what the core sends back."""

from __future__ import annotations

from arch.host import Cmd
from arch.counters import counter_names
from arch.isa import instr_layout
from arch.errors import InputError

__all__ = ["header", "load_beats", "run_beats", "counters_beats", "clear_beats", "decode_counters",
           "ProtocolError"]


class ProtocolError(InputError):
    """A command does not fit the protocol, or a reply is malformed."""


def header(cmd: int, arg0: int = 0, arg1: int = 0) -> int:
    if not 0 <= arg0 < (1 << 16) or not 0 <= arg1 < (1 << 12):
        raise ProtocolError(f"header arguments out of range: arg0={arg0} (16 bits), arg1={arg1} (12 bits)")
    return (cmd & 0xF) | (arg0 << 4) | (arg1 << 20)


def load_beats(cfg, words, addr: int = 0) -> list[int]:
    """LOAD commands for microcode ``words`` (ints) at ``addr`` (split into <=4096-word chunks)."""
    words = [int(w) for w in words]
    bits = instr_layout(cfg).size
    hw = cfg.host_width
    bpw = -(-bits // hw)
    if addr < 0 or addr + len(words) > cfg.ucode_depth:
        raise ProtocolError(f"program of {len(words)} words at {addr} does not fit the "
                            f"{cfg.ucode_depth}-word microcode memory")
    out = []
    for start in range(0, len(words), 4096):
        chunk = words[start:start + 4096]
        out.append(header(Cmd.LOAD, addr + start, len(chunk) % 4096))
        for wd in chunk:
            if not 0 <= wd < (1 << bits):
                raise ProtocolError(f"microcode word {wd:#x} is wider than {bits} bits")
            out += [(wd >> (k * hw)) & ((1 << hw) - 1) for k in range(bpw)]
    return out


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
