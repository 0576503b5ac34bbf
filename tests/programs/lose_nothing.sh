#!/usr/bin/env bash
# The programs lose nothing: one case a CTest (tests/CMakeLists.txt), each
# a bad command line or a bad file that once went unnoticed. A case passes
# when the program ends with the expected exit code and one clear line, and
# nothing on disk was lost or half-written.
#
#   lose_nothing.sh CASE WORKDIR   with G2P, CHAR_LM, ADDITION, TRAIN_TASKS,
#                                  ATTENTION_MAP set to the programs' paths
set -uo pipefail
case_name=$1
work=$2
rm -rf "$work"
mkdir -p "$work"
cd "$work" || exit 1

fail() {
  echo "FAIL: $*"
  exit 1
}
# run EXPECTED_EXIT CMD...: runs CMD, its stdout+stderr in out.txt; checks the exit code.
run() {
  local want=$1
  shift
  "$@" >out.txt 2>&1
  local got=$?
  [ "$got" = "$want" ] || { cat out.txt | head -20; fail "exit $got, expected $want: $*"; }
}
# said REGEX: out.txt holds a line matching REGEX.
said() { grep -qE -- "$1" out.txt || { head -20 out.txt; fail "no line matches: $1"; }; }
# never_trained: no progress line was printed (the check came before step 1).
never_trained() { ! grep -qE '^step [0-9]+/' out.txt || fail "training steps ran before the check"; }
# Tiny runs of each trainer.
g2p_small=(--layers 1 --d-model 16 --heads 2 --d-ff 32 --batch 8 --max-words 200 --warmup 1 --eval-every 1
           --eval-words 10 --beam 1 --threads 1)
lm_small=(--layers 1 --d-model 16 --heads 2 --d-ff 32 --context 16 --batch 4 --train-chars 5000 --warmup 1
          --eval-every 1 --eval-chars 200 --threads 1 --no-samples)
add_small=(--layers 1 --d-model 16 --heads 2 --d-ff 32 --batch 8 --warmup 1 --eval-every 1 --threads 1 --target 0)
# fortunes: N records in a file, CRLF line ends when $2 is crlf.
fortunes() {
  local n=$1 eol=$'\n'
  [ "${2:-}" = crlf ] && eol=$'\r\n'
  for i in $(seq 1 "$n"); do printf 'Fortune number %d says something wise.%s%%%s' "$i" "$eol" "$eol"; done
}

case "$case_name" in
same_file)  # --checkpoint and --metrics one file (also through a link): refused, the file intact
  echo keep >x.st
  ln -s x.st y.st
  run 1 "$G2P" train "${g2p_small[@]}" --steps 2 --checkpoint x.st --metrics x.st
  said "^g2p: checkpoint x.st and metrics x.st are the same file: one would destroy the other$"
  never_trained
  mkdir corpus && fortunes 50 >corpus/f
  run 1 "$CHAR_LM" train "${lm_small[@]}" --data corpus --steps 2 --checkpoint x.st --metrics y.st
  said "^char_lm: checkpoint x.st and metrics y.st are the same file"
  run 1 "$ADDITION" "${add_small[@]}" --steps 2 --checkpoint x.st --metrics x.st
  said "^addition: checkpoint x.st and metrics x.st are the same file"
  [ "$(cat x.st)" = keep ] || fail "x.st changed"
  ;;
empty_paths)  # an output given as '' is a usage error, not output written nowhere (or into /)
  run 2 "$G2P" train --checkpoint ''
  said "^g2p: --checkpoint '': expected a file path \(try --help\)$"
  run 2 "$CHAR_LM" train --metrics ''
  said "^char_lm: --metrics '': expected a file path"
  run 2 "$ADDITION" --checkpoint ''
  said "^addition: --checkpoint '': expected a file path"
  run 2 "$G2P" attention --checkpoint c --input word --out ''
  said "^g2p: --out '': expected a folder"
  run 2 "$ATTENTION_MAP" --checkpoint c --input 3 --out ''
  said "^attention_map: --out '': expected a folder"
  ;;
outputs_checked_first)  # an unwritable --metrics or --out is found before step 1
  run 1 "$TRAIN_TASKS" --steps 3 --no-samples --metrics missing/m.csv
  said "^train_tasks: metrics missing/m.csv: the folder missing does not exist$"
  never_trained
  mkdir d
  run 1 "$TRAIN_TASKS" --steps 3 --no-samples --metrics d
  said "^train_tasks: metrics d is a directory, not a file$"
  run 1 "$ATTENTION_MAP" --checkpoint none.st --input 3 --out missing
  said "^attention_map: --out missing: no such folder$"
  ;;
not_a_regular_file)  # a checkpoint path that is a device or a pipe is refused, never replaced
  mkfifo pipe
  run 1 "$TRAIN_TASKS" --steps 2 --no-samples --checkpoint pipe
  said "^train_tasks: checkpoint pipe is not a regular file \(a device, pipe or socket\): refusing to replace it$"
  never_trained
  [ -p pipe ] || fail "the pipe was replaced"
  run 1 "$TRAIN_TASKS" --steps 2 --no-samples --checkpoint /dev/null
  said "^train_tasks: checkpoint /dev/null is not a regular file"
  [ -c /dev/null ] || fail "/dev/null is no longer a device"
  ;;
damaged_checkpoint)  # a flipped bit or a NaN in a checkpoint is refused by name; an old file loads with a warning
  mkdir corpus && fortunes 80 >corpus/f
  run 0 "$CHAR_LM" train "${lm_small[@]}" --data corpus --steps 2 --checkpoint ck.st
  cp ck.st good.st
  # The last byte of the file belongs to the last tensor by name.
  size=$(stat -c %s ck.st)
  printf '\x55' | dd of=ck.st bs=1 seek=$((size - 1)) conv=notrunc status=none
  damaged=$(md5sum <ck.st)
  run 1 "$CHAR_LM" train "${lm_small[@]}" --data corpus --steps 4 --checkpoint ck.st --resume
  said "^char_lm: load_tensors: ck.st: tensor '[^']+': its bytes do not match their checksum .*: the file is damaged$"
  never_trained
  [ "$(md5sum <ck.st)" = "$damaged" ] || fail "the damaged file was rewritten"
  # A NaN written with a valid checksum (as another writer could) is refused too.
  python3 - good.st nan.st old.st <<'EOF'
import json, struct, sys, zlib
src, nan_path, old_path = sys.argv[1:4]
b = open(src, 'rb').read()
n = struct.unpack('<Q', b[:8])[0]
header = json.loads(b[8:8 + n])
data = bytearray(b[8 + n:])
name = sorted(k for k in header if k.startswith('model.'))[0]
begin, end = header[name]['data_offsets']
data[begin:begin + 4] = struct.pack('<f', float('nan'))
sums = json.loads(header['__metadata__']['crc32'])
sums['tensors'][name] = '%08x' % zlib.crc32(bytes(data[begin:end]))
header['__metadata__']['crc32'] = json.dumps(sums, separators=(',', ':'))
def write(path, h):
    text = json.dumps(h, separators=(',', ':')).encode()
    text += b' ' * ((8 - len(text) % 8) % 8)
    open(path, 'wb').write(struct.pack('<Q', len(text)) + text + bytes(data))
write(nan_path, header)
del header['__metadata__']['crc32']
data[begin:begin + 4] = b[8 + n + begin:8 + n + begin + 4]
write(old_path, header)
EOF
  run 1 "$CHAR_LM" sample --checkpoint nan.st --chars 5
  said "^char_lm: checkpoint nan.st: tensor 'model\.[^']+' holds nan at element 0 \(of [0-9]+\): refusing a non-finite checkpoint$"
  run 0 "$CHAR_LM" sample --checkpoint old.st --chars 5
  said "^warning: checkpoint old.st has no checksums \(written by an older xgrad\): its bytes are not verified$"
  ;;
options_as_help_says)  # values --help shows are accepted; values that cannot train are refused up front
  run 0 "$ADDITION" --help
  said "--eps REAL=.*\(0\.\.1\]"
  said "--lr REAL=.*\(0\.\.1e\+30\]"
  run 2 "$ADDITION" --eps 0
  said "^addition: --eps 0: expected a number above 0, at most 1 \(try --help\)$"
  run 2 "$G2P" train --lr 0
  said "^g2p: --lr 0: expected a number above 0, at most 1e\+30 \(try --help\)$"
  run 2 "$CHAR_LM" train --checkpoint x.st --resume=1e30
  said "^char_lm: --resume: '1e30': expected true, false, 1 or 0 \(--resume alone: true\) \(try --help\)$"
  run 2 "$TRAIN_TASKS" --no-samples=2
  said "^train_tasks: --no-samples: '2': expected true, false, 1 or 0"
  ;;
too_large_a_model)  # refused by its parameter count before anything is allocated
  run 1 "$ADDITION" --layers 64 --d-model 8192 --heads 256 --d-ff 65536
  said "^addition: the model's [0-9]+ parameters need [0-9]+ GB with their gradients and Adam state, more than this machine's [0-9]+ GB$"
  ;;
long_dictionary_word)  # a 1 MB word is a dictionary error, not an allocation failure
  { echo MNCL; printf '("%s" nil (((b aa) 1)))\n' "$(head -c 1048576 /dev/zero | tr '\0' 'a')"; } >dict.out
  run 1 "$G2P" train --dict dict.out --steps 2 --warmup 1
  said "^g2p: dict.out: line 2: a word of 1048576 letters, more than the 64 a dictionary word may have$"
  ;;
no_held_out_words)  # a dictionary whose words all fall in the training split is refused, not scored perfect
  # "ab" is a training word (fnv1a64 % 10 != 0), as test_g2p.cpp checks.
  printf 'MNCL\n("ab" nil (((ae b) 1)))\n' >dict.out
  run 1 "$G2P" train --dict dict.out --steps 2 --warmup 1
  said "^g2p: dict.out: no held-out word to evaluate on: all 1 words fall in the training split"
  ;;
binary_input)  # pronounce on a binary file: a bounded number of printable error lines
  run 0 "$G2P" train "${g2p_small[@]}" --steps 2 --checkpoint ck.st
  python3 -c "
import random, sys
r = random.Random(0)
sys.stdout.buffer.write(bytes(r.randrange(256) for _ in range(65536)) + b'\\n')" >binary
  "$G2P" pronounce --checkpoint ck.st <binary >pron.txt 2>err.txt
  [ $? = 1 ] || fail "pronounce did not exit 1"
  lines=$(wc -l <err.txt)
  [ "$lines" -le 21 ] || fail "$lines error lines, expected at most 21"
  LC_ALL=C grep -q '[^ -~]' err.txt && fail "bytes outside printable ASCII on stderr"
  grep -qE "^g2p: [0-9]+ more lines refused \(the first 20 are shown\)$" err.txt || fail "no count of the rest"
  [ "$(wc -l <pron.txt)" = "$(($(tr -cd '\n' <binary | wc -c)))" ] || fail "not one output line per input line"
  ;;
fortunes_files)  # CRLF fortunes train; an empty corpus or a file given as --data is named by path
  mkdir crlf empty
  fortunes 200 crlf >crlf/f
  run 0 "$CHAR_LM" train "${lm_small[@]}" --data crlf --steps 2
  said "^final steps=2 val_bpc="
  : >empty/f
  run 1 "$CHAR_LM" train "${lm_small[@]}" --data empty --steps 2
  said "^char_lm: load_fortunes: the 1 fortune file in empty hold no text$"
  run 1 "$CHAR_LM" train "${lm_small[@]}" --data crlf/f --steps 2
  said "^char_lm: load_fortunes: crlf/f is not a folder$"
  ;;
*)
  fail "unknown case $case_name"
  ;;
esac
echo "ok: $case_name"
