#include "store/git_handles.h"

namespace cairn::git {

void ensure_initialized() {
  static const int initialized = git_libgit2_init();
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

bool parse_oid(const std::string& text, git_oid* out) {
  return text.size() == GIT_OID_HEXSZ && git_oid_fromstr(out, text.c_str()) == 0;
}

}  // namespace cairn::git
