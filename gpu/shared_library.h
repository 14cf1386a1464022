// Opening the GPU libraries at run time. cairn never links CUDA, cuBLAS, NVRTC or NCCL
// (the one executable must run where they are absent), so each is found with dlopen and
// its functions bound by name. The handles are never closed: these libraries register
// state with the CUDA runtime that outlives any one use.
#pragma once

#include <dlfcn.h>

#include <initializer_list>

namespace cairn::gpu_lib {

// The first of `names` that dlopen loads; nullptr when none does.
inline void* open_first(std::initializer_list<const char*> names) {
  for (const char* name : names)
    if (void* h = ::dlopen(name, RTLD_NOW | RTLD_LOCAL)) return h;
  return nullptr;
}

// fn = the function `name` of `lib`; false when the library lacks it.
template <typename Fn>
bool bind(void* lib, const char* name, Fn& fn) {
  fn = reinterpret_cast<Fn>(::dlsym(lib, name));
  return fn != nullptr;
}

}  // namespace cairn::gpu_lib
