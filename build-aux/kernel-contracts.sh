#!/bin/sh
# kernel-contracts.sh: write <tokitai-jit/kernels.h>, the launch contract of
# every embedded kernel, from the kernel sources themselves.
#   kernel-contracts.sh OUT.h kernels/*.hip
# Every `extern "C" __global__` entry must sit right under a comment
#   /* contract ...
#    *   block      X Y Z          threads; X*Y*Z must be the entry's
#    *                             __launch_bounds__, when it has one
#    *   grid       the grid rule (text)
#    *   shared     bytes of dynamic shared memory
#    *   alignment  what the pointers must be (text)
#    *   notes      everything else a caller must know (text)
#    */
# where a line indented past the key continues its value.  The signature is
# taken from the entry's own line, so neither can drift from the code; a
# missing, unknown or malformed field stops the build.
set -eu
out=$1; shift
tmp="$out.tmp"
mkdir -p "$(dirname "$out")"
files=
for f in "$@"; do files="$files${files:+ }kernels/${f##*/}"; done
awk -v files="$files" '
function fail(msg) { printf "%s:%d: %s\n", FILENAME, FNR, msg > "/dev/stderr"; bad = 1; exit 1 }
function trim(s) { sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s); return s }
function cstr(s) { gsub(/\\/, "\\\\", s); gsub(/"/, "\\\"", s); return "\"" s "\"" }
# Word-wrap s into comment lines that start with lead (first) and pad.
function wrap(lead, pad, s,   n, w, i, line, text) {
  n = split(s, w, / +/); line = lead; text = ""
  for (i = 1; i <= n; i++) {
    if (length(line) + length(w[i]) + 1 > 78 && line != lead && line != pad) {
      text = text line "\n"; line = pad
    }
    line = line ((line == lead || line == pad) ? "" : " ") w[i]
  }
  return text line "\n"
}
# The same for a signature, broken only after a comma.
function wrapsig(lead, pad, s,   n, w, i, line, text, sep) {
  n = split(s, w, /, /); line = lead; text = ""
  for (i = 1; i <= n; i++) {
    sep = i < n ? "," : ""
    if (length(line) + length(w[i]) + 2 > 78 && line != lead && line != pad) {
      text = text line "\n"; line = pad
    }
    line = line ((line == lead || line == pad) ? "" : " ") w[i] sep
  }
  return text line "\n"
}
FNR == 1 { file = FILENAME; sub(/.*\//, "", file); incontract = 0; have = 0 }
/^\/\* contract/ { incontract = 1; have = 0; key = ""; delete field; next }
incontract && /^ \*\/$/ { incontract = 0; have = 1; next }
incontract {
  line = $0
  if (line !~ /^ \*/) fail("a contract line must start with \" *\"")
  sub(/^ \*/, "", line)
  match(line, /^ */)
  if (RLENGTH <= 4 && line ~ /[^ ]/) {
    key = line; sub(/^ +/, "", key); sub(/ .*/, "", key)
    if (key !~ /^(block|grid|shared|alignment|notes)$/) fail("unknown contract field \"" key "\"")
    if (key in field) fail("contract field \"" key "\" given twice")
    value = line; sub(/^ +[^ ]+/, "", value); field[key] = trim(value)
  } else if (line ~ /[^ ]/) {
    if (key == "") fail("a continuation line before any field")
    field[key] = field[key] " " trim(line)
  }
  next
}
/^extern "C" __global__/ {
  if (!have) fail("an extern \"C\" __global__ entry without a /* contract */ comment right above it")
  have = 0
  sig = $0
  sub(/^extern "C" __global__ +/, "", sig)
  bounds = ""
  if (match(sig, /__launch_bounds__\([^)]*\) */)) {
    bounds = substr(sig, RSTART + 18, RLENGTH - 18)
    sub(/\).*/, "", bounds); sub(/,.*/, "", bounds); bounds = trim(bounds)
    sig = substr(sig, 1, RSTART - 1) substr(sig, RSTART + RLENGTH)
  }
  sub(/[ \t]*\{[ \t]*$/, "", sig)
  if (sig !~ /\)$/) fail("the entry line must hold the whole signature, up to its \")\"")
  name = sig; sub(/\(.*/, "", name); sub(/.*[^A-Za-z0-9_]/, "", name)
  if (name == "") fail("no entry name")
  split("block grid shared alignment notes", need, " ")
  for (i = 1; i <= 5; i++) if (!(need[i] in field) || field[need[i]] == "") fail(name ": contract lacks \"" need[i] "\"")
  if (split(field["block"], b, / +/) != 3 || b[1] !~ /^[1-9][0-9]*$/ || b[2] !~ /^[1-9][0-9]*$/ || b[3] !~ /^[1-9][0-9]*$/)
    fail(name ": block must be three positive numbers, X Y Z")
  if (bounds != "" && bounds + 0 != b[1] * b[2] * b[3])
    fail(name ": block " field["block"] " does not match __launch_bounds__(" bounds ")")
  if (field["shared"] !~ /^[0-9]+$/) fail(name ": shared must be a number of bytes")
  n++; names[n] = name; up = toupper(name)
  doc = doc "/*\n * " name " (" file ")\n"
  doc = doc wrapsig(" *   extern \"C\" __global__ ", " *       ", sig)
  doc = doc " *   block      " b[1] " x " b[2] " x " b[3] " threads\n"
  doc = doc wrap(" *   grid       ", " *              ", field["grid"])
  doc = doc " *   shared     " field["shared"] " bytes of dynamic shared memory\n"
  doc = doc wrap(" *   alignment  ", " *              ", field["alignment"])
  doc = doc wrap(" *   notes      ", " *              ", field["notes"])
  doc = doc " */\n"
  doc = doc "#define TJ_KERNEL_" up "_SIGNATURE \\\n  " cstr(sig) "\n"
  doc = doc "#define TJ_KERNEL_" up "_BLOCK_X " b[1] "\n"
  doc = doc "#define TJ_KERNEL_" up "_BLOCK_Y " b[2] "\n"
  doc = doc "#define TJ_KERNEL_" up "_BLOCK_Z " b[3] "\n"
  doc = doc "#define TJ_KERNEL_" up "_SHARED_BYTES " field["shared"] "\n"
  doc = doc "#define TJ_KERNEL_" up "_GRID \\\n  " cstr(field["grid"]) "\n"
  doc = doc "#define TJ_KERNEL_" up "_ALIGNMENT \\\n  " cstr(field["alignment"]) "\n"
  doc = doc "#define TJ_KERNEL_" up "_NOTES \\\n  " cstr(field["notes"]) "\n\n"
  xs = xs "  X(" name ", \"" file "\", TJ_KERNEL_" up "_SIGNATURE, TJ_KERNEL_" up "_BLOCK_X, \\\n" \
          "    TJ_KERNEL_" up "_BLOCK_Y, TJ_KERNEL_" up "_BLOCK_Z, TJ_KERNEL_" up "_SHARED_BYTES, \\\n" \
          "    TJ_KERNEL_" up "_GRID, TJ_KERNEL_" up "_ALIGNMENT, TJ_KERNEL_" up "_NOTES) \\\n"
  delete field
  next
}
END {
  if (bad) exit 1
  if (incontract) { print "kernel-contracts.sh: a contract comment is not closed" > "/dev/stderr"; exit 1 }
  if (n == 0) { print "kernel-contracts.sh: no extern \"C\" __global__ entry found" > "/dev/stderr"; exit 1 }
  print "/* generated by build-aux/kernel-contracts.sh from " files "; do not edit */"
  print "/*"
  print " * tokitai-jit/kernels.h: the launch contract of each embedded kernel, for"
  print " * programs that get one with tj_kernel_get and launch it themselves with"
  print " * tj_launch (the tj_add_i32 ... calls of <tokitai-jit/ops.h> follow these"
  print " * contracts for you).  Written at build time from the comment above each"
  print " * entry in kernels/NAME.hip, and the signature from the entry itself."
  print " *"
  print " * args[i] must point at a value of exactly the i-th parameter type: n is"
  print " * unsigned long long, not int or size_t (a narrower n reads garbage in its"
  print " * upper bytes, silently).  __half is IEEE binary16, uint16_t on the host."
  print " * The grid rules are the ones the tj_ calls use; the block size is fixed."
  print " * Macros only; include it from C or C++ (it needs nothing else)."
  print " */"
  print "#ifndef TOKITAI_JIT_KERNELS_H"
  print "#define TOKITAI_JIT_KERNELS_H"
  print ""
  printf "%s", doc
  print "/* X(name, file, signature, block_x, block_y, block_z, shared_bytes, grid,"
  print " *   alignment, notes) once per embedded kernel, in the library'"'"'s order; name"
  print " * is a bare token (#name makes it a string), the rest are the macros above. */"
  print "#define TJ_KERNEL_CONTRACTS(X) \\"
  printf "%s", xs
  print ""
  print "#define TJ_KERNEL_CONTRACT_COUNT " n
  print ""
  print "#endif /* TOKITAI_JIT_KERNELS_H */"
}' "$@" > "$tmp" || { rm -f "$tmp"; exit 1; }
mv "$tmp" "$out"
