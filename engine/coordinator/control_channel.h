// The server side of the trial control channel (docs/protocol.md): a Unix stream socket
// that trials connect to, carrying one JSON object per line in each direction. Everything
// is non-blocking; the coordinator's poll loop drives it.
#pragma once

#include <deque>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/file_util.h"
#include "common/json.h"
#include "common/status.h"

namespace cairn {

class ControlConnection {
 public:
  explicit ControlConnection(UniqueFd fd) : fd_(std::move(fd)) {}
  int fd() const { return fd_.get(); }

  // The longest line kept (docs/protocol.md: at least 1 MiB must be accepted). A longer one
  // is dropped as it arrives, up to its newline, so a trial that never ends a line cannot
  // make the coordinator's memory grow without bound.
  static constexpr size_t kMaxLineBytes = size_t{16} << 20;

  // Reads what is available. Returns false when the peer closed or the socket failed.
  bool read_available();
  // Complete lines received so far, without their newline.
  std::vector<std::string> take_lines();
  // How many lines longer than kMaxLineBytes were dropped since the last call.
  int take_overlong_lines() { return std::exchange(overlong_lines_, 0); }
  void send(const Json& message);
  // Writes what the socket accepts now. Returns false when the peer is gone.
  bool flush();
  bool wants_write() const { return !out_.empty(); }

  // Set once the trial said hello.
  int64_t trial = 0;
  int rank = 0;
  int64_t pid = 0;  // as the hello said, for messages; 0 when it did not

 private:
  // Appends received bytes to in_, dropping what exceeds kMaxLineBytes of one line.
  void receive(std::string_view data);

  UniqueFd fd_;
  std::string in_;
  size_t line_start_ = 0;  // where in in_ the line not yet ended begins
  bool dropping_ = false;  // inside an over-long line: bytes are dropped up to its newline
  int overlong_lines_ = 0;
  std::string out_;
};

class ControlListener {
 public:
  // Listens on a socket in `dir` (or in a short directory under /tmp when the path would be
  // longer than a Unix socket address allows).
  static Result<ControlListener> listen(const std::filesystem::path& dir, const std::string& name);
  ControlListener(ControlListener&&) noexcept = default;
  ControlListener& operator=(ControlListener&&) noexcept = default;
  ~ControlListener();

  int fd() const { return fd_.get(); }
  // "unix:/path", the value of CAIRN_CONTROL.
  std::string address() const { return "unix:" + path_.string(); }
  // Accepts every pending connection.
  std::vector<UniqueFd> accept_all();

 private:
  ControlListener() = default;
  UniqueFd fd_;
  std::filesystem::path path_;
  std::filesystem::path owned_dir_;  // removed on destruction when we made it
};

}  // namespace cairn
