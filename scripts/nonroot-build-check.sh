#!/usr/bin/env bash
# scripts/nonroot-build-check.sh — builds and runs dtrain as an unprivileged
# user against dependencies in a prefix, as on a cluster where nothing can be
# installed system-wide (README.md, "On a cluster"). Run as root on Debian 12,
# from the repository root or anywhere; scripts/fresh-machine-check.sh runs it
# as its third command. Usage: scripts/nonroot-build-check.sh [--jobs N] [--keep]
#
# Root part (what a cluster's support staff or Spack would have done):
#  1. scripts/setup-deps.sh (the toolchain: compiler, cmake, pkg-config; the
#     system's on a cluster; idempotent and quiet when installed).
#  2. The prefix: the libraries of `scripts/setup-deps.sh --list-libraries`
#     (and the dataset) with the packages of the same Debian source that they
#     depend on (libhdf5-dev → libhdf5-103-1, libboost-…-dev → libboost1.74-dev,
#     …), as .deb files (apt's cache when it has the version this machine has,
#     else `apt-get download`), unpacked with `dpkg -x` into PREFIX: nothing is
#     installed. Their own dependencies outside those sources (glib, PMIx,
#     hwloc, libc) stay the system's, as with a module on a cluster. Then what
#     dpkg's scripts would have done, inside PREFIX only: the alternatives links
#     of the packages' postinst (mpicxx, mpirun, libopenblas.so, hdf5.pc), and
#     the text files that name the install prefix (*.pc, h5cc, *-config)
#     rewritten to PREFIX, as Spack relocates a binary package. PREFIX stays
#     root's and read-only to the user.
#  3. A copy of the source tree (no build*/, data/, runs/, .git) for the user.
# User part (as DTRAIN_NONROOT_USER, default nobody, through setpriv; a clean
# environment: PATH=PREFIX/usr/bin + the system's, LD_LIBRARY_PATH into PREFIX,
# OPAL_PREFIX=PREFIX/usr as Open MPI's relocation wants; no root anywhere):
#  4. cmake --preset release -DCMAKE_PREFIX_PATH=PREFIX/usr -DDTRAIN_TESTS=OFF,
#     cmake --build --preset release --target dtrain.
#  5. The proof that PREFIX was used and not the same packages in /usr (this
#     machine has them installed there too): no file that PREFIX provides is
#     taken from /usr — not a path in CMakeCache.txt, not a library on the link
#     line, not a header in the compiler's dependency files (*.o.d), not a
#     library `ldd` resolves for dtrain, mpirun and orted; and the project's
#     libraries (MPI, HDF5, oneDNN, Boost, OpenBLAS, libvips, TurboJPEG, libpng,
#     libexif, libswscale, libavutil) resolve into PREFIX.
#  6. dtrain data fashion-mnist from PREFIX's dataset, then a short training:
#     mpirun (PREFIX's) -np 3, LeNet-5 in ps mode (2 workers + 1 server) for
#     one epoch of 4000 images; the run's test accuracy must reach 0.5.
# Last line: "nonroot build check PASSED" (exit 0) or "nonroot build check
# FAILED: why" (exit 1). The work folder is removed on success (--keep keeps
# it) and kept on failure.
#
# Environment: DTRAIN_NONROOT_WORKDIR (default /var/tmp): where the work folder
# is made; DTRAIN_NONROOT_USER (default nobody); DTRAIN_BUILD_JOBS: parallel
# build jobs when --jobs is not given (default nproc).
# Measured (2 shared cores, -j 2): 344 s in the fresh-machine check's root
# (prefix 10 s, configure 5 s, build 323 s, checks + data + training 2 s);
# 351 s on the development machine (prefix 21 s from apt's cache + 5 packages
# downloaded). The prefix: 42 packages, 71 MB of .debs, 401 MB unpacked.
set -euo pipefail

say() { echo "nonroot-build-check: $*"; }
failed() {
  [ -z "${work:-}" ] || [ "${user_part:-0}" = 1 ] || say "work folder kept: $work"
  echo "nonroot build check FAILED: $*"; exit 1
}
t_start=$SECONDS
phase() { say "[$((SECONDS - t_start)) s] $*"; }

# shadowed PREFIX: reads absolute paths (one a line) and prints those outside
# PREFIX whose file PREFIX also provides (the same path under PREFIX, /lib and
# /usr/lib taken as one: Debian 12 merges them), i.e. a dependency taken from
# the system although the prefix has it.
shadowed() {
  local prefix=$1 f rest
  while IFS= read -r f; do
    case "$f" in "$prefix"/* | "") continue ;; esac
    rest=${f#/usr}
    if [ -e "$prefix/usr$rest" ] || [ -e "$prefix$rest" ]; then echo "$f"; fi
  done
}

# ---------------------------------------------------------------------------
# The user part: $1 = the work folder (run from the copied source tree).
# ---------------------------------------------------------------------------
user_part() {
  local work=$1 jobs=$2
  SECONDS=$3 t_start=0  # the phases' times count from the root part's start
  local prefix=$work/prefix src=$work/src run=$work/run
  [ "$(id -u)" != 0 ] || failed "the user part runs as root"
  say "user part as $(id -un 2>/dev/null || id -u) (uid $(id -u)); PATH=$PATH"
  if touch "$prefix/.w" 2>/dev/null; then rm -f "$prefix/.w"; failed "the user can write into the prefix"; fi

  phase "configure: cmake --preset release -DCMAKE_PREFIX_PATH=$prefix/usr -DDTRAIN_TESTS=OFF"
  cd "$src"
  cmake --preset release -DCMAKE_PREFIX_PATH="$prefix/usr" -DDTRAIN_TESTS=OFF >"$work/configure.log" 2>&1 ||
    { cat "$work/configure.log"; failed "cmake configure failed against the prefix"; }
  grep -E '^-- dtrain:|CMake Warning' "$work/configure.log" | sed 's/^-- //' || true
  phase "build: cmake --build --preset release -j $jobs --target dtrain"
  cmake --build --preset release -j "$jobs" --target dtrain >"$work/build.log" 2>&1 ||
    { tail -n 60 "$work/build.log"; failed "the build against the prefix failed"; }
  local bin=$src/build-release/dtrain bdir=$src/build-release
  phase "built $bin"

  # 5. What was used: cache paths, link line, headers, run-time libraries.
  local leaks="" l
  # (Files, and the folders of CMake packages (dnnl_DIR, Boost_DIR, ...); an
  # include folder such as /usr/include names no file: the headers are checked
  # below, from the compiler's own list.)
  local cached; cached=$(sed -nE -e '/_(INCLUDE|LIBRARY)_DIRS?:/d' \
      -e 's/^[A-Za-z_][^:#]*(:FILEPATH|_DIR:PATH)=(\/.*)/\2/p' "$bdir/CMakeCache.txt" | tr ';' '\n')
  l=$(shadowed "$prefix" <<<"$cached" | sort -u)
  [ -z "$l" ] || leaks+="CMakeCache.txt names the system's copies of: $(echo $l); "
  l=$(tr ' ' '\n' <"$bdir/CMakeFiles/dtrain.dir/link.txt" | grep '^/' |
      while read -r f; do if [ -f "$f" ]; then echo "$f"; fi; done | shadowed "$prefix" | sort -u)
  [ -z "$l" ] || leaks+="the link line takes from the system: $(echo $l); "
  local ndeps; ndeps=$(find "$bdir" -name '*.o.d' | wc -l)
  [ "$ndeps" -gt 0 ] || failed "no compiler dependency files (*.o.d) in $bdir to check the headers with"
  l=$(find "$bdir" -name '*.o.d' -exec cat {} + | tr ' \\' '\n\n' | sed 's/:$//' | grep '^/' | sort -u | xargs realpath -ms -- |
      sort -u | shadowed "$prefix")
  [ -z "$l" ] || leaks+="headers taken from the system: $(echo $l | cut -c1-600); "
  local exe ldd_out
  for exe in "$bin" "$(command -v mpirun)" "$(command -v orted)"; do
    case "$exe" in "$prefix"/* | "$bin") ;; *) leaks+="$exe is not the prefix's; " ;; esac
    ldd_out=$(ldd "$(readlink -f "$exe")")
    if grep -q 'not found' <<<"$ldd_out"; then leaks+="ldd $exe: $(grep 'not found' <<<"$ldd_out" | tr -s ' \t\n' ' '); "; fi
    l=$(sed -nE 's/.*=> (\/[^ ]+) .*/\1/p' <<<"$ldd_out" | shadowed "$prefix" | sort -u)
    [ -z "$l" ] || leaks+="ldd $exe resolves to the system's: $(echo $l); "
  done
  ldd_out=$(ldd "$bin")
  local lib missing=""
  for lib in libmpi.so libhdf5 libdnnl.so libboost_program_options libopenblas.so libvips.so libturbojpeg.so \
             libpng16.so libexif.so libswscale.so libavutil.so; do
    grep -qE "^[[:space:]]*$lib[^ ]* => $prefix/" <<<"$ldd_out" || missing+=" $lib"
  done
  [ -z "$missing" ] || leaks+="not resolved into the prefix:$missing; "
  [ -z "$leaks" ] || failed "the build did not use the prefix only: $leaks"
  say "checked: $(grep -cE "=> $prefix/" <<<"$ldd_out") of dtrain's $(grep -c '=>' <<<"$ldd_out") libraries come from the prefix" \
      "(the rest: glibc, the compiler's runtime, and the libraries' own system dependencies); no file the prefix has" \
      "was taken from /usr by CMake ($(wc -l <<<"$cached") cache paths), the linker or" \
      "the compiler ($ndeps dependency files)"
  say "dtrain's RUNPATH: $(readelf -d "$bin" | sed -nE 's/.*(RUNPATH|RPATH).*\[(.*)\]/\2/p' | cut -c1-300)"

  # 6. Data from the prefix, and a short distributed training run.
  mkdir -p "$run" && cd "$run"
  phase "data: dtrain data fashion-mnist --src $prefix/usr/share/datasets/fashion-mnist"
  "$bin" data fashion-mnist --src "$prefix/usr/share/datasets/fashion-mnist" --out "$run/data" || failed "dtrain data fashion-mnist"
  phase "train: $(command -v mpirun) -np 3 dtrain train (LeNet-5, ps mode, 2 workers + 1 server, 4000 images, 1 epoch)"
  mpirun -np 3 --oversubscribe --bind-to none "$bin" train --job "$src/jobs/fashion_lenet.ini" \
    --train-data "$run/data/fashion-mnist-train.h5" --test-data "$run/data/fashion-mnist-test.h5" \
    --max-train-samples 4000 --max-test-samples 1000 --epochs 1 --mode ps --ps 1 --minibatch 16 \
    --threads 1 --log-interval 50 || failed "the training run failed"
  local metrics; metrics=$(ls "$run"/runs/*/latest/metrics.jsonl 2>/dev/null | head -n1)
  [ -n "$metrics" ] || failed "the run wrote no metrics.jsonl under $run/runs"
  local acc; acc=$(grep -o '"test_accuracy":[0-9.eE+-]*' "$metrics" | tail -n1 | cut -d: -f2)
  [ -n "$acc" ] || failed "no test_accuracy in $metrics"
  awk -v a="$acc" 'BEGIN { exit !(a >= 0.5) }' || failed "test accuracy $acc < 0.5 after one epoch of 4000 images"
  phase "trained: test accuracy $acc ($metrics)"
}

# ---------------------------------------------------------------------------
# The root part.
# ---------------------------------------------------------------------------

# The packages of the prefix: the libraries, with the packages of the same
# source they depend on (installed ones: the alternatives this machine chose),
# less any Essential one (the base system's, like libc; none today).
prefix_packages() {
  local -A seen=() src=()
  local queue p q s
  mapfile -t queue < <("$repo/scripts/setup-deps.sh" --list-libraries)
  while read -r p s; do src[$p]=$s; done < <(dpkg-query -W -f='${Package} ${source:Package}\n')
  # Breadth first, one apt-cache call a level (each call reads apt's whole cache).
  while [ ${#queue[@]} -gt 0 ]; do
    local level=()
    for p in "${queue[@]}"; do
      [ -z "${seen[$p]:-}" ] || continue
      [ -n "${src[$p]:-}" ] || failed "$p is not installed (scripts/setup-deps.sh installs it)"
      seen[$p]=1; level+=("$p")
    done
    queue=()
    [ ${#level[@]} -gt 0 ] || break
    while read -r p q; do
      q=${q%:any}
      # Same source, or a -defaults source's versioned package (boost-defaults → boost1.74).
      s=${src[$p]}
      if [ "${src[$q]:-}" = "$s" ] || [[ $s == *-defaults ]]; then queue+=("$q"); fi
    done < <(apt-cache depends --installed --no-recommends --no-suggests --no-conflicts --no-breaks \
               --no-replaces --no-enhances "${level[@]}" |
             awk '/^[^ ]/ { p = $1 } /^ +\|?(Pre)?Depends: [^<]/ { print p, $2 }')
  done
  for p in "${!seen[@]}"; do
    [ "$(dpkg-query -W -f='${Essential}' "$p")" = yes ] || echo "$p"
  done | sort
}

# fetch_debs DIR PKG...: each package's .deb into DIR: this machine's version
# from apt's cache when it is there, else that version with apt-get download,
# else (a version the mirror no longer has) the mirror's candidate.
fetch_debs() {
  local dir=$1 p v a f cached=0 want=() newer=(); shift
  for p in "$@"; do
    read -r v a < <(dpkg-query -W -f='${Version} ${Architecture}\n' "$p")
    f=/var/cache/apt/archives/${p}_${v//:/%3a}_${a}.deb
    if [ -f "$f" ]; then cp "$f" "$dir/"; cached=$((cached + 1)); else want+=("$p=$v"); fi
  done
  get() { (cd "$dir" && apt-get download -q -o APT::Sandbox::User=root "$@") >>"$work/apt-download.log" 2>&1; }
  if [ ${#want[@]} -gt 0 ] && ! get "${want[@]}"; then
    for p in "${want[@]}"; do compgen -G "$dir/${p%%=*}_*.deb" >/dev/null || newer+=("${p%%=*}"); done
    [ ${#newer[@]} -eq 0 ] || get "${newer[@]}" ||
      { cat "$work/apt-download.log"; failed "apt-get download of ${newer[*]} failed"; }
    say "not on the mirror at this machine's version, so the mirror's: ${newer[*]}"
  fi
  say "$# packages: $cached from apt's cache, $((${#want[@]} - ${#newer[@]})) downloaded at this machine's version, ${#newer[@]} at the mirror's ($(du -sh "$dir" | cut -f1))"
}

# finish_prefix PREFIX DEBDIR: what the packages' scripts would have done, in PREFIX only.
finish_prefix() {
  local prefix=$1 debs=$2 d link target n_alt=0 n_rel=0 f
  # Alternatives: each `update-alternatives --install LINK NAME PATH ...
  # --slave LINK NAME PATH` of the postinst scripts whose master PATH the prefix
  # has: the master and its slaves (the first candidate wins).
  for d in "$debs"/*.deb; do
    dpkg-deb --ctrl-tarfile "$d" | tar -xO ./postinst 2>/dev/null || true
  done | sed -e ':a' -e '/\\$/N; s/\\\n//; ta' |
    awk '{ n = split($0, t, /[[:space:]]+/)
           for (i = 1; i + 3 <= n; i++)
             if (t[i] == "--install" || t[i] == "--slave") { print (t[i] == "--install" ? "M" : "S"), t[i + 1], t[i + 3]; i += 3 } }' |
    while read -r kind link target; do
      [ "$kind" = S ] || { master_ok=0; [[ $link$target == /*/* && $link$target != *'$'* ]] && [ -e "$prefix$target" ] && master_ok=1; }
      if [ "$master_ok" = 1 ] && [ -e "$prefix$target" ] && [ ! -e "$prefix$link" ] && [ ! -L "$prefix$link" ]; then
        mkdir -p "$(dirname "$prefix$link")"; ln -sr "$prefix$target" "$prefix$link"; echo "$link"
      fi
    done | wc -l >"$work/n_alt"
  n_alt=$(cat "$work/n_alt")
  # Absolute symbolic links into a file the prefix has: into the prefix.
  while IFS= read -r link; do
    target=$(readlink "$link")
    if [ -e "$prefix$target" ]; then ln -sfr "$prefix$target" "$link"; fi
  done < <(find "$prefix" -type l -lname '/*')
  # Text files naming the install prefix /usr: pkg-config files and the
  # configuration scripts in bin/ (h5cc, libpng-config, ...); never a #! line.
  while IFS= read -r f; do
    sed -i -E "/^#!/!s#(^|[=[:space:]\"':]|-[IL])/usr(/|\$|[[:space:]\"'])#\\1$prefix/usr\\2#g" "$f"; n_rel=$((n_rel + 1))
  done < <(find "$prefix" -type f \( -name '*.pc' -o -path "$prefix/usr/bin/*" \) -exec grep -lI '/usr' {} +)
  say "prefix finished: $n_alt alternatives links, $n_rel text files relocated to $prefix/usr"
}

root_part() {
  local jobs=$1 keep=$2
  [ "$(id -u)" = 0 ] || failed "needs root (it prepares the prefix and the user); run it as root"
  command -v dpkg-deb >/dev/null && command -v apt-get >/dev/null || failed "needs Debian's dpkg and apt"
  repo=$(cd "$(dirname "$0")/.." && pwd)
  local user=${DTRAIN_NONROOT_USER:-nobody} uid gid
  uid=$(id -u "$user") && gid=$(id -g "$user") || failed "no user '$user' (DTRAIN_NONROOT_USER)"
  [ "$uid" != 0 ] || failed "DTRAIN_NONROOT_USER=$user is root"

  phase "toolchain: scripts/setup-deps.sh"
  "$repo/scripts/setup-deps.sh"
  work=$(mktemp -d "${DTRAIN_NONROOT_WORKDIR:-/var/tmp}/dtrain-nonroot-check.XXXXXX")
  chmod 755 "$work"
  trap 'if [ $? = 0 ]; then if [ '"$keep"' = 0 ]; then rm -rf --one-file-system "$work"; else say "work folder kept: $work"; fi; fi' EXIT
  local prefix=$work/prefix debs=$work/debs p
  mkdir -p "$prefix" "$debs"

  phase "prefix: packages"
  local pkgs; mapfile -t pkgs < <(prefix_packages)
  [ ${#pkgs[@]} -gt 0 ] || failed "no packages for the prefix"
  say "${#pkgs[@]} packages: ${pkgs[*]}"
  fetch_debs "$debs" "${pkgs[@]}"
  for p in "$debs"/*.deb; do dpkg -x "$p" "$prefix"; done
  finish_prefix "$prefix" "$debs"
  chown -R root:root "$prefix"; chmod -R go-w "$prefix"
  phase "prefix ready: $prefix ($(du -sh "$prefix" | cut -f1); nothing installed system-wide)"

  # The user's copy of the source tree, home and scratch.
  mkdir -p "$work/src" "$work/home" "$work/run" "$work/tmp"
  tar -C "$repo" --exclude='./build*' --exclude=./data --exclude=./runs --exclude=./.git -cf - . | tar -C "$work/src" -xf -
  chown -R "$uid:$gid" "$work/src" "$work/home" "$work/run" "$work/tmp"
  touch "$work/configure.log" "$work/build.log"; chown "$uid:$gid" "$work/configure.log" "$work/build.log"

  local arch libdir; arch=$(gcc -dumpmachine); libdir=$prefix/usr/lib/$arch
  phase "user part: setpriv --reuid=$uid --regid=$gid --clear-groups (user $user)"
  setpriv --reuid="$uid" --regid="$gid" --clear-groups --no-new-privs \
    env -i PATH="$prefix/usr/bin:/usr/local/bin:/usr/bin:/bin" HOME="$work/home" TMPDIR="$work/tmp" \
      LANG=C.UTF-8 USER="$user" LOGNAME="$user" SHELL=/bin/bash TERM="${TERM:-dumb}" \
      LD_LIBRARY_PATH="$libdir:$prefix/lib/$arch" OPAL_PREFIX="$prefix/usr" \
      bash "$work/src/scripts/nonroot-build-check.sh" --user-part "$work" "$jobs" "$((SECONDS - t_start))" ||
    failed "the user part failed (its output above)"
  phase "done"
  echo "nonroot build check PASSED: built and trained as $user (uid $uid) against $prefix only, in $((SECONDS - t_start)) s"
}

if [ "${1:-}" = --user-part ]; then
  user_part=1
  user_part "$2" "$3" "$4"
  exit 0
fi
jobs=${DTRAIN_BUILD_JOBS:-$(nproc)} keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs | -j) jobs=${2:?--jobs needs a number}; shift 2 ;;
    --keep) keep=1; shift ;;
    *) echo "usage: $0 [--jobs N] [--keep]" >&2; exit 2 ;;
  esac
done
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "nonroot-build-check: --jobs must be a positive integer" >&2; exit 2; }
root_part "$jobs" "$keep"
