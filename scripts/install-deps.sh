#!/usr/bin/env bash
# Installs the Debian packages zenopt needs. Idempotent: does nothing when all are present.
set -euo pipefail
packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev python3
  libmlir-19-dev mlir-19-tools llvm-19-dev llvm-19-tools libzstd-dev zlib1g-dev
  libonnx-dev libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libabsl-dev libeigen3-dev libcli11-dev libfmt-dev libmimalloc-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenmpi-dev openmpi-bin libvalijson-dev libcpp-httplib-dev
  python3-torch
)
missing=()
for package in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing+=("$package")
done
if ((${#missing[@]})); then
  echo "zenopt: installing ${missing[*]}"
  sudo_cmd=""
  [ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
