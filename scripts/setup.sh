#!/usr/bin/env bash
# Installs what xgrad needs from Debian 12's packages, if anything is missing.
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail
# clang-14 + libfuzzer-14-dev build the fuzzers (scripts/fuzz.sh); OpenMPI builds
# xg::dist (data-parallel training) and runs its tests. fortunes and festlex-cmu
# are the real corpora (char_lm, g2p), dataset-fashion-mnist the images of
# apps/vision (IDX files under /usr/share/datasets/fashion-mnist); gnuplot-nox draws scripts/pictures.sh;
# doxygen builds the API reference (cmake --build build --target docs);
# zlib1g-dev gives the checksums of checkpoint files;
# python3-torch runs the float64 parity tests against PyTorch (tests/torch/).
# libonnx-dev, libprotobuf-dev and protobuf-compiler build the ONNX export
# (onnx/); python3-onnx is ONNX's own checker in its tests, and npm brings
# ONNX Runtime for node (onnxruntime-node, below) that runs the exported models.
# iproute2 (ip, tc) makes the network namespaces of scripts/cluster.sh.
PACKAGES=(g++ cmake make pkg-config xtensor-dev libopenblas-dev libdnnl-dev libfmt-dev doctest-dev nlohmann-json3-dev zlib1g-dev
          libcli11-dev clang-14 libfuzzer-14-dev libopenmpi-dev openmpi-bin fortunes festlex-cmu dataset-fashion-mnist gnuplot-nox doxygen
          python3-torch libonnx-dev python3-onnx libprotobuf-dev protobuf-compiler iproute2)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# node and npm: Debian's, unless a node of another origin (with its own npm) is there.
command -v npm >/dev/null || missing+=(nodejs npm)
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# ONNX Runtime for node, into the build tree (tests/CMakeLists.txt's
# XG_ONNXRUNTIME_DIR), once, at a fixed version: the tests never download. Its install script
# would fetch CUDA libraries from outside the npm registry on Linux x64, and
# npm warns about it: --ignore-scripts runs none, and installs the same files
# (the CPU runtime the package ships).
ORT_DIR=${XG_ONNXRUNTIME_DIR:-$(cd "$(dirname "$0")/.." && pwd)/build/onnxruntime}
if ! (cd "$ORT_DIR" 2>/dev/null && node -e "require('onnxruntime-node')" 2>/dev/null); then
  echo "setup: installing onnxruntime-node into $ORT_DIR"
  mkdir -p "$ORT_DIR"
  npm install --prefix "$ORT_DIR" --no-audit --no-fund --ignore-scripts onnxruntime-node@1.30.0 >/dev/null
fi
