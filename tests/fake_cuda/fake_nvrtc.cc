// A stand-in for NVRTC, built as libnvrtc.so.13 for tests only, for machines without a CUDA
// toolkit (CI): with it and fake_cuda.cc's driver on LD_LIBRARY_PATH, builtin:mlp's GPU
// path runs end to end on the host. It compiles nothing: the "image" lists the source's
// __global__ functions as PTX .entry lines, which fake_cuda.cc's cuModuleLoadData ignores
// anyway. It reports version 0.0, by which tests know not to check real compilation.
// Where the real NVRTC exists, CMake leaves this one off the path.
#include <cstring>
#include <string>

namespace {

struct Program {
  std::string image;
};

}  // namespace

extern "C" {

using nvrtcResult = int;
constexpr nvrtcResult kOk = 0;

nvrtcResult nvrtcVersion(int* major, int* minor) {
  *major = 0;
  *minor = 0;
  return kOk;
}
nvrtcResult nvrtcGetNumSupportedArchs(int* n) {
  *n = 0;  // "any": the caller then asks for a cubin of the device's own architecture
  return kOk;
}
nvrtcResult nvrtcGetSupportedArchs(int*) {
  return kOk;
}
nvrtcResult nvrtcCreateProgram(void** program, const char* source, const char*, int,
                               const char* const*, const char* const*) {
  auto* p = new Program;
  const std::string text(source);
  for (size_t at = text.find("__global__ void "); at != std::string::npos;
       at = text.find("__global__ void ", at + 1)) {
    const size_t name = at + std::strlen("__global__ void ");
    p->image += ".visible .entry " + text.substr(name, text.find('(', name) - name) + "(\n";
  }
  *program = p;
  return kOk;
}
nvrtcResult nvrtcDestroyProgram(void** program) {
  delete static_cast<Program*>(*program);
  *program = nullptr;
  return kOk;
}
nvrtcResult nvrtcCompileProgram(void*, int, const char* const*) {
  return kOk;
}
nvrtcResult nvrtcGetProgramLogSize(void*, size_t* size) {
  *size = 1;
  return kOk;
}
nvrtcResult nvrtcGetProgramLog(void*, char* log) {
  *log = '\0';
  return kOk;
}
nvrtcResult nvrtcGetPTXSize(void* program, size_t* size) {
  *size = static_cast<Program*>(program)->image.size() + 1;
  return kOk;
}
nvrtcResult nvrtcGetPTX(void* program, char* out) {
  const std::string& image = static_cast<Program*>(program)->image;
  std::memcpy(out, image.c_str(), image.size() + 1);
  return kOk;
}
nvrtcResult nvrtcGetCUBINSize(void* program, size_t* size) {
  return nvrtcGetPTXSize(program, size);
}
nvrtcResult nvrtcGetCUBIN(void* program, char* out) {
  return nvrtcGetPTX(program, out);
}
const char* nvrtcGetErrorString(nvrtcResult r) {
  return r == kOk ? "NVRTC_SUCCESS" : "fake NVRTC error";
}

}  // extern "C"
