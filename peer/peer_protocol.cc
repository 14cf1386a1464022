#include "peer/peer_protocol.h"

#include "common/build_info.h"

namespace cairn {

Json hello_message(const std::string& role) {
  return Json{{"type", "hello"},
              {"protocol", kPeerProtocolVersion},
              {"cairn", CAIRN_VERSION},
              {"role", role}};
}

Status check_hello(const Json& message, PeerHello* hello) {
  if (!message.is_object() || message.value("type", Json()) != "hello")
    return Status::BadInput("the first frame is not a hello");
  auto protocol = message.find("protocol");
  if (protocol == message.end() || !protocol->is_number_integer())
    return Status::BadInput("the hello has no integer \"protocol\"");
  PeerHello got;
  got.protocol = protocol->get<int64_t>();
  if (auto cairn = message.find("cairn"); cairn != message.end() && cairn->is_string())
    got.cairn_version = cairn->get<std::string>();
  if (hello) *hello = got;
  if (got.protocol != kPeerProtocolVersion)
    return Status::Failed("peer protocol version " + std::to_string(got.protocol) + " (cairn " +
                          (got.cairn_version.empty() ? "?" : got.cairn_version) +
                          "), this cairn speaks version " + std::to_string(kPeerProtocolVersion) +
                          " (cairn " CAIRN_VERSION "): run the same cairn on every machine");
  return Status::Ok();
}

Json refusal_message(const std::string& reason) {
  return Json{{"type", "refused"}, {"reason", reason}};
}

}  // namespace cairn
