#include "gpu/nccl_library.h"

#include <string>

#include "gpu/shared_library.h"
#include "gpu/version_text.h"

namespace cairn {
namespace nccl {
namespace {

void* open_nccl() {
  return gpu_lib::open_first({"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"});
}

void load_nccl(Api& a) {
  void* nccl = open_nccl();
  if (!nccl) return;
  a.loaded = true;
  gpu_lib::Binder bind(nccl);
  bind("ncclGetVersion", a.ncclGetVersion);
  bind("ncclGetUniqueId", a.ncclGetUniqueId);
  bind("ncclCommInitRankConfig", a.ncclCommInitRankConfig);
  bind("ncclCommGetAsyncError", a.ncclCommGetAsyncError);
  bind("ncclCommDestroy", a.ncclCommDestroy);
  bind("ncclCommAbort", a.ncclCommAbort);
  bind("ncclAllReduce", a.ncclAllReduce);
  bind("ncclBroadcast", a.ncclBroadcast);
  bind("ncclGetErrorString", a.ncclGetErrorString);
  gpu_lib::bind(nccl, "ncclCommFinalize", a.ncclCommFinalize);
  gpu_lib::bind(nccl, "ncclGetLastError", a.ncclGetLastError);
  if (a.ncclGetVersion && a.ncclGetVersion(&a.version) != kNcclSuccess) a.version = 0;
  if (!bind.ok() || a.version < 21400) {
    a.nccl_status = Status::NotFound(
        "NCCL " + (a.version ? nccl_version_text(a.version) + " " : std::string()) +
        "is too old for cairn (2.14 or later needed" +
        (bind.ok() ? std::string(")") : std::string("; it lacks ") + bind.missing() + ")"));
    return;
  }
  a.nccl_status = Status::Ok();
}

// Loaded once and never unloaded: NCCL keeps threads and state that must not lose their
// code under them.
}  // namespace

const Api& api() {
  static const Api instance = [] {
    Api a;
    load_nccl(a);
    return a;
  }();
  return instance;
}

}  // namespace nccl

NcclLibrary nccl_library() {
  const nccl::Api& a = nccl::api();
  return NcclLibrary{.loaded = a.loaded, .status = a.nccl_status, .version = a.version};
}

bool nccl_available() {
  return cuda::driver().status.ok() && nccl::api().nccl_status.ok();
}

}  // namespace cairn
