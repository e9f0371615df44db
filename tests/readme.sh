#!/bin/sh
# readme.sh: the program in README.md, between its marker comments, built
# the way a user builds it: `make install` from this build tree into a
# temporary DESTDIR, then cc with `pkg-config --cflags --libs tokitai-jit`
# found there, then run with the installed library.  With a GPU it must
# exit 0 and print gelu'(0) = 0.5; without one it must print the no-GPU
# message README.md documents and exit 1; never a signal.
# Run by `make check` from the build directory (srcdir, CC and MAKE set).
set -u
srcdir=${srcdir:-.}
readme=$srcdir/README.md
CC=${CC:-cc}
fail=0
for tool in pkg-config "$CC"; do
  command -v "$tool" >/dev/null 2>&1 ||
    { echo "readme.sh: $tool is not installed; skipping"; exit 77; }
done
[ -f Makefile ] && [ -x ./tokitai-jit ] ||
  { echo "readme.sh: not run from a built tree ($(pwd)); skipping"; exit 77; }
tmp=$(mktemp -d "${TJ_TEST_TMPDIR:-/tmp}/readme.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

# The example: the lines between the markers, less the code fence.
awk '/^<!-- end of readme-example/ { on = 0 }
     on && !/^```/ { print }
     /^<!-- readme-example/ { on = 1 }' "$readme" >"$tmp/app.c"
grep -q 'int main' "$tmp/app.c" ||
  { echo "FAIL: no whole program between the readme-example markers of $readme"; exit 1; }

# Install as a user would, into a staging root; the recursive make must
# not join the jobserver of the `make check` that runs this script.  The
# system cache is tests/system_cache.sh's: none here.
dest=$tmp/dest
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s install \
    DESTDIR="$dest" SYSTEM_CACHE_ARCHS=no >"$tmp/install.log" 2>&1; then
  echo "FAIL: make install DESTDIR=$dest"; tail -20 "$tmp/install.log"; exit 1
fi
pc=$(find "$dest" -name tokitai-jit.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: make install put no tokitai-jit.pc under $dest"; exit 1; }
PKG_CONFIG_PATH=$(dirname "$pc")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
PKG_CONFIG_SYSROOT_DIR=$dest
export PKG_CONFIG_PATH PKG_CONFIG_SYSROOT_DIR
flags=$(pkg-config --cflags --libs tokitai-jit) ||
  { echo "FAIL: pkg-config --cflags --libs tokitai-jit"; exit 1; }
echo "pkg-config: $flags"
case $flags in
  *"$dest"*) ;;
  *) echo "FAIL: pkg-config's flags do not point into $dest"; fail=1 ;;
esac

# As pedantic C99 with every warning an error: people copy it.  A
# sanitizer build's library needs its runtime linked first.
if ! $CC -std=c99 -pedantic -Wall -Wextra -Werror ${TJ_SANITIZER_FLAGS:-} \
    "$tmp/app.c" -o "$tmp/app" $flags >"$tmp/cc.log" 2>&1; then
  echo "FAIL: the README example does not compile against the installed library"
  cat "$tmp/cc.log"; exit 1
fi
libdir=$(dirname "$(find "$dest" -name 'libtokitai-jit.so' | head -n 1)")
if LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$tmp/app" 2>/dev/null | grep -q 'libtokitai-jit'; then
  LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ldd "$tmp/app" | grep 'libtokitai-jit' | grep -q "$dest" ||
    { echo "FAIL: the example does not load the installed library"; fail=1; }
fi

TOKITAI_JIT_CACHE=$tmp/cache/cache.db LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
  "$tmp/app" >"$tmp/out" 2>"$tmp/err"
status=$?
sed 's/^/  stdout: /' "$tmp/out"
sed 's/^/  stderr: /' "$tmp/err"
if ./tokitai-jit --info | grep -q 'none visible'; then gpu=no; else gpu=yes; fi
case $gpu:$status in
  yes:0)
    grep -q "^gelu'(0) = 0.5\$" "$tmp/out" ||
      { echo "FAIL: the example ran but did not print gelu'(0) = 0.5"; fail=1; }
    # A second run finds the code in the cache.
    TOKITAI_JIT_CACHE=$tmp/cache/cache.db LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} \
      "$tmp/app" >"$tmp/out" 2>"$tmp/err" && grep -q 'from the cache' "$tmp/out" ||
      { echo "FAIL: a second run did not load gelu_bwd_f16 from the cache"; fail=1; }
    ;;
  no:1)
    grep -q '^app: tj_runtime_open: no GPU device available: ' "$tmp/err" ||
      { echo "FAIL: without a GPU the example did not print README.md's message"; fail=1; }
    grep -q 'app: tj_runtime_open: no GPU device available: ' "$readme" ||
      { echo "FAIL: README.md no longer documents the no-GPU message"; fail=1; }
    [ -s "$tmp/out" ] && { echo "FAIL: output on stdout without a GPU"; fail=1; }
    ;;
  *)
    if [ "$status" -gt 128 ]; then
      echo "FAIL: the README example died of signal $((status - 128))"
    else
      echo "FAIL: the README example exited $status (GPU: $gpu)"
    fi
    fail=1
    ;;
esac
[ "$fail" = 0 ] && echo "ok: the README example builds against the installed library and exits $status (GPU: $gpu)"

# The first screen's program: a module with a header, a name expression and
# a C entry, compile-only for an arch of this platform (so it runs with or
# without a GPU), then the cache commands README.md points to.
awk '/^<!-- end of readme-module/ { on = 0 }
     on && !/^```/ { print }
     /^<!-- readme-module/ { on = 1 }' "$readme" >"$tmp/mod.c"
grep -q 'int main' "$tmp/mod.c" ||
  { echo "FAIL: no whole program between the readme-module markers of $readme"; exit 1; }
if ! $CC -std=c99 -pedantic -Wall -Wextra -Werror ${TJ_SANITIZER_FLAGS:-} \
    "$tmp/mod.c" -o "$tmp/mod" $flags >"$tmp/cc.log" 2>&1; then
  echo "FAIL: README's module program does not compile against the installed library"
  cat "$tmp/cc.log"; exit 1
fi
case $(./tokitai-jit --version | sed -n 's/^platform: //p') in
  nvidia) arch=sm_90 ;;
  *) arch=gfx90a ;;
esac
mcache=$tmp/mcache/cache.db
for run in compiled "from the cache"; do
  TOKITAI_JIT_CACHE=$mcache LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} "$tmp/mod" "$arch" \
    >"$tmp/out" 2>"$tmp/err"
  status=$?
  grep -q "^scale<float>: key [0-9a-f]\{12\}, $run.*, for $arch\$" "$tmp/out" &&
    [ "$status" = 0 ] || {
    echo "FAIL: README's module program (run: $run) exited $status"
    sed 's/^/  stdout: /' "$tmp/out"; sed 's/^/  stderr: /' "$tmp/err"; fail=1; }
done
./tokitai-jit --list-cache --cache "$mcache" >"$tmp/out" 2>&1
grep -q 'scale<float> \[_Z' "$tmp/out" && grep -q '^1 entry' "$tmp/out" ||
  { echo "FAIL: --list-cache does not show the module's one row with its lowered name"
    sed 's/^/  /' "$tmp/out"; fail=1; }
[ "$fail" = 0 ] && echo "ok: README's module program compiled once for $arch and was found in the cache"
exit $fail
