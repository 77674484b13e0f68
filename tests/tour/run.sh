#!/usr/bin/env bash
# The README's tour as a new user runs it (ctest `readme_tour`, label `system`):
#   run.sh <repository root> <inac binary>
# Extracts every ```sh block of the README's "A short tour" section and runs them in order, as
# written, in one bash with `set -e` (a command that fails fails the test), from a fresh directory
# holding links to the repository's examples/, with build/cli/inac pointing to the binary under
# test. As root it runs in a network namespace of its own (the tour's fixed ports, 8080 and
# 50000-50019, cannot clash with anything); otherwise it skips (77) when one of those ports is taken.
# Whatever the tour starts in the background is stopped at the end, also when it fails.
set -uo pipefail
repo="${1:?usage: run.sh <repository root> <inac binary>}"
inac="${2:?usage: run.sh <repository root> <inac binary>}"
work="$(mktemp -d "${TMPDIR:-/tmp}/inac-tour.XXXXXX")"
trap 'rm -rf "$work"' EXIT

# The tour's command blocks: the ```sh fences between "## A short tour" and the next "## ".
awk '/^## A short tour/{on=1; next} /^## /{on=0} on && /^```sh$/{code=1; next}
     on && /^```$/{code=0; next} on && code' "$repo/README.md" > "$work/tour.sh"
if [ ! -s "$work/tour.sh" ]; then
  echo "FAIL: no command block found under \"## A short tour\" in $repo/README.md"
  exit 1
fi
mkdir -p "$work/build/cli"
ln -s "$inac" "$work/build/cli/inac"
ln -s "$repo/examples" "$work/examples"

cat > "$work/driver.sh" <<'DRIVER'
set -eo pipefail
cd "$1"
stop_background() {
  local pids
  pids="$(jobs -p)"
  [ -n "$pids" ] && kill $pids 2>/dev/null
  wait 2>/dev/null
  return 0
}
trap stop_background EXIT
set -x
. ./tour.sh
set +x
# Anything the tour left running is stopped by the trap; the tour itself must end in a state
# where nothing it started is still needed.
echo "TOUR OK"
DRIVER

if [ "$(id -u)" = 0 ] && command -v unshare >/dev/null && command -v ip >/dev/null; then
  unshare --net bash -c 'ip link set lo up && exec timeout 240 bash "$0" "$1"' \
    "$work/driver.sh" "$work" > "$work/out.txt" 2>&1
  rc=$?
else
  for port in 8080 $(seq 50000 50019); do
    if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "SKIP: port $port is in use on this machine and the tour uses it (run as root for a private network namespace)"
      exit 77
    fi
  done
  timeout 240 bash "$work/driver.sh" "$work" > "$work/out.txt" 2>&1
  rc=$?
fi
cat "$work/out.txt"
for f in serve.log switches.log; do
  [ -f "$work/$f" ] && { echo "--- $f (last lines)"; tail -n 20 "$work/$f"; }
done
if [ $rc -ne 0 ] || ! grep -q '^TOUR OK$' "$work/out.txt"; then
  echo "FAIL: the README's tour stopped (exit $rc)"
  exit 1
fi
echo "PASS: every command of the README's tour ran"
