#!/usr/bin/env bash
# Dependencies point one way: engine <- autograd <- {data, nn, optim} <- models, distributed <- train
# <- apps/common/ (the programs' command lines) <- applications (apps/NAME/) <- programs
# (examples/, bench/); onnx/ (export) sits beside train/, using autograd, nn and models,
# and no other library folder uses it. Nothing in the
# library or its tests includes apps/, and no application includes another.
# Fails listing every #include that points back.
set -euo pipefail
cd "$(dirname "$0")/.."
declare -A allowed=(
  [engine]="engine"
  [autograd]="engine autograd"
  [data]="engine autograd data"
  [nn]="engine autograd nn"
  [optim]="engine autograd optim"
  [models]="engine autograd nn models"
  [distributed]="engine autograd nn optim distributed"
  [train]="engine autograd data nn optim models distributed train"
  [onnx]="engine autograd nn models onnx"
)
bad=0
for layer in "${!allowed[@]}"; do
  while IFS= read -r hit; do
    file=${hit%%:*}
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$hit")
    if [[ " ${allowed[$layer]} " != *" $target "* ]]; then
      echo "check_layers: $file includes $target/, which $layer/ may not use: ${hit#*:}"
      bad=1
    fi
  done < <(grep -rnE '^#include "[a-z_]+/' "$layer" --include='*.h' --include='*.cpp' || true)
done
# The library, tests and bench never include a program.
if grep -rnE '^#include "examples/' engine autograd data nn optim models distributed train onnx tests bench apps; then
  echo "check_layers: the lines above include examples/ (programs are thin, nothing depends on them)"
  bad=1
fi
# The library and its tests know no application.
if grep -rnE '^#include "apps/' engine autograd data nn optim models distributed train onnx tests; then
  echo "check_layers: the lines above include apps/ from the library or its tests (applications sit on top of it)"
  bad=1
fi
# An application uses the library, apps/common/ and itself, never another
# application; apps/common/ uses the library alone.
for app in apps/*/; do
  name=$(basename "$app")
  while IFS= read -r hit; do
    other=$(sed -E 's/.*#include "apps\/([a-z_0-9]+)\/.*/\1/' <<<"$hit")
    if [[ $other != "$name" && ( $other != common || $name == common ) ]]; then
      echo "check_layers: ${hit%%:*} includes apps/$other/, another application: ${hit#*:}"
      bad=1
    fi
  done < <(grep -rnE '^#include "apps/' "$app" --include='*.h' --include='*.cpp' || true)
done
[ $bad = 0 ] && echo "check_layers: every #include points down the layers"
exit $bad
