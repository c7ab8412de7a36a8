"""Without a device: which strategy compiles a kernel, what each module declares and needs, and
that every strategy's module validates for every profile."""
from __future__ import annotations

import pytest

from irtk.compiler.codegen.spirv import STRATEGIES, compile_kernel, pack_executable
from irtk.compiler.codegen.spirv.float_formats import FORMATS
from irtk.compiler.kernel import Grid, GridAxis, Kernel, Op, Operand, Param
from irtk.compiler.targets import VULKAN_PROFILES, VulkanProfile, vulkan_profile
from irtk.errors import CompileError
from spirv import tools

from .kernels import identity, projection
from .test_strategies import argmax_kernel, conv2d, matmul, reduce_rows

PROFILES = [*VULKAN_PROFILES.values(),
            VulkanProfile("spirv15", vulkan_env="vulkan1.2", spirv_version=(1, 5),
                          vulkan_version=(1, 2))]

KERNELS = {
    "matmul": lambda: matmul(64, 48, 40),
    "matmul-dynamic": lambda: matmul(0, 0, 0, dynamic=True),
    "matmul-i8": lambda: matmul(32, 32, 32, "i8", "i32"),
    "batch-matmul": lambda: matmul(16, 16, 16, batch=2, transpose_b=True),
    "convolution": lambda: conv2d(1, 8, 8, 3, 3, 3, 4),
    "reduction": lambda: reduce_rows("arith.addf", "f32", 4, 500),
    "reduction-umax": lambda: reduce_rows("arith.maxui", "i32", 4, 500),
    "reduction-dynamic": lambda: reduce_rows("arith.maximumf", "f32", 0, 0, dynamic=True),
    "argmax": lambda: argmax_kernel(4, 100),
}
EXPECTED = {"matmul": "matmul", "matmul-dynamic": "matmul", "matmul-i8": "matmul",
            "batch-matmul": "matmul", "convolution": "convolution", "reduction": "reduction",
            "reduction-umax": "reduction", "reduction-dynamic": "reduction",
            "argmax": "fallback"}


@pytest.mark.parametrize("name", list(KERNELS))
@pytest.mark.parametrize("profile", PROFILES, ids=lambda p: p.name)
def test_every_strategy_validates_for_every_profile(name, profile):
    compiled = compile_kernel(KERNELS[name](), profile)
    assert compiled.strategy == EXPECTED[name]
    tools.validate(compiled.code, profile.vulkan_env)


@pytest.mark.parametrize("name", list(KERNELS))
def test_the_fallback_compiles_every_kernel(name):
    compiled = compile_kernel(KERNELS[name](), VULKAN_PROFILES["default"], strategy="fallback")
    assert compiled.grid is not None and compiled.grid.linear
    assert compiled.workgroup_size == (64, 1, 1)


def test_strategy_names_and_unfitting_requests():
    assert STRATEGIES == ("matmul", "convolution", "reduction", "elementwise", "fallback")
    with pytest.raises(CompileError, match="unknown strategy 'tiles'"):
        compile_kernel(matmul(8, 8, 8), VULKAN_PROFILES["default"], strategy="tiles")
    with pytest.raises(CompileError, match="does not fit strategy 'matmul'"):
        compile_kernel(argmax_kernel(4, 100), VULKAN_PROFILES["default"], strategy="matmul")


def test_subgroup_reductions_only_where_the_profile_fixes_the_size():
    kernel = reduce_rows("arith.addf", "f32", 4, 500)
    default = compile_kernel(kernel, VULKAN_PROFILES["default"])
    assert "subgroup_size" not in default.requirements
    assert default.requirements["shared_memory_bytes"] == 4 * 64
    lavapipe = compile_kernel(kernel, VULKAN_PROFILES["llvmpipe"])
    assert lavapipe.requirements["subgroup_size"] == 8
    assert lavapipe.workgroup_size == (8, 1, 1)
    swiftshader = compile_kernel(kernel, VULKAN_PROFILES["swiftshader"])
    assert swiftshader.requirements["subgroup_size"] == 4


def test_matmul_tiles_in_shared_memory_on_gpus_and_reads_directly_on_cpu_drivers():
    kernel = matmul(128, 128, 64)
    gpu = compile_kernel(kernel, VULKAN_PROFILES["default"])
    assert gpu.workgroup_size == (256, 1, 1) and gpu.workgroup_count == (2, 2, 1)
    assert gpu.requirements["shared_memory_bytes"] == 4 * 16 * 128
    cpu = compile_kernel(kernel, VULKAN_PROFILES["llvmpipe"])
    assert cpu.workgroup_size == (8, 1, 1) and "shared_memory_bytes" not in cpu.requirements
    # Texel fetches of 4 k values of A and 4 columns of B, 8 x 4 per lane, no broadcasts.
    assert "subgroup_size" not in cpu.requirements and cpu.texel_bindings == (0, 1)
    assert cpu.grid == Grid(GridAxis((1,), 32), GridAxis((0,), 8), GridAxis(()))
    swiftshader = compile_kernel(kernel, VULKAN_PROFILES["swiftshader"])
    assert swiftshader.workgroup_size == (4, 1, 1)
    assert swiftshader.requirements["subgroup_size"] == 4   # A shared by subgroup broadcasts
    assert swiftshader.grid == Grid(GridAxis((1,), 16), GridAxis((0,), 16), GridAxis(()))
    plain = compile_kernel(kernel, VulkanProfile("cpu", cpu_device=True))
    assert plain.workgroup_size == (8, 1, 1) and "subgroup_size" not in plain.requirements


def test_push_constants_follow_the_param_offsets():
    kernel = Kernel("scaled", ("N",), [Operand(0, "i64", ("N",), identity(1))],
                    [Operand(1, "i64", ("N",), identity(1))],
                    [Op("kernel.param", (), "i64", int_value=1),
                     Op("arith.muli", (0, 2), "i64")], [3], ("parallel",),
                    (Param("N", "index"), Param("scale", "i64")))
    assert kernel.param_offsets() == [0, 8]
    compiled = compile_kernel(kernel, VULKAN_PROFILES["llvmpipe"])
    assert compiled.push_constant_count == 4
    assert compiled.requirements["push_constant_bytes"] == 16
    assert compiled.requirements["int64"] is True
    assert compiled.workgroup_count == (0, 0, 0)
    assert compiled.grid.counts((1000,)) == (16, 1, 1)
    pack_executable([compiled], VULKAN_PROFILES["llvmpipe"])


def test_static_kernels_record_their_launch():
    compiled = compile_kernel(reduce_rows("arith.addf", "f32", 70000, 100),
                              VULKAN_PROFILES["default"])
    assert compiled.grid.linear
    assert compiled.workgroup_count == (65535, 2, 1)


def test_sub_word_outputs_use_atomics_and_no_extra_capabilities():
    kernel = Kernel("to_i8", (10,), [Operand(0, "f32", (10,), identity(1))],
                    [Operand(1, "i8", (10,), identity(1))],
                    [Op("arith.fptosi", (0,), "i8")], [2])
    text = tools.disassemble(compile_kernel(kernel, VULKAN_PROFILES["default"]).code)
    assert "OpAtomicAnd" in text and "OpAtomicOr" in text
    assert "Int8" not in text and "StorageBuffer8BitAccess" not in text


def test_unknown_profiles_list_the_known_ones():
    with pytest.raises(CompileError, match="default, swiftshader, llvmpipe"):
        vulkan_profile("radv")


@pytest.mark.parametrize("kind, largest", [("f16", 65504.0), ("bf16", 3.3895313892515355e38),
                                           ("f8E4M3FN", 448.0), ("f8E5M2", 57344.0),
                                           ("f8E4M3FNUZ", 240.0), ("f8E5M2FNUZ", 57344.0),
                                           ("f8E8M0FNU", 2.0 ** 127), ("f4E2M1FN", 6.0)])
def test_float_formats_know_their_largest_value(kind, largest):
    fmt = FORMATS[kind]
    assert fmt.value(fmt.max_bits) == largest


def test_maps_with_projections_reach_the_contraction_roles():
    from irtk.compiler.codegen.spirv.matmul import match
    c = match(matmul(8, 8, 8, batch=2))
    assert (c.m, c.n, c.ks, c.batch) == (1, 2, (3,), (0,))
    c = match(conv2d(1, 8, 8, 3, 3, 3, 4))
    assert (c.m, c.n, c.ks, c.batch) == (2, 3, (4, 5, 6), (0, 1))
    assert match(Kernel("copy", (4, 4), [Operand(0, "f32", (4, 4), identity(2))],
                        [Operand(1, "f32", (4,), projection(2, [0]))],
                        [Op("arith.addf", (1, 0), "f32")], [2],
                        ("parallel", "reduction"))) is None
