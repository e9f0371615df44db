#!/bin/sh
# one_sql_path.sh: every SQL statement of the library goes through the one
# prepare/step/retry path of src/cache/sql.c, so that no statement can meet
# "database is locked" that the others would have waited out.  Fails when
# sqlite3_prepare*, sqlite3_step or sqlite3_exec appears in any other file
# of src/, or not at all in sql.c (the check would then check nothing).
set -u
srcdir=${srcdir:-.}
pattern='sqlite3_step\|sqlite3_exec\|sqlite3_prepare'
one=src/cache/sql.c
if [ ! -f "$srcdir/$one" ]; then
  echo "FAIL: $srcdir/$one is missing"; exit 1
fi
# Sources only: a build in the source tree leaves objects beside them.
files=$(cd "$srcdir" && grep -rl --include='*.[ch]' "$pattern" src)
if [ "$files" != "$one" ]; then
  echo "FAIL: SQL outside $one (use tj__sql_* from src/cache/cache_internal.h):"
  (cd "$srcdir" && grep -rn --include='*.[ch]' "$pattern" src | grep -v "^$one:")
  exit 1
fi
echo "ok: every statement is prepared, stepped and run in $one"
