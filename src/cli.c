/* cli.c: the tokitai-jit command. */
#include "tokitai-jit.h"

#include <stdio.h>
#include <string.h>

int main(int argc, char **argv)
{
  if (argc > 1 && strcmp(argv[1], "--version") == 0) {
    printf("tokitai-jit %s (%s)\n", tj_version(), tj_platform());
    return 0;
  }
  fprintf(stderr, "usage: tokitai-jit --version\n");
  return 2;
}
