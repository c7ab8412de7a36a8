"""Device commands batched into segments, with barriers only where commands depend.

Fills, copies and dispatches are collected into a segment (one command buffer); a barrier goes
in only before a command that touches a storage an earlier command of the segment wrote (or
writes one it read). The segment is submitted when its block ends, waiting on the fence of the
submission before it (the fence chain), so the device keeps program order across blocks while
the host moves on; the host waits only when it needs data (`sync`). A segment of static
dispatches, fills and copies only is recorded once by `__init` and re-submitted with a binding
table (the buffers of this call); any other is recorded into a new command buffer per call.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from irtk.compiler import tir
from irtk.compiler.host_function import HostFunction
from irtk.compiler.module_context import ModuleContext
from irtk.compiler.stream import StreamPlan
from irtk.vm.writer import Label, Reg


@dataclass
class Command:
    """One device command of the open segment: the operands of its direct call (after the
    command buffer), and for a dispatch what recording it once needs."""

    kind: str                                   # barrier | fill | copy | dispatch
    regs: list[Reg] = field(default_factory=list)
    segments: list[int] = field(default_factory=list)
    ordinal: int = -1
    bindings: list[tuple[int, Reg, int]] = field(default_factory=list)  # (binding, buffer, bytes)
    reusable: bool = False
    pattern: tuple[int, int] = (0, 0)            # a fill's (pattern, pattern length)


class CommandBatching(HostFunction):
    def __init__(self, module: ModuleContext, function: tir.Function, plan: StreamPlan) -> None:
        super().__init__(module, function, plan)
        self.pending: list[Command] = []
        # The fence of the last submission not yet waited on (null when none), in a fixed
        # register so that it crosses blocks (`chain`); `chain_idle` is True where it is
        # known null.
        self._chain: Reg | None = None
        self.chain_idle = True
        self.written: set[int] = set()   # storages the open segment writes
        self.read: set[int] = set()      # storages the open segment reads

    def start_chain(self) -> None:
        """Give the fence chain its register, null. A function calls this once its arguments
        have their registers, which come first in each bank."""
        self._chain = self.new("ref")
        self.b.emit("const.ref.null", self._chain)

    @property
    def chain(self) -> Reg:
        """The register of the fence chain (`start_chain`)."""
        if self._chain is None:
            raise ValueError("the fence chain is used before start_chain")
        return self._chain

    def record(self, command: Command, reads: set[int], writes: set[int]) -> None:
        """Add `command`, which reads and writes the given storages, to the open segment:
        after a barrier if it touches what earlier commands wrote (or writes what they
        read)."""
        if (reads | writes) & self.written or writes & self.read:
            self.pending.append(Command("barrier"))
            self.written.clear()
            self.read.clear()
        self.read |= reads
        self.written |= writes
        self.pending.append(command)

    # -- blocks end segments -------------------------------------------------------------------
    def bind(self, label: Label) -> None:
        """Start a block: constants of other blocks do not dominate it."""
        if not self.terminated:
            self.flush()
            self.b.emit("br", label)
        self.b.bind(label)
        self.consts.clear()
        self.terminated = False
        self.chain_idle = False   # a predecessor may have left a submission in flight

    def br(self, label: Label) -> None:
        self.flush()
        self.b.emit("br", label)
        self.terminated = True

    # -- submission ------------------------------------------------------------------------------
    def flush(self) -> None:
        """Submit the segment's commands without waiting: each submission waits on the one
        before it (the fence chain), so the device keeps program order while the host moves
        on to the next block."""
        if not self.pending:
            return
        commands, self.pending = self.pending, []
        self.written.clear()
        self.read.clear()
        dev = self.device()
        fence = self.new("ref")
        self.call("hal.fence.create", [dev, self.const("i32", 0)], [fence])
        if all(c.kind == "barrier" or c.reusable for c in commands):
            self.submit_recorded(commands, dev, self.chain, fence)
        else:
            self.submit_direct(commands, dev, fence)
        self.b.emit("mov.ref", self.chain, fence)
        self.chain_idle = False

    def sync(self) -> None:
        """Submit what is pending and wait for every submission: the host needs data."""
        self.flush()
        if self.chain_idle:
            return
        status = self.new("i32")
        self.call_variadic("hal.fence.await", [1], [self.const("i32", -1), self.chain], [status])
        self.b.emit("const.ref.null", self.chain)
        self.chain_idle = True

    def submit_direct(self, commands: list[Command], dev: Reg, fence: Reg) -> None:
        """Record the commands into a new command buffer and submit it."""
        cmd = self.new("ref")
        zero, one = self.const("i32", 0), self.const("i32", 1)
        self.call("hal.command_buffer.create", [dev, one, one, zero], [cmd])
        for c in commands:
            if c.kind == "barrier":
                self.call("hal.command_buffer.execution_barrier", [cmd, zero, zero, zero], [])
            elif c.kind == "dispatch":
                self.call_variadic("hal.command_buffer.dispatch", c.segments, [cmd, *c.regs], [])
            else:
                self.call(f"hal.command_buffer.{c.kind}_buffer", [cmd, *c.regs], [])
        self.call("hal.command_buffer.finalize", [cmd], [])
        self.call_variadic("hal.device.queue.execute", [1],
                           [dev, self.const("i64", -1), self.chain, fence, cmd], [])

    def submit_recorded(self, commands: list[Command], dev: Reg, wait: Reg,
                        fence: Reg) -> None:
        """Submit the command buffer `__init` records for these commands, with this call's
        buffers in its binding table. A constant's buffer is bound in the recording itself
        (the module's global, made before `__init` records), so a call neither loads nor
        passes it."""
        slots: list[Reg] = []
        recording: list[tuple] = []

        def source(buf: Reg) -> tuple[str, int]:
            """Where the recording takes `buf` from: ("global", g) or ("slot", i)."""
            if buf in self.constant_buffers:
                return ("global", self.constant_buffers[buf])
            if buf not in slots:
                slots.append(buf)
            return ("slot", slots.index(buf))

        for c in commands:
            if c.kind == "barrier":
                recording.append(("barrier",))
                continue
            bindings = [(binding, source(buf), length) for binding, buf, length in c.bindings]
            if c.kind == "fill":
                (_, target, length), = bindings
                recording.append(("fill", target, length, *c.pattern))
            elif c.kind == "copy":
                (_, src, length), (_, target, _) = bindings
                recording.append(("copy", src, target, length))
            else:
                recording.append(("dispatch", c.ordinal, bindings))
        cmd = self.new("ref")
        self.b.emit("global.load.ref", cmd, self.m.record_segment(recording, len(slots)))
        table: list[Reg] = []
        for buf in slots:
            table += [buf, self.const("i64", 0), self.const("i64", -1)]
        self.call_variadic("hal.device.queue.execute.indirect", [len(slots)],
                           [dev, self.const("i64", -1), wait, fence, cmd, *table], [])
