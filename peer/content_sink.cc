#include "peer/content_sink.h"

#include <fcntl.h>

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
      ::sync_file_range(fd_, static_cast<off_t>(handed_back), static_cast<off_t>(to - handed_back),
                        SYNC_FILE_RANGE_WRITE);
      handed_back = to;
    }
    lock.lock();
    ++hashed_;
    freed_.notify_one();
  }
}

}  // namespace cairn
