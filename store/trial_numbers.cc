#include "store/trial_numbers.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cstdlib>
#include <string>

#include "common/file_util.h"

namespace cairn {

Result<int64_t> allocate_trial_number(const StoreLayout& store) {
  const std::filesystem::path path = store.root() / "trial_numbers";
  UniqueFd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd) return Status::Io("cannot open " + path.string() + ": " + errno_text());
  if (::flock(fd.get(), LOCK_EX) != 0)
    return Status::Io("cannot lock " + path.string() + ": " + errno_text());
  char buf[32] = {};
  const ssize_t n = ::pread(fd.get(), buf, sizeof buf - 1, 0);
  if (n < 0) return Status::Io("cannot read " + path.string() + ": " + errno_text());
  char* end = nullptr;
  const long long last = n > 0 ? std::strtoll(buf, &end, 10) : 0;
  if (n > 0 && (end == buf || last < 0))
    return Status::Corrupt(path.string() + " does not hold a trial number");
  const int64_t next = static_cast<int64_t>(last) + 1;
  const std::string text = std::to_string(next) + "\n";
  // One short write at offset 0: the text only grows, so a crash leaves the old or the new
  // number (a longer new one is written whole or not at all within one page).
  if (::pwrite(fd.get(), text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::fsync(fd.get()) != 0)
    return Status::Io("cannot write " + path.string() + ": " + errno_text());
  return next;  // the lock goes with the descriptor
}

}  // namespace cairn
