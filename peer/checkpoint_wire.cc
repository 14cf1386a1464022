#include "peer/checkpoint_wire.h"

#include <unistd.h>

#include <cstring>
#include <memory>
#include <optional>

#include "common/file_util.h"
#include "common/sha256.h"
#include "peer/content_sink.h"
#include "peer/frame.h"

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
                    uint64_t* counted, uint64_t from) {
  if (from > size)  // the callers check the peer's offset first; never read past the content
    return Status::BadInput("an offset beyond the content");
  // Each chunk's header frame travels in the same write as the chunk's first piece, and the
  // file is read in pieces (ContentSink::kPieceBytes) that stay in the cache between the
  // read and the encryption. The bytes on the wire are the same as one header then N bytes.
  constexpr size_t kPiece = ContentSink::kPieceBytes;
  constexpr size_t kHeadRoom = 1024;  // a chunk's header frame is about 150 bytes
  auto buffer = std::make_unique<char[]>(kHeadRoom + kPiece);
  uint64_t offset = from;
  do {
    const size_t chunk = static_cast<size_t>(std::min<uint64_t>(kChunkBytes, size - offset));
    Json header{
        {"type", "checkpoint_chunk"}, {"sha256", digest}, {"offset", offset}, {"bytes", chunk}};
    auto frame = encode_frame(header);
    if (!frame.ok()) return frame.status();
    size_t head = 0;
    if (frame->size() <= kHeadRoom) {
      head = frame->size();
      std::memcpy(buffer.get(), frame->data(), head);
    } else if (Status sent = peer.send_bytes(*frame, Clock::now() + kChunkTime); !sent.ok()) {
      return sent;
    }
    size_t done = 0;
    do {
      const size_t want = std::min(kPiece, chunk - done);
      size_t got = 0;
      while (got < want) {
        const ssize_t n = ::pread(fd, buffer.get() + head + got, want - got,
                                  static_cast<off_t>(offset + done + got));
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
          return Status::Io("cannot read content " + digest.substr(0, 12) + ": " + errno_text());
        if (n == 0)
          return Status::Io("content " + digest.substr(0, 12) + " shrank while it was sent");
        got += static_cast<size_t>(n);
      }
      if (Status sent = peer.send_bytes(std::string_view(buffer.get(), head + got),
                                        Clock::now() + kChunkTime);
          !sent.ok())
        return sent;
      head = 0;
      done += got;
      if (counted) *counted += got;
    } while (done < chunk);
    offset += chunk;
  } while (offset < size);
  return Status::Ok();
}

Status receive_content(PeerConnection& peer, const std::string& digest, uint64_t size, int out_fd,
                       bool sync, uint64_t* counted, uint64_t kept) {
  if (kept > size) kept = 0;  // cannot be this content's prefix: received whole
  std::optional<ContentSink> sink;
  uint64_t offset = 0;
  do {
    auto frame = receive_frame(peer);
    if (!frame.ok()) return frame.status();
    const Json& m = *frame;
    if (m["type"] == "error")
      return Status::Failed(m.value("reason", Json("no reason")).is_string()
                                ? m["reason"].get<std::string>().substr(0, 300)
                                : "refused");
    const Json at = m.value("offset", Json());
    const Json bytes = m.value("bytes", Json());
    if (m["type"] != "checkpoint_chunk" || m.value("sha256", Json()) != digest ||
        !at.is_number_unsigned() || !bytes.is_number_unsigned())
      return Status::BadInput("expected the chunk of " + digest.substr(0, 12) + " at offset " +
                              std::to_string(sink ? offset : kept) + ", got something else");
    if (!sink) {
      // The first chunk says where the sender starts: after what this side kept, or at 0.
      const uint64_t first = at.get<uint64_t>();
      if (first != kept && first != 0)
        return Status::BadInput("expected the chunk of " + digest.substr(0, 12) + " at offset " +
                                std::to_string(kept) + ", got one at " + std::to_string(first));
      sink.emplace(out_fd, size - first);
      if (Status resumed = sink->resume_after(first); !resumed.ok()) return resumed;
      offset = first;
    } else if (at.get<uint64_t>() != offset) {
      return Status::BadInput("expected the chunk of " + digest.substr(0, 12) + " at offset " +
                              std::to_string(offset) + ", got something else");
    }
    const uint64_t n = bytes.get<uint64_t>();
    if (n > kChunkBytes || n > size - offset || (n == 0 && offset != size))
      return Status::BadInput("a chunk of " + digest.substr(0, 12) + " of the wrong size (" +
                              std::to_string(n) + " bytes)");
    // The chunk's bytes, in the sink's pieces: each is hashed and written while the next
    // one is read.
    for (uint64_t done = 0; done < n;) {
      const size_t piece =
          static_cast<size_t>(std::min<uint64_t>(ContentSink::kPieceBytes, n - done));
      if (Status got = peer.receive_raw(sink->buffer(), piece, Clock::now() + kChunkTime);
          !got.ok())
        return got;
      if (Status w = sink->put(piece); !w.ok()) return w;
      done += piece;
    }
    offset += n;
    if (counted) *counted += n;
  } while (offset < size);
  if (sink->digest() != digest)
    return Status::BadInput("content sent as " + digest.substr(0, 12) + " does not hash to it");
  if (sync && ::fsync(out_fd) != 0) return Status::Io("fsync: " + errno_text());
  return Status::Ok();
}

}  // namespace cairn
