# cli_prelude.sh: what the command's shell tests share, sourced by each
# (cli.sh, cli_jobs.sh, cli_archs.sh) from its own folder.  It skips (exit
# 77) when ./tokitai-jit is not built here; makes $tmp, a private folder
# removed at exit; and gives the checks below, which count into $checks
# and $failures.  The test ends with `finish`, its exit status.
set -u
me=$(basename "$0")
prog=./tokitai-jit
if [ ! -x "$prog" ]; then
  echo "$me: $prog is not built here ($(pwd)); skipping"
  exit 77
fi
tmp=$(mktemp -d "${TJ_TEST_TMPDIR:-/tmp}/${me%.sh}.XXXXXX") || exit 99
trap 'rm -rf "$tmp"' EXIT

checks=0
failures=0
fail() {
  failures=$((failures + 1))
  echo "FAIL: $*"
}

# run STATUS ARG...: run the program, keep its output in $tmp/out and
# $tmp/err, and check its exit status (a crash is never the status wanted)
# and, when it is not 0, that stderr says why.
run() {
  want=$1
  shift
  last="tokitai-jit $*"
  checks=$((checks + 1))
  "$prog" "$@" >"$tmp/out" 2>"$tmp/err"
  got=$?
  if [ "$got" -ne "$want" ]; then
    fail "$last: exit $got, expected $want"
    sed 's/^/  stdout: /' "$tmp/out"
    sed 's/^/  stderr: /' "$tmp/err"
  fi
  if [ "$want" -ne 0 ] && ! grep -q '^tokitai-jit: ' "$tmp/err"; then
    fail "$last: no 'tokitai-jit: ' message on stderr"
  fi
}
# out PATTERN / err PATTERN: the last run's stdout / stderr matches.
out() {
  grep -Eq -- "$1" "$tmp/out" || { fail "$last: stdout lacks /$1/"; sed 's/^/  stdout: /' "$tmp/out"; }
}
err() {
  grep -Eq -- "$1" "$tmp/err" || { fail "$last: stderr lacks /$1/"; sed 's/^/  stderr: /' "$tmp/err"; }
}
no_out() {
  if grep -Eq -- "$1" "$tmp/out"; then fail "$last: stdout has /$1/"; fi
}

# The last line: what ran and what failed; 0 when nothing did.
finish() {
  echo "$me: $checks checks, $failures failed"
  [ "$failures" -eq 0 ]
}
