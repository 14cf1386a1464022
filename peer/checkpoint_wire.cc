#include "peer/checkpoint_wire.h"

#include <openssl/evp.h>
#include <unistd.h>

#include "common/file_util.h"
#include "common/sha256.h"

namespace cairn {

namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3), '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return Status::BadInput("chunk data is not base64");
  std::string out(text.size() / 4 * 3, '\0');
  if (text.empty()) return out;
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return Status::BadInput("chunk data is not base64");
  size_t pad = 0;
  if (text.back() == '=') ++pad;
  if (text.size() >= 2 && text[text.size() - 2] == '=') ++pad;
  out.resize(static_cast<size_t>(n) - pad);
  return out;
}

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
    Json chunk{{"type", "checkpoint_chunk"},
               {"sha256", digest},
               {"offset", offset},
               {"data", base64_encode(std::string_view(buffer.data(), got))}};
    if (Status sent = peer.send(chunk, Clock::now() + kChunkTime); !sent.ok()) return sent;
    offset += got;
    if (counted) *counted += got;
  } while (offset < size);
  return Status::Ok();
}

Status receive_content(PeerConnection& peer, const std::string& digest, uint64_t size, int out_fd,
                       bool sync, uint64_t* counted) {
  Sha256 hash;
  uint64_t offset = 0;
  do {
    auto frame = receive_frame(peer);
    if (!frame.ok()) return frame.status();
    const Json& m = *frame;
    if (m["type"] == "error")
      return Status::Failed(m.value("reason", Json("no reason")).is_string()
                                ? m["reason"].get<std::string>().substr(0, 300)
                                : "refused");
    if (m["type"] != "checkpoint_chunk" || m.value("sha256", Json()) != digest ||
        !m.value("offset", Json()).is_number_unsigned() || m["offset"].get<uint64_t>() != offset ||
        !m.value("data", Json()).is_string())
      return Status::BadInput("expected the chunk of " + digest.substr(0, 12) + " at offset " +
                              std::to_string(offset) + ", got something else");
    auto data = base64_decode(m["data"].get_ref<const std::string&>());
    if (!data.ok()) return data.status();
    if (data->size() > kChunkBytes || data->size() > size - offset || (data->empty() && size != 0))
      return Status::BadInput("a chunk of " + digest.substr(0, 12) + " of the wrong size");
    hash.update(data->data(), data->size());
    if (Status w = write_all(out_fd, *data); !w.ok()) return w;
    offset += data->size();
    if (counted) *counted += data->size();
  } while (offset < size);
  if (hash.hex_digest() != digest)
    return Status::BadInput("content sent as " + digest.substr(0, 12) + " does not hash to it");
  if (sync && ::fsync(out_fd) != 0) return Status::Io("fsync: " + errno_text());
  return Status::Ok();
}

}  // namespace cairn
