#include "peer/chunk_stream.h"

#include <unistd.h>

#include "common/file_util.h"

namespace cairn {

Status send_chunks(PeerConnection& peer, std::string_view bytes, Deadline deadline) {
  for (size_t at = 0; at < bytes.size(); at += kShipChunkBytes) {
    Status st = peer.send(
        Json{{"type", "chunk"}, {"data", base64_encode(bytes.substr(at, kShipChunkBytes))}},
        deadline);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status send_file_chunks(PeerConnection& peer, int fd, uint64_t size, Deadline deadline) {
  std::string buffer(kShipChunkBytes, '\0');
  uint64_t left = size;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, kShipChunkBytes));
    size_t got = 0;
    while (got < want) {
      const ssize_t n = ::read(fd, buffer.data() + got, want - got);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Status::Io("read: " + errno_text());
      if (n == 0) return Status::Io("the file is shorter than recorded");
      got += static_cast<size_t>(n);
    }
    Status st = peer.send(
        Json{{"type", "chunk"}, {"data", base64_encode(std::string_view(buffer.data(), got))}},
        deadline);
    if (!st.ok()) return st;
    left -= got;
  }
  return Status::Ok();
}

Status receive_chunks(PeerConnection& peer, uint64_t size,
                      const std::function<Status(std::string_view)>& sink,
                      std::chrono::milliseconds per_chunk) {
  auto broken = [](const std::string& why) { return Status::BadInput("broken stream: " + why); };
  Status first = Status::Ok();
  uint64_t received = 0;
  while (received < size) {
    auto message = peer.receive(std::chrono::steady_clock::now() + per_chunk);
    if (!message.ok()) return broken(message.status().message());
    if (!message->has_value()) return broken("the peer closed the connection");
    const Json& m = **message;
    const Json data = m.value("data", Json());
    if (m["type"] != "chunk" || !data.is_string()) return broken("expected a chunk");
    auto bytes = base64_decode(data.get<std::string>());
    if (!bytes.ok()) return broken(bytes.status().message());
    if (bytes->empty()) return broken("an empty chunk");
    if (bytes->size() > size - received) return broken("more bytes than announced");
    received += bytes->size();
    if (first.ok()) first = sink(*bytes);
  }
  return first;
}

}  // namespace cairn
