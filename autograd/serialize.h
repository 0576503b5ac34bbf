// Named tensors on disk in the safetensors format: an 8-byte little-endian
// header length, a JSON header {"name": {"dtype", "shape", "data_offsets"}},
// then the raw little-endian data. Files load in PyTorch and NumPy too.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "autograd/tensor.h"

namespace xg {

// A file that is not what it should be (malformed, truncated, or not the
// checkpoint expected): the message names the file and the key or byte offset.
struct FormatError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// The "__metadata__" entry holding a file's checksums: CRC-32 (zlib's) of the
// header without this entry and of each tensor's bytes, as the JSON text
// {"header": "8 hex digits", "tensors": {"NAME": "8 hex digits", ...}}.
// Other readers (PyTorch's safetensors) see one more string entry.
inline constexpr const char* kChecksumKey = "crc32";

// Writes atomically: a temporary file beside `path`, flushed, then renamed,
// so a crash mid-write leaves any previous file intact. Temporary files of
// `path` left by writers that crashed (their process is gone) are removed.
// A `path` that exists and is not a regular file (a directory, a device) is
// refused, never replaced. `metadata` goes into the header's "__metadata__"
// (string values only, as the format says), with the file's checksums
// (kChecksumKey; an entry of that name in `metadata` is replaced).
void save_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                  const std::map<std::string, std::string>& metadata = {});
// The atomic write save_tensors does, for any file: `write` hands the bytes
// in order to the sink it is given; they go to PATH.tmp.PID beside `path`,
// which is flushed and renamed over `path` only if `write` returns. If it
// throws, or a write fails, the temporary file is removed and `path` is left
// as it was. Errors are std::runtime_error beginning "WHO: " and naming the
// file (a `path` that is a directory, a folder that cannot take the file).
using ByteSink = std::function<void(const void* data, size_t bytes)>;
void write_file_atomically(const std::string& path, const char* who, const std::function<void(const ByteSink&)>& write);
// The most dimensions a tensor in a file may have (the error says so).
inline constexpr size_t kMaxTensorDims = 64;

// Reads and validates everything before allocating any tensor: the header
// length (at most 100 MiB) and JSON (no key twice in one object, no array
// longer than kMaxTensorDims, no NUL byte in a tensor name or metadata key),
// dtypes (F32, F64), shapes (at most kMaxTensorDims dimensions, at most 2^40
// elements counting only the non-zero dimensions) against their byte ranges,
// and the ranges themselves: sorted by offset they must cover the data
// buffer exactly, from 0 to the end of the file, with no hole, overlap or
// trailing byte (as the format requires). Reads only the header and then
// each tensor's bytes into that tensor. A file with checksums (kChecksumKey)
// must match them: the header before anything is allocated, each tensor as
// it is read. Throws FormatError naming the file, the key or the byte
// offset (the tensor, for a checksum). `metadata`, if given, receives the
// "__metadata__" entries (added to what it holds) only when the whole file
// loads.
std::map<std::string, Tensor> load_tensors(const std::string& path,
                                           std::map<std::string, std::string>* metadata = nullptr);

// The same checks and result over `size` bytes in memory holding a whole
// file (`data` may be null when `size` is 0), for instance for a fuzzer or a
// file that was received rather than opened. The bytes are copied into the
// tensors; `data` need not outlive the call. Error messages say `name` where
// load_tensors says the path ("load_tensors: <memory>: ...").
std::map<std::string, Tensor> load_tensors_from_memory(const void* data, size_t size,
                                                       std::map<std::string, std::string>* metadata = nullptr,
                                                       const std::string& name = "<memory>");

// A file's "__metadata__": string keys and values.
using Metadata = std::map<std::string, std::string>;

// `s` for a message: in single quotes, at most `max_bytes` of it (then
// "..."), every byte outside printable ASCII written \xNN:
// "'caf\xc3\xa9...'". What a program echoes of bad input.
std::string quote_text(std::string_view s, size_t max_bytes = 40);

// A whole number written as decimal digits with an optional leading '-' (at
// most 18 digits, so it fits in int64): the one reading of integers in
// command lines, checkpoint metadata and the programs' inputs. "1.5", "1e3",
// "0x10", "+1", " 1", "nan" and "" give nullopt: nothing is truncated or
// reinterpreted.
std::optional<int64_t> parse_whole_number(const std::string& s);
// The same within [lo, hi], for option `name`: else std::invalid_argument
// "NAME S: expected a whole number from LO to HI".
int64_t parse_whole_number(const std::string& name, const std::string& s, int64_t lo, int64_t hi);

// metadata[key] as a whole number within [lo, hi]; throws FormatError
// "checkpoint PATH: metadata 'KEY' is 'V', expected a whole number from LO to
// HI" (or "... has no 'KEY'").
int64_t metadata_int(const Metadata& metadata, const std::string& key, const std::string& path, int64_t lo,
                     int64_t hi);

}  // namespace xg
