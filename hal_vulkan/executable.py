"""Executables of format "vulkan-spirv-fb": shader modules turned into compute pipelines.

Requirements are checked before any Vulkan object exists. Each entry point gets its own
descriptor set layout (storage or uniform texel buffers at set 0, bindings as declared, an
array of views for texel windows; a push-descriptor layout when the device has
VK_KHR_push_descriptor) and pipeline layout (one push-constant range of push_constant_count
words). All pipelines are created in one vkCreateComputePipelines call through the device's
persistent pipeline cache; the shader modules are destroyed right after. Executables made
from the same bytes share their pipelines, which outlive them for a while
(`executable_cache`), so loading a module again does not compile again.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import vulkan as vk

from irtk.hal import Executable
from irtk.hal.executable import ExportInfo
from hal_vulkan import requirements, shader_verifier
from hal_vulkan.executable_def import EntryPointSpec, ExecutableSpec, parse_executable
from hal_vulkan.resource import Resource, release_when_collected
from hal_vulkan.status import call

if TYPE_CHECKING:
    from hal_vulkan.context import DeviceContext
    from hal_vulkan.executable_cache import ExecutableCache
    from hal_vulkan.pipeline_cache import PipelineCache

_COMPUTE = vk.VK_SHADER_STAGE_COMPUTE_BIT
# Vulkan 1.2 core values the binding only has as unresolved aliases (None).
SET_LAYOUT_UPDATE_AFTER_BIND_POOL = 0x2  # VK_DESCRIPTOR_SET_LAYOUT_CREATE_UPDATE_AFTER_BIND_POOL_BIT


@dataclass(frozen=True)
class EntryPoint:
    """What recording a dispatch of one export needs."""

    name: str
    pipeline: Any
    pipeline_layout: Any
    set_layout: Any
    binding_numbers: tuple[int, ...]
    push_constant_count: int
    workgroup_size: tuple[int, int, int]
    push_descriptors: bool
    texel_bindings: frozenset[int] = frozenset()  # bound as uniform texel buffers
    # texel bindings read through window views: binding -> (view count, texels per view)
    texel_windows: dict[int, tuple[int, int]] = field(default_factory=dict, compare=False,
                                                      hash=False)
    texel_descriptors: int = 0  # texel-buffer views a dispatch binds (windows count each)

    @property
    def update_after_bind(self) -> bool:
        """Whether its descriptor sets may be rewritten after bind: storage buffers only."""
        return not self.push_descriptors and not self.texel_bindings


class ExecutableResource(Resource):
    kind = "executable"

    def __init__(self, context: DeviceContext) -> None:
        super().__init__()
        self.context = context
        self.pipelines: list[Any] = []
        self.pipeline_layouts: list[Any] = []
        self.set_layouts: list[Any] = []

    def destroy_handles(self) -> None:
        handle, tracker = self.context.handle, self.context.tracker
        for p in self.pipelines:
            vk.vkDestroyPipeline(handle, p, None)
            tracker.destroyed("VkPipeline")
        for layout in self.pipeline_layouts:
            vk.vkDestroyPipelineLayout(handle, layout, None)
            tracker.destroyed("VkPipelineLayout")
        for layout in self.set_layouts:
            vk.vkDestroyDescriptorSetLayout(handle, layout, None)
            tracker.destroyed("VkDescriptorSetLayout")
        self.pipelines, self.pipeline_layouts, self.set_layouts = [], [], []


class VulkanExecutable(Executable):
    """Pipelines come from `executables` (the device's cache of them, by the bytes' hash) or
    are created through `pipeline_cache` (the device's), which is saved after."""

    def __init__(self, context: DeviceContext, pipeline_cache: PipelineCache,
                 executables: ExecutableCache, data: bytes | memoryview) -> None:
        spec = parse_executable(data)
        requirements.check(spec, context.info)
        shader_verifier.verify(spec, context.info)
        self.spec = spec
        self.context = context
        self.requirements = spec.requirements

        def build() -> tuple[ExecutableResource, list[EntryPoint]]:
            resource = ExecutableResource(context)
            try:
                return resource, _build(context, pipeline_cache, spec, resource)
            except BaseException:
                resource.destroy_handles()
                raise

        with context.lock:
            shared, entry_points, self._use, built = executables.acquire(
                hashlib.sha256(data).digest(), build)
        self.resource = shared   # what submissions mark as used
        self.entry_points: list[EntryPoint] = entry_points
        self._finalizer = release_when_collected(self, self._use, context.garbage)
        super().__init__([ExportInfo(e.name, len(e.bindings), e.push_constant_count,
                                     e.workgroup_size) for e in spec.entry_points])
        if built:
            pipeline_cache.save()

    def entry_point(self, ordinal: int) -> EntryPoint:
        if not 0 <= ordinal < len(self.entry_points):
            raise ValueError(f"export ordinal {ordinal} is out of range "
                             f"({len(self.entry_points)} exports)")
        return self.entry_points[ordinal]

    @property
    def released(self) -> bool:
        return not self._finalizer.alive

    def release(self) -> None:
        """End this executable's use of its pipelines (destroyed once no executable uses them,
        no submission does and the cache lets them go); idempotent."""
        if self._finalizer.detach() is not None:
            self.context.retire(self._use)


def _build(context: DeviceContext, pipeline_cache: PipelineCache, spec: ExecutableSpec,
           res: ExecutableResource) -> list[EntryPoint]:
    handle, tracker = context.handle, context.tracker
    modules: list[Any] = []
    try:
        for code in spec.shader_modules:
            info = vk.VkShaderModuleCreateInfo(sType=vk.VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO,
                                               codeSize=len(code), pCode=code)
            modules.append(call(vk.vkCreateShaderModule, handle, info, None))
            tracker.created("VkShaderModule")
            context.check()  # the validation layer checks SPIR-V here
        max_push = int(context.physical.limits.get("maxPushDescriptors", 0))
        push_flags: list[bool] = []
        for entry in spec.entry_points:
            push = context.push_descriptors and len(entry.bindings) <= max_push
            push_flags.append(push)
            set_layout, pipeline_layout = _layouts(context, entry, push)
            res.set_layouts.append(set_layout)
            res.pipeline_layouts.append(pipeline_layout)
        subgroup = requirements.subgroup_size_to_request(spec, context.info)
        stage_next = None
        if subgroup:
            stage_next = vk.VkPipelineShaderStageRequiredSubgroupSizeCreateInfo(
                sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_REQUIRED_SUBGROUP_SIZE_CREATE_INFO,
                requiredSubgroupSize=subgroup)
        # The stage structs own the entry point names: keep them alive through the call.
        stages = [vk.VkPipelineShaderStageCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO, pNext=stage_next,
            stage=_COMPUTE, module=modules[entry.shader_module], pName=entry.name)
            for entry in spec.entry_points]
        infos = [vk.VkComputePipelineCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO, stage=stages[i],
            layout=res.pipeline_layouts[i], basePipelineIndex=-1)
            for i in range(len(stages))]
        pipelines = call(vk.vkCreateComputePipelines, handle, pipeline_cache.handle,
                         len(infos), infos, None)
        res.pipelines = [pipelines[i] for i in range(len(infos))]
        tracker.created("VkPipeline", len(infos))
        context.check()
    finally:
        for module in modules:
            vk.vkDestroyShaderModule(handle, module, None)
            tracker.destroyed("VkShaderModule")
    return [EntryPoint(e.name, res.pipelines[i], res.pipeline_layouts[i], res.set_layouts[i],
                       tuple(b.binding for b in e.bindings), e.push_constant_count,
                       e.workgroup_size, push_flags[i],
                       frozenset(b.binding for b in e.bindings if b.texel),
                       {b.binding: (b.window_count, b.window_texels)
                        for b in e.bindings if b.window_count},
                       sum(b.descriptor_count for b in e.bindings if b.texel))
            for i, e in enumerate(spec.entry_points)]


def descriptor_type(texel: bool) -> int:
    return vk.VK_DESCRIPTOR_TYPE_UNIFORM_TEXEL_BUFFER if texel else \
        vk.VK_DESCRIPTOR_TYPE_STORAGE_BUFFER


def _layouts(context: DeviceContext, entry: EntryPointSpec, push: bool) -> tuple[Any, Any]:
    handle, tracker = context.handle, context.tracker
    bindings = [vk.VkDescriptorSetLayoutBinding(
        binding=b.binding, descriptorType=descriptor_type(b.texel),
        descriptorCount=b.descriptor_count, stageFlags=_COMPUTE) for b in entry.bindings]
    flags = vk.VK_DESCRIPTOR_SET_LAYOUT_CREATE_PUSH_DESCRIPTOR_BIT_KHR if push else 0
    binding_flags = None
    # Texel-buffer sets are written once per recording (update-after-bind of texel buffers
    # is a feature of its own, and their views belong to the recording).
    if context.update_after_bind and not push and bindings and \
            not any(b.texel for b in entry.bindings):
        flags = SET_LAYOUT_UPDATE_AFTER_BIND_POOL
        binding_flags = vk.VkDescriptorSetLayoutBindingFlagsCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_BINDING_FLAGS_CREATE_INFO,
            pBindingFlags=[vk.VK_DESCRIPTOR_BINDING_UPDATE_AFTER_BIND_BIT] * len(bindings))
    set_layout = call(vk.vkCreateDescriptorSetLayout, handle, vk.VkDescriptorSetLayoutCreateInfo(
        sType=vk.VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO, pNext=binding_flags,
        flags=flags, pBindings=bindings or None), None)
    tracker.created("VkDescriptorSetLayout")
    ranges = [vk.VkPushConstantRange(stageFlags=_COMPUTE, offset=0,
                                     size=4 * entry.push_constant_count)]
    try:
        pipeline_layout = call(vk.vkCreatePipelineLayout, handle, vk.VkPipelineLayoutCreateInfo(
            sType=vk.VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO, pSetLayouts=[set_layout],
            pPushConstantRanges=ranges if entry.push_constant_count else None), None)
    except BaseException:
        vk.vkDestroyDescriptorSetLayout(handle, set_layout, None)
        tracker.destroyed("VkDescriptorSetLayout")
        raise
    tracker.created("VkPipelineLayout")
    return set_layout, pipeline_layout
