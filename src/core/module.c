/* module.c: turning a code object into a launchable function. */
#include "internal.h"

#include <stdio.h>

int tj__module_load(const void *code, const char *entry, void **module,
                    void **function, char *err, size_t errlen)
{
  hipModule_t mod;
  hipFunction_t fn;
  hipError_t e = hipModuleLoadData(&mod, code);
  if (e != hipSuccess) {
    snprintf(err, errlen, "hipModuleLoadData: %s", hipGetErrorString(e));
    return TJ_EDEVICE;
  }
  e = hipModuleGetFunction(&fn, mod, entry);
  if (e != hipSuccess) {
    snprintf(err, errlen, "hipModuleGetFunction(%s): %s", entry,
             hipGetErrorString(e));
    hipModuleUnload(mod);
    return TJ_EDEVICE;
  }
  *module = (void *)mod;
  *function = (void *)fn;
  return TJ_OK;
}

void tj__module_unload(void *module)
{
  if (module)
    hipModuleUnload((hipModule_t)module);
}

int tj__module_load_code(const void *code, void **module, char *err,
                         size_t errlen)
{
  hipModule_t mod;
  hipError_t e = hipModuleLoadData(&mod, code);
  if (e != hipSuccess) {
    snprintf(err, errlen, "hipModuleLoadData: %s", hipGetErrorString(e));
    return TJ_EDEVICE;
  }
  *module = (void *)mod;
  return TJ_OK;
}

int tj__module_function(void *module, const char *entry, void **function,
                        char *err, size_t errlen)
{
  hipFunction_t fn;
  hipError_t e = hipModuleGetFunction(&fn, (hipModule_t)module, entry);
  if (e != hipSuccess) {
    snprintf(err, errlen, "hipModuleGetFunction(%s): %s", entry,
             hipGetErrorString(e));
    return TJ_EDEVICE;
  }
  *function = (void *)fn;
  return TJ_OK;
}
