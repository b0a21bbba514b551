#include "cudnn/conv_runner.hpp"

#include <cudnn.h>
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "core/error.hpp"
#include "gpu/device_memory.hpp"

namespace cnnrt::cudnn {

namespace {

void check(cudnnStatus_t status, const char* what) {
  if (status != CUDNN_STATUS_SUCCESS) {
    fail(ErrorCode::DeviceError, "cuDNN {} failed: {}", what, cudnnGetErrorString(status));
  }
}

const char* algo_name(cudnnConvolutionFwdAlgo_t a) {
  switch (a) {
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM: return "IMPLICIT_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_PRECOMP_GEMM: return "IMPLICIT_PRECOMP_GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_GEMM: return "GEMM";
    case CUDNN_CONVOLUTION_FWD_ALGO_DIRECT: return "DIRECT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT: return "FFT";
    case CUDNN_CONVOLUTION_FWD_ALGO_FFT_TILING: return "FFT_TILING";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD: return "WINOGRAD";
    case CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD_NONFUSED: return "WINOGRAD_NONFUSED";
    default: return "?";
  }
}

}  // namespace

std::string unsupported_reason(const kernels::ConvLayer& L) {
  const kernels::ConvGeometry& g = L.g;
  const kernels::Epilogue& e = L.e;
  if (g.pad_top != g.pad_bottom || g.pad_left != g.pad_right) return "cuDNN has no asymmetric padding";
  if (e.param_act == kernels::ParamAct::LeakyRelu) return "cuDNN has no LeakyRelu activation";
  if (e.param_act == kernels::ParamAct::HardSigmoid || e.param_act == kernels::ParamAct::HardSwish ||
      e.param_act == kernels::ParamAct::Swish || e.param_act == kernels::ParamAct::Gelu) {
    return "the comparison runs cuDNN's ReLU, sigmoid, tanh and clip activations only";
  }
  if (e.param_act == kernels::ParamAct::Clip && (e.alpha != 0.0f || e.beta <= 0.0f)) {
    return "cuDNN clips at [0, max] only";
  }
  if (L.pooled()) {
    const kernels::PoolGeometry& p = e.pool;
    if (p.pad_top != p.pad_bottom || p.pad_left != p.pad_right) return "cuDNN pooling has no asymmetric padding";
    if (p.dil_h != 1 || p.dil_w != 1) return "cuDNN pooling has no dilation";
    const int ph = (g.OH + 2 * p.pad_top - p.kh) / p.sh + 1;
    const int pw = (g.OW + 2 * p.pad_left - p.kw) / p.sw + 1;
    if (ph != p.PH || pw != p.PW) return "cuDNN pooling has no ceil_mode";
  }
  return "";
}

struct ConvRunner::Impl {
  kernels::ConvLayer layer;
  cudaStream_t stream;
  cudnnHandle_t handle = nullptr;
  cudnnTensorDescriptor_t x_desc = nullptr, y_desc = nullptr, b_desc = nullptr, p_desc = nullptr;
  cudnnFilterDescriptor_t w_desc = nullptr;
  cudnnConvolutionDescriptor_t conv_desc = nullptr;
  cudnnActivationDescriptor_t act_desc = nullptr;
  cudnnPoolingDescriptor_t pool_desc = nullptr;
  cudnnConvolutionFwdAlgo_t algo{};
  gpu::DeviceAllocation workspace;
  int OH = 0, OW = 0, PH = 0, PW = 0;
  bool fused_bias_relu = false;
  bool found_by_hand = false;

  // What cudnnFindConvolutionForwardAlgorithmEx does, one algorithm at a time, so that one failing
  // algorithm only drops itself: each FP32 algorithm that runs is timed (CUDA events, median of 5 runs
  // after 2 warm-ups) and `perf` is filled fastest first. Returns 0, or -1 when none runs.
  int find_by_hand(const float* x, const float* w, float* y, void* space, size_t space_bytes,
                   cudnnConvolutionFwdAlgoPerf_t* perf, int* returned) {
    cudaEvent_t start = nullptr, stop = nullptr;
    cudaEventCreate(&start);
    cudaEventCreate(&stop);
    const float one = 1.0f, zero = 0.0f;
    for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
      const auto candidate = static_cast<cudnnConvolutionFwdAlgo_t>(a);
      size_t bytes = 0;
      if (cudnnGetConvolutionForwardWorkspaceSize(handle, x_desc, w_desc, conv_desc, y_desc, candidate, &bytes) !=
              CUDNN_STATUS_SUCCESS ||
          bytes > space_bytes) {
        continue;
      }
      std::vector<float> ms;
      bool ok = true;
      for (int r = 0; r < 7 && ok; ++r) {
        cudaEventRecord(start, stream);
        ok = cudnnConvolutionForward(handle, &one, x_desc, x, w_desc, w, conv_desc, candidate, space, bytes, &zero, y_desc,
                                     y) == CUDNN_STATUS_SUCCESS;
        cudaEventRecord(stop, stream);
        ok = ok && cudaEventSynchronize(stop) == cudaSuccess;
        float t = 0;
        if (ok && r >= 2 && cudaEventElapsedTime(&t, start, stop) == cudaSuccess) ms.push_back(t);
      }
      cudaGetLastError();
      if (!ok || ms.empty()) continue;
      std::sort(ms.begin(), ms.end());
      cudnnConvolutionFwdAlgoPerf_t& p = perf[(*returned)++];
      p = {};
      p.algo = candidate;
      p.status = CUDNN_STATUS_SUCCESS;
      p.time = ms[ms.size() / 2];
      p.memory = bytes;
      p.mathType = CUDNN_FMA_MATH;
    }
    cudaEventDestroy(start);
    cudaEventDestroy(stop);
    std::sort(perf, perf + *returned, [](const auto& a, const auto& b) { return a.time < b.time; });
    return *returned > 0 ? 0 : -1;
  }

  ~Impl() {
    if (pool_desc) cudnnDestroyPoolingDescriptor(pool_desc);
    if (act_desc) cudnnDestroyActivationDescriptor(act_desc);
    if (conv_desc) cudnnDestroyConvolutionDescriptor(conv_desc);
    if (w_desc) cudnnDestroyFilterDescriptor(w_desc);
    for (auto d : {x_desc, y_desc, b_desc, p_desc}) {
      if (d) cudnnDestroyTensorDescriptor(d);
    }
    if (handle) cudnnDestroy(handle);
  }
};

ConvRunner::ConvRunner(const kernels::ConvLayer& L, cudaStream_t stream, const float* x, const float* w, float* y)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.layer = L;
  const kernels::ConvGeometry& s = L.g;
  m.stream = stream;
  check(cudnnCreate(&m.handle), "cudnnCreate");
  check(cudnnSetStream(m.handle, stream), "cudnnSetStream");
  check(cudnnCreateTensorDescriptor(&m.x_desc), "descriptor");
  check(cudnnCreateTensorDescriptor(&m.y_desc), "descriptor");
  check(cudnnCreateTensorDescriptor(&m.b_desc), "descriptor");
  check(cudnnCreateFilterDescriptor(&m.w_desc), "descriptor");
  check(cudnnCreateConvolutionDescriptor(&m.conv_desc), "descriptor");
  check(cudnnSetTensor4dDescriptor(m.x_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.N, s.C, s.H, s.W), "x descriptor");
  check(cudnnSetFilter4dDescriptor(m.w_desc, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, s.F, s.C / s.groups, s.KH, s.KW),
        "w descriptor");
  check(cudnnSetConvolution2dDescriptor(m.conv_desc, s.pad_top, s.pad_left, s.stride_h, s.stride_w, s.dil_h, s.dil_w,
                                        CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
        "conv descriptor");
  check(cudnnSetConvolutionGroupCount(m.conv_desc, s.groups), "group count");
  check(cudnnSetConvolutionMathType(m.conv_desc, CUDNN_FMA_MATH), "math type");
  int n, f;
  check(cudnnGetConvolution2dForwardOutputDim(m.conv_desc, m.x_desc, m.w_desc, &n, &f, &m.OH, &m.OW), "output dim");
  check(cudnnSetTensor4dDescriptor(m.y_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.N, s.F, m.OH, m.OW), "y descriptor");
  check(cudnnSetTensor4dDescriptor(m.b_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, 1, s.F, 1, 1), "bias descriptor");
  m.PH = m.OH;
  m.PW = m.OW;

  // Enough workspace for every algorithm, then the fastest FP32 (FMA) one on these buffers.
  size_t most = 0;
  for (int a = 0; a < CUDNN_CONVOLUTION_FWD_ALGO_COUNT; ++a) {
    size_t bytes = 0;
    if (cudnnGetConvolutionForwardWorkspaceSize(m.handle, m.x_desc, m.w_desc, m.conv_desc, m.y_desc,
                                                static_cast<cudnnConvolutionFwdAlgo_t>(a), &bytes) == CUDNN_STATUS_SUCCESS) {
      most = std::max(most, bytes);
    }
  }
  most = std::min<size_t>(most, size_t(4) << 30);
  gpu::DeviceAllocation search_space(most);
  cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
  int returned = 0;
  const cudnnStatus_t found = cudnnFindConvolutionForwardAlgorithmEx(
      m.handle, m.x_desc, x, m.w_desc, w, m.conv_desc, m.y_desc, y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &returned, perf,
      search_space.get(), most);
  int best = -1;
  if (found == CUDNN_STATUS_SUCCESS) {
    for (int i = 0; i < returned; ++i) {
      if (perf[i].status == CUDNN_STATUS_SUCCESS && perf[i].mathType == CUDNN_FMA_MATH) {
        best = i;
        break;
      }
    }
  } else {
    // Seen on the H100 for a 1-channel 5x5 layer at batch 1024 (CUDNN_STATUS_INTERNAL_ERROR): one algorithm
    // fails and takes the whole search down. Do the search by hand: every algorithm that runs, timed.
    cudaGetLastError();
    returned = 0;
    best = m.find_by_hand(x, w, y, search_space.get(), most, perf, &returned);
    m.found_by_hand = true;
  }
  CNNRT_CHECK(best >= 0, ErrorCode::DeviceError, "cuDNN found no FP32 algorithm for this convolution ({})",
              cudnnGetErrorString(found));
  m.algo = perf[best].algo;
  m.workspace = gpu::DeviceAllocation(perf[best].memory);

  const kernels::ParamAct act = L.e.param_act;
  if (act != kernels::ParamAct::None) {
    check(cudnnCreateActivationDescriptor(&m.act_desc), "activation descriptor");
    const cudnnActivationMode_t mode = act == kernels::ParamAct::Relu      ? CUDNN_ACTIVATION_RELU
                                       : act == kernels::ParamAct::Sigmoid ? CUDNN_ACTIVATION_SIGMOID
                                       : act == kernels::ParamAct::Tanh    ? CUDNN_ACTIVATION_TANH
                                                                           : CUDNN_ACTIVATION_CLIPPED_RELU;
    check(cudnnSetActivationDescriptor(m.act_desc, mode, CUDNN_NOT_PROPAGATE_NAN, L.e.beta), "activation");
  }
  m.fused_bias_relu = L.e.bias != nullptr && act == kernels::ParamAct::Relu;
  if (L.pooled()) {
    const kernels::PoolGeometry& p = L.e.pool;
    check(cudnnCreatePoolingDescriptor(&m.pool_desc), "pooling descriptor");
    const cudnnPoolingMode_t mode = p.kind == kernels::FusedPool::Max ? CUDNN_POOLING_MAX
                                    : p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                          : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    check(cudnnSetPooling2dDescriptor(m.pool_desc, mode, CUDNN_NOT_PROPAGATE_NAN, p.kh, p.kw, p.pad_top, p.pad_left,
                                      p.sh, p.sw),
          "pooling");
    check(cudnnCreateTensorDescriptor(&m.p_desc), "descriptor");
    check(cudnnGetPooling2dForwardOutputDim(m.pool_desc, m.y_desc, &n, &f, &m.PH, &m.PW), "pool output dim");
    check(cudnnSetTensor4dDescriptor(m.p_desc, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, s.N, s.F, m.PH, m.PW), "p descriptor");
  }
}

ConvRunner::~ConvRunner() = default;

void ConvRunner::run(const float* x, const float* w, const float* bias, const float* residual, float* conv_out,
                     float* y) {
  Impl& m = *impl_;
  const float one = 1.0f, zero = 0.0f;
  float* target = m.pool_desc ? conv_out : y;
  if (m.fused_bias_relu) {
    // y = relu(conv + residual + bias): cuDNN's fused bias + activation path.
    const float alpha2 = residual ? 1.0f : 0.0f;
    check(cudnnConvolutionBiasActivationForward(m.handle, &one, m.x_desc, x, m.w_desc, w, m.conv_desc, m.algo,
                                                m.workspace.get(), m.workspace.bytes(), &alpha2, m.y_desc,
                                                residual ? residual : target, m.b_desc, bias, m.act_desc, m.y_desc,
                                                target),
          "cudnnConvolutionBiasActivationForward");
  } else {
    check(cudnnConvolutionForward(m.handle, &one, m.x_desc, x, m.w_desc, w, m.conv_desc, m.algo, m.workspace.get(),
                                  m.workspace.bytes(), &zero, m.y_desc, target),
          "cudnnConvolutionForward");
    if (bias) check(cudnnAddTensor(m.handle, &one, m.b_desc, bias, &one, m.y_desc, target), "cudnnAddTensor");
    if (residual) check(cudnnAddTensor(m.handle, &one, m.y_desc, residual, &one, m.y_desc, target), "cudnnAddTensor");
    if (m.act_desc) {
      check(cudnnActivationForward(m.handle, m.act_desc, &one, m.y_desc, target, &zero, m.y_desc, target),
            "cudnnActivationForward");
    }
  }
  if (m.pool_desc) {
    check(cudnnPoolingForward(m.handle, m.pool_desc, &one, m.y_desc, conv_out, &zero, m.p_desc, y), "cudnnPoolingForward");
  }
}

std::string ConvRunner::algorithm() const {
  const Impl& m = *impl_;
  std::string name = algo_name(m.algo);
  if (m.found_by_hand) name += " (hand search)";
  static const char* const kActNames[] = {"", "relu", "leakyrelu", "clip", "sigmoid", "tanh"};
  if (m.fused_bias_relu) name += " +bias+relu";
  else if (m.act_desc) name += std::string(" +") + kActNames[static_cast<int>(m.layer.e.param_act)];
  if (m.pool_desc) name += m.layer.e.pool.kind == kernels::FusedPool::Max ? " +maxpool" : " +avgpool";
  return name;
}

int64_t ConvRunner::conv_out_floats() const {
  return int64_t(impl_->layer.g.N) * impl_->layer.g.F * impl_->OH * impl_->OW;
}
int64_t ConvRunner::output_floats() const {
  return int64_t(impl_->layer.g.N) * impl_->layer.g.F * impl_->PH * impl_->PW;
}
size_t ConvRunner::workspace_bytes() const { return impl_->workspace.bytes(); }

std::string version() {
  const size_t v = cudnnGetVersion();
  return fmt::format("{}.{}.{}", v / 10000, (v % 10000) / 100, v % 100);
}

}  // namespace cnnrt::cudnn
