#!/bin/sh
# Prints "same" when the README's first C++ block is examples/first_program.cpp,
# character for character; else the difference.
#   tests/readme_first_program.sh SOURCE_DIR
awk '/^```cpp$/ { inside = 1; next } /^```$/ { if (inside) exit } inside' "$1/README.md" |
  diff - "$1/examples/first_program.cpp" && echo same
