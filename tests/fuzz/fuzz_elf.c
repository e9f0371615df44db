/*
 * fuzz_elf.c: libFuzzer harness for the code-object reader
 * (src/platform/elfview.c, codeobj.c, symbols.c), which reads every
 * blob a cache row, a code file, a system cache, a merge or the remote
 * tier hands it.
 *
 * The input is the code object.  Its resources are read for kernel "k"
 * and for the C++ kernel "add" (the seeds, compiled by hipRTC for gfx90a
 * and by NVRTC for sm_90, define both), and its symbols are looked up.
 * Nothing may crash, leak or read outside the blob, and every figure read
 * is unknown (-1) or within the bounds codeobj.h gives.
 */
#include "codeobj.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static void check_figures(const tj__resources *r)
{
  if (r->regs < -1 || r->regs > TJ__MAX_REGS || r->sgprs < -1 ||
      r->sgprs > TJ__MAX_REGS || r->agprs < -1 || r->agprs > TJ__MAX_REGS ||
      r->spills < -1 || r->shared_bytes < -1 ||
      r->shared_bytes > TJ__MAX_SHARED_BYTES || r->local_bytes < -1 ||
      r->local_bytes > TJ__MAX_LOCAL_BYTES || r->max_threads == 0 ||
      r->max_threads < -1 || r->max_threads > TJ__MAX_THREADS ||
      (r->wave_size != -1 && r->wave_size != 32 && r->wave_size != 64))
    abort();
}

static void read_kernel(const void *code, size_t n, const char *symbol)
{
  tj__resources r;
  int rc = tj__code_resources(code, n, symbol, &r);
  if (rc != 0 && rc != -1)
    abort();
  check_figures(&r);
  (void)tj__elf_has_kernel(code, n, symbol);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
  /* A copy, aligned as malloc aligns (the reader refuses an unaligned
   * blob) and exactly as long as the input, so ASan sees any overread. */
  void *code = malloc(size ? size : 1);
  if (!code)
    return 0;
  memcpy(code, data, size);
  read_kernel(code, size, "k");
  char lowered[256];
  int found = tj__elf_find_cxx_kernel(code, size, "add", lowered, sizeof lowered);
  if (found < -1 || found > 1)
    abort();
  if (found == 1) {
    if (!memchr(lowered, '\0', sizeof lowered))
      abort();
    read_kernel(code, size, lowered);
  }
  free(code);
  return 0;
}
