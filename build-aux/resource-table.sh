#!/bin/sh
# resource-table.sh: the table of each embedded kernel's resources per arch
# in cache/README.md, made from what the cache stores (no GPU needed).
#
#   resource-table.sh warm PROG DIR ARCH...
#     PROG --warm --arch ARCH --cache DIR/ARCH.db, then --list-cache --json
#     into DIR/ARCH.json, and PROG --version's compiler line into
#     DIR/compiler.  Needs only sh and PROG, so that it runs inside a
#     chroot (the HIP 5.7 lane's Debian 13 root).
#   resource-table.sh table TITLE DIR
#     The markdown table of DIR's JSON files (python3), headed by TITLE
#     and the compiler; one line per kernel and arch.
set -eu
mode=${1:?usage: resource-table.sh warm PROG DIR ARCH... | table TITLE DIR}
shift
case $mode in
warm)
  prog=$1 dir=$2
  shift 2
  mkdir -p -m 700 "$dir"
  "$prog" --version | sed -n 's/^compiler: //p' >"$dir/compiler"
  for arch in "$@"; do
    rm -f "$dir/$arch.db"*
    "$prog" --warm --arch "$arch" --cache "$dir/$arch.db" >&2
    "$prog" --list-cache --json --cache "$dir/$arch.db" >"$dir/$arch.json"
  done
  ;;
table)
  python3 - "$1" "$2" <<'PY'
import glob, json, os, sys
title, d = sys.argv[1], sys.argv[2]
compiler = open(os.path.join(d, "compiler")).read().strip()
rows = []
for f in sorted(glob.glob(os.path.join(d, "*.json"))):
    for r in json.load(open(f)):
        for k in r["kernels"]:
            rows.append((k["entry"], r["arch"], k, r["code_size"]))
def fig(v, unit=""):
    return "-" if v is None else f"{v}{unit}"
print(f"**{title}** ({compiler})\n")
print("| kernel | arch | VGPRs / regs | SGPRs | AGPRs | LDS / shared | "
      "scratch / local | spills | max threads | code |")
print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
for name, arch, k, size in sorted(rows, key=lambda t: (t[0], t[1])):
    print(f"| {name} | {arch} | {fig(k['regs'])} | {fig(k['sgprs'])} | "
          f"{fig(k['agprs'])} | {fig(k['shared_bytes'], ' B')} | "
          f"{fig(k['local_bytes'], ' B')} | {fig(k['spills'])} | "
          f"{fig(k['max_threads'])} | {size} B |")
print()
PY
  ;;
*)
  echo "resource-table.sh: unknown mode $mode" >&2
  exit 2
  ;;
esac
