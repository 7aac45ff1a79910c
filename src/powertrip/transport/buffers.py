"""Where received payloads land: in memory while a byte budget allows, else in a spool file.

An aggregator receiving updates from many sites at once would hold one model-sized buffer per
site. A `ReceiveBudget` caps the bytes held in memory; a payload that does not fit is written
to an unlinked temporary file as it arrives and mapped read-only for decoding, so every site
keeps streaming in parallel (no site waits for another's fold) while the process's own memory
stays at the budget. Mapped file pages belong to the page cache, which the kernel can write
back and drop under pressure.
"""

from __future__ import annotations

import contextlib
import mmap
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Protocol


class ReceiveBuffer(Protocol):
    """A payload's destination: written once in order, then viewed whole."""

    def write(self, piece: memoryview) -> None:
        """Append the next piece."""
        ...

    def view(self) -> memoryview:
        """The whole payload (after the last write)."""
        ...

    def close(self) -> None:
        """Give the storage back (views still in use keep a mapping alive until dropped)."""
        ...


Allocate = Callable[[int], ReceiveBuffer]
"""Makes a buffer for a payload of the given size."""


class MemoryBuffer:
    """A payload in a bytearray."""

    def __init__(self, size: int) -> None:
        self._data = bytearray(size)
        self._filled = 0

    def write(self, piece: memoryview) -> None:
        """Copy `piece` in after what is already there."""
        end = self._filled + len(piece)
        self._data[self._filled : end] = piece
        self._filled = end

    def view(self) -> memoryview:
        """The bytes received."""
        return memoryview(self._data)

    def close(self) -> None:
        """Nothing to release: the bytearray goes with its last view."""


class FileBuffer:
    """A payload in an unlinked temporary file, mapped read-only once complete."""

    def __init__(self, size: int, directory: Path | None = None) -> None:
        self._file = tempfile.TemporaryFile(dir=directory)  # noqa: SIM115 (closed by close())
        self._size = size
        self._map: mmap.mmap | None = None

    def write(self, piece: memoryview) -> None:
        """Append `piece` to the file."""
        self._file.write(piece)

    def view(self) -> memoryview:
        """The file's bytes, mapped."""
        self._file.flush()
        if self._size == 0:
            return memoryview(b"")
        self._map = mmap.mmap(self._file.fileno(), self._size, access=mmap.ACCESS_READ)
        return memoryview(self._map)

    def close(self) -> None:
        """Close the file; the mapping goes now, or with its last view."""
        self._file.close()
        if self._map is not None:
            # Arrays that still view the map keep it alive; it is unmapped when they go.
            with contextlib.suppress(BufferError):
                self._map.close()


def memory_buffer(size: int) -> ReceiveBuffer:
    """The default destination: memory, no budget."""
    return MemoryBuffer(size)


class ReceiveBudget:
    """At most `max_bytes` of received payloads in memory at once (None: no limit); payloads
    beyond it spool to files in `spool_dir` (default: the system's temporary directory)."""

    def __init__(self, max_bytes: int | None = None, spool_dir: Path | None = None) -> None:
        self.max_bytes = max_bytes
        self.spool_dir = spool_dir
        self.in_memory_bytes = 0
        self.spooled = 0
        self._lock = threading.Lock()

    @contextmanager
    def buffers(self) -> Iterator[Allocate]:
        """An allocator whose buffers, and their share of the budget, are released when the
        block ends."""
        reserved = 0
        made: list[ReceiveBuffer] = []

        def allocate(size: int) -> ReceiveBuffer:
            nonlocal reserved
            with self._lock:
                fits = self.max_bytes is None or self.in_memory_bytes + size <= self.max_bytes
                if fits:
                    self.in_memory_bytes += size
                    reserved += size
                else:
                    self.spooled += 1
            buffer: ReceiveBuffer = MemoryBuffer(size) if fits else FileBuffer(size, self.spool_dir)
            made.append(buffer)
            return buffer

        try:
            yield allocate
        finally:
            for buffer in made:
                buffer.close()
            with self._lock:
                self.in_memory_bytes -= reserved
