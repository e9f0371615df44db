#!/bin/sh
# system_cache.sh: `make install` writes the system cache (README.md,
# "System caches"): installed from this build tree into a temporary
# DESTDIR with one arch (SYSTEM_CACHE_ARCHS), it lies where the library
# looks by default, read-only for others, and a fresh per-user cache gets
# every embedded kernel for that arch from it with zero compiles, through
# the installed command and library; `make uninstall` leaves no file.
# An arch the compiler lacks fails the install and installs nothing.
# Also what build-aux/system-cache.sh makes of auto, no and a list.
# Run by `make check` from the build directory (srcdir and MAKE set).
. "$(dirname "$0")/cli_prelude.sh"
unset TOKITAI_JIT_CACHE TOKITAI_JIT_SYSTEM_CACHE NO_COLOR
srcdir=${srcdir:-.}
script=$srcdir/build-aux/system-cache.sh
[ -f Makefile ] || { echo "$me: not run from a built tree; skipping"; exit 77; }

platform=$("$prog" --version | sed -n 's/^platform: //p')
case $platform in
  nvidia) list="sm_80 sm_90 sm_90a" ;;
  *) list="gfx90a gfx942 gfx1100 gfx1101" ;;
esac
# auto: the platform's archs that the compiler lists, in the list's order.
checks=$((checks + 1))
auto=$(sh "$script" archs "$prog" "$platform" auto) || fail "archs auto: exit $?"
known=$("$prog" --info | sed -n 's/^compiler archs *//p' | tr ',' ' ')
want=
for a in $list; do
  case " $known " in *" $a "*|*" ${a%a} "*) want="$want $a" ;; esac
done
[ "$(echo $auto)" = "$(echo $want)" ] || fail "archs auto: '$auto', not '$want'"
checks=$((checks + 1))
[ -z "$(sh "$script" archs "$prog" "$platform" no)" ] || fail "archs no is not empty"
checks=$((checks + 1))
[ "$(echo $(sh "$script" archs "$prog" "$platform" 'gfx90a sm_90'))" = "gfx90a sm_90" ] ||
  fail "archs of a list are not the list"
arch=$(echo $auto | cut -d' ' -f1)
if [ -z "$arch" ]; then
  echo "$me: the compiler knows none of $list; skipping"
  exit 77
fi

# The path the library reads by default, and the install.
default=$("$prog" --stats --system | sed -n 's/^no system cache at \(.*\) (nothing.*/\1/p; s/^cache  *//p')
checks=$((checks + 1))
[ -n "$default" ] || fail "tokitai-jit --stats --system names no default path"
dest=$tmp/dest
work=$tmp/work
mkdir "$work" || exit 99
checks=$((checks + 1))
if ! TMPDIR=$work env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s install \
    DESTDIR="$dest" SYSTEM_CACHE_ARCHS="$arch" >"$tmp/install.log" 2>&1; then
  fail "make install DESTDIR=$dest SYSTEM_CACHE_ARCHS=$arch"
  tail -20 "$tmp/install.log"; finish; exit 1
fi
sys=$dest$default
checks=$((checks + 1))
[ -s "$sys" ] || { fail "no system cache at $sys"; find "$dest" -name 'system.db*'; finish; exit 1; }
checks=$((checks + 1))
[ "$(stat -c %a "$sys")" = 644 ] || fail "$sys has mode $(stat -c %a "$sys"), not 644"
checks=$((checks + 1))
[ "$(find "$dest" -name 'system.db*' | wc -l)" -eq 1 ] || fail "more than system.db under $dest"
checks=$((checks + 1))
[ -z "$(ls -A "$work")" ] || fail "make install left $(ls -A "$work") in $work"
run 0 --verify-cache --system --cache "$sys"
out ' 0 bad$'

# The installed command and library, a fresh per-user cache, the system
# cache by its variable (the default path lies outside DESTDIR).
bin=$(find "$dest" -path '*/bin/tokitai-jit' -type f | head -n 1)
lib=$(dirname "$(find "$dest" -name 'libtokitai-jit.so' | head -n 1)")
nkernels=$("$prog" --list-kernels --all | grep -Ec '^[A-Za-z_][A-Za-z0-9_]*$')
fresh=$tmp/fresh/cache.db
checks=$((checks + 1))
[ -x "$bin" ] && [ -d "$lib" ] || { fail "no installed command or library under $dest"; finish; exit 1; }
# installed PROGRAM SYSTEM: a program that runs the installed command
# with the installed library and TOKITAI_JIT_SYSTEM_CACHE=SYSTEM.
installed() {
  { echo '#!/bin/sh'
    echo "LD_LIBRARY_PATH='$lib'\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
    echo "TOKITAI_JIT_SYSTEM_CACHE='$2'"
    echo 'export LD_LIBRARY_PATH TOKITAI_JIT_SYSTEM_CACHE'
    [ -n "$2" ] || echo 'unset TOKITAI_JIT_SYSTEM_CACHE'
    echo "exec '$bin' \"\$@\""; } >"$1" && chmod +x "$1"
}
installed "$tmp/with-system" "$sys"
installed "$tmp/without" ""
built=$prog
prog=$tmp/with-system
run 0 --warm --arch "$arch" --cache "$fresh"
out "^warmed $nkernels kernels for $arch in $fresh: 0 compiled \([^)]*\), 0 stored with their file, $nkernels already cached\$"
run 0 --stats --cache "$fresh"
out "^entries +$nkernels\$"
out "^from system +$nkernels entries, $nkernels hits\$"
# Without it (and with nothing at the default path) the same arch compiles.
if [ ! -e "$default" ]; then
  prog=$tmp/without
  run 0 --warm --arch "$arch" add_i32 --cache "$tmp/without-system/cache.db"
  out "^warmed 1 kernel for $arch in .*: 1 compiled "
fi
prog=$built

checks=$((checks + 1))
if ! env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s uninstall \
    DESTDIR="$dest" >"$tmp/uninstall.log" 2>&1; then
  fail "make uninstall DESTDIR=$dest"; tail -20 "$tmp/uninstall.log"
fi
checks=$((checks + 1))
[ ! -e "$sys" ] || fail "make uninstall left $sys"
checks=$((checks + 1))
left=$(find "$dest" -type f)
[ -z "$left" ] || fail "make uninstall left files: $left"

# An arch the compiler lacks, asked for by name, fails the install with
# the command's message and installs no system cache.
bad=$tmp/bad
checks=$((checks + 1))
if TMPDIR=$work env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL ${MAKE:-make} -s install \
    DESTDIR="$bad" SYSTEM_CACHE_ARCHS="$arch gfx9999" >"$tmp/bad.log" 2>&1; then
  fail "make install SYSTEM_CACHE_ARCHS='$arch gfx9999' succeeded"
fi
checks=$((checks + 1))
grep -Eq "gfx9999.*(not supported|not an NVIDIA arch)" "$tmp/bad.log" ||
  { fail "make install SYSTEM_CACHE_ARCHS=gfx9999 does not say why"; sed 's/^/  /' "$tmp/bad.log"; }
checks=$((checks + 1))
[ -z "$(find "$bad" -name 'system.db*')" ] || fail "a failed install left a system cache"
checks=$((checks + 1))
[ -z "$(ls -A "$work")" ] || fail "a failed install left $(ls -A "$work") in $work"

finish
