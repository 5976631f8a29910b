"""Bulk access to a simulated memory from a cocotb test, through the simulator's own VPI.

cocotb's handles cost about 15 us per memory word (a handle object per word, value
conversions); these helpers call the IEEE 1800 VPI functions the simulator executable
exports (``vpi_handle_by_name``, ``vpi_handle_by_index``, ``vpi_put_value``,
``vpi_get_value``, ``vpi_free_object``: Verilator and Icarus both export them) with
:mod:`ctypes`, a few microseconds per word. Only inside a cocotb test (the simulator's
process); values are two-state (an X or Z bit raises).
"""

from __future__ import annotations

import ctypes

__all__ = ["available", "write_words", "read_words"]

VPI_VECTOR_VAL = 9      # vpiVectorVal
VPI_NO_DELAY = 1        # vpiNoDelay


class _VecVal(ctypes.Structure):
    _fields_ = [("aval", ctypes.c_uint32), ("bval", ctypes.c_uint32)]


class _Value(ctypes.Structure):
    _fields_ = [("format", ctypes.c_int32), ("vector", ctypes.POINTER(_VecVal))]


def _lib():
    lib = ctypes.CDLL(None)
    for name, res, args in (
        ("vpi_handle_by_name", ctypes.c_void_p, [ctypes.c_char_p, ctypes.c_void_p]),
        ("vpi_handle_by_index", ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_int32]),
        ("vpi_put_value", ctypes.c_void_p, [ctypes.c_void_p, ctypes.POINTER(_Value), ctypes.c_void_p,
                                            ctypes.c_int32]),
        ("vpi_get_value", None, [ctypes.c_void_p, ctypes.POINTER(_Value)]),
        ("vpi_free_object", ctypes.c_int32, [ctypes.c_void_p]),
    ):
        fn = getattr(lib, name)
        fn.restype, fn.argtypes = res, args
    return lib


def available() -> bool:
    """The simulator process exports the VPI functions these helpers call."""
    try:
        _lib()
    except (AttributeError, OSError):
        return False
    return True


def _memory(lib, path: str):
    h = lib.vpi_handle_by_name(path.encode(), None)
    if not h:
        raise LookupError(f"VPI: no object {path!r}")
    return h


def write_words(path: str, values, width: int) -> None:
    """Write ``values`` (ints of ``width`` bits) into words ``0..`` of memory ``path``
    (hierarchical name, e.g. ``dut.in_mem._path``), immediately (``vpiNoDelay``)."""
    lib = _lib()
    mem = _memory(lib, path)
    n_words = -(-width // 32)
    vec = (_VecVal * n_words)()
    val = _Value(VPI_VECTOR_VAL, vec)
    ref = ctypes.byref(val)
    for i, v in enumerate(values):
        for k in range(n_words):
            vec[k].aval, vec[k].bval = (v >> (32 * k)) & 0xFFFFFFFF, 0
        h = lib.vpi_handle_by_index(mem, i)
        if not h:
            raise IndexError(f"VPI: {path}[{i}] does not exist")
        lib.vpi_put_value(h, ref, None, VPI_NO_DELAY)
        lib.vpi_free_object(h)
    lib.vpi_free_object(mem)


def read_words(path: str, n: int, width: int) -> list[int]:
    """Words ``0..n-1`` of memory ``path`` as ints (``width`` bits)."""
    lib = _lib()
    mem = _memory(lib, path)
    n_words = -(-width // 32)
    mask = (1 << width) - 1
    val = _Value(VPI_VECTOR_VAL, None)
    ref = ctypes.byref(val)
    out = []
    for i in range(n):
        h = lib.vpi_handle_by_index(mem, i)
        if not h:
            raise IndexError(f"VPI: {path}[{i}] does not exist")
        val.format = VPI_VECTOR_VAL
        lib.vpi_get_value(h, ref)
        vec = val.vector
        v = 0
        for k in range(n_words):
            if vec[k].bval:
                raise ValueError(f"VPI: {path}[{i}] has X or Z bits")
            v |= vec[k].aval << (32 * k)
        out.append(v & mask)
        lib.vpi_free_object(h)
    lib.vpi_free_object(mem)
    return out
