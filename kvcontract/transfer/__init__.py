"""The torch copy engine that moves KV-cache blocks between GPU (or CPU) tensors and host memory."""

from kvcontract.transfer.host_buffer import HostBuffer
from kvcontract.transfer.layout import BlockPlane, KVCacheGroup, KVCacheLayout
from kvcontract.transfer.worker import TorchOffloadingWorker

__all__ = ["BlockPlane", "HostBuffer", "KVCacheGroup", "KVCacheLayout", "TorchOffloadingWorker"]
