"""Read the sections of an ELF64 file (cubins, host objects) by name, for byte comparisons."""
from __future__ import annotations

import struct


def elf_sections(data: bytes) -> dict[str, bytes]:
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise ValueError("not an ELF64 file")
    (shoff,) = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    headers = []
    for i in range(shnum):
        name, type_, flags, addr, off, size = struct.unpack_from("<IIQQQQ", data, shoff + i * shentsize)
        headers.append((name, type_, off, size))
    strtab_off, strtab_size = headers[shstrndx][2], headers[shstrndx][3]
    out = {}
    for name, type_, off, size in headers:
        end = data.index(b"\0", strtab_off + name)
        label = data[strtab_off + name:end].decode()
        out[label] = b"" if type_ == 8 else data[off:off + size]  # SHT_NOBITS holds no bytes
    return out
