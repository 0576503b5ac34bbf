#!/usr/bin/env bash
# Installs what xgrad needs from Debian 12's packages, if anything is missing.
# Runs apt-get as root (directly, or through sudo when available).
set -euo pipefail
# clang-14 + libfuzzer-14-dev build the fuzzers (scripts/fuzz.sh); OpenMPI builds
# xg::dist (data-parallel training) and runs its tests. fortunes and festlex-cmu
# are the real corpora (char_lm, g2p); gnuplot-nox draws scripts/pictures.sh;
# doxygen builds the API reference (cmake --build build --target docs);
# zlib1g-dev gives the checksums of checkpoint files;
# python3-torch runs the float64 parity tests against PyTorch (tests/torch/).
PACKAGES=(g++ cmake make pkg-config xtensor-dev libopenblas-dev libdnnl-dev libfmt-dev doctest-dev nlohmann-json3-dev zlib1g-dev
          libcli11-dev clang-14 libfuzzer-14-dev libopenmpi-dev openmpi-bin fortunes festlex-cmu gnuplot-nox doxygen
          python3-torch)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
