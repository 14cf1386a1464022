#include "peer/checkpoint_send.h"

#include "common/file_util.h"
#include "peer/checkpoint_want.h"
#include "peer/checkpoint_wire.h"

namespace cairn {

std::string resumed_text(size_t count, uint64_t kept) {
  if (count == 0) return "";
  return ", " + std::to_string(count) + (count == 1 ? " content" : " contents") +
         " resumed after " + std::to_string(kept) + " bytes kept";
}

Status send_wanted_contents(PeerConnection& peer, const WireManifest& manifest,
                            const std::filesystem::path& dir, SentContents* sent) {
  auto want = receive_frame(peer);
  if (!want.ok()) return Status::Io(want.status().message());  // the connection's
  // Each digest one of the manifest's, once; each from the offset it asks (what the receiver
  // kept of a try cut in the middle), never beyond the content.
  auto wanted = parse_checkpoint_want(*want, manifest);
  if (!wanted.ok()) return wanted.status();
  sent->wanted = wanted->size();
  for (const WantedFile& w : *wanted) {
    const WireFile& f = *w.file;
    UniqueFd fd = open_beneath(dir, f.path);
    if (!fd) return Status::NotFound(f.path + " vanished: " + errno_text());
    if (w.from > 0) {
      sent->kept += w.from;
      ++sent->resumed;
    }
    if (Status s = send_content(peer, fd.get(), f.sha256, f.size, &sent->content_bytes, w.from);
        !s.ok())
      return Status::Io(s.message());
  }
  return Status::Ok();
}

}  // namespace cairn
