/*
 * entries.h: the one reader of a module row's entries column, shared by
 * the library (src/core/user.c writes the column; src/core and src/cache
 * read it) and the command (src/cli/cli_cache.c shows it).  A header of
 * static functions, like json_escape.h, because the command links only
 * the library's public API.
 *
 * The column is "expression<TAB>lowered" lines: each entry as the caller
 * named it and its symbol in the code object.
 */
#ifndef TJ_ENTRIES_H
#define TJ_ENTRIES_H

#include <stddef.h>
#include <string.h>

/* From *p: the next line's expression and lowering as pointer and length,
 * and *p moved past it; 0 at the end.  Lines without a TAB are skipped. */
static inline int tj_entries_next(const char **p, const char **expr,
                                  size_t *elen, const char **lowered,
                                  size_t *llen)
{
  while (*p && **p) {
    const char *line = *p;
    size_t len = strcspn(line, "\n"), tab = strcspn(line, "\t");
    *p = line + len + (line[len] == '\n');
    if (tab < len) {
      *expr = line, *elen = tab;
      *lowered = line + tab + 1, *llen = len - tab - 1;
      return 1;
    }
  }
  return 0;
}

#endif /* TJ_ENTRIES_H */
