#!/bin/sh
# abi.sh: the public header compiles on its own as pedantic C99 and as C++,
# and the shared library exports the tj_ names the header declares and
# nothing else (internals are tj__, hidden).
set -u
srcdir=${srcdir:-.}
inc=$srcdir/src/include
headers="$inc/tokitai-jit.h $inc/tokitai-jit/cache.h $inc/tokitai-jit/ops.h"
CC=${CC:-cc}
fail=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '#include "tokitai-jit.h"\nint main(void) { return tj_strerror(TJ_OK) == 0; }\n' > "$tmp/use.c"

if $CC -std=c99 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$tmp/use.c" -o "$tmp/use.o"; then
  echo "ok: header is pedantic C99"
else
  echo "FAIL: header does not compile as pedantic C99"; fail=1
fi
if command -v c++ >/dev/null 2>&1; then
  cp "$tmp/use.c" "$tmp/use.cc"
  if c++ -std=c++11 -pedantic -Wall -Wextra -Werror -I"$inc" -c "$tmp/use.cc" -o "$tmp/usecc.o"; then
    echo "ok: header compiles as C++"
  else
    echo "FAIL: header does not compile as C++"; fail=1
  fi
else
  echo "note: no C++ compiler, C++ check not run"
fi

lib=.libs/libtokitai-jit.so
if [ -f "$lib" ] && command -v nm >/dev/null 2>&1; then
  nm -D --defined-only "$lib" | awk '$2 ~ /^[TDBRV]$/ {print $3}' | sort > "$tmp/exported"
  cat $headers | sed -n 's/^TJ_EXPORT [^(]*[ *]\(tj_[a-z0-9_]*\)(.*/\1/p' | sort -u > "$tmp/declared"
  leaked=$(grep -v '^tj_[a-z]' "$tmp/exported" | grep -v '^_' || true)
  missing=$(comm -23 "$tmp/declared" "$tmp/exported")
  extra=$(comm -13 "$tmp/declared" "$tmp/exported" | grep '^tj_' || true)
  [ -z "$leaked" ] || { echo "FAIL: exported non-tj_ symbols: $leaked"; fail=1; }
  [ -z "$missing" ] || { echo "FAIL: declared but not exported: $missing"; fail=1; }
  [ -z "$extra" ] || { echo "FAIL: exported but not declared in the header: $extra"; fail=1; }
  [ -s "$tmp/declared" ] || { echo "FAIL: found no TJ_EXPORT declarations"; fail=1; }
  [ $fail = 0 ] && echo "ok: $(wc -l < "$tmp/exported") exported symbols, all declared tj_ names"
else
  echo "note: no shared library built (or no nm): symbol check not run"
fi
exit $fail
