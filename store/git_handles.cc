#include "store/git_handles.h"

namespace cairn::git {

void ensure_initialized() {
  static const int initialized = [] {
    int n = git_libgit2_init();
    // Strict creation re-reads every object a new tree names to check it exists: cairn
    // writes those blobs itself a moment before (or found them in the odb), so the check
    // only costs time, about half of a second snapshot of a 10,000-file workdir.
    git_libgit2_opts(GIT_OPT_ENABLE_STRICT_OBJECT_CREATION, 0);
    return n;
  }();
  (void)initialized;
}

Status error(const std::string& what, ErrorKind kind) {
  const git_error* e = git_error_last();
  std::string msg = what + ": " + (e && e->message ? e->message : "unknown libgit2 error");
  switch (kind) {
    case ErrorKind::kBadInput:
      return Status::BadInput(msg);
    case ErrorKind::kNotFound:
      return Status::NotFound(msg);
    case ErrorKind::kCorrupt:
      return Status::Corrupt(msg);
    case ErrorKind::kFailed:
      return Status::Failed(msg);
    default:
      return Status::Io(msg);
  }
}

std::string hex(const git_oid& oid) {
  char buf[GIT_OID_HEXSZ + 1];
  git_oid_tostr(buf, sizeof buf, &oid);
  return buf;
}

bool parse_oid(std::string_view text, git_oid* out) {
  return text.size() == GIT_OID_HEXSZ && git_oid_fromstrn(out, text.data(), text.size()) == 0;
}

}  // namespace cairn::git
