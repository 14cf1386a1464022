// Where content received over the wire goes (checkpoint_wire.h): a file, written as the
// bytes arrive, and a SHA-256 of them, which the receiver compares with the digest it asked
// for before it keeps anything.
//
// Why not simply read a 1 MiB chunk, hash it, write it, as this did before: measured on
// issue 17's benchmark (bench/RESULTS.md, 2026-11-27), that receiver was the bottleneck of
// a transfer. The hash ran on the thread that reads the socket, so one core decrypted,
// hashed and copied to the page cache while the sender's core mostly waited; and 1 MiB
// pieces cost more than smaller ones (on the benchmark's machine a plain TLS receiver took
// 0.58 s of CPU per 256 MiB in 1 MiB pieces against 0.37 s in 256 KiB ones, and 1 MiB
// write(2)s cost the kernel about 4x the CPU of 256 KiB ones for the same bytes). Here the bytes go
// in pieces of 256 KiB (kPieceBytes), and a content of more than a few pieces is hashed on a thread
// of its own while the receiving thread decrypts and writes the next pieces: two cores share the
// work that one did. That thread also hands the pieces written to the disk every few MiB
// (sync_file_range(WRITE), advisory), so the fsync that makes the content durable finds most of it
// already written instead of starting on all of it at the end.
//
// Nothing here decides whether the content is good: the caller compares digest() with what
// it asked for and discards the file when they differ.
//
// Thread-safety: one thread uses a ContentSink (buffer, put, digest); the hashing thread is
// internal and ends in digest() or the destructor.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/sha256.h"
#include "common/status.h"

namespace cairn {

class ContentSink {
 public:
  static constexpr size_t kPieceBytes = 256 << 10;
  // A content of more pieces than this is hashed on a thread of its own.
  static constexpr size_t kThreadFromPieces = 4;
  // How many pieces may be written and not yet hashed: the hashing thread's lead.
  static constexpr size_t kSlots = 8;
  // Written bytes are handed to the disk in steps of this much.
  static constexpr uint64_t kWriteBackBytes = 8 << 20;

  // `fd`: the file to write (not owned), at its current offset; `size`: how many bytes will
  // come (sizes the buffers and decides whether a hashing thread is worth starting).
  ContentSink(int fd, uint64_t size);
  ~ContentSink();
  ContentSink(const ContentSink&) = delete;
  ContentSink& operator=(const ContentSink&) = delete;

  // The file already holds the content's first `kept` bytes (written by an earlier try whose
  // connection broke, checkpoint_wire.h): reads them back and hashes them, cuts the file to
  // them, and writes what is put after them. Call before the first put. An error is the
  // file's (a read, a seek).
  Status resume_after(uint64_t kept);

  // Where the next piece goes: room for kPieceBytes. May wait for the hashing thread to be
  // done with that buffer.
  char* buffer();
  // The next `n` bytes (n <= kPieceBytes) are in buffer(): writes them to the file and hashes
  // them. An error is the write's; after one, only the destructor may be called.
  Status put(size_t n);
  // The lowercase hex SHA-256 of everything put. Call once, after the last put.
  std::string digest();

 private:
  void hash_loop();

  int fd_;
  uint64_t start_ = 0;  // the file offset of the first byte put (resume_after)
  Sha256 hash_;
  std::vector<std::unique_ptr<char[]>> slots_;
  std::vector<size_t> lengths_;
  // With a hashing thread: pieces put and pieces hashed, under mutex_.
  std::mutex mutex_;
  std::condition_variable more_, freed_;
  uint64_t put_ = 0, hashed_ = 0;
  bool last_ = false;  // no more pieces: the thread hashes what is left and ends
  bool quit_ = false;  // the destructor: the thread ends now
  std::thread thread_;
};

}  // namespace cairn
