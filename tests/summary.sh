#!/bin/sh
# summary.sh DIR...: one line, "N passed, N failed, N skipped", summed over
# the automake test harness's .trs files found under each DIR.
pass=0 fail=0 skip=0
for f in $(find "$@" -name '*.trs' 2>/dev/null); do
  r=$(sed -n 's/^:test-result: //p' "$f")
  case $r in
    PASS|XFAIL) pass=$((pass + 1)) ;;
    SKIP) skip=$((skip + 1)) ;;
    *) fail=$((fail + 1)) ;;
  esac
done
echo "$pass passed, $fail failed, $skip skipped"
