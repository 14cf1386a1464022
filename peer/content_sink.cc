#include "peer/content_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include <string_view>

#include "common/file_util.h"

namespace cairn {

ContentSink::ContentSink(int fd, uint64_t size) : fd_(fd) {
  const uint64_t pieces = (size + kPieceBytes - 1) / kPieceBytes;
  const bool threaded = pieces > kThreadFromPieces;
  const size_t slots = threaded ? kSlots : 1;
  for (size_t i = 0; i < slots; ++i) slots_.push_back(std::make_unique<char[]>(kPieceBytes));
  lengths_.assign(slots, 0);
  if (threaded) thread_ = std::thread([this] { hash_loop(); });
}

ContentSink::~ContentSink() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  more_.notify_one();
  thread_.join();
}

Status ContentSink::resume_after(uint64_t kept) {
  // On this thread, before any put: the hashing thread touches hash_ only for pieces put.
  auto piece = std::make_unique<char[]>(kPieceBytes);
  for (uint64_t at = 0; at < kept;) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kPieceBytes, kept - at));
    const ssize_t n = ::pread(fd_, piece.get(), want, static_cast<off_t>(at));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Status::Io("cannot read back the content kept: " + errno_text());
    if (n == 0) return Status::Io("the content kept is shorter than it was");
    hash_.update(piece.get(), static_cast<size_t>(n));
    at += static_cast<uint64_t>(n);
  }
  if (::ftruncate(fd_, static_cast<off_t>(kept)) != 0 ||
      ::lseek(fd_, static_cast<off_t>(kept), SEEK_SET) < 0)
    return Status::Io("cannot go on after the content kept: " + errno_text());
  start_ = kept;
  return Status::Ok();
}

char* ContentSink::buffer() {
  if (!thread_.joinable()) return slots_[0].get();
  std::unique_lock lock(mutex_);
  // The slot of piece put_ was last used by piece put_ - kSlots: hashed yet? (Written it
  // was: put() writes a piece before it returns.)
  freed_.wait(lock, [&] { return put_ - hashed_ < slots_.size(); });
  return slots_[put_ % slots_.size()].get();
}

Status ContentSink::put(size_t n) {
  const size_t slot = put_ % slots_.size();  // only this thread changes put_
  const char* data = slots_[slot].get();
  if (!thread_.joinable()) {
    hash_.update(data, n);
    ++put_;
  } else {
    lengths_[slot] = n;
    {
      std::lock_guard lock(mutex_);
      ++put_;
    }
    more_.notify_one();
  }
  // While the other thread hashes the piece, this one copies it to the page cache: both only
  // read the slot, which buffer() hands out again only once it is hashed and written.
  return write_all(fd_, std::string_view(data, n));
}

std::string ContentSink::digest() {
  if (thread_.joinable()) {
    {
      std::lock_guard lock(mutex_);
      last_ = true;
    }
    more_.notify_one();
    thread_.join();
  }
  return hash_.hex_digest();
}

void ContentSink::hash_loop() {
  // Offsets in the content put, which starts at start_ in the file.
  uint64_t hashed_bytes = 0, handed_back = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    more_.wait(lock, [&] { return quit_ || last_ || hashed_ < put_; });
    if (quit_ || hashed_ == put_) return;  // quit, or last_ with everything hashed
    const size_t slot = hashed_ % slots_.size();
    const size_t n = lengths_[slot];
    lock.unlock();
    hash_.update(slots_[slot].get(), n);
    hashed_bytes += n;
    // The receiving thread has written about as far as this thread has hashed; what lies
    // kSlots pieces behind is surely written (a range not written yet would simply be
    // skipped). Handed to the disk from here, not from the receiving thread, which goes on
    // reading the socket while the kernel queues the writes. Advisory: the caller's fsync
    // is what makes the bytes durable and reports errors.
    const uint64_t behind = kSlots * kPieceBytes;
    if (hashed_bytes >= behind + handed_back + kWriteBackBytes) {
      const uint64_t to = hashed_bytes - behind;
      ::sync_file_range(fd_, static_cast<off_t>(start_ + handed_back),
                        static_cast<off_t>(to - handed_back), SYNC_FILE_RANGE_WRITE);
      handed_back = to;
    }
    lock.lock();
    ++hashed_;
    freed_.notify_one();
  }
}

}  // namespace cairn
