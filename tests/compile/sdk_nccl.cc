// Compiles the C++ SDK's NCCL header against the CUDA toolkit's nccl.h, so a change that
// breaks it fails the build wherever the toolkit is installed. Nothing here runs: NCCL
// needs a GPU (the GPU tests of tests/e2e cover running it where one is lent).
#include <cairn/nccl.hpp>

ncclComm_t cairn_sdk_nccl_compile_check(cairn::Context& ctx, std::string* error) {
  return cairn::connect_nccl(ctx, error, std::chrono::seconds(5));
}
