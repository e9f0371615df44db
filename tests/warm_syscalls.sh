#!/bin/sh
# warm_syscalls.sh: a warm start with TOKITAI_JIT_REMOTE set touches
# neither SQLite nor the network.  tokitai-jit --warm add_i32 first fills
# a cache (its code directory too) through a redis-server of the test's
# own; then the same command, the kernel in the code directory, runs under
# strace with the variable naming that live server, and again naming a
# dead one.  Each traced run must open no -wal, -shm, -journal or .lock
# beside the cache, open the cache file itself at most read-only (the
# runtime reads its first 100 bytes for the mark, without SQLite, which
# opens it read-write), make no socket and connect nowhere, and read the
# kernel's file in the code directory (the trace sees the warm start).
# The live server must count no connection from it.
# Exit 0 when all passed, 1 when any failed, 77 when the program is
# absent, strace is not installed or ptrace is not permitted here.
. "$(dirname "$0")/cli_prelude.sh"
unset TOKITAI_JIT_TRACE TOKITAI_JIT_SYSTEM_CACHE

if ! command -v strace >/dev/null 2>&1; then
  echo "$me: strace is not installed; skipping"
  exit 77
fi
if ! strace -f -o /dev/null true >/dev/null 2>&1; then
  echo "$me: strace cannot trace here (ptrace not permitted); skipping"
  exit 77
fi
# LeakSanitizer cannot run under ptrace: a sanitizer build's leak check
# is off for this script's runs (make check's other suites keep it).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS
# The program itself, not libtool's wrapper script (whose sed and ls
# open files and sockets of their own).
traced() {
  if [ -x ./libtool ] && [ -x .libs/tokitai-jit ]; then
    ./libtool --mode=execute strace "$@"
  else
    strace "$@"
  fi
}

case $("$prog" --version | sed -n 's/^platform: //p') in
  amd) arch=gfx90a ;;
  nvidia) arch=sm_90 ;;
  *) echo "$me: unknown platform"; exit 99 ;;
esac
cache=$tmp/c.db
export TOKITAI_JIT_CACHE="$cache"

# ------------------------------------------------------------ the server
port=
server=
if command -v redis-server >/dev/null 2>&1 && command -v redis-cli >/dev/null 2>&1 &&
   command -v python3 >/dev/null 2>&1; then
  for attempt in 1 2 3 4 5; do
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
      --dir "$tmp" --daemonize no >"$tmp/redis.log" 2>&1 &
    server=$!
    i=0
    while [ $i -lt 300 ] && ! redis-cli -p "$port" ping >/dev/null 2>&1; do
      kill -0 "$server" 2>/dev/null || break
      sleep 0.02
      i=$((i + 1))
    done
    redis-cli -p "$port" ping >/dev/null 2>&1 && break
    kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    server=
  done
fi
stop_server() {
  if [ -n "$server" ]; then
    kill -9 "$server" 2>/dev/null
    wait "$server" 2>/dev/null
    server=
  fi
}
trap 'stop_server; rm -rf "$tmp"' EXIT
connections() {
  redis-cli -p "$port" info stats | tr -d '\r' |
    sed -n 's/^total_connections_received://p'
}

# ------------------------------------------------------------ fill it
if [ -n "$server" ]; then
  live=redis://127.0.0.1:$port
  TOKITAI_JIT_REMOTE=$live
  export TOKITAI_JIT_REMOTE
  run 0 --warm add_i32 --arch "$arch" -j 1
  unset TOKITAI_JIT_REMOTE
else
  live=
  echo "$me: no redis-server here (or redis-cli, python3): the live server's run is left out"
  run 0 --warm add_i32 --arch "$arch" -j 1
fi
out "1 compiled"
checks=$((checks + 1))
if ! ls "$cache.code" 2>/dev/null | grep -Eq '^[0-9a-f]{32}$'; then
  fail "no kernel file in $cache.code after the compile"
fi

# ------------------------------------------------------------ warm starts
# warm_start LABEL URL: the traced warm start and its checks.
warm_start() {
  label=$1
  trace=$tmp/trace.$label
  checks=$((checks + 1))
  if ! TOKITAI_JIT_REMOTE=$2 traced -f -e trace=openat,open,socket,connect \
       -o "$trace" "$prog" --warm add_i32 --arch "$arch" -j 1 \
       >"$tmp/out" 2>"$tmp/err"; then
    fail "$label: the warm start failed"
    sed 's/^/  stderr: /' "$tmp/err"
    return
  fi
  last="$label warm start"
  out "0 compiled.*1 already cached"
  # "PATH" or "PATH<side>" as strace quotes it, whatever the call.
  for side in -wal -shm -journal .lock; do
    if grep -F "\"$cache$side\"" "$trace" >"$tmp/hits"; then
      fail "$label: the warm start opened $cache$side"
      sed 's/^/  /' "$tmp/hits"
    fi
  done
  if grep -F "\"$cache\"" "$trace" | grep -E 'O_RDWR|O_WRONLY|O_CREAT' \
       >"$tmp/hits"; then
    fail "$label: the warm start opened the cache file for writing (SQLite)"
    sed 's/^/  /' "$tmp/hits"
  fi
  if grep -E '(^|[0-9] +)(socket|connect)\(' "$trace" >"$tmp/hits"; then
    fail "$label: the warm start made a socket or connected"
    sed 's/^/  /' "$tmp/hits"
  fi
  if ! grep -Eq "\"($cache\\.code/)?[0-9a-f]{32}\"" "$trace"; then
    fail "$label: the trace shows no read of the kernel's file"
    sed 's/^/  /' "$trace" | tail -20
  fi
}

if [ -n "$live" ]; then
  before=$(connections)
  warm_start live "$live"
  after=$(connections)
  checks=$((checks + 1))
  # one more: the question itself
  if [ "$after" != "$((before + 1))" ]; then
    fail "live: the server counted $((after - before - 1)) connections from the warm start"
  fi
  stop_server
fi
warm_start dead "redis://127.0.0.1:${port:-1}"

finish
