#!/usr/bin/env bash
# run-together.sh NAME CMD [NAME CMD ...]: run each command at the same time, each with its output in its own log,
# print each log whole (headed by its name) as its command finishes, and fail when any command failed. `make test`
# runs the e2e package beside the Python and browser suites with it: both mostly wait on the processes they start,
# so on 2 cores the two together take about as long as the longer one (README "Two commands").
set -uo pipefail
if (( $# == 0 || $# % 2 )); then echo "usage: $0 NAME CMD [NAME CMD ...]" >&2; exit 2; fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
declare -A pid_name
names=()
while (( $# )); do
  name=$1 cmd=$2; shift 2
  names+=("$name")
  ( bash -c "$cmd" >"$dir/$name.log" 2>&1 ) &
  pid_name[$!]=$name
  echo "== $name: started: $cmd"
done
failed=()
start=$SECONDS
while (( ${#pid_name[@]} )); do
  wait -n -p done_pid
  rc=$?
  name=${pid_name[$done_pid]}
  unset "pid_name[$done_pid]"
  echo "== $name: exit $rc after $((SECONDS - start)) s; its output:"
  cat "$dir/$name.log"
  echo "== $name: end of output (exit $rc)"
  (( rc == 0 )) || failed+=("$name")
done
if (( ${#failed[@]} )); then echo "== failed: ${failed[*]}"; exit 1; fi
echo "== all passed: ${names[*]}"
