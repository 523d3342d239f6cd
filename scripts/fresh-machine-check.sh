#!/usr/bin/env bash
# scripts/fresh-machine-check.sh — the README's two commands on a machine with
# nothing installed: builds a minimal Debian 12 root (debootstrap minbase), puts
# a clean clone of this repository's HEAD (committed state, as CI sees it) in
# it at /root/dtrain, and runs there, as root, with a clean environment:
#   1. scripts/run-main.sh    2. scripts/run-tests.sh
# exactly as the README writes them, then
#   3. scripts/nonroot-build-check.sh (in command 1's clone): dtrain built and
#      trained as an unprivileged user against a prefix of unpacked .debs
#      (README.md, "On a cluster"), not against the packages command 1 installed.
# Run by .ci/run after the normal suite.
# Needs root (debootstrap, mount, chroot). Usage: scripts/fresh-machine-check.sh
#
# Result (last line): "fresh-machine check PASSED" (exit 0); "fresh-machine
# check FAILED: why" (exit 1) when either command fails, or anything else goes
# wrong; "fresh-machine check NOT RUN: why" (exit 0) only when packages could
# not be *downloaded* (debootstrap or apt failing on the network after
# $DTRAIN_FRESH_TRIES tries with back-off). A package that does not exist or a
# dependency that does not resolve is a FAILURE, never a NOT RUN.
#
# The root: debootstrap's minbase variant (the least a Debian 12 has; what
# container images have), from the first `deb` source for bookworm in this
# machine's apt sources (a dated snapshot here; never written in the repo),
# with this machine's apt settings copied in, so it sees the same snapshot.
#
# Isolation. The whole root phase runs in its own mount, PID and IPC namespaces
# (unshare), the network is the host's (never touched). So every mount the check
# makes (proc, read-only sysfs with this machine's cgroups read-only on it, a
# private tmpfs /dev holding bind mounts of the few device nodes, a new devpts,
# a tmpfs /dev/shm for MPI, the package cache) exists only inside that
# namespace and vanishes with it, even when this script is killed; the host's
# /dev is never mounted into the root, so no `rm -rf` can reach it. Every process left in the root dies with the PID namespace. The
# inner EXIT trap still kills and unmounts everything and checks with findmnt;
# the outer one removes the root only when findmnt shows nothing mounted
# beneath it and no process has its root there; otherwise it leaves the root
# on disk and says so.
# The root has no CUDA (a fresh Debian 12 has none): the build there is CPU-only.
# The network inside is the host's (apt needs it), so the local Slurm test
# (it_slurm) runs as it does outside: its daemons listen on 127.0.0.1 ports the
# kernel picks as free.
#
# Command 2 runs in a second clean clone, after command 1 (which installed the
# packages): so it builds from scratch, and a test that leans on command 1's
# outputs in the checkout (data/, runs/, build/) fails here. That costs one
# more build (2.5-3 min here); DTRAIN_FRESH_SAME_CLONE=1 runs command 2 in
# command 1's clone instead, as a user who types both in one checkout does.
# Timings are noisy on a shared machine: each step's wall time is printed, and
# each output line carries the seconds since its step began.
#
# Environment:
#   DTRAIN_FRESH_CACHE   package cache kept between runs (default
#                        /var/cache/dtrain-fresh-check): debootstrap/ (its
#                        --cache-dir), apt-archives/ (bind-mounted on the root's
#                        /var/cache/apt/archives), last-run/ (the last run's logs)
#   DTRAIN_FRESH_WORKDIR where the per-run work folder is made (default
#                        /var/tmp; never inside the repository)
#   DTRAIN_FRESH_TRIES   download tries, with back-off (default 3)
#   DTRAIN_FRESH_MAIN_TIMEOUT / DTRAIN_FRESH_TESTS_TIMEOUT  seconds for
#                        command 1 / 2 (defaults 1500 / 2400; here, on 2
#                        cores, command 1 took 4-12 min, command 2 up to 18
#                        min with the whole suite)
#   DTRAIN_FRESH_NONROOT_TIMEOUT  seconds for command 3 (default 1500; here,
#                        on 2 shared cores, 344 s: a 5.5-min build)
#   DTRAIN_FRESH_SAME_CLONE=1  run command 2 in command 1's clone
# Tools of the check, not of the project (so not in scripts/setup-deps.sh):
# debootstrap (installed here with apt-get when missing), git, util-linux.
set -euo pipefail

SUITE=bookworm  # Debian 12, as the README says
CACHE=${DTRAIN_FRESH_CACHE:-/var/cache/dtrain-fresh-check}
WORK_PARENT=${DTRAIN_FRESH_WORKDIR:-/var/tmp}
TRIES=${DTRAIN_FRESH_TRIES:-3}
MAIN_TIMEOUT=${DTRAIN_FRESH_MAIN_TIMEOUT:-1500}
TESTS_TIMEOUT=${DTRAIN_FRESH_TESTS_TIMEOUT:-2400}
NONROOT_TIMEOUT=${DTRAIN_FRESH_NONROOT_TIMEOUT:-1500}
ROOT_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
SELF=$(readlink -f "$0")

say() { echo "fresh-machine check: $*"; }
# The verdict line; the inner phase also records it, for the outer one to
# print again after the summary, as the log's last line.
verdict() { echo "$1"; [ -z "${res:-}" ] || echo "verdict=$1" >>"$res"; }
failed() { verdict "fresh-machine check FAILED: $*"; exit 1; }
# Exit code 3 travels from the inner phase to the outer one: "not run".
not_run() { verdict "fresh-machine check NOT RUN: $*"; exit "${NOT_RUN_EXIT:-3}"; }

# stamp T0: prefixes each line with the seconds since T0 (bash's SECONDS).
stamp() { local line; while IFS= read -r line; do printf '[%5d s] %s\n' $((SECONDS - $1)) "$line"; done; }

# logged T0 LOG FILTER CMD...: runs CMD (stdin /dev/null) with its output
# stamped into LOG and onto stdout (less the lines matching the regex FILTER,
# if any); returns CMD's exit code. The pipeline runs in the background with
# a `wait`, so that a TERM reaches this shell's trap at once (bash runs no
# trap until a foreground job ends).
logged() {
  local t0=$1 log=$2 filter=$3; shift 3
  rm -f "$log.rc"
  if [ -n "$filter" ]; then
    { "$@" </dev/null 2>&1 && echo 0 >"$log.rc" || echo $? >"$log.rc"; } | stamp "$t0" | tee -a "$log" |
      grep --line-buffered -vE "$filter" &
  else
    { "$@" </dev/null 2>&1 && echo 0 >"$log.rc" || echo $? >"$log.rc"; } | stamp "$t0" | tee -a "$log" &
  fi
  wait $! || true
  local rc; rc=$(cat "$log.rc" 2>/dev/null) || rc=255
  rm -f "$log.rc"
  return "$rc"
}

# Output classification, for failures of debootstrap and apt. A download
# problem is a network or mirror failure; a package problem is a package or
# dependency that does not resolve, or a package that does not install.
download_problem() {
  grep -qE "Failed to fetch|Temporary failure (resolving|in name resolution)|Could not (resolve|connect)|Connection (failed|timed out|refused|reset)|Unable to connect|Some index files failed to download|Unable to fetch some archives|Hash Sum mismatch|Network is unreachable|No route to host|Undetermined Error|Failed getting release (signature )?file|Couldn't download|unable to resolve host" "$1"
}
package_problem() {
  grep -qE "Unable to locate package|has no installation candidate|unmet dependencies|Unable to correct problems|held broken packages|Couldn't find any package|Unable to satisfy dependencies|Couldn't find these debs|dpkg: error processing|/usr/bin/dpkg returned an error code|Failure trying to run" "$1"
}

# errors_in LOG: its last distinct download error lines, on one line.
errors_in() {
  grep -hE 'Failed|Could not|Couldn.t|Temporary failure|Unable to' "$1" | sed -E 's/^\[ *[0-9]+ s\] //' |
    awk '!seen[$0]++' | tail -n 2 | tr '\n' ' '
}

# mounts_under DIR: mount points at or below DIR in this mount namespace, deepest first.
mounts_under() {
  findmnt -rn -o TARGET | awk -v d="$1" '$0 == d || index($0, d "/") == 1' | sort -r
}
# procs_in_root DIR: PIDs (as this PID namespace sees them) whose root is DIR or below.
procs_in_root() {
  local p r
  for p in /proc/[0-9]*; do
    r=$(readlink "$p/root" 2>/dev/null) || continue
    case "$r" in "$1" | "$1"/*) echo "${p#/proc/}" ;; esac
  done
}
# safe_remove DIR: rm -rf DIR only when nothing is mounted beneath it and no
# process has its root there; otherwise leave it and say so (returns 1).
safe_remove() {
  local d=$1 m
  [ -e "$d" ] || return 0
  m=$(mounts_under "$d")
  if [ -n "$m" ]; then say "NOT removing $d: still mounted beneath it: $(echo $m)"; return 1; fi
  if [ -n "$(procs_in_root "$d")" ]; then say "NOT removing $d: processes run in it: $(echo $(procs_in_root "$d"))"; return 1; fi
  rm -rf --one-file-system "$d"
}

# --------------------------------------------------------------------------
# Inner phase: PID 1 of new mount/PID/IPC namespaces; $1 = the work folder.
# --------------------------------------------------------------------------
inner() {
  local work=$1
  root=$work/root logs=$work/logs res=$work/result
  trap inner_cleanup EXIT
  trap 'say "root phase interrupted by a signal"; exit 130' INT TERM HUP
  mount --make-rprivate /
  debootstrap_root
  configure_apt
  mount_root
  clone_into /root/dtrain
  apt_download
  local main_rc=0 tests_rc=0 nonroot_rc=0
  run_readme run-main /root/dtrain scripts/run-main.sh "$MAIN_TIMEOUT" || main_rc=$?
  # Command 1 builds only dtrain (scripts/build.sh --target dtrain): the tests
  # are command 2's, and building them too cost command 1 ~2.5 min here.
  local main_built_tests=0
  [ ! -e "$root/root/dtrain/build/tests/dtrain_tests" ] || main_built_tests=1
  local tests_dir=/root/dtrain-tests
  if [ "${DTRAIN_FRESH_SAME_CLONE:-0}" = 1 ]; then tests_dir=/root/dtrain; else clone_into "$tests_dir"; fi
  run_readme run-tests "$tests_dir" scripts/run-tests.sh "$TESTS_TIMEOUT" || tests_rc=$?
  [ -f "$logs/run-tests.log" ] && ctest_report "$tests_dir"
  run_readme nonroot-build-check /root/dtrain scripts/nonroot-build-check.sh "$NONROOT_TIMEOUT" || nonroot_rc=$?
  classify_readme run-main "$main_rc"
  classify_readme run-tests "$tests_rc"
  classify_nonroot "$nonroot_rc"
  [ "$main_rc" = 0 ] || failed "scripts/run-main.sh exited $main_rc in the fresh root (log above)"
  [ "$main_built_tests" = 0 ] || failed "scripts/run-main.sh built the test binaries (build/tests/dtrain_tests): command 1 needs only dtrain"
  [ "$tests_rc" = 0 ] || failed "scripts/run-tests.sh exited $tests_rc in the fresh root (log above)"
  [ "$nonroot_rc" = 0 ] || failed "scripts/nonroot-build-check.sh exited $nonroot_rc in the fresh root (log above)"
}

inner_cleanup() {
  local rc=$? m
  trap - EXIT; trap '' INT TERM HUP  # a cleanup must not be cut short
  local p left=""
  for p in $(procs_in_root "$root"); do left+=" $(cat "/proc/$p/comm" 2>/dev/null)($p)"; done
  [ -z "$left" ] || say "still running in the root at the end, now stopped:$left"
  # Every process of this PID namespace but this one (PID 1): TERM, then KILL.
  kill -TERM -1 2>/dev/null || true
  sleep 2
  kill -KILL -1 2>/dev/null || true
  sleep 0.5
  for m in $(mounts_under "$root"); do umount "$m" 2>/dev/null || umount -R "$m" 2>/dev/null || true; done
  for m in $(mounts_under "$root"); do say "lazy unmount of $m"; umount -l "$m" || true; done
  m=$(mounts_under "$root")
  if [ -n "$m" ]; then echo "root_mounts_left=$(echo $m)" >>"$res"; say "still mounted: $m"; [ "$rc" != 0 ] || rc=1; fi
  exit "$rc"
}

# in_root CMD: runs CMD (a shell command line) in the root as root, with a
# clean environment (no host PATH, no CUDA, no proxies but apt's own).
in_root() {
  chroot "$root" /usr/bin/env -i PATH="$ROOT_PATH" HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 \
    USER=root LOGNAME=root SHELL=/bin/bash ${http_proxy:+http_proxy=$http_proxy} /bin/bash -c "$1"
}

# with_tries NAME LOG CMD...: runs CMD (output stamped into LOG and stdout) up
# to $TRIES times while its failure is a download problem. Sets `took` to the
# seconds of the passing try. Returns 0, or ends the check: NOT RUN after
# $TRIES download failures, FAILED on any other failure.
with_tries() {
  local name=$1 log=$2 try rc t0 wait=15; shift 2
  for ((try = 1; try <= TRIES; try++)); do
    t0=$SECONDS
    echo "=== $name, try $try/$TRIES ($(date -u +%H:%M:%SZ))" | tee -a "$log"
    rc=0
    logged "$t0" "$log" '^\[ *[0-9]+ s\] I: (Retrieving|Validating|Extracting|Unpacking|Configuring|Checking component) ' "$@" || rc=$?
    took=$((SECONDS - t0))
    [ "$rc" = 0 ] && return 0
    if package_problem "$log" || ! download_problem "$log"; then
      failed "$name exited $rc, and not for want of a download: a package or dependency problem, or worse (output above; log kept in $CACHE/last-run/${log##*/})"
    fi
    if [ "$try" -lt "$TRIES" ]; then say "$name: download failed (exit $rc); retrying in $wait s"; sleep "$wait"; wait=$((wait * 3)); fi
    [ -z "${on_retry:-}" ] || "$on_retry"
  done
  not_run "$name could not download packages after $TRIES tries (mirror $MIRROR unreachable?): $(errors_in "$log")"
}

# A fresh, empty root folder (between debootstrap tries: nothing is mounted then).
fresh_root() {
  local m
  for m in $(mounts_under "$root"); do umount -R "$m" 2>/dev/null || umount -l "$m" || true; done
  safe_remove "$root" || failed "cannot reset $root between debootstrap tries"
  mkdir -p "$root"
}

debootstrap_root() {
  local args=(--variant=minbase --arch="$(dpkg --print-architecture)" --cache-dir="$CACHE/debootstrap")
  [ -z "$KEYRING" ] || args+=(--keyring="$KEYRING")
  mkdir -p "$root" "$CACHE/debootstrap"
  on_retry=fresh_root
  with_tries debootstrap "$logs/debootstrap.log" env -i PATH="$ROOT_PATH" HOME=/root LANG=C.UTF-8 \
    ${http_proxy:+http_proxy=$http_proxy} debootstrap "${args[@]}" "$SUITE" "$root" "$MIRROR"
  on_retry=""
  echo "t_debootstrap=$took" >>"$res"
  say "debootstrap ($SUITE minbase from $MIRROR) took $took s"
}

# This machine's apt settings, so that the root sees the same (snapshot)
# mirror; but never a hook that deletes downloaded .debs (docker-clean style):
# the root's archives folder is the check's cache.
configure_apt() {
  local f
  rm -f "$root/etc/apt/sources.list"  # debootstrap's own; the host's replace it
  [ ! -f /etc/apt/sources.list ] || cp /etc/apt/sources.list "$root/etc/apt/"
  for d in sources.list.d apt.conf.d keyrings trusted.gpg.d preferences.d; do
    mkdir -p "$root/etc/apt/$d"
    for f in /etc/apt/$d/*; do
      [ -f "$f" ] || continue
      if [ "$d" = apt.conf.d ] && grep -qE 'rm .*(/var/cache/apt/archives|\*\.deb)' "$f"; then
        say "not copying /etc/apt/apt.conf.d/${f##*/} (it deletes downloaded packages)"; continue
      fi
      cp "$f" "$root/etc/apt/$d/"
    done
  done
  for f in /etc/apt/trusted.gpg /etc/apt/preferences; do [ ! -f "$f" ] || cp "$f" "$root/etc/apt/"; done
  # Keyrings the sources name (Signed-By) that the root lacks.
  for f in $(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | sed -nE 's/^Signed-By:[[:space:]]*(\/[^[:space:]]+).*/\1/p' | sort -u); do
    [ -e "$root$f" ] || { mkdir -p "$root${f%/*}"; cp "$f" "$root$f"; }
  done
  cat >"$root/etc/apt/apt.conf.d/99dtrain-fresh-check" <<'EOF'
// written by scripts/fresh-machine-check.sh: keep downloaded packages (the
// archives folder is the check's cache, bind-mounted from outside the root)
APT::Keep-Downloaded-Packages "true";
Binary::apt::APT::Keep-Downloaded-Packages "true";
EOF
  # A machine has /etc/hosts (debootstrap copies resolv.conf and hostname only).
  cp /etc/hosts "$root/etc/hosts"
}

mount_root() {
  local n
  mount -t proc -o nosuid,nodev,noexec proc "$root/proc"
  mount -t sysfs -o ro,nosuid,nodev,noexec sysfs "$root/sys"
  # A machine has its cgroups mounted (by systemd or the container runtime) and
  # slurmd (it_slurm) does not start without them: this machine's, read-only.
  if mountpoint -q /sys/fs/cgroup; then
    mount --rbind /sys/fs/cgroup "$root/sys/fs/cgroup"
    for n in $(mounts_under "$root/sys/fs/cgroup"); do mount -o remount,bind,ro "$n"; done
  fi
  mount -t tmpfs -o mode=755,nosuid,size=16m tmpfs "$root/dev"
  for n in null zero full random urandom tty; do
    touch "$root/dev/$n"; mount --bind "/dev/$n" "$root/dev/$n"
  done
  ln -s /proc/self/fd "$root/dev/fd"
  ln -s /proc/self/fd/0 "$root/dev/stdin"; ln -s /proc/self/fd/1 "$root/dev/stdout"; ln -s /proc/self/fd/2 "$root/dev/stderr"
  mkdir "$root/dev/pts" "$root/dev/shm"
  mount -t devpts -o newinstance,ptmxmode=0666,mode=620,gid=5 devpts "$root/dev/pts"
  ln -s pts/ptmx "$root/dev/ptmx"
  mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$root/dev/shm"  # MPI's shared memory
  mkdir -p "$CACHE/apt-archives/partial" "$root/var/cache/apt/archives"
  mount --bind "$CACHE/apt-archives" "$root/var/cache/apt/archives"
  say "mounted in the root: $(mounts_under "$root" | sed "s|^$root||" | sort | tr '\n' ' ')"
}

# clone_into DIR: a clean clone of HEAD at DIR inside the root.
clone_into() {
  git clone -q --no-hardlinks "$REPO" "$root$1"
  git -C "$root$1" checkout -q --detach "$HEAD_SHA"
  [ "$(git -C "$root$1" rev-parse HEAD)" = "$HEAD_SHA" ] || failed "the clone at $1 is not at $HEAD_SHA"
  say "cloned $REPO at ${HEAD_SHA:0:12} into the root's $1"
}

# The packages scripts/setup-deps.sh installs, downloaded first (with tries),
# so that a mirror failure is told apart from a broken package list; the
# README commands then install them from the cache.
apt_download() {
  with_tries "apt (setup-deps.sh --download-only)" "$logs/apt.log" in_root "cd /root/dtrain && scripts/setup-deps.sh --download-only"
  echo "t_apt=$took" >>"$res"
  say "apt update and download of setup-deps.sh's packages took $took s ($(du -sh "$CACHE/apt-archives" | cut -f1) in the cache)"
}

# run_readme NAME DIR CMD TIMEOUT: the README command CMD in DIR, in the root.
run_readme() {
  local name=$1 dir=$2 cmd=$3 limit=$4 log=$logs/$1.log rc t0=$SECONDS
  echo "=== $cmd (in the root's $dir, limit $limit s, $(date -u +%H:%M:%SZ), load $(cut -d' ' -f1-3 /proc/loadavg))" | tee -a "$log"
  rc=0
  logged "$t0" "$log" "" timeout --kill-after=30 "$limit" chroot "$root" /usr/bin/env -i PATH="$ROOT_PATH" \
    HOME=/root TERM="${TERM:-dumb}" LANG=C.UTF-8 USER=root LOGNAME=root SHELL=/bin/bash \
    /bin/bash -c "cd $dir && $cmd" || rc=$?
  local took=$((SECONDS - t0))
  echo "t_$name=$took" >>"$res"; echo "rc_$name=$rc" >>"$res"
  if [ "$rc" = 0 ]; then say "$name.sh passed in $took s"
  elif [ "$rc" = 124 ] || [ "$rc" = 137 ]; then say "$name.sh TIMED OUT after $took s (limit $limit s)"
  else say "$name.sh FAILED (exit $rc) after $took s"; fi
  # Where the time went, from the line stamps.
  local t_deps t_build rest=ctest
  t_deps=$(sed -nE 's/^\[ *([0-9]+) s\] setup-deps: done.*/\1/p' "$log" | tail -n1)
  t_build=$(sed -nE 's/^\[ *([0-9]+) s\] \[ *[0-9]+%\] .*/\1/p' "$log" | tail -n1)
  t_deps=${t_deps:-0}; t_build=${t_build:-$t_deps}
  [ "$name" != run-main ] || rest="data + training"
  echo "t_install_$name=$t_deps" >>"$res"
  echo "split_$name=setup-deps $t_deps s + build $((t_build - t_deps)) s + $rest $((took - t_build)) s" >>"$res"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then  # what the timeout left behind
    kill -TERM -1 2>/dev/null || true; sleep 2; kill -KILL -1 2>/dev/null || true
  fi
  return "$rc"
}

# A README command that failed only because apt could not download (its
# setup-deps.sh runs apt-get update again) is NOT RUN, not FAILED.
classify_readme() {
  local log=$logs/$1.log
  [ "$2" != 0 ] || return 0
  if download_problem "$log" && ! package_problem "$log" && grep -q "setup-deps: installing" "$log" &&
     ! grep -q "setup-deps: done" "$log"; then
    not_run "scripts/$1.sh: apt could not download: $(errors_in "$log")"
  fi
}

# The non-root check takes its .debs from apt's cache and fetches any it lacks
# with apt-get download: a failure of that download is NOT RUN.
classify_nonroot() {
  local log=$logs/nonroot-build-check.log
  [ "$1" != 0 ] || return 0
  if grep -q "nonroot build check FAILED: apt-get download" "$log" && download_problem "$log" && ! package_problem "$log"; then
    not_run "scripts/nonroot-build-check.sh: apt-get download failed: $(errors_in "$log")"
  fi
}

# ctest's summary, its not-run/failed lists, and every test's own "skip" lines
# (ctest shows a passing test's output nowhere; Testing/Temporary/LastTest.log has it).
ctest_report() {
  local log=$logs/run-tests.log last="$root$1/build/Testing/Temporary/LastTest.log" s
  s=$(sed -nE 's/^\[ *[0-9]+ s\] ([0-9]+% tests passed.*)/\1/p' "$log" | tail -n1)
  echo "ctest_summary=${s:-none (ctest did not finish)}" >>"$res"
  s=$(sed -nE 's/^\[ *[0-9]+ s\] (Total Test time.*)/\1/p' "$log" | tail -n1)
  echo "ctest_time=${s:-}" >>"$res"
  sed -nE 's/^\[ *[0-9]+ s\][[:space:]]+[0-9]+ - (.*\((Skipped|Not Run|Disabled|Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)\))/\1/p' "$log" |
    sort -u | sed 's/^/ctest_not_passed=/' >>"$res"
  if [ -f "$last" ]; then
    grep -E '^[[:space:]]*(skip|SKIP)[a-zA-Z]*[: ]|[1-9][0-9]* skipped|SKIPPED' "$last" | sort -u | head -n 20 | sed 's/^/test_skip_line=/' >>"$res" || true
  fi
}

# --------------------------------------------------------------------------
# Outer phase: the host side.
# --------------------------------------------------------------------------

# find_mirror: the URI (and Signed-By keyring) this machine's apt uses for
# $SUITE, from deb822 .sources files or one-line .list files. Prints "URI KEYRING".
find_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      function flush() {
        if (f["types"] ~ /(^| )deb( |$)/ && (" " f["suites"] " ") ~ (" " suite " ") && tolower(f["enabled"]) != "no" && f["uris"] != "") {
          split(f["uris"], u, " "); print u[1], (f["signed-by"] ~ /^\// ? f["signed-by"] : "-"); found = 1; exit
        }
        delete f; key = ""
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      /^[ \t]/ { if (key != "") { sub(/^[ \t]+/, ""); f[key] = f[key] " " $0 }; next }
      { key = tolower(substr($0, 1, index($0, ":") - 1)); v = substr($0, index($0, ":") + 1); gsub(/^[ \t]+|[ \t]+$/, "", v); f[key] = v }
      END { if (!found) flush() }' "$f"
  done
  cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | awk -v suite="$SUITE" '
    $1 == "deb" { i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/ && i < NF) i++; i++ }
                  if ($(i + 1) == suite) { print $i, "-"; exit } }'
}

outer_cleanup() {
  local rc=$? p
  trap - EXIT; trap '' INT TERM HUP  # a cleanup must not be cut short
  if [ -n "${inner_pid:-}" ] && kill -0 "$inner_pid" 2>/dev/null; then
    # The inner phase's PID 1 cleans up on TERM; unshare (--kill-child) follows.
    pkill -TERM -P "$inner_pid" 2>/dev/null || true
    for _ in $(seq 1 30); do kill -0 "$inner_pid" 2>/dev/null || break; sleep 1; done
    kill -KILL "$inner_pid" 2>/dev/null || true
  fi
  if [ -n "${work:-}" ] && [ -d "$work" ]; then
    for p in $(procs_in_root "$work/root"); do say "killing leftover process $p in the root"; kill -KILL "$p" 2>/dev/null || true; done
    sleep 0.5
    mkdir -p "$CACHE"
    rm -rf "$CACHE/last-run"; cp -r "$work/logs" "$CACHE/last-run" 2>/dev/null || true
    if safe_remove "$work/root"; then rm -rf --one-file-system "$work"
    else say "left $work on disk (remove it by hand once nothing is mounted beneath it: findmnt | grep $work)"; [ "$rc" != 0 ] || rc=1; fi
  fi
  exit "$rc"
}

# The last run's roots, left behind by a run that was killed (we hold the lock).
remove_stale_work() {
  local w
  for w in "$WORK_PARENT"/dtrain-fresh-check.*; do
    [ -f "$w/cache-path" ] && [ "$(cat "$w/cache-path")" = "$CACHE" ] || continue
    say "removing the stale work folder $w of an earlier run"
    if safe_remove "$w/root"; then rm -rf --one-file-system "$w"; else say "left $w"; fi
  done
}

summary() {
  local r=$work/result
  v() { local x; x=$(sed -nE "s/^$1=(.*)/\1/p" "$r" 2>/dev/null | tail -n1); echo "${x:--}"; }
  echo "================ fresh-machine check summary ================"
  echo "commit:        $HEAD_SHA ($SUITE minbase root, mirror $MIRROR)"
  echo "machine:       $(nproc) cores, load at end $(cut -d' ' -f1-3 /proc/loadavg) (timings are noisy when the machine is shared)"
  echo "debootstrap:   $(v t_debootstrap) s"
  echo "apt:           download $(v t_apt) s (apt-get update + setup-deps.sh --download-only), install $(v t_install_run-main) s (setup-deps.sh in run-main.sh)"
  echo "run-main.sh:   $(v t_run-main) s, exit $(v rc_run-main) ($(v split_run-main))"
  echo "run-tests.sh:  $(v t_run-tests) s, exit $(v rc_run-tests) ($(v split_run-tests))"
  echo "ctest:         $(v ctest_summary); $(v ctest_time)"
  echo "non-root:      $(v t_nonroot-build-check) s, exit $(v rc_nonroot-build-check) (scripts/nonroot-build-check.sh: prefix of unpacked .debs, build and training as nobody)"
  sed -nE 's/^ctest_not_passed=(.*)/ctest did not run (skipped or not passed): \1/p; s/^test_skip_line=(.*)/a test skipped part of itself inside the root: \1/p' "$r" 2>/dev/null || true
  echo "total:         $((SECONDS - T_START)) s"
  echo "logs:          $CACHE/last-run/"
  echo "============================================================="
}

outer() {
  T_START=$SECONDS
  NOT_RUN_EXIT=0  # (not exported: the inner phase exits 3, and this one then 0)
  [ "$(id -u)" = 0 ] || failed "needs root (debootstrap, mount, chroot); run it as root"
  REPO=$(git -C "$(dirname "$SELF")" rev-parse --show-toplevel)
  HEAD_SHA=$(git -C "$REPO" rev-parse HEAD)
  [ -z "$(git -C "$REPO" status --porcelain --untracked-files=no)" ] ||
    say "note: $REPO has uncommitted changes; the check tests the commit $HEAD_SHA only"
  case "$(readlink -f "$WORK_PARENT")/" in "$REPO"/*) failed "DTRAIN_FRESH_WORKDIR is inside the repository" ;; esac
  case "$(readlink -f "$CACHE" 2>/dev/null || echo "$CACHE")/" in "$REPO"/*) failed "DTRAIN_FRESH_CACHE is inside the repository" ;; esac
  mkdir -p "$CACHE" "$WORK_PARENT"
  exec 9>"$CACHE/lock"
  flock -w 1800 9 || failed "another fresh-machine check has held $CACHE/lock for 30 min"
  remove_stale_work

  read -r MIRROR KEYRING < <(find_mirror | head -n1) || true
  [ -n "${MIRROR:-}" ] || failed "no '$SUITE' deb source in /etc/apt/sources.list{,.d/*} to build the root from"
  MIRROR=${MIRROR%/}; KEYRING=${KEYRING:-}; [ "$KEYRING" != - ] || KEYRING=""
  # apt's proxy, if this machine's apt has one, for debootstrap's wget too.
  eval "$(apt-config shell http_proxy Acquire::http::Proxy)"
  [ -z "${http_proxy:-}" ] || export http_proxy
  export MIRROR KEYRING REPO HEAD_SHA CACHE
  say "commit $HEAD_SHA of $REPO; $SUITE from $MIRROR (this machine's apt sources); cache $CACHE"

  work=$(mktemp -d "$WORK_PARENT/dtrain-fresh-check.XXXXXX")
  echo "$CACHE" >"$work/cache-path"
  mkdir -p "$work/logs"; : >"$work/result"
  trap outer_cleanup EXIT
  trap 'echo "fresh-machine check FAILED: interrupted by a signal (the root is being cleaned up)"; exit 130' INT TERM HUP

  if ! command -v debootstrap >/dev/null; then
    say "installing debootstrap on this machine (a tool of the check, not of the project)"
    local log=$work/logs/host-apt.log
    on_retry=""
    with_tries "apt-get install debootstrap (host)" "$log" \
      bash -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap'
  fi

  local rc=0
  # setpriv --pdeathsig: unshare (and with --kill-child the namespaces' PID 1,
  # and so everything in them) gets a KILL if this process dies, even by a KILL.
  # 9>&-: the cache lock stays with this process, not with anything in the root.
  setpriv --pdeathsig KILL unshare --mount --pid --ipc --fork --propagation private --kill-child \
    "$SELF" --inner "$work" 9>&- &
  inner_pid=$!
  wait "$inner_pid" || rc=$?
  inner_pid=""
  summary
  local line; line=$(sed -n 's/^verdict=//p' "$work/result" | tail -n1)
  case "$rc" in
    0) echo "fresh-machine check PASSED: both README commands and the non-root build passed in a fresh $SUITE root" ;;
    3) echo "$line"; exit 0 ;;
    *) echo "${line:-fresh-machine check FAILED: the root phase ended with exit $rc (see above)}"; exit 1 ;;
  esac
}

if [ "${1:-}" = --inner ]; then
  logs=$2/logs
  # Inner failures print their FAILED / NOT RUN line themselves and exit 1 / 3.
  inner "$2"
else
  outer
fi
