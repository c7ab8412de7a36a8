"""A driver enumerates the devices of one kind and creates them."""
from __future__ import annotations

from abc import ABC, abstractmethod

from irtk.hal.device import Device, DeviceInfo


class Driver(ABC):
    name: str = ""

    @abstractmethod
    def enumerate_devices(self) -> list[DeviceInfo]: ...

    @abstractmethod
    def create_device(self, index: int = 0) -> Device: ...
