#include "peer/chunk_stream.h"

#include <openssl/evp.h>
#include <unistd.h>

#include "common/file_util.h"

namespace cairn {

std::string base64_encode(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(static_cast<size_t>(n));
  return out;
}

Result<std::string> base64_decode(std::string_view text) {
  if (text.size() % 4 != 0) return Status::BadInput("bad base64 (length)");
  size_t pad = 0;
  if (!text.empty() && text.back() == '=') ++pad;
  if (text.size() > 1 && text[text.size() - 2] == '=') ++pad;
  for (size_t i = 0; i + pad < text.size(); ++i)
    if (text[i] == '=') return Status::BadInput("bad base64 (padding)");
  std::string out(3 * (text.size() / 4) + 1, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(text.data()),
                                static_cast<int>(text.size()));
  if (n < 0) return Status::BadInput("bad base64");
  out.resize(static_cast<size_t>(n) - pad);  // EVP_DecodeBlock counts padding as zero bytes
  return out;
}

Status send_chunks(PeerConnection& peer, std::string_view bytes, Deadline deadline) {
  for (size_t at = 0; at < bytes.size(); at += kChunkBytes) {
    Status st = peer.send(
        Json{{"type", "chunk"}, {"data", base64_encode(bytes.substr(at, kChunkBytes))}}, deadline);
    if (!st.ok()) return st;
  }
  return Status::Ok();
}

Status send_file_chunks(PeerConnection& peer, int fd, uint64_t size, Deadline deadline) {
  std::string buffer(kChunkBytes, '\0');
  uint64_t left = size;
  while (left > 0) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(left, kChunkBytes));
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
