"""The `irtk` command: devices, compile, run, dump, check, vm-as, vm-dis.

User errors (`irtk.Error`) print one message and exit 1, without a traceback. Nothing is
written unless it is complete: module files are written to a temporary name and renamed.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

from irtk.errors import CompileWarning, Error, InputError, VerificationError


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 2
    handler: Callable[[argparse.Namespace], int] = args.handler
    if args.verbose:
        import logging
        logging.basicConfig(level=logging.DEBUG if args.verbose > 1 else logging.INFO,
                            format="%(name)s: %(message)s", stream=sys.stderr)
    try:
        return handler(args)
    except Error as e:
        _clear_progress()
        print(_error_text(e), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1


def _error_text(e: Error) -> str:
    text = str(e)
    return text if ": error: " in text.split("\n", 1)[0] else f"irtk: error: {text}"


def _version_text() -> str:
    """irtk, the module format it writes and reads, the compiler's xDSL, the Vulkan loader."""
    import importlib.metadata

    from irtk import __version__
    from irtk.vm.isa import BYTECODE_VERSION
    try:
        xdsl = importlib.metadata.version("xdsl")
    except importlib.metadata.PackageNotFoundError:
        xdsl = "not installed"
    try:
        import vulkan as vk
        v = vk.vkEnumerateInstanceVersion()
        loader = f"{v >> 22 & 0x7F}.{v >> 12 & 0x3FF}.{v & 0xFFF}"
    except Exception:  # noqa: BLE001 - no loader library, or one without the entry point
        loader = "not found"
    return (f"irtk {__version__}\nmodule format: irtk bytecode version {BYTECODE_VERSION} "
            f"(not IREE's .vmfb)\nxDSL: {xdsl}\nVulkan loader: {loader}")


def _device_argument(parser: argparse.ArgumentParser) -> None:
    from irtk.hal import registry
    parser.add_argument("--device", default="local-task",
                        help=f"{', '.join(registry.driver_names())}, vulkan://N or vulkan://NAME")


def _keep_f64_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-f64", action="store_true",
                        help="compute f64 in f64; by default it is computed in f32, as IREE's "
                             "--iree-input-demote-f64-to-f32 does (devices without 64-bit "
                             "floats run it)")


def _vulkan_target_argument(parser: argparse.ArgumentParser, default: str | None = "default",
                            default_text: str = "default") -> None:
    from irtk.compiler.targets import VULKAN_PROFILES
    parser.add_argument("--vulkan-target", default=default,
                        help=f"Vulkan target profile: {', '.join(VULKAN_PROFILES)} "
                             f"(default: {default_text})")


def _parser() -> argparse.ArgumentParser:
    from irtk.compiler.target_backends import target_names
    targets = target_names()
    p = argparse.ArgumentParser(prog="irtk", description="Compile linalg MLIR to SPIR-V and VM "
                                "bytecode modules (.vmfb) and run them on Vulkan or the CPU.",
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--version", action="version", version=_version_text(),
                   help="print irtk's version, its module format and what it runs on")
    p.add_argument("-v", "--verbose", action="count", default=0,
                   help="log what irtk does to standard error (-v: phases and their times, "
                        "-vv: details)")
    sub = p.add_subparsers(dest="command")

    d = sub.add_parser("devices", help="list the drivers and devices irtk can use")
    d.add_argument("--json", action="store_true",
                   help="print a JSON list of device descriptions (as irtk.devices() gives)")
    d.set_defaults(handler=_cmd_devices)

    c = sub.add_parser("compile", help="compile an MLIR file (or an ONNX model) into a .vmfb "
                                       "module")
    c.add_argument("input", help="MLIR file ('-' for standard input), or an ONNX model (.onnx, "
                                 "with the onnx extra)")
    c.add_argument("-o", "--output", required=True,
                   help="module file to write ('-' for standard output)")
    c.add_argument("--target", default="vulkan-spirv",
                   help=f"{', '.join(targets)}, or a comma-separated list (default: vulkan-spirv)")
    _vulkan_target_argument(c)
    c.add_argument("--dump-after", metavar="PHASE",
                   help="print the IR after each listed phase (comma-separated): import, "
                        "const-eval, dispatch, stream, vm, or all")
    c.add_argument("--dump-spirv", metavar="DIR",
                   help="write each shader's SPIR-V binary (.spv) and disassembly (.spvasm)")
    _keep_f64_argument(c)
    c.add_argument("--no-const-eval", action="store_true",
                   help="run what depends only on constants at every call, instead of "
                        "computing it once at compile time (as IREE's --iree-opt-const-eval)")
    c.add_argument("--partial", action="store_true",
                   help="keep a function that fails to compile as a stub that fails when "
                        "called, instead of failing the compile (its errors are printed)")
    c.set_defaults(handler=_cmd_compile)

    im = sub.add_parser("import", help="import an ONNX model as linalg-on-tensors MLIR "
                                       "(with the onnx extra)")
    im.add_argument("input", help="ONNX model file (.onnx)")
    im.add_argument("-o", "--output", required=True,
                    help="MLIR file to write ('-' for standard output)")
    im.add_argument("--function", metavar="NAME",
                    help="name of the function the main graph becomes (default: the graph's)")
    im.set_defaults(handler=_cmd_import)

    r = sub.add_parser("run", help="run an exported function of a module")
    _module_arguments(r)
    r.add_argument("--output", action="append", default=[],
                   help="where a result goes, one per result in order: - (print), @y.npy, "
                        "@y.bin (raw bytes), +y.npy (append)")
    r.add_argument("--print_max_element_count", type=int, default=1024, metavar="N",
                   help="print at most N elements of a tensor, then '...' (default 1024)")
    r.set_defaults(handler=_cmd_run)

    b = sub.add_parser("benchmark", help="time an exported function with its inputs resident "
                       "on the device (as iree-benchmark-module)")
    _module_arguments(b)
    b.add_argument("--benchmark_repetitions", type=int, default=5, metavar="N",
                   help="repetitions to report the median, min and max of (default 5)")
    b.add_argument("--benchmark_min_time", type=_min_time, default=0.1, metavar="SECONDS",
                   help="each repetition calls the function for at least this long, e.g. 0.5 "
                        "or 0.5s (default 0.1)")
    b.add_argument("--warmup", type=int, default=1, metavar="N",
                   help="untimed calls first (default 1)")
    b.add_argument("--json", action="store_true",
                   help="print one JSON object (median_ms, min_ms, max_ms, repetitions, ...)")
    b.set_defaults(handler=_cmd_benchmark)

    ca = sub.add_parser("cache", help="what irtk's caches (compiled shaders) hold, or clear "
                        "them")
    ca.add_argument("action", choices=["info", "clear"],
                    help="info: where the caches are and their size; clear: remove their files")
    ca.set_defaults(handler=_cmd_cache)

    du = sub.add_parser("dump", help="show what a module holds (VM code as vm-dis prints it)")
    du.add_argument("module", help=".vmfb file")
    du.add_argument("--rodata", action="store_true",
                    help="show every rodata byte (default: segments over 64 bytes are elided)")
    du.add_argument("--metadata", action="store_true",
                    help="only a summary: exports with their signatures, executables by "
                         "target, and the compiler and options that built the module")
    du.set_defaults(handler=_cmd_dump)

    va = sub.add_parser("vm-as", help="assemble VM assembly text into a .vmfb module")
    va.add_argument("input", help="assembly file ('-' for standard input)")
    va.add_argument("-o", "--output", required=True, help="module file to write")
    va.set_defaults(handler=_cmd_vm_as)

    vd = sub.add_parser("vm-dis", help="disassemble a .vmfb module into VM assembly text")
    vd.add_argument("module", help=".vmfb file")
    vd.add_argument("-o", "--output", help="text file to write (default: standard output)")
    vd.set_defaults(handler=_cmd_vm_dis)

    ck = sub.add_parser("check", help="run a test program's functions and report which pass "
                        "(IREE's check tests)")
    ck.add_argument("input", help="MLIR file (or a .vmfb module) with test functions")
    _device_argument(ck)
    ck.add_argument("--target", default=None,
                    help=f"{' or '.join(targets)} (default: the one the device runs)")
    _vulkan_target_argument(ck, None, "the one that suits --device, as `irtk devices` says")
    ck.add_argument("--all", action="store_true",
                    help="also run functions that take arguments, on random inputs "
                    "(pass: they run without error)")
    ck.add_argument("--function", action="append", default=[],
                    help="run only this function (repeat for several)")
    ck.add_argument("--seed", type=int, default=None, help="seed of the random inputs")
    _keep_f64_argument(ck)
    ck.set_defaults(handler=_cmd_check)
    return p


def _module_arguments(p: argparse.ArgumentParser) -> None:
    """What `run` and `benchmark` share: the module, device, function, inputs and timeout."""
    p.add_argument("module", nargs="?", help=".vmfb file (or --module=FILE)")
    p.add_argument("--module", dest="module_option", metavar="FILE",
                   help=".vmfb file, as iree-run-module takes it")
    from irtk.hal import registry
    p.add_argument("--device", default=None,
                   help=f"{', '.join(registry.driver_names())}, vulkan://N or vulkan://NAME "
                        "(default: one that runs the module's executables: local-task for "
                        "CPU ones, else vulkan)")
    p.add_argument("--function", default=None,
                   help="exported function to call (default: the module's only export)")
    p.add_argument("--input", action="append", default=[],
                   help="an argument, e.g. 4x2xf32=1,2,3,4,5,6,7,8, 5, 2.5 or @x.npy "
                        "(repeat per argument)")
    p.add_argument("--timeout", type=_seconds, default=None, metavar="SECONDS",
                   help="fail the load or a call if it runs longer (VM code and waits)")
    p.add_argument("--trace", metavar="FILE",
                   help="write a Chrome/Perfetto trace (JSON) of the load and the calls: VM "
                        "calls, hal calls, submissions, dispatches with their device time")
    p.add_argument("--print_statistics", action="store_true",
                   help="print calls, submissions, dispatches (count and device time each) "
                        "and bytes moved to standard error")


def _progress_line(label: str = "compiling") -> Callable[[str], None] | None:
    """On a terminal, a progress line (`label: what`) on standard error once a compile or a
    check has taken a second (models take seconds; IRTK_PROGRESS_AFTER sets the seconds),
    rewritten in place and cleared before other output (`_clear_progress`) and at exit;
    else None."""
    if not sys.stderr.isatty():
        return None
    import atexit
    import time
    try:
        after = float(os.environ.get("IRTK_PROGRESS_AFTER", "1"))
    except ValueError:
        after = 1.0
    start = time.monotonic()
    shown = [False]

    def show(what: str) -> None:
        if time.monotonic() - start >= after:
            sys.stderr.write(f"\r\033[K{label}: {what}")
            sys.stderr.flush()
            shown[0] = True

    def clear() -> None:
        if shown[0]:
            sys.stderr.write("\r\033[K")
            sys.stderr.flush()
            shown[0] = False
    atexit.register(clear)
    _PROGRESS_CLEARS.append(clear)
    return show


# How to wipe the progress lines shown, before an error message is printed in their place.
_PROGRESS_CLEARS: list[Callable[[], None]] = []


def _clear_progress() -> None:
    for clear in _PROGRESS_CLEARS:
        clear()


def _min_time(text: str) -> float:
    """--benchmark_min_time: seconds, with an optional 's' as Google benchmark writes it."""
    return _seconds(text[:-1] if text.endswith("s") else text)


_min_time.__name__ = "number of seconds"


def _cmd_devices(args: argparse.Namespace) -> int:
    from irtk.compiler.targets import suited_profile
    from irtk.hal import registry
    if args.json:
        import json

        import irtk
        print(json.dumps([d.to_dict() for d in irtk.devices()], indent=2))
        return 0
    for name in registry.driver_names():
        try:
            infos = registry.get_driver(name).enumerate_devices()
        except Error as e:
            print(f"{name}: unavailable ({e})")
            continue
        if name != "vulkan":
            for info in infos:
                print(f"{name:<12} {info.name}")
            continue
        if not infos:
            print("vulkan: no devices")
        for info in infos:
            bits16 = "yes" if info.float16 else "no"
            bits64 = "yes" if info.float64 else "no"
            print(f"vulkan://{info.index:<3} {info.name}\n"
                  f"    driver: {info.extra.get('driver_name', info.driver)} "
                  f"{info.driver_version}, Vulkan {info.api_version}\n"
                  f"    subgroup size: {info.subgroup_size}, max workgroup invocations: "
                  f"{info.max_workgroup_invocations}, shared memory: "
                  f"{info.shared_memory_bytes} bytes\n"
                  f"    16-bit float: {bits16}, 64-bit float: {bits64}, "
                  f"8/16/64-bit int: {'yes' if info.int8 else 'no'}/"
                  f"{'yes' if info.int16 else 'no'}/{'yes' if info.int64 else 'no'}\n"
                  f"    compile for it with: --vulkan-target={suited_profile(info)}")
    return 0


def _cmd_compile(args: argparse.Namespace) -> int:
    from irtk.compiler import driver
    options: driver.CompileOptions = {"vulkan_target": args.vulkan_target,
                                      "dump_after": args.dump_after,
                                      "dump_spirv": args.dump_spirv,
                                      "partial": args.partial,
                                      "demote_f64": not args.keep_f64,
                                      "const_eval": not args.no_const_eval,
                                      "progress": _progress_line()}
    with warnings.catch_warnings(record=True) as left_out:
        warnings.simplefilter("always", CompileWarning)
        if args.input == "-":
            data = driver.compile_str(sys.stdin.read(), target=args.target,
                                      filename="<stdin>", **options)
        elif args.input.endswith(".onnx"):
            from irtk.importers import import_onnx
            data = import_onnx(args.input).compile(args.target, **options)
        else:
            data = driver.compile_file(args.input, target=args.target, **options)
    for w in left_out:
        if issubclass(w.category, CompileWarning):
            print(f"{w.message}\n(kept as a stub that fails when called: --partial)",
                  file=sys.stderr)
    if args.output == "-":
        sys.stdout.flush()
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
    else:
        _write_atomically(Path(args.output), data)
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from irtk.importers import import_onnx
    text = import_onnx(args.input, func_name=args.function).mlir
    if args.output == "-":
        sys.stdout.write(text)
    else:
        _write_atomically(Path(args.output), text.encode())
    return 0


def _write_atomically(path: Path, data: bytes) -> None:
    folder = path.parent if str(path.parent) else Path(".")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=folder)
    except OSError as e:
        raise InputError(f"cannot write '{path}': {e.strerror}") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except OSError as e:
        os.unlink(tmp)
        raise InputError(f"cannot write '{path}': {e.strerror}") from None


def _seconds(text: str) -> float:
    """A positive number of seconds (argparse turns the ValueError into a usage error)."""
    value = float(text)
    if not value > 0 or value == float("inf"):
        raise ValueError(text)
    return value


_seconds.__name__ = "number of seconds"   # argparse: "invalid number of seconds value: '-1'"


def _load_for_run(args: argparse.Namespace) -> tuple[Any, str]:
    """The loaded module and the function to call, for `run` and `benchmark`."""
    from irtk import runtime
    from irtk.runtime.module import default_device
    from irtk.vm import load_module
    from irtk.vm.limits import Limits
    path = _run_module_path(args)
    try:
        bytecode = load_module(path)
    except VerificationError as e:
        raise VerificationError(f"{path}: {e}") from None
    module = runtime.load(bytecode, device=args.device or default_device(bytecode),
                          limits=Limits(seconds=args.timeout))
    return module, _run_function(args.function, module.function_names)


def _traced(command: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """`--trace FILE` and `--print_statistics` for `run` and `benchmark`: the whole command
    (the load included) is traced; the trace is written, and the statistics printed, even
    when the command fails, so a failure can be looked at."""
    def traced(args: argparse.Namespace) -> int:
        if not args.trace and not args.print_statistics:
            return command(args)
        from irtk import tracing
        if args.trace:
            folder = Path(args.trace).parent
            if str(folder) and not folder.is_dir():
                raise InputError(f"--trace {args.trace}: folder '{folder}' does not exist")
        tracing.start()
        try:
            return command(args)
        finally:
            tracer = tracing.stop()
            if args.trace:
                try:
                    tracer.save(args.trace)
                except OSError as e:
                    raise InputError(f"cannot write trace '{args.trace}': {e.strerror}") \
                        from None
            if args.print_statistics:
                sys.stdout.flush()
                print(tracer.statistics().table(), file=sys.stderr)
    traced.__name__ = command.__name__
    return traced


@_traced
def _cmd_benchmark(args: argparse.Namespace) -> int:
    from irtk import runtime
    module, function = _load_for_run(args)
    inputs = [runtime.parse_input(text, where=f"--input {i}")
              for i, text in enumerate(args.input)]
    result = module[function].benchmark(*inputs, repetitions=args.benchmark_repetitions,
                                        min_time=args.benchmark_min_time, warmup=args.warmup)
    if args.json:
        import json
        print(json.dumps(result.to_dict()))
    else:
        print(f"BENCHMARK @{function} on {module.device.info.name}: inputs resident, "
              f"{args.warmup} warm-up call(s), each repetition at least "
              f"{args.benchmark_min_time:g} s")
        print(result.table())
    return 0


@_traced
def _cmd_run(args: argparse.Namespace) -> int:
    from irtk import runtime
    module, function = _load_for_run(args)
    exported = module[function]
    # Output arguments are checked before anything runs.
    for target in args.output:
        runtime.check_output_target(target)
    expected = len(exported.signature.results)
    if args.output and len(args.output) != expected:
        raise InputError(f"{len(args.output)} --output given for the {expected} results of "
                         f"'{function}'")
    inputs = [runtime.parse_input(text, where=f"--input {i}")
              for i, text in enumerate(args.input)]
    results = exported(*inputs)
    if results is None:
        results = ()
    elif not isinstance(results, tuple):
        results = (results,)
    names = [str(t.element_type.name) if not t.shape else None for t in exported.result_types]
    print(f"EXEC @{function}")
    for i, value in enumerate(results):
        target = args.output[i] if args.output else "-"
        type_name = names[i] if i < len(names) else None
        if runtime.write_output(target, value, type_name):
            continue
        print(runtime.format_results((value,), args.print_max_element_count, [type_name])
              .replace("result[0]", f"result[{i}]", 1))
    return 0


def _run_module_path(args: argparse.Namespace) -> str:
    if args.module and args.module_option:
        raise InputError("give the module once: as an argument or as --module=FILE")
    path = args.module or args.module_option
    if not path:
        raise InputError("no module given: irtk run FILE.vmfb (or --module=FILE.vmfb)")
    return _module_path(path)


def _run_function(name: str | None, exports: list[str]) -> str:
    if name is None:
        if len(exports) == 1:
            return exports[0]
        raise InputError(f"the module exports {len(exports)} functions; choose one with "
                         f"--function=NAME: {', '.join(exports) or 'none'}")
    if name not in exports:
        raise InputError(f"module has no exported function '{name}'; exports: "
                         f"{', '.join(exports) or 'none'}")
    return name


def _cmd_cache(args: argparse.Namespace) -> int:
    from irtk.hal import cache
    from irtk.vm.limits import format_bytes
    if args.action == "clear":
        files, size = cache.clear_cache()
        print(f"removed {files} file{'s' if files != 1 else ''} ({format_bytes(size)}) from "
              f"{cache.cache_root()}")
        return 0
    print(f"cache: {cache.cache_root()} (set IRTK_CACHE_DIR to move it)")
    for usage in cache.cache_usage():
        print(f"  {usage.kind}: {usage.files} file{'s' if usage.files != 1 else ''}, "
              f"{format_bytes(usage.bytes)} ({usage.description})")
    return 0


def _cmd_dump(args: argparse.Namespace) -> int:
    from irtk.dump import dump_module, module_metadata
    if args.metadata:
        print(module_metadata(_module_path(args.module)), end="")
        return 0
    print(dump_module(args.module, rodata_limit=None if args.rodata else 64), end="")
    return 0


def _cmd_vm_as(args: argparse.Namespace) -> int:
    from irtk.vm.assembler import assemble, assemble_file
    if args.input == "-":
        data = assemble(sys.stdin.read(), "<stdin>")
    else:
        data = assemble_file(args.input)
    _write_atomically(Path(args.output), data)
    return 0


def _cmd_vm_dis(args: argparse.Namespace) -> int:
    from irtk.vm.disassembler import disassemble_module
    text = disassemble_module(_module_path(args.module))
    if args.output:
        _write_atomically(Path(args.output), text.encode("utf-8"))
    else:
        print(text, end="")
    return 0


def _module_path(path: str) -> str:
    if not os.path.isfile(path):
        raise InputError(f"cannot read '{path}': no such file")
    return path


def _cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 when nothing failed, 1 when a function failed, 2 when the file as a whole could
    not be checked (unreadable, a compile error outside every function, no such device)."""
    from irtk import check_runner
    from irtk.hal import registry
    try:
        device = registry.get_device(args.device)
        target = args.target or check_runner.default_target(args.device)
        vulkan_target = args.vulkan_target
        if vulkan_target is None:
            from irtk.compiler.targets import suited_profile
            vulkan_target = suited_profile(device.info) if device.info.driver == "vulkan" \
                else "default"
        compiled = check_runner.compile_checks(args.input, target, vulkan_target=vulkan_target,
                                               progress=_progress_line(),
                                               demote_f64=not args.keep_f64)
        _clear_progress()
        names = [f.name for f in compiled.tests(include_args=True)]
        unknown = [n for n in args.function if n not in names]
        if unknown:
            raise InputError(f"'{args.input}' has no test function '{unknown[0]}'; functions: "
                             f"{', '.join(names) or 'none'}")
    except Error as e:
        print(_error_text(e), file=sys.stderr)
        return 2

    progress = _progress_line("checking")

    def starting(name: str, index: int, count: int) -> None:
        if progress is not None:
            progress(f"{name} ({index + 1}/{count})")

    def report(result: check_runner.CheckResult) -> None:
        _clear_progress()
        first, *rest = result.line().split("\n")
        print(first)
        for line in rest:
            print("    " + line)
        sys.stdout.flush()

    results = check_runner.run_compiled(compiled, device,
                                        include_args=args.all or bool(args.function),
                                        seed=args.seed, on_result=report, on_start=starting,
                                        only=set(args.function) or None)
    print(check_runner.summary(results))
    return 1 if any(r.status == check_runner.FAIL for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
