#!/usr/bin/env python3
"""code-sections.py CACHE: one line per code section of every code object
in a tokitai-jit cache file: kernel (of a module's entries, the first by
name), arch, section, bytes, and the first 16 hex digits of the section's
SHA-256.

For changing kernel code without a GPU: warm a cache before and after the
change (tokitai-jit --warm --arch sm_90a --arch gfx90a ... --cache
DIR/before.db), list both, and diff.  Code that compiles to the same bytes
runs the same; a function whose .text differs is the one to measure.  Each
entry's code is its own section in an NVIDIA cubin (.text.<entry>); an AMD
code object keeps its functions together in .text.
"""
import hashlib
import sqlite3
import struct
import sys


def sections(elf):
    """(name, bytes) of each section that is loaded (SHF_ALLOC) and has
    contents in the file, of a 64-bit little-endian ELF."""
    if elf[:4] != b"\x7fELF" or elf[4] != 2 or elf[5] != 1:
        raise ValueError("not a 64-bit little-endian ELF")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    heads = [struct.unpack_from("<IIQQQQ", elf, shoff + i * shentsize)
             for i in range(shnum)]
    names = heads[shstrndx][4]
    for name, kind, flags, _addr, off, size in heads:
        if not flags & 2 or kind == 8:  # not SHF_ALLOC, or SHT_NOBITS
            continue
        end = elf.index(b"\0", names + name)
        yield elf[names + name:end].decode(), elf[off:off + size]


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: code-sections.py CACHE")
    db = sqlite3.connect("file:%s?mode=ro" % sys.argv[1], uri=True)
    rows = db.execute("SELECT min(kernel), arch, min(code) FROM code_objects "
                      "GROUP BY arch, code_hash ORDER BY 1, 2")
    for kernel, arch, code in rows:
        for name, data in sections(bytes(code)):
            print(kernel, arch, name, len(data),
                  hashlib.sha256(data).hexdigest()[:16])


if __name__ == "__main__":
    try:
        main()
    except BrokenPipeError:  # a pager or head that stopped reading
        sys.exit(1)
