// A CUDA driver too old for cairn, built as libcuda.so.1 into build/fake_cuda_old for tests
// only: it answers the three calls a quick probe would make (cuInit, cuDriverGetVersion,
// cuDeviceGetCount: a driver with one device) and has none of the other entry points
// cairn's GPU code needs. `cairn doctor` on it must not say the GPU is usable, since a
// trial could not use it (tests/e2e/test_gpu_probe.py).
extern "C" {

int cuInit(unsigned) {
  return 0;
}
int cuDriverGetVersion(int* v) {
  *v = 10020;  // CUDA 10.2: before cuDevicePrimaryCtxRelease_v2
  return 0;
}
int cuDeviceGetCount(int* n) {
  *n = 1;
  return 0;
}
int cuGetErrorString(int r, const char** text) {
  *text = r == 0 ? "no error" : "fake CUDA error";
  return 0;
}

}  // extern "C"
