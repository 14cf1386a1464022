#include "peer/checkpoint_wire.h"

#include <unistd.h>

#include "common/file_util.h"
#include "common/sha256.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

Result<Json> receive_frame(PeerConnection& peer) {
  auto message = peer.receive(Clock::now() + kChunkTime);
  if (!message.ok()) return message.status();
  if (!message->has_value()) return Status::Failed("the peer closed the connection");
  return std::move(**message);
}

Status send_content(PeerConnection& peer, int fd, const std::string& digest, uint64_t size,
                    uint64_t* counted) {
  std::string buffer(kChunkBytes, '\0');
  uint64_t offset = 0;
  do {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, size - offset));
    size_t got = 0;
    while (got < want) {
      const ssize_t n =
          ::pread(fd, buffer.data() + got, want - got, static_cast<off_t>(offset + got));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0)
        return Status::Io("cannot read content " + digest.substr(0, 12) + ": " + errno_text());
      if (n == 0)
        return Status::Io("content " + digest.substr(0, 12) + " shrank while it was sent");
      got += static_cast<size_t>(n);
    }
    Json chunk{
        {"type", "checkpoint_chunk"}, {"sha256", digest}, {"offset", offset}, {"bytes", got}};
    if (Status sent = peer.send(chunk, Clock::now() + kChunkTime); !sent.ok()) return sent;
    if (Status sent =
            peer.send_bytes(std::string_view(buffer.data(), got), Clock::now() + kChunkTime);
        !sent.ok())
      return sent;
    offset += got;
    if (counted) *counted += got;
  } while (offset < size);
  return Status::Ok();
}

Status receive_content(PeerConnection& peer, const std::string& digest, uint64_t size, int out_fd,
                       bool sync, uint64_t* counted) {
  Sha256 hash;
  std::string buffer(kChunkBytes, '\0');
  uint64_t offset = 0;
  do {
    auto frame = receive_frame(peer);
    if (!frame.ok()) return frame.status();
    const Json& m = *frame;
    if (m["type"] == "error")
      return Status::Failed(m.value("reason", Json("no reason")).is_string()
                                ? m["reason"].get<std::string>().substr(0, 300)
                                : "refused");
    const Json bytes = m.value("bytes", Json());
    if (m["type"] != "checkpoint_chunk" || m.value("sha256", Json()) != digest ||
        !m.value("offset", Json()).is_number_unsigned() || m["offset"].get<uint64_t>() != offset ||
        !bytes.is_number_unsigned())
      return Status::BadInput("expected the chunk of " + digest.substr(0, 12) + " at offset " +
                              std::to_string(offset) + ", got something else");
    const uint64_t n = bytes.get<uint64_t>();
    if (n > kChunkBytes || n > size - offset || (n == 0 && size != 0))
      return Status::BadInput("a chunk of " + digest.substr(0, 12) + " of the wrong size (" +
                              std::to_string(n) + " bytes)");
    if (Status got = peer.receive_raw(buffer.data(), n, Clock::now() + kChunkTime); !got.ok())
      return got;
    hash.update(buffer.data(), n);
    if (Status w = write_all(out_fd, std::string_view(buffer.data(), n)); !w.ok()) return w;
    offset += n;
    if (counted) *counted += n;
  } while (offset < size);
  if (hash.hex_digest() != digest)
    return Status::BadInput("content sent as " + digest.substr(0, 12) + " does not hash to it");
  if (sync && ::fsync(out_fd) != 0) return Status::Io("fsync: " + errno_text());
  return Status::Ok();
}

}  // namespace cairn
