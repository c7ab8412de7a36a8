"""VM speed: instructions per second of a VM-only loop, and the cost of an empty exported call.

    python bench/vm.py [--iterations N]

The loop (no HAL calls) is written in irtk's VM assembly: a counting loop whose body does
integer arithmetic (add, xor, shift), float arithmetic (an int-to-float cast, f32 multiply and
add, f64 multiply and add) and a compare-and-branch. The empty call is `m.noop()` through the
Python runtime API (argument checks, the VM call, result conversion). Targets (docs/vm.md):
at least 5 million instructions per second and at most 20 microseconds per empty call. Both are
printed twice: by the wall clock and by the process's CPU time (the two agree on an idle
machine; the CPU time stays meaningful on a busy one).
"""
from __future__ import annotations

import argparse
import statistics
import time

from irtk.modules.hal import HalModule
from irtk.runtime import LoadedModule
from irtk.vm import Context, load_module
from irtk.vm.assembler import assemble

LOOP = """
module @bench

export @loop = @loop
export @noop = @noop

func @loop "0i_iF" registers(i32 6, f32 3, f64 3) {
    i32:1 = const.i32 0               // i
    i32:2 = const.i32 0               // integer accumulator
    i32:3 = const.i32 1
    f32:0 = const.f32 0.0             // f32 accumulator
    f32:1 = const.f32 0.5
    f64:0 = const.f64 0.0             // f64 accumulator
    f64:1 = const.f64 0.25
    br ^loop
^loop:
    i32:2 = add.i32 i32:2, i32:1
    i32:4 = shl.i32 i32:1, i32:3
    i32:2 = xor.i32 i32:2, i32:4
    f32:2 = cast.si32.f32 i32:1
    f32:0 = mul.f32 f32:0, f32:1
    f32:0 = add.f32 f32:0, f32:2
    f64:2 = cast.f32.f64 f32:0
    f64:0 = mul.f64 f64:0, f64:1
    f64:0 = add.f64 f64:0, f64:2
    i32:1 = add.i32 i32:1, i32:3
    i32:5 = cmp.lt.s.i32 i32:1, i32:0
    cond_br i32:5, ^loop, ^done
^done:
    return (i32:2, f64:0)
}

func @noop "0v_v" {
    return ()
}
"""
PROLOGUE = 8        # instructions before the loop (7 constants and the br)
BODY = 12           # instructions per iteration
EPILOGUE = 1


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}


def instructions_per_second(iterations: int, clock: str, repeats: int = 5) -> float:
    """Best of `repeats` runs of the loop, by the wall clock or by this process's CPU time."""
    ctx = Context(load_module(assemble(LOOP)))
    executed = PROLOGUE + BODY * iterations + EPILOGUE
    now = CLOCKS[clock]
    times = []
    for _ in range(repeats):
        start = now()
        ctx.call("loop", [iterations])
        times.append(now() - start)
    return executed / min(times)


def empty_call_seconds(clock: str, calls: int = 20000) -> float:
    """Median over 5 batches of the time of one `m.noop()` through the runtime API."""
    from irtk.hal import registry
    device = registry.get_device("local-sync")
    module = load_module(assemble(LOOP))
    m = LoadedModule(Context(module, [HalModule(device)]), device)
    noop = m.noop
    now = CLOCKS[clock]
    samples = []
    for _ in range(5):
        start = now()
        for _ in range(calls):
            noop()
        samples.append((now() - start) / calls)
    return statistics.median(samples)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=200_000)
    args = p.parse_args()
    # CPU time is what the VM costs; on a busy machine the wall clock also counts the time
    # other processes held the cores.
    for clock in ("wall", "cpu"):
        rate = instructions_per_second(args.iterations, clock)
        call = empty_call_seconds(clock)
        print(f"VM loop ({clock:4}):             {rate / 1e6:6.2f} M instructions/s "
              "(target >= 5)")
        print(f"empty exported call ({clock:4}): {call * 1e6:6.2f} us "
              "                (target <= 20)")


if __name__ == "__main__":
    main()
