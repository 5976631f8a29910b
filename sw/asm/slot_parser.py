"""Recursive-descent parser of one slot of assembly text.

:class:`_SlotParser` turns the tokens of one ``|``-separated slot into :class:`Slot`
objects (a leading predicate becomes a slot of its own), evaluating constant
expressions with the ``.equ`` definitions in force; :data:`_HANDLERS` maps each
operation keyword to its parse method.
"""

from __future__ import annotations

from arch.microop import Gate, Src

from sw.asm.errors import AsmError
from sw.asm.operands import (_AGU_RE, _AR_RE, _DIRS, _DMA_OPS, _DMA_SEL, _GATES, _REG_RE, _SPAD_SEL, _SRC_HELP,
                             _SRC_WORDS, _WB_DST, _seg_of)
from sw.asm.slots import (Slot, _ctl, _drv, _fpu, _read, _write, ar_add, ar_set, ar_stride, hin, hout, mask, mov, nop,
                          pred, raw, relu, rin, rout, sin, sout, dma)


class _SlotParser:
    """Recursive-descent parser of one slot's tokens."""

    def __init__(self, toks, equ, file, slot_no):
        self.t, self.i, self.equ, self.file, self.slot_no = toks, 0, equ, file, slot_no

    # -- token helpers
    def err(self, msg, tok=None):
        tok = tok or (self.t[self.i] if self.i < len(self.t) else self.t[-1])
        return AsmError(msg, tok.line, tok.col, self.slot_no, self.file)

    def peek(self, k=0):
        j = self.i + k
        return self.t[j] if j < len(self.t) else None

    def at(self, *texts, k=0):
        p = self.peek(k)
        return p is not None and p.text in texts

    def next(self, what="more"):
        if self.i >= len(self.t):
            last = self.t[-1]
            raise AsmError(f"unexpected end of slot: expected {what}", last.line,
                           None if last.col is None else last.col + len(last.text), self.slot_no,
                           self.file)
        tok = self.t[self.i]
        self.i += 1
        return tok

    def expect(self, text, what=None):
        tok = self.next(repr(text))
        if tok.text != text:
            raise self.err(f"expected {what or repr(text)}, got {tok.text!r}", tok)
        return tok

    def end(self):
        if self.i < len(self.t):
            raise self.err(f"unexpected {self.t[self.i].text!r} at the end of the slot")

    def alias(self, tok) -> str:
        """Name token text with .equ aliases resolved."""
        text = tok.text
        v = self.equ.get(text)
        return v if isinstance(v, str) else text

    # -- operands
    def src(self) -> int:
        tok = self.next("a source operand")
        if tok.text == "-" and self.at("0"):
            self.next()
            return Src.NZERO
        if tok.kind == "num":
            if tok.value == 0:
                return Src.ZERO
            if tok.value == 1:
                return Src.ONE
            raise self.err(f"unknown source operand {tok.text!r} (sources: {_SRC_HELP})", tok)
        if tok.kind == "name":
            name = self.alias(tok)
            if name in _SRC_WORDS:
                return _SRC_WORDS[name]
            m = _REG_RE.match(name)
            if m:
                r = int(m.group(1))
                if r >= 16:
                    raise self.err(f"register {name} does not exist (at most r0..r15)", tok)
                return r
        raise self.err(f"unknown source operand {tok.text!r} (sources: {_SRC_HELP})", tok)

    def dst(self):
        """FMA destination: a register or mema/memb (SRAM write-back)."""
        tok = self.peek()
        if tok is not None and tok.kind == "name" and self.alias(tok) in _WB_DST:
            self.next()
            return self.alias(tok)
        return self.reg()

    def reg(self) -> int:
        tok = self.next("a register")
        m = _REG_RE.match(self.alias(tok)) if tok.kind == "name" else None
        if not m:
            raise self.err(f"expected a destination register r0..r15, got {tok.text!r}", tok)
        r = int(m.group(1))
        if r >= 16:
            raise self.err(f"register r{r} does not exist (at most r0..r15)", tok)
        return r

    def named(self, regex, what):
        tok = self.next(what)
        m = regex.match(self.alias(tok)) if tok.kind == "name" else None
        if not m:
            raise self.err(f"expected {what}, got {tok.text!r}", tok)
        return int(m.group(1)), tok

    def ident(self, what):
        tok = self.next(what)
        if tok.kind != "name" or tok.text.startswith("."):
            raise self.err(f"expected {what}, got {tok.text!r}", tok)
        return tok.text

    # -- expressions: | << >> | + - | * / % | unary | atom
    def expr(self):
        v = self.additive()
        while self.at("<<", ">>"):
            op = self.next().text
            r = self.additive()
            if r < 0:
                raise self.err("negative shift count")
            v = v << r if op == "<<" else v >> r
        return v

    def additive(self):
        v = self.term()
        while self.at("+", "-"):
            op = self.next().text
            r = self.term()
            v = v + r if op == "+" else v - r
        return v

    def term(self):
        v = self.unary()
        while self.at("*", "/", "%"):
            tok = self.next()
            r = self.unary()
            if tok.text != "*" and r == 0:
                raise self.err("division by zero", tok)
            v = v * r if tok.text == "*" else (v // r if tok.text == "/" else v % r)
        return v

    def unary(self):
        if self.at("-"):
            self.next()
            return -self.unary()
        if self.at("+"):
            self.next()
            return self.unary()
        return self.atom()

    def atom(self):
        tok = self.next("a number")
        if tok.kind == "num":
            return tok.value
        if tok.text == "(":
            v = self.expr()
            self.expect(")")
            return v
        if tok.kind == "name":
            if tok.text in self.equ:
                v = self.equ[tok.text]
                if isinstance(v, int):
                    return v
                raise self.err(f"{tok.text!r} is an operand alias ({v}), not a number", tok)
            raise self.err(f"undefined constant {tok.text!r}", tok)
        raise self.err(f"expected a number, got {tok.text!r}", tok)

    def number(self, what="a number"):
        if self.peek() is None:
            self.next(what)
        return self.expr()

    # -- composite operands
    def address(self, port):
        """``[arN (+ gK) (+- expr)...]`` then optional ``++``."""
        self.expect("[", "'[' (an address such as [ar0 + g1 + 4])")
        first = self.peek()
        ar = agu = None
        off = 0
        while True:
            sign = 1
            if self.at("+", "-"):
                sign = 1 if self.next().text == "+" else -1
            tok = self.peek()
            if tok is None:
                self.next("']'")
            name = self.alias(tok) if tok.kind == "name" else None
            if name and _AR_RE.match(name):
                self.next()
                if ar is not None:
                    raise self.err("an address has one address register", tok)
                if sign < 0:
                    raise self.err(f"cannot subtract {name}", tok)
                ar = int(_AR_RE.match(name).group(1))
            elif name and _AGU_RE.match(name):
                self.next()
                if agu is not None:
                    raise self.err("an address adds at most one address generator", tok)
                if sign < 0:
                    raise self.err(f"cannot subtract {name}", tok)
                agu = int(_AGU_RE.match(name).group(1))
            else:
                off += sign * self.term()
            if self.at("]"):
                self.next()
                break
            if not self.at("+", "-"):
                raise self.err("expected '+', '-' or ']' in the address")
        if ar is None:
            raise self.err("the address needs an address register (e.g. [ar0 + 4])", first)
        inc = 0
        if self.at("++"):
            self.next()
            inc = 1
        return ar, agu, off, inc

    def modulus(self):
        """Optional ``%M`` after a selector name."""
        if not self.at("%"):
            return None
        self.next()
        tok = self.peek()
        m = self.unary()
        try:
            _seg_of(m)
        except AsmError as e:
            raise self.err(e.msg, tok) from None
        return m

    def drv_sel(self, bus):
        allowed = ("col", "diag") if bus == "rdrv" else ("row", "diag")
        tok = self.expect("@", f"@{allowed[0]}=k or @diag=k")
        name = self.ident(f"{allowed[0]} or diag")
        if name not in allowed:
            raise self.err(f"{bus} selects its driver with @{allowed[0]}=k or @diag=k, not @{name}", tok)
        mod = self.modulus()
        if mod is not None and name == "diag":
            raise self.err(f"a segmented {bus} selects its drivers by {allowed[0]} index, not diag", tok)
        self.expect("=")
        return name, self.number(), mod

    # -- the slot
    def parse(self) -> list[Slot]:
        out = []
        if self.at("@"):
            col = self.peek().col
            out.append(self.predicate())
            out[-1].col = col
            if self.peek() is None:
                return out
        head = self.next("an operation")
        op = head.text
        handler = _HANDLERS.get(op)
        if handler is None:
            name = self.alias(head) if head.kind == "name" else ""
            if _AR_RE.match(name):
                handler = _SlotParser.p_arop
            else:
                raise self.err(f"unknown operation {op!r}", head)
        s = handler(self, op)
        self.end()
        s.col = head.col
        out.append(s)
        return out

    def predicate(self):
        self.expect("@")
        tok = self.peek()
        name = self.ident("all, col=k, row=k or diag=k")
        if name == "all":
            if self.at("writes"):
                raise self.err("@all writes selects every PE: drop 'writes'", self.peek())
            return pred("all")
        if name not in ("col", "row", "diag"):
            raise self.err(f"unknown predicate @{name} (@all, @col=k, @row=k, @diag=k)", tok)
        mod = self.modulus()
        self.expect("=")
        k = self.number()
        writes = self.at("writes")
        if writes:
            self.next()
        return pred(name, k, mod, writes=writes)

    def p_nop(self, op):
        return nop()

    def p_fpu(self, op):
        d = self.dst()
        if op == "mac":
            self.expect("+=")
            a = self.src()
            self.expect("*")
            return _fpu(op, d, a, self.src(), d)
        self.expect("=")
        a = self.src()
        if op == "add":
            self.expect("+")
            return _fpu(op, d, a, Src.ONE, self.src())
        self.expect("*")
        b = self.src()
        if op == "mul":
            return _fpu(op, d, a, b, Src.NZERO)
        self.expect("+")
        return _fpu(op, d, a, b, self.src())

    def p_mv(self, op):
        d = self.reg()
        self.expect("=")
        s = self.src()
        if op == "mask":
            self.expect("if", "'if' (mask rD = src if msk)")
            return mask(d, s, self.src())
        return (mov if op == "mov" else relu)(d, s)

    def p_drv(self, op):
        s = self.src()
        sel, k, mod = self.drv_sel(op)
        return _drv(op, s, sel, k, mod)

    def p_read(self, op):
        port = {"rda": "ra", "rdb": "rb"}[op]
        ar, agu, off, inc = self.address(port)
        gate = Gate.ALL
        read = True
        if self.at("noread"):
            self.next()
            read = False
        if self.at("gate"):
            self.next()
            self.expect("=")
            tok = self.peek()
            g = self.ident("a read gate")
            if g not in _GATES:
                raise self.err(f"unknown read gate {g!r} (all, pred, rdrv, cdrv)", tok)
            gate = _GATES[g]
        return _read(port, ar, off, inc, agu, gate, read)

    def p_write(self, op):
        port = {"wra": "wa", "wrb": "wb"}[op]
        ar, agu, off, inc = self.address(port)
        self.expect("=")
        return _write(port, self.src(), ar, off, inc, agu)

    def p_arop(self, op):
        self.i -= 1
        idx, _ = self.named(_AR_RE, "an address register")
        tok = self.next("'=', '+=' or '-='")
        if tok.text == "=":
            return ar_set(idx, self.number())
        if tok.text in ("+=", "-="):
            v = self.number()
            return ar_add(idx, v if tok.text == "+=" else -v)
        raise self.err(f"expected '=', '+=' or '-=' after ar{idx}, got {tok.text!r}", tok)

    def p_stride(self, op):
        idx, _ = self.named(_AR_RE, "an address register")
        self.expect("=")
        return ar_stride(idx, self.number())

    def p_host(self, op):
        tok = self.peek()
        d = self.ident("row or col")
        if d not in _DIRS:
            raise self.err(f"{op} direction must be row or col, got {d!r}", tok)
        if op == "hin":
            return hin(d)
        if op == "rin":
            return rin(d)
        if op == "rout":
            return rout(d)
        if op == "sin":
            return sin(d)
        if op == "sout":
            return sout(d)
        last = False
        if self.at("last"):
            self.next()
            last = True
        return hout(d, last)

    def p_loop(self, op):
        tok = self.peek()
        name = self.ident("a loop name")
        if name == "level":
            raise self.err("'level' is reserved and cannot name a loop", tok)
        count = self.number("a trip count")
        level = None
        if self.at("level"):
            self.next()
            self.expect("=")
            level = self.number("a loop level")
        return _ctl("loop", name, count, level)

    def p_agu(self, op):
        k, _ = self.named(_AGU_RE, "an address generator g0..g6")
        if self.at("stride"):
            self.next()
            if self.at("level"):
                self.next()
                ref = self.number("a loop level")
            else:
                ref = self.ident("a loop name or 'level N'")
            self.expect("=")
            return _ctl("agu_stride", k, ref, self.number())
        self.expect("=", "'=' or 'stride'")
        return _ctl("agu_base", k, self.number())

    def p_jump(self, op):
        return _ctl("jump", self.ident("a label"))

    def p_spad(self, op):
        tok = self.peek()
        which = self.ident("rd, wr or rw")
        if which not in _SPAD_SEL:
            raise self.err(f"spad pointer must be rd, wr or rw, got {which!r}", tok)
        self.expect("=")
        return _ctl("spad", which, self.number("a scratchpad address"))

    def p_dma(self, op):
        tok = self.peek()
        what = self.ident("load, store, wait, dram, spad or both")
        if what in _DMA_SEL:
            self.expect("=")
            return dma(what, self.number("an address"))
        if what == "wait":
            tok = self.peek()
            if tok is None or tok in ("|", "{"):
                return dma(what)
            n = self.number("the transfers kept outstanding")
            try:
                return dma(what, n)
            except AsmError as e:
                raise self.err(e.msg, tok) from None
        if what not in _DMA_OPS:
            raise self.err(f"dma must be load, store, wait, dram, spad or both, got {what!r}", tok)
        tok = self.peek()
        n = self.number("a beat count")
        try:
            return dma(what, n)
        except AsmError as e:
            raise self.err(e.msg, tok) from None

    def p_halt(self, op):
        return _ctl("halt")

    def p_raw(self, op):
        fields = {}
        if self.peek() is None:
            raise self.err("raw needs field=value pairs")
        while self.peek() is not None:
            tok = self.peek()
            name = self.ident("a field name")
            self.expect("=")
            if name in fields:
                raise self.err(f"raw sets {name} twice", tok)
            fields[name] = self.number()
            if self.at(","):
                self.next()
        s = raw(**fields)
        return s


_HANDLERS = {
    "nop": _SlotParser.p_nop,
    "fma": _SlotParser.p_fpu, "mac": _SlotParser.p_fpu, "mul": _SlotParser.p_fpu, "add": _SlotParser.p_fpu,
    "mov": _SlotParser.p_mv, "relu": _SlotParser.p_mv, "mask": _SlotParser.p_mv,
    "rdrv": _SlotParser.p_drv, "cdrv": _SlotParser.p_drv,
    "rda": _SlotParser.p_read, "rdb": _SlotParser.p_read,
    "wra": _SlotParser.p_write, "wrb": _SlotParser.p_write,
    "stride": _SlotParser.p_stride,
    "hin": _SlotParser.p_host, "hout": _SlotParser.p_host,
    "rin": _SlotParser.p_host, "rout": _SlotParser.p_host,
    "sin": _SlotParser.p_host, "sout": _SlotParser.p_host, "spad": _SlotParser.p_spad,
    "dma": _SlotParser.p_dma,
    "loop": _SlotParser.p_loop, "agu": _SlotParser.p_agu, "jump": _SlotParser.p_jump,
    "halt": _SlotParser.p_halt, "raw": _SlotParser.p_raw,
}
