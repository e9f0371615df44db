/*
 * cli_compile.c: tokitai-jit --compile FILE --entry NAME...: precompile a
 * program's own kernels (one module) into the cache, for each --arch,
 * through the public API only, so that the key is the one the program's
 * tj_module_compile or tj_kernel_compile computes for the same source,
 * entries and options.
 */
#include "config.h"
#include "cli.h"
#include "tokitai-jit.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FILE_BYTES (64u << 20)

static char *read_source(const char *path)
{
  FILE *f = fopen(path, "rb");
  if (!f) {
    cli_error("cannot open %s: %s", path, strerror(errno));
    return NULL;
  }
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap + 1);
  while (buf) {
    size_t got = fread(buf + len, 1, cap - len, f);
    len += got;
    if (len < cap)
      break;
    char *grown = cap < MAX_FILE_BYTES ? realloc(buf, 2 * cap + 1) : NULL;
    if (!grown) {
      free(buf);
      buf = NULL;
      cli_error("%s: over %u bytes, or out of memory", path, MAX_FILE_BYTES);
      break;
    }
    buf = grown;
    cap *= 2;
  }
  int bad = ferror(f);
  fclose(f);
  if (buf && bad) {
    cli_error("cannot read %s", path);
    free(buf);
    return NULL;
  }
  if (buf && memchr(buf, '\0', len)) {
    cli_error("%s holds a NUL byte: not a source file", path);
    free(buf);
    return NULL;
  }
  if (buf)
    buf[len] = '\0';
  return buf;
}

static void print_text(const tj_module_info *i, const char *file,
                       const char *arch)
{
  char size[32], ms[32];
  cli_format_size(i->code_size, size, sizeof size);
  cli_format_ms(i->compile_ms, ms, sizeof ms);
  if (i->origin == TJ_FROM_COMPILER)
    printf("%s for %s: compiled in %s, key %s, %s\n", file, arch, ms, i->key, size);
  else
    printf("%s for %s: already cached, key %s, %s\n", file, arch, i->key, size);
  for (int e = 0; e < i->num_entries; e++)
    printf("  %s -> %s\n", i->entries[e], i->lowered[e]);
}

static void print_json(const tj_module_info *i, const char *file,
                       const char *arch, int first)
{
  fputs(first ? "[\n  {\"file\": " : ",\n  {\"file\": ", stdout);
  cli_json_string(stdout, file);
  fputs(", \"arch\": ", stdout);
  cli_json_string(stdout, arch);
  printf(", \"key\": \"%s\", \"origin\": \"%s\", \"code_size\": %zu, "
         "\"compile_ms\": %.3f, \"entries\": [", i->key,
         i->origin == TJ_FROM_COMPILER ? "compiler" : "cache", i->code_size,
         i->compile_ms);
  for (int e = 0; e < i->num_entries; e++) {
    fputs(e ? ", {\"entry\": " : "{\"entry\": ", stdout);
    cli_json_string(stdout, i->entries[e]);
    fputs(", \"lowered\": ", stdout);
    cli_json_string(stdout, i->lowered[e]);
    putchar('}');
  }
  fputs("]}", stdout);
}

/* One arch (NULL: this machine's GPU); EXIT_OK or EXIT_FAIL. */
static int compile_for(const cli_options *o, const tj_module_source *src,
                       const char *arch, int first)
{
  tj_options opts = cli_runtime_options(o, arch);
  tj_runtime *rt = NULL;
  tj_module *m = NULL;
  tj_module_info info;
  memset(&info, 0, sizeof info);
  info.size = sizeof info;
  int rc = tj_runtime_open(&rt, &opts);
  if (rc != TJ_OK) {
    cli_error("%s%s: %s", arch ? "--arch " : "cannot compile for this "
              "machine's GPU (give --arch to compile without one)",
              arch ? arch : "", tj_errmsg(rt));
  } else if (!tj_runtime_cache_path(rt)) {
    cli_error("no cache to compile into: %s", tj_errmsg(rt));
    rc = TJ_ECACHE;
  } else if ((rc = tj_module_compile(rt, src, &m)) != TJ_OK) {
    /* The compiler's log, whole: it is what the user needs. */
    cli_error("%s for %s: %s: %s", src->name, tj_runtime_arch(rt),
              tj_strerror(rc), tj_errmsg(rt));
  } else if ((rc = tj_module_get_info(m, &info)) == TJ_OK) {
    if (o->json)
      print_json(&info, src->name, tj_runtime_arch(rt), first);
    else
      print_text(&info, src->name, tj_runtime_arch(rt));
  }
  tj_runtime_close(rt);
  return rc == TJ_OK ? EXIT_OK : EXIT_FAIL;
}

int cli_compile(const cli_options *o)
{
  if (o->nentries == 0) {
    cli_error("--compile needs at least one --entry NAME");
    return EXIT_USAGE;
  }
  char *source = read_source(o->compile_file);
  if (!source)
    return EXIT_FAIL;
  tj_module_source src;
  memset(&src, 0, sizeof src);
  src.size = sizeof src;
  src.source = source;
  src.name = o->compile_file;
  src.options = o->compile_args;
  src.num_options = o->ncompile_args;
  src.entries = o->entries;
  src.num_entries = o->nentries;
  int rc = EXIT_OK, printed = 0;
  int n = o->narchs ? o->narchs : 1;
  for (int a = 0; a < n; a++) {
    int one = compile_for(o, &src, o->narchs ? o->archs[a] : NULL, !printed);
    printed += one == EXIT_OK;
    if (one != EXIT_OK)
      rc = EXIT_FAIL;
  }
  if (o->json)
    fputs(printed ? "\n]\n" : "[]\n", stdout);
  free(source);
  return rc;
}
