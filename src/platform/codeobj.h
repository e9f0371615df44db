/*
 * codeobj.h: what a kernel asks of the GPU, read from its code object
 * without a GPU.  An AMD GPU ELF says it in its metadata note
 * (NT_AMDGPU_METADATA, a MessagePack map per kernel); an NVIDIA cubin in its
 * .nv.info records and its .nv.shared.<entry> section.  The reader goes by
 * the ELF's machine, not by the platform this library was built for, so
 * either build can read either kind of code object.
 */
#ifndef TJ_CODEOBJ_H
#define TJ_CODEOBJ_H

#include "tokitai-jit.h"

#include <stddef.h>
#include <stdint.h>

/* The ELF machines of GPU code objects, for C libraries that predate them. */
#ifndef EM_AMDGPU
#define EM_AMDGPU 224
#endif
#ifndef EM_CUDA
#define EM_CUDA 190
#endif

/* The public tj_kernel_resources (tokitai-jit.h): -1 where the code
 * object does not say. */
typedef tj_kernel_resources tj__resources;

/* Read the resources of entry `symbol` (the lowered name, as in the code
 * object's symbol table) from `code`.  0 on success; -1 when the blob is not
 * an ELF this reader knows or has no record of that entry (out untouched
 * but for being reset to "unknown"). */
int tj__code_resources(const void *code, size_t len, const char *symbol,
                       tj__resources *out);

#endif
