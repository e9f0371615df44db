/*
 * resources.c: what each entry of a row's code asks of the GPU (registers,
 * LDS or shared memory, scratch or local memory, spills), kept in the
 * kernel_resources table beside the row.
 *
 * The figures are read from the code itself (src/platform/codeobj.c, the
 * reader tj_kernel_get_info uses), when the row is stored; so they are a
 * function of the blob, and no caller can store figures that disagree
 * with it.  The table's trigger deletes them with their row.
 */
#include "cache_internal.h"
#include "codeobj.h"
#include "entries.h"

#include <stdlib.h>
#include <string.h>

/* The statement tj__resources_put steps; prepared once per connection. */
const char tj__resources_insert_sql[] =
    "INSERT OR IGNORE INTO kernel_resources (key, entry, lowered, regs, sgprs, "
    "agprs, spills, shared_bytes, local_bytes, max_threads, wave_size) VALUES "
    "(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)";

/* -1 ("the code object does not say") is stored as NULL. */
static void bind_figure(sqlite3_stmt *st, int col, int64_t v)
{
  if (v < 0)
    sqlite3_bind_null(st, col);
  else
    sqlite3_bind_int64(st, col, v);
}

static int put_one(sqlite3_stmt *ins, const char *key, const char *entry,
                   const char *lowered, const void *code, size_t size)
{
  tj__resources r;
  tj__code_resources(code, size, lowered, &r);
  sqlite3_bind_text(ins, 1, key, -1, SQLITE_STATIC);
  sqlite3_bind_text(ins, 2, entry, -1, SQLITE_STATIC);
  sqlite3_bind_text(ins, 3, lowered, -1, SQLITE_STATIC);
  bind_figure(ins, 4, r.regs);
  bind_figure(ins, 5, r.sgprs);
  bind_figure(ins, 6, r.agprs);
  bind_figure(ins, 7, r.spills);
  bind_figure(ins, 8, r.shared_bytes);
  bind_figure(ins, 9, r.local_bytes);
  bind_figure(ins, 10, r.max_threads);
  bind_figure(ins, 11, r.wave_size);
  int rc = tj__sql_step(ins);
  tj__sql_reset(ins);
  return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

/* A module's entries are "expression<TAB>lowered" lines; a row without
 * them (an embedded kernel, or a caller's kernel stored before modules)
 * has one entry, its kernel, named as it is in the code. */
int tj__resources_put(sqlite3_stmt *ins, const char *key, const char *kernel,
                      const char *entries, const void *code, size_t size)
{
  if (!entries || !*entries)
    return put_one(ins, key, kernel, kernel, code, size);
  int rc = SQLITE_OK;
  size_t elen, llen;
  const char *e, *l;
  for (const char *p = entries;
       rc == SQLITE_OK && tj_entries_next(&p, &e, &elen, &l, &llen);) {
    char *entry = strndup(e, elen), *lowered = strndup(l, llen);
    rc = entry && lowered ? put_one(ins, key, entry, lowered, code, size)
                          : SQLITE_NOMEM;
    free(entry);
    free(lowered);
  }
  return rc;
}

/* ------------------------------------------------------------ reading */

static int64_t figure(sqlite3_stmt *st, int col)
{
  return sqlite3_column_type(st, col) == SQLITE_NULL
             ? -1
             : sqlite3_column_int64(st, col);
}

static int read_one(sqlite3_stmt *st, tj_cache_kernel *k)
{
  const unsigned char *entry = sqlite3_column_text(st, 0);
  const unsigned char *lowered = sqlite3_column_text(st, 1);
  memset(k, 0, sizeof *k);
  k->entry = strdup(entry ? (const char *)entry : "");
  k->lowered = strdup(lowered ? (const char *)lowered : "");
  tj_kernel_resources *r = &k->resources;
  r->regs = (int32_t)figure(st, 2);
  r->sgprs = (int32_t)figure(st, 3);
  r->agprs = (int32_t)figure(st, 4);
  r->spills = (int32_t)figure(st, 5);
  r->shared_bytes = figure(st, 6);
  r->local_bytes = figure(st, 7);
  r->max_threads = (int32_t)figure(st, 8);
  r->wave_size = (int32_t)figure(st, 9);
  return k->entry && k->lowered ? SQLITE_OK : SQLITE_NOMEM;
}

const char tj__resources_select_sql[] =
    "SELECT entry, lowered, regs, sgprs, agprs, spills, shared_bytes, "
    "local_bytes, max_threads, wave_size FROM kernel_resources WHERE key = ?1 "
    "ORDER BY rowid";

int tj__resources_get(sqlite3_stmt *sel, const char *key, tj_cache_kernel **out,
                      int *n)
{
  tj_cache_kernel *ks = NULL;
  int count = 0, rc;
  sqlite3_bind_text(sel, 1, key, -1, SQLITE_TRANSIENT);
  while ((rc = tj__sql_step(sel)) == SQLITE_ROW) {
    tj_cache_kernel *grown = realloc(ks, (size_t)(count + 1) * sizeof *ks);
    if (!grown) {
      rc = SQLITE_NOMEM;
      break;
    }
    ks = grown;
    if ((rc = read_one(sel, &ks[count++])) != SQLITE_OK)
      break;
  }
  tj__sql_reset(sel);
  if (rc != SQLITE_DONE) {
    tj__resources_free(ks, count);
    return rc;
  }
  *out = ks;
  *n = count;
  return SQLITE_OK;
}

void tj__resources_free(tj_cache_kernel *ks, int n)
{
  for (int i = 0; ks && i < n; i++) {
    free((char *)ks[i].entry);
    free((char *)ks[i].lowered);
  }
  free(ks);
}
