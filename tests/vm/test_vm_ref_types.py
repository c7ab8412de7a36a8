"""The ref type registry: native modules register their types; the VM knows only its own."""
from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import pytest

from irtk.errors import VerificationError
from irtk.vm import Context, VMBuffer, VMList, load_module, ref_types
from irtk.vm.ref_types import RefType, RefTypeRegistry

from tests.vm.helpers import module_with

ROOT = Path(__file__).resolve().parents[2]


class Widget:
    pass


class Gadget:
    pass


class FancyWidget(Widget):
    pass


WIDGET = RefType("!shop.widget", (Widget,))


def test_a_registered_type_is_found_by_name_and_by_value():
    registry = RefTypeRegistry()
    assert registry.register(WIDGET) is WIDGET
    assert registry.lookup("!shop.widget") is WIDGET
    assert registry.type_of(Widget()) is WIDGET
    assert registry.type_of(FancyWidget()) is WIDGET   # subclasses carry their base's type
    assert registry.name_of(FancyWidget()) == "!shop.widget"
    assert registry.names() == ["!shop.widget"]


def test_registering_an_equal_type_again_changes_nothing():
    registry = RefTypeRegistry()
    registry.register(WIDGET)
    again = RefType("!shop.widget", (Widget,))
    assert registry.register(again) is WIDGET
    assert registry.names() == ["!shop.widget"]


def test_a_name_registered_for_another_class_is_refused():
    registry = RefTypeRegistry()
    registry.register(WIDGET)
    with pytest.raises(ValueError, match=r"ref type '!shop.widget' is already registered for "
                                         r".*\.Widget, not .*\.Gadget"):
        registry.register(RefType("!shop.widget", (Gadget,)))
    assert registry.lookup("!shop.widget") is WIDGET


def test_a_class_registered_under_another_name_is_refused():
    registry = RefTypeRegistry()
    registry.register(WIDGET)
    with pytest.raises(ValueError, match=r"\.Widget already carries ref type '!shop.widget', "
                                         r"not '!shop.thing'"):
        registry.register(RefType("!shop.thing", (Gadget, Widget)))
    assert registry.names() == ["!shop.widget"]
    assert registry.type_of(Gadget()) is None   # a refused type leaves nothing behind


def test_the_nearest_registered_class_decides_a_values_type():
    registry = RefTypeRegistry()
    registry.register(WIDGET)
    fancy = registry.register(RefType("!shop.fancy_widget", (FancyWidget,)))
    assert registry.type_of(FancyWidget()) is fancy
    assert registry.type_of(Widget()) is WIDGET


def test_values_of_no_registered_type():
    registry = RefTypeRegistry()
    assert registry.type_of(Gadget()) is None
    assert registry.name_of(Gadget()) == "!py.Gadget"
    assert registry.name_of(None) == "null"
    assert registry.lookup("!shop.widget") is None


def test_a_type_needs_a_module_qualified_name_and_classes():
    with pytest.raises(ValueError, match="'shop.widget' is not '!module.type'"):
        RefType("shop.widget", (Widget,))
    with pytest.raises(ValueError, match="'!widget' is not '!module.type'"):
        RefType("!widget", (Widget,))
    with pytest.raises(ValueError, match="needs one or more classes"):
        RefType("!shop.widget", ())
    with pytest.raises(ValueError, match="cannot be carried by every object"):
        RefType("!shop.anything", (object,))


def test_resolve_gives_each_types_table_entry_or_names_the_unregistered_one():
    registry = RefTypeRegistry()
    registry.register(WIDGET)
    assert registry.resolve(["!shop.widget", "!shop.widget"]) == [WIDGET, WIDGET]
    with pytest.raises(VerificationError,
                       match=r"^type 1 '!shop.gizmo' is not a registered ref type "
                             r"\(registered: !shop.widget; a native module registers"):
        registry.resolve(["!shop.widget", "!shop.gizmo"])


def test_the_vm_registers_its_own_buffer_and_list_types():
    assert ref_types.REGISTRY.lookup("!vm.buffer").classes == (VMBuffer,)
    assert ref_types.REGISTRY.lookup("!vm.list").classes == (VMList,)
    assert ref_types.ref_type_name(VMBuffer(b"")) == "!vm.buffer"
    assert ref_types.ref_type_name(VMList()) == "!vm.list"


def test_concurrent_registrations_all_land_and_agree():
    registry = RefTypeRegistry()
    classes = [type(f"C{i}", (), {}) for i in range(40)]
    shared = [RefType(f"!shared.t{i}", (c,)) for i, c in enumerate(classes[:20])]
    start = threading.Barrier(8)
    results: list[list[RefType]] = [[] for _ in range(8)]

    def load(worker: int) -> None:
        start.wait()
        for t in shared:   # every thread registers the same types, as repeated imports do
            results[worker].append(registry.register(RefType(t.name, t.classes)))
        for i in range(worker, 20, 8):   # and some of its own
            registry.register(RefType(f"!own.t{i}", (classes[20 + i],)))

    threads = [threading.Thread(target=load, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    first = results[0]
    assert all(r == first for r in results) and first == shared
    assert all(registry.lookup(t.name) is first[i] for i, t in enumerate(shared))
    assert len(registry.names()) == 40
    assert all(registry.type_of(c()) is not None for c in classes)


def test_linking_refuses_a_type_nobody_registered():
    module = load_module(module_with("0v_v", lambda b: b.emit("return", []),
                                     setup=lambda w: (w.add_type("!vm.buffer"),
                                                      w.add_type("!shop.nothing"))))
    with pytest.raises(VerificationError,
                       match=r"^type 1 '!shop.nothing' is not a registered ref type "
                             r"\(registered: .*!vm.buffer, !vm.list"):
        Context(module)


def test_importing_the_vm_imports_nothing_of_the_hal_or_native_modules():
    code = ("import sys, irtk.vm, irtk.vm.docgen, irtk.vm.assembler, irtk.vm.disassembler\n"
            "print(sorted(m for m in sys.modules if m.startswith(('irtk.hal', 'irtk.modules',"
            " 'hal_'))))\n"
            "print(irtk.vm.ref_types.REGISTRY.names())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == ["[]", "['!vm.buffer', '!vm.list']"]


def test_importing_the_hal_module_registers_the_hal_types():
    code = ("import irtk.vm.ref_types as r; before = r.REGISTRY.names()\n"
            "import irtk.modules.hal\n"
            "print(before); print(r.REGISTRY.names())")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                         text=True, check=True).stdout.splitlines()
    assert out == ["['!vm.buffer', '!vm.list']",
                   "['!hal.allocator', '!hal.buffer', '!hal.buffer_view', '!hal.command_buffer',"
                   " '!hal.device', '!hal.executable', '!hal.fence', '!hal.semaphore',"
                   " '!vm.buffer', '!vm.list']"]
