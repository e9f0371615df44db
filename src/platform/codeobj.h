/*
 * codeobj.h: what a code object says, read without a GPU, whatever the
 * platform this library was built for (the reader goes by the ELF's
 * machine): the kernels it defines (symbols.c) and what each asks of the
 * GPU (codeobj.c).  An AMD GPU ELF says the latter in its metadata note
 * (NT_AMDGPU_METADATA, a MessagePack map per kernel); an NVIDIA cubin in
 * its .nv.info records and its .nv.shared.<entry> section.  Both read the
 * ELF through elfview.h.
 */
#ifndef TJ_CODEOBJ_H
#define TJ_CODEOBJ_H

#include "tokitai-jit.h"

#include <stddef.h>
#include <stdint.h>

/* ------------------------------------------------------------ symbols.c */

/* Whether the code object (an ELF64: AMD GPU code object or NVIDIA cubin)
 * defines a kernel named symbol. */
int tj__elf_has_kernel(const void *code, size_t size, const char *symbol);
/* A kernel whose mangled name is that of a non-template function ident at
 * namespace scope (_Z<len><ident><params>): 1 and its symbol in out when
 * exactly one matches; 0 when none; -1 when several (overloads). */
int tj__elf_find_cxx_kernel(const void *code, size_t size, const char *ident,
                            char *out, size_t outlen);

/* ------------------------------------------------------------ codeobj.c */

/* The public tj_kernel_resources (tokitai-jit.h): -1 where the code
 * object does not say. */
typedef tj_kernel_resources tj__resources;

/* The largest figures the reader believes (no GPU comes near them); one
 * past them in a code object reads as unknown. */
#define TJ__MAX_REGS 4096
#define TJ__MAX_SHARED_BYTES ((int64_t)1 << 30)
#define TJ__MAX_LOCAL_BYTES ((int64_t)1 << 30)
#define TJ__MAX_THREADS 4096

/* Read the resources of entry `symbol` (the lowered name, as in the code
 * object's symbol table) from `code`.  0 on success; -1 when the blob is not
 * an ELF this reader knows or has no record of that entry (out untouched
 * but for being reset to "unknown"). */
int tj__code_resources(const void *code, size_t len, const char *symbol,
                       tj__resources *out);

#endif
