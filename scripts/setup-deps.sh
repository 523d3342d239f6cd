#!/usr/bin/env bash
# scripts/setup-deps.sh — installs every Debian 12 package dtrain needs.
# Idempotent and quiet when everything is already there. Needs root (or sudo).
# --download-only: fetch the missing packages into apt's cache and install
# nothing (scripts/fresh-machine-check.sh uses it to tell a mirror that cannot
# be reached from a package list that does not resolve).
# --list-libraries: print the project's libraries (and data) below, one a
# line, and do nothing else (scripts/nonroot-build-check.sh unpacks them into
# a prefix; needs no root).
set -euo pipefail

# The libraries dtrain builds against and runs with, and its dataset: what a
# prefix (a module, Spack, a hand-made one) provides on a cluster.
libraries=(
  openmpi-bin libopenmpi-dev
  libhdf5-dev
  libboost-program-options-dev
  catch2
  libdnnl-dev ocl-icd-opencl-dev libopenblas-dev
  nlohmann-json3-dev zlib1g-dev
  libturbojpeg0-dev libpng-dev libexif-dev libvips-dev  # dtrain data imagefolder (io/image_codec.cpp), the jpeg loader
  libswscale-dev  # the jpeg loader's resampler (io/resample.cpp)
  dataset-fashion-mnist
)
# The toolchain and the tools of the tests and scripts: the system's on a cluster.
tools=(
  build-essential cmake pkg-config
  hdf5-tools
  python3 procps  # procps: pgrep/pkill in the tests (only cmake pulls it in otherwise)
  iproute2  # ip, tc: scripts/emulated-cluster.sh (nodes in network namespaces, shaped links)
  slurm-wlm munge python3-matplotlib
)

apt_args=()
case "${1:-}" in
  "") ;;
  --download-only) apt_args+=(--download-only) ;;
  --list-libraries) printf '%s\n' "${libraries[@]}"; exit 0 ;;
  *) echo "usage: $0 [--download-only | --list-libraries]" >&2; exit 2 ;;
esac

packages=("${tools[@]}" "${libraries[@]}")
# The PyTorch peer of bench/ (large): only when asked.
if [ "${DTRAIN_BENCH_DEPS:-0}" = 1 ]; then packages+=(python3-torch python3-torchvision python3-h5py); fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "setup-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${apt_args[@]}" "${missing[@]}" >/dev/null
echo "setup-deps: done${apt_args[0]:+ (${apt_args[0]}: nothing installed)}"
