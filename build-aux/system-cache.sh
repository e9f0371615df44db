#!/bin/sh
# system-cache.sh: the system cache `make install` writes (README.md,
# "System caches"): every embedded kernel for a list of archs, compiled by
# the just-built command, checked, and installed read-only.
#
#   system-cache.sh archs   PROG PLATFORM ARCHS
#       print the archs ARCHS stands for: auto is those of the platform's
#       list that PROG's compiler knows (--info); no is none
#   system-cache.sh install PROG PLATFORM ARCHS DEST WORKDIR
#       --warm those archs into a cache in a new folder under WORKDIR,
#       --merge that into a new file, install it as DEST (mode 0644) and
#       --verify-cache --system it there.  The Makefile passes $TMPDIR or
#       /tmp: the cache refuses a build tree that another user owns, as
#       under `sudo make install`.
#
# PROG is ./tokitai-jit of the build tree (libtool's wrapper finds the
# uninstalled library).  An arch given by name that the compiler lacks
# fails the install with the command's message; auto skips it.
set -u -f # no globbing of the arch list
me=system-cache.sh
die() { echo "$me: $*" >&2; exit 1; }

# The archs: one a line.
resolve() { # PROG PLATFORM ARCHS
  case $3 in
    no) return 0 ;;
    auto) ;;
    *) printf '%s\n' $3; return 0 ;;
  esac
  case $2 in
    nvidia) want="sm_80 sm_90 sm_90a" ;;
    amd) want="gfx90a gfx942 gfx1100 gfx1101" ;;
    *) die "unknown platform '$2'" ;;
  esac
  known=$("$1" --info | sed -n 's/^compiler archs *//p' | tr ',' ' ') ||
    die "$1 --info failed"
  # NVRTC lists sm_90 for the sm_90a it also takes.
  for a in $want; do
    case $2:$a in nvidia:sm_*a) base=${a%a} ;; *) base=$a ;; esac
    for k in $known; do
      [ "$a" = "$k" ] || [ "$base" = "$k" ] && { echo "$a"; break; }
    done
  done
  return 0
}

# The entries of a cache file, as --stats counts them.
entries() { # FILE [--system]
  "$prog" --stats ${2:-} --cache "$1" | sed -n 's/^entries  *//p'
}

install_cache() { # PROG PLATFORM ARCHS DEST WORKDIR
  prog=$1 dest=$4
  archs=$(resolve "$1" "$2" "$3") || exit 1
  if [ -z "$archs" ]; then
    echo "$me: no system cache to install (archs: $3)"
    return 0
  fi
  # An absolute path: `--warm -j 1` with a relative --cache fails its own
  # check of the rows it stored.
  top=$(cd "$5" && pwd) || die "no folder $5"
  work=$(mktemp -d "$top/tokitai-jit-system-cache.XXXXXX") || die "cannot make a folder in $top"
  trap 'rm -rf "$work"' EXIT
  set --
  for a in $archs; do set -- "$@" --arch "$a"; done
  echo "$me: compiling the embedded kernels for" $archs
  # One process (-j 1): its close folds the WAL into the file.  Rows that
  # worker processes store can stay in the WAL, which --merge reads past
  # (it opens its sources as system caches, immutable).
  "$prog" --warm -q -j 1 "$@" --cache "$work/warm.db" ||
    die "tokitai-jit --warm $* failed"
  # --merge leaves every row in the main file of the new one; the count
  # says none was left behind.
  "$prog" --merge "$work/warm.db" --cache "$work/system.db" >/dev/null ||
    die "tokitai-jit --merge into $work/system.db failed"
  want=$(entries "$work/warm.db") && got=$(entries "$work/system.db" --system) &&
    [ -n "$want" ] && [ "$want" = "$got" ] ||
    die "$work/system.db holds ${got:-no} entries of the ${want:-?} compiled"
  mkdir -p "$(dirname "$dest")" || die "cannot make $(dirname "$dest")"
  rm -f "$dest" "$dest-wal" "$dest-shm"
  cp "$work/system.db" "$dest.tmp" && chmod 0644 "$dest.tmp" &&
    mv -f "$dest.tmp" "$dest" || { rm -f "$dest.tmp"; die "cannot write $dest"; }
  "$prog" --verify-cache --system --cache "$dest" ||
    { rm -f "$dest"; die "tokitai-jit --verify-cache --system --cache $dest failed"; }
  [ -s "$dest" ] || die "$dest is missing after the install"
  echo "$me: installed $dest ($(wc -c <"$dest" | tr -d ' ') bytes)"
}

case ${1:-} in
  archs) [ $# -eq 4 ] || die "usage: $me archs PROG PLATFORM ARCHS"
    resolve "$2" "$3" "$4" ;;
  install) [ $# -eq 6 ] || die "usage: $me install PROG PLATFORM ARCHS DEST WORKDIR"
    install_cache "$2" "$3" "$4" "$5" "$6" ;;
  *) die "usage: $me archs|install ..." ;;
esac
