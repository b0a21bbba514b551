// The bench library (cnnrt/bench.hpp): layers and whole models, ours beside cuDNN.
#include "cnnrt/bench.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <sstream>

#include <unistd.h>

#include "api/context_access.hpp"
#include "core/error.hpp"
#include "cudnn/conv_runner.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_info.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/graph_timing.hpp"
#include "ir/window.hpp"
#include "kernels/layer.hpp"
#include "plan/gpu_plan.hpp"
#include "runtime/device.hpp"

namespace cnnrt::bench {

namespace {

// Physical memory of this machine in bytes (0 when unknown).
int64_t host_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? int64_t(pages) * page : 0;
}

std::vector<float> random_values(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-scale, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

gpu::DeviceAllocation upload(const std::vector<float>& host) {
  gpu::DeviceAllocation d(host.size() * sizeof(float));
  CNNRT_CUDA_CHECK(cudaMemcpy(d.get(), host.data(), host.size() * sizeof(float), cudaMemcpyHostToDevice));
  return d;
}

std::vector<float> download(const float* device, int64_t count) {
  std::vector<float> host(static_cast<size_t>(count));
  CNNRT_CUDA_CHECK(cudaMemcpy(host.data(), device, host.size() * sizeof(float), cudaMemcpyDeviceToHost));
  return host;
}

// A stream owned for the duration of a measurement.
struct OwnedStream {
  cudaStream_t stream = nullptr;
  OwnedStream() { CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking)); }
  ~OwnedStream() { cudaStreamDestroy(stream); }
};

Timing summarize(std::vector<double> us) {
  Timing t;
  if (us.empty()) return t;
  std::sort(us.begin(), us.end());
  auto at = [&](double q) { return us[std::min(us.size() - 1, static_cast<size_t>(q * (us.size() - 1) + 0.5))]; };
  t.samples = static_cast<int>(us.size());
  t.min_us = us.front();
  t.max_us = us.back();
  t.median_us = at(0.5);
  t.p90_us = at(0.9);
  t.p99_us = at(0.99);
  double sum = 0;
  for (double v : us) sum += v;
  t.mean_us = sum / us.size();
  t.unstable = t.p90_us > 1.10 * t.median_us;
  return t;
}

// Samples of "GPU time per run" until the median is stable (two successive batches of samples within 1%)
// or max_samples are taken. `sampler(runs, samples)` returns per-run times.
Timing measure_stable(const std::function<std::vector<double>(int, int)>& sampler, const BenchOptions& o) {
  // Calibrate: how many runs make a sample of about sample_target_us.
  const double single = gpu::median(sampler(1, 3));
  const int runs = std::clamp(static_cast<int>(o.sample_target_us / std::max(single, 0.5)), 1, 2000);
  // Warm-up for warmup_ms (clocks, caches).
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() < o.warmup_ms) {
    sampler(runs, 1);
  }
  std::vector<double> all;
  double last_median = -1;
  while (static_cast<int>(all.size()) < o.max_samples) {
    const std::vector<double> batch = sampler(runs, 5);
    all.insert(all.end(), batch.begin(), batch.end());
    const double m = gpu::median(all);
    if (static_cast<int>(all.size()) >= o.min_samples && last_median > 0 && std::fabs(m - last_median) <= 0.01 * last_median) {
      break;
    }
    last_median = m;
  }
  return summarize(all);
}

// ||got - want|| / ||want|| (NaN anywhere or a size difference: infinity), and the largest |got - want|.
double relative_error(const std::vector<float>& got, const std::vector<double>& want, double* max_abs) {
  double num = 0, den = 0;
  bool nan = got.size() != want.size();
  *max_abs = 0;
  for (size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (std::isnan(got[i]) || std::isnan(want[i])) nan = true;
    const double d = double(got[i]) - want[i];
    num += d * d;
    den += want[i] * want[i];
    *max_abs = std::max(*max_abs, std::fabs(d));
  }
  return nan ? INFINITY : (den > 0 ? std::sqrt(num / den) : std::sqrt(num));
}

// The exact answer (FP64) of a convolution step at a sample of its output elements: conv + bias +
// residual + activation, then pooling, from host copies of the step's inputs. The judge between our
// output and cuDNN's: Winograd and FFT algorithms are less accurate than a direct sum, so a difference
// between the two is only our error when the FP64 answer says so.
struct SampledReference {
  std::vector<int64_t> index;  // sampled output elements
  std::vector<double> value;
};

SampledReference sampled_reference(const kernels::ConvLayer& L, const std::vector<float>& x, const std::vector<float>& w,
                                   const std::vector<float>& bias, const std::vector<float>& residual, int samples) {
  const kernels::ConvGeometry& g = L.g;
  const kernels::Epilogue& e = L.e;
  const int64_t cpg = g.C / g.groups, fpg = g.F / g.groups;
  auto conv_at = [&](int64_t n, int64_t f, int64_t oy, int64_t ox) {
    double acc = bias.empty() ? 0.0 : bias[f];
    const int64_t c0 = (f / fpg) * cpg;
    for (int64_t c = 0; c < cpg; ++c) {
      for (int64_t ky = 0; ky < g.KH; ++ky) {
        const int64_t iy = oy * g.stride_h - g.pad_top + ky * g.dil_h;
        if (iy < 0 || iy >= g.H) continue;
        for (int64_t kx = 0; kx < g.KW; ++kx) {
          const int64_t ix = ox * g.stride_w - g.pad_left + kx * g.dil_w;
          if (ix < 0 || ix >= g.W) continue;
          acc += double(x[((n * g.C + c0 + c) * g.H + iy) * g.W + ix]) * w[((f * cpg + c) * g.KH + ky) * g.KW + kx];
        }
      }
    }
    if (!residual.empty()) acc += residual[((n * g.F + f) * g.OH + oy) * g.OW + ox];
    return kernels::apply_activation<double>(e.param_act, acc, e.alpha, e.beta);
  };
  const kernels::PoolGeometry& p = e.pool;
  const bool pooled = L.pooled();
  const int64_t OH = pooled ? p.PH : g.OH, OW = pooled ? p.PW : g.OW;
  const int64_t total = int64_t(g.N) * g.F * OH * OW;
  SampledReference r;
  std::mt19937_64 rng(11);
  std::uniform_int_distribution<int64_t> pick(0, total - 1);
  const int64_t count = std::min<int64_t>(samples, total);
  for (int64_t s = 0; s < count; ++s) {
    const int64_t i = count == total ? s : pick(rng);
    const int64_t ox = i % OW, oy = (i / OW) % OH, f = (i / (OW * OH)) % g.F, n = i / (OW * OH * g.F);
    double v = 0;
    if (!pooled) {
      v = conv_at(n, f, oy, ox);
    } else {
      double best = -INFINITY, sum = 0;
      int64_t inside = 0;
      for (int64_t py = 0; py < p.kh; ++py) {
        for (int64_t px = 0; px < p.kw; ++px) {
          const int64_t y = oy * p.sh - p.pad_top + py * p.dil_h;
          const int64_t xx = ox * p.sw - p.pad_left + px * p.dil_w;
          if (y < 0 || y >= g.OH || xx < 0 || xx >= g.OW) continue;
          const double c = conv_at(n, f, y, xx);
          best = std::max(best, c);
          sum += c;
          ++inside;
        }
      }
      // count_include_pad counts padded positions, but not those past the padded extent (ceil_mode).
      auto padded_taps = [](int64_t first, int64_t kernel, int64_t dil, int64_t end) {
        int64_t taps = 0;
        for (int64_t k = 0; k < kernel; ++k) taps += first + k * dil < end;
        return taps;
      };
      const int64_t padded = padded_taps(oy * p.sh - p.pad_top, p.kh, p.dil_h, g.OH + p.pad_bottom) *
                             padded_taps(ox * p.sw - p.pad_left, p.kw, p.dil_w, g.OW + p.pad_right);
      v = p.kind == kernels::FusedPool::Max
              ? best
              : sum / double(p.count_include_pad ? std::max<int64_t>(padded, 1) : std::max<int64_t>(inside, 1));
    }
    r.index.push_back(i);
    r.value.push_back(v);
  }
  return r;
}

// A step's output as one dense tensor [N, F, ...]: `written` as the step writes it (image by image at the layer's
// image stride, where it has one).
std::vector<float> dense_output(const kernels::ConvLayer& L, std::vector<float> written) {
  if (L.e.out_image_floats == 0) return written;
  const int64_t image = L.out_image_dense();
  std::vector<float> dense(static_cast<size_t>(L.out_floats()));
  for (int64_t n = 0; n < L.g.N; ++n) {
    std::copy_n(written.begin() + static_cast<std::ptrdiff_t>(n * L.e.out_image_floats), image,
                dense.begin() + static_cast<std::ptrdiff_t>(n * image));
  }
  return dense;
}

std::vector<float> gather(const std::vector<float>& all, const std::vector<int64_t>& index) {
  std::vector<float> out;
  out.reserve(index.size());
  for (int64_t i : index) out.push_back(all[static_cast<size_t>(i)]);
  return out;
}

// The FP64 answer of a convolution step at 2048 sampled output elements, for input `x` (and `residual`),
// with the step's weights and bias read back from the device.
SampledReference step_reference(const plan::ConvStepInfo& ci, const std::vector<float>& x,
                                const std::vector<float>& residual) {
  const kernels::ConvGeometry& g = ci.layer.g;
  const std::vector<float> w = download(ci.weights, int64_t(g.F) * (g.C / g.groups) * g.KH * g.KW);
  const std::vector<float> bias = ci.layer.e.bias ? download(ci.layer.e.bias, g.F) : std::vector<float>{};
  return sampled_reference(ci.layer, x, w, bias, residual, 2048);
}

// cuDNN on a convolution step of our plan: same weights, random input of the step's shape. Fills the
// cuDNN columns of `c` and checks our step's own output against cuDNN's on that input; `time_alone`: and times
// the step alone the way cuDNN is timed (alone_us), where cuDNN runs it.
void compare_with_cudnn(const plan::Step& step, const BenchOptions& o, bool time_alone, Comparison* c) {
  const plan::ConvStepInfo& ci = *step.conv;
  const kernels::ConvLayer& L = ci.layer;
  const std::string why = cudnn::unsupported_reason(L);
  OwnedStream s;
  const int64_t in_floats = int64_t(L.g.N) * L.g.C * L.g.H * L.g.W;
  const int64_t conv_floats = L.conv_floats();
  const int64_t out_floats = L.out_floats();
  const std::vector<float> x_host = random_values(static_cast<size_t>(in_floats), 7);
  // The input as the convolution sees it (a step that reads through a prologue, a channel shuffle or an affine and
  // activation, sees it rearranged or normalized): what the FP64 answer and cuDNN take.
  const std::vector<float> scale = L.in.scale ? download(L.in.scale, L.g.C) : std::vector<float>{};
  const std::vector<float> shift = L.in.shift ? download(L.in.shift, L.g.C) : std::vector<float>{};
  const std::vector<float> x_seen =
      L.in.any() ? kernels::apply_input_prologue(L, x_host.data(), scale.data(), shift.data()) : x_host;
  const std::vector<float> res_host = random_values(static_cast<size_t>(L.residual ? conv_floats : 1), 8);
  // The input as the step reads it: image n at n times its image stride, where it has one.
  std::vector<float> x_memory = x_host;
  if (L.in.image_floats != 0) {
    const int64_t image = int64_t(L.g.C) * L.g.H * L.g.W;
    x_memory.assign(static_cast<size_t>(L.in_extent_floats()), 0.0f);
    for (int64_t n = 0; n < L.g.N; ++n) {
      std::copy_n(x_host.begin() + static_cast<std::ptrdiff_t>(n * image), image,
                  x_memory.begin() + static_cast<std::ptrdiff_t>(n * L.in.image_floats));
    }
  }
  gpu::DeviceAllocation x = upload(x_memory);
  gpu::DeviceAllocation x_plain = upload(x_seen);
  gpu::DeviceAllocation res = upload(res_host);
  // Ours as the step writes it: a strided block of a Concat's output spans more than its own floats.
  gpu::DeviceAllocation ours(L.out_extent_floats() * sizeof(float)), theirs(out_floats * sizeof(float));
  gpu::DeviceAllocation conv_tmp(conv_floats * sizeof(float));
  const int64_t workspace_floats = ci.workspace_floats;  // our step's own scratch, if its kernel needs one
  gpu::DeviceAllocation workspace(std::max<int64_t>(workspace_floats, 1) * sizeof(float));

  // Ours first, judged against the FP64 answer whatever cuDNN does next.
  std::vector<const float*> in = {x.floats()};
  if (L.residual) in.push_back(res.floats());
  if (workspace_floats > 0) in.push_back(workspace.floats());
  float* out[1] = {ours.floats()};
  CNNRT_CUDA_CHECK(cudaMemsetAsync(ours.get(), 0xFF, ours.bytes(), s.stream));
  step.launch(in.data(), out, s.stream);
  CNNRT_CUDA_CHECK(cudaGetLastError());
  CNNRT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  // Ours must be within 1e-5 of the exact answer (the numerics target of FP32 direct convolution);
  // cuDNN's error, below, is reported, not judged.
  const SampledReference ref = step_reference(ci, x_seen, L.residual ? res_host : std::vector<float>{});
  c->rel_error = relative_error(gather(dense_output(L, download(ours.floats(), L.out_extent_floats())), ref.index),
                                ref.value, &c->max_abs_error);
  c->mismatch = !(c->rel_error <= 1e-5);
  if (!why.empty()) {
    c->cudnn_algo = "n/a: " + why;
    return;
  }

  std::unique_ptr<cudnn::ConvRunner> runner;
  const float* res_ptr = L.residual ? res.floats() : nullptr;
  try {
    // The search writes the convolution's own (unpooled) output: conv_tmp has that size, `theirs` may not.
    runner = std::make_unique<cudnn::ConvRunner>(L, s.stream, x_plain.floats(), ci.weights, conv_tmp.floats());
    runner->run(x_plain.floats(), ci.weights, L.e.bias, res_ptr, conv_tmp.floats(), theirs.floats());
    CNNRT_CUDA_CHECK(cudaStreamSynchronize(s.stream));
  } catch (const Error& e) {
    // cuDNN failing on a layer is reported in its column; ours is still checked and timed.
    cudaGetLastError();
    c->cudnn_algo = fmt::format("n/a: cuDNN failed ({})", e.what());
    return;
  }
  // A model's step alone, timed as cuDNN is below: the profiled run's single launches between events add a launch's
  // latency to every step, which for a step of a few microseconds is most of its time. (A layer of a suite is
  // timed back to back already: bench_conv_layer.)
  if (time_alone) {
    c->alone_us = measure_stable(
                      [&](int runs, int samples) {
                        return gpu::time_captured_runs(s.stream, runs, samples,
                                                       [&] { step.launch(in.data(), out, s.stream); });
                      },
                      o)
                      .median_us;
  }
  double cudnn_max_abs = 0;
  c->cudnn_rel_error = relative_error(gather(download(theirs.floats(), out_floats), ref.index), ref.value, &cudnn_max_abs);
  const Timing t = measure_stable(
      [&](int runs, int samples) {
        return gpu::time_captured_runs(s.stream, runs, samples, [&] {
          runner->run(x_plain.floats(), ci.weights, L.e.bias, res_ptr, conv_tmp.floats(), theirs.floats());
        });
      },
      o);
  c->cudnn_us = t.median_us;
  c->cudnn_algo = runner->algorithm();
}

void fill_from_step(const plan::Step& step, Comparison* c) {
  c->label = step.label;
  c->nodes = step.nodes;
  c->kernel = step.kernel;
  c->output_shape = step.output_shape;
  c->flops = step.flops;
  c->min_bytes = step.min_bytes;
  c->floor_us = floor_us(step.flops, step.min_bytes);
}

// The ONNX model of one conv layer (+ bias, activation, pooling) with fixed random weights.
std::string conv_layer_model(const LayerSpec& L) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  auto* opset = m.add_opset_import();
  opset->set_domain("");
  opset->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name(L.name);
  auto add_value = [](onnx::ValueInfoProto* v, const std::string& name, std::vector<int64_t> dims) {
    v->set_name(name);
    auto* tt = v->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(onnx::TensorProto::FLOAT);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
  };
  add_value(g->add_input(), "x", {L.N, L.C, L.H, L.W});
  auto add_init = [&](const std::string& name, std::vector<int64_t> dims, uint32_t seed, float scale) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    int64_t n = 1;
    for (int64_t d : dims) {
      t->add_dims(d);
      n *= d;
    }
    const auto values = random_values(static_cast<size_t>(n), seed, scale);
    t->set_raw_data(values.data(), values.size() * sizeof(float));
  };
  // Weights scaled so that outputs stay O(1) whatever C*K*K is.
  add_init("w", {L.F, L.C, L.K, L.K}, 1, 1.0f / std::sqrt(float(L.C * L.K * L.K)));
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("conv");
  conv->add_input("x");
  conv->add_input("w");
  if (L.bias) {
    add_init("b", {L.F}, 2, 0.1f);
    conv->add_input("b");
  }
  const int64_t pad = L.pad < 0 ? L.K / 2 : L.pad;
  auto ints = [](onnx::NodeProto* n, const char* name, std::vector<int64_t> v) {
    auto* a = n->add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v) a->add_ints(x);
  };
  ints(conv, "kernel_shape", {L.K, L.K});
  ints(conv, "strides", {L.stride, L.stride});
  ints(conv, "pads", {pad, pad, pad, pad});
  std::string last = "c";
  conv->add_output(last);
  if (!L.activation.empty()) {
    auto* act = g->add_node();
    act->set_op_type(L.activation);
    act->set_name("act");
    act->add_input(last);
    act->add_output(last = "a");
  }
  if (!L.pool.empty()) {
    auto* pool = g->add_node();
    pool->set_op_type(L.pool);
    pool->set_name("pool");
    pool->add_input(last);
    ints(pool, "kernel_shape", {L.pool_k, L.pool_k});
    ints(pool, "strides", {L.pool_s, L.pool_s});
    pool->add_output(last = "p");
  }
  g->mutable_node(g->node_size() - 1)->set_output(0, "y");
  auto* y = g->add_output();
  y->set_name("y");
  y->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  return m.SerializeAsString();
}

}  // namespace

Environment environment() {
  std::string why;
  CNNRT_CHECK(runtime::cuda_device_available(&why), ErrorCode::DeviceUnavailable,
              "cnnrt bench measures GPU kernels, but no usable CUDA device is present: {}", why);
  const gpu::DeviceInfo& d = gpu::current_device();
  Environment e;
  e.gpu = d.name;
  e.sm_count = d.sm_count;
  e.sm_clock_mhz = d.sm_clock_khz / 1000;
  e.memory_clock_mhz = d.mem_clock_khz / 1000;
  e.driver = fmt::format("{}.{}", d.driver_version / 1000, (d.driver_version % 1000) / 10);
  e.cuda_runtime = fmt::format("{}.{}", d.runtime_version / 1000, (d.runtime_version % 1000) / 10);
  e.cudnn = cudnn::version();
  e.engine = version();
  return e;
}

Comparison bench_conv_layer(const LayerSpec& L, const BenchOptions& o) {
  const std::string bytes = conv_layer_model(L);
  Options engine = o.engine;
  engine.device = Device::Gpu;
  engine.batch_sizes = {L.N};
  const Model model = Model::load_from_memory(bytes.data(), bytes.size(), engine, L.name);
  Context context(model);
  runtime::Executor& executor = detail::ContextAccess::executor(context, L.N);
  const plan::GpuPlan& plan = *executor.gpu_plan();
  const plan::Step* conv = nullptr;
  for (const plan::Step& s : plan.steps) {
    if (s.conv) conv = &s;
  }
  CNNRT_CHECK(conv != nullptr && plan.steps.size() == 1, ErrorCode::Internal,
              "layer '{}' planned as {} steps, not one fused convolution", L.name, plan.steps.size());
  Comparison c;
  fill_from_step(*conv, &c);
  c.label = L.name;

  // Our output on a random input, through the normal entry point.
  const int64_t in_floats = L.N * L.C * L.H * L.W;
  const int64_t out_floats = ir::numel(model.output_shapes(L.N)[0]);
  gpu::DeviceAllocation x = upload(random_values(static_cast<size_t>(in_floats), 3));
  gpu::DeviceAllocation y(out_floats * sizeof(float));
  const float* ins[1] = {x.floats()};
  float* outs[1] = {y.floats()};
  context.enqueue(ins, outs, L.N);
  context.synchronize();
  compare_with_cudnn(*conv, o, false, &c);  // also times cuDNN
  // Our time for the whole run (one fused step) on the same buffers.
  context.enqueue(ins, outs, L.N);
  context.synchronize();
  c.ours_us = measure_stable([&](int runs, int samples) { return executor.time_runs_us(runs, samples); }, o).median_us;
  return c;
}

namespace {

// The model's input shapes for one batch size, or as given (checked by the engine).
struct ShapeRequest {
  int64_t batch = 0;               // used when `shapes` is empty
  std::vector<Shape> shapes;
};

ModelReport bench_loaded_model(const std::string& path, const ShapeRequest& request, const BenchOptions& o,
                               int iterations, double duration_s, bool include_transfers) {
  ModelReport r;
  r.env = environment();
  r.model = path;
  r.cuda_graph = o.engine.cuda_graphs;
  r.included_transfers = include_transfers;
  Options engine = o.engine;
  engine.device = Device::Gpu;
  if (request.shapes.empty()) {
    engine.batch_sizes = {request.batch};
  } else {
    engine.input_shapes = {request.shapes};
  }
  const Model model = Model::load(path, engine);
  Context context(model);
  const auto& impl = detail::ContextAccess::model(model);
  const std::vector<ir::Shape> in_shapes = request.shapes.empty() ? impl.shapes_for_batch(request.batch)
                                                                  : impl.checked_shapes(request.shapes);
  runtime::Executor& executor = detail::ContextAccess::executor(context, in_shapes);
  const auto out_shapes = model.output_shapes(in_shapes);
  r.input_shapes = in_shapes;
  r.batch = !in_shapes.empty() && !in_shapes[0].empty() ? in_shapes[0][0] : 1;
  const int64_t batch = r.batch;

  // Device buffers with random inputs, pinned host copies for the transfer timings: checked against the
  // memory there is before any is allocated.
  int64_t in_bytes = 0, out_bytes = 0;
  for (const auto& shape : in_shapes) in_bytes += ir::numel(shape) * int64_t(sizeof(float));
  for (const auto& shape : out_shapes) out_bytes += ir::numel(shape) * int64_t(sizeof(float));
  const int64_t host_bytes = 3 * in_bytes + out_bytes;  // random values, their pinned copy and host tensors; outputs
  const int64_t host_total = host_memory_bytes();
  CNNRT_CHECK(host_total <= 0 || host_bytes <= host_total / 2, ErrorCode::LimitExceeded,
              "'{}' at batch {}: the benchmark's host buffers (inputs and outputs, pinned) need {} bytes; this "
              "machine has {} bytes of memory: use a smaller batch", path, r.batch, host_bytes, host_total);
  size_t free_device = 0, total_device = 0;
  if (cudaMemGetInfo(&free_device, &total_device) == cudaSuccess) {
    CNNRT_CHECK(in_bytes + out_bytes <= static_cast<int64_t>(free_device), ErrorCode::LimitExceeded,
                "'{}' at batch {}: the benchmark's device inputs and outputs need {} bytes; {} bytes of device "
                "memory are free: use a smaller batch", path, r.batch, in_bytes + out_bytes, free_device);
  }
  std::vector<gpu::DeviceAllocation> d_in, d_out;
  std::vector<gpu::PinnedAllocation> h_in, h_out;
  std::vector<const float*> in_ptrs;
  std::vector<float*> out_ptrs;
  std::vector<Tensor> host_inputs;
  for (size_t i = 0; i < in_shapes.size(); ++i) {
    const int64_t n = ir::numel(in_shapes[i]);
    auto values = random_values(static_cast<size_t>(n), 11 + uint32_t(i));
    d_in.push_back(upload(values));
    h_in.emplace_back(values.size() * sizeof(float));
    std::copy(values.begin(), values.end(), h_in.back().floats());
    in_ptrs.push_back(d_in.back().floats());
    host_inputs.push_back({in_shapes[i], std::move(values)});
  }
  for (const auto& s : out_shapes) {
    const int64_t n = ir::numel(s);
    d_out.emplace_back(n * sizeof(float));
    h_out.emplace_back(n * sizeof(float));
    out_ptrs.push_back(d_out.back().floats());
  }
  OwnedStream s;
  context.set_stream(s.stream);
  context.enqueue(in_ptrs.data(), out_ptrs.data(), in_shapes);
  context.synchronize();

  // Transfers, timed separately.
  cudaEvent_t start = nullptr, stop = nullptr;
  CNNRT_CUDA_CHECK(cudaEventCreate(&start));
  CNNRT_CUDA_CHECK(cudaEventCreate(&stop));
  auto time_copies = [&](bool to_device) {
    std::vector<double> us;
    for (int rep = 0; rep < 20; ++rep) {
      CNNRT_CUDA_CHECK(cudaEventRecord(start, s.stream));
      for (size_t i = 0; i < (to_device ? d_in.size() : d_out.size()); ++i) {
        if (to_device) {
          CNNRT_CUDA_CHECK(cudaMemcpyAsync(d_in[i].get(), h_in[i].floats(), d_in[i].bytes(), cudaMemcpyHostToDevice, s.stream));
        } else {
          CNNRT_CUDA_CHECK(cudaMemcpyAsync(h_out[i].floats(), d_out[i].get(), d_out[i].bytes(), cudaMemcpyDeviceToHost, s.stream));
        }
      }
      CNNRT_CUDA_CHECK(cudaEventRecord(stop, s.stream));
      CNNRT_CUDA_CHECK(cudaEventSynchronize(stop));
      float ms = 0;
      CNNRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
      us.push_back(ms * 1000.0);
    }
    return gpu::median(us);
  };
  r.h2d_us = time_copies(true);
  r.d2h_us = time_copies(false);

  // Latency, after warm-up: events around single runs (each a CUDA graph replay unless graphs are off) on
  // device buffers; with transfers, the host-to-host path an application takes (Context::run on host data:
  // its pinned staging, one graph with the copies and the steps, the wait), timed on the host clock.
  std::vector<const float*> host_in_ptrs;
  for (const Tensor& t : host_inputs) host_in_ptrs.push_back(t.data.data());
  std::vector<std::vector<float>> host_outputs;
  std::vector<float*> host_out_ptrs;
  for (const auto& shape : out_shapes) host_outputs.emplace_back(static_cast<size_t>(ir::numel(shape)));
  for (auto& v : host_outputs) host_out_ptrs.push_back(v.data());
  auto run_once = [&] {
    if (include_transfers) {
      context.run(host_in_ptrs.data(), host_out_ptrs.data(), in_shapes);
    } else {
      context.enqueue(in_ptrs.data(), out_ptrs.data(), in_shapes);
      context.synchronize();
    }
  };
  const auto warm_start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - warm_start).count() < o.warmup_ms) {
    run_once();
  }
  std::vector<double> single;
  const auto run_start = std::chrono::steady_clock::now();
  for (int it = 0;; ++it) {
    const double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
    if (duration_s > 0 ? elapsed >= duration_s : it >= iterations) break;
    if (include_transfers) {
      const auto t0 = std::chrono::steady_clock::now();
      run_once();
      single.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
      continue;
    }
    CNNRT_CUDA_CHECK(cudaEventRecord(start, s.stream));
    context.enqueue(in_ptrs.data(), out_ptrs.data(), in_shapes);
    CNNRT_CUDA_CHECK(cudaEventRecord(stop, s.stream));
    CNNRT_CUDA_CHECK(cudaEventSynchronize(stop));
    float ms = 0;
    CNNRT_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
    single.push_back(ms * 1000.0);
  }
  // Ours again on device buffers: the profile and the throughput below read them.
  context.enqueue(in_ptrs.data(), out_ptrs.data(), in_shapes);
  context.synchronize();
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  r.latency = summarize(single);

  // Throughput: back-to-back runs captured together (what a busy server sees).
  r.per_run_us = measure_stable([&](int runs, int samples) { return executor.time_runs_us(runs, samples); }, o).median_us;
  r.throughput = r.per_run_us > 0 ? double(batch) * 1e6 / r.per_run_us : 0;

  // Per step: a separate profiling run, then cuDNN on every convolution step.
  const std::vector<StepTiming> timings = context.profile(host_inputs, 50);
  const plan::GpuPlan& plan = *executor.gpu_plan();
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    StepReport step;
    fill_from_step(plan.steps[i], &step.timing);
    step.timing.ours_us = timings[i].median_ms * 1000.0;
    r.steps_ours_us += step.timing.ours_us;
    if (plan.steps[i].conv) {
      step.is_conv = true;
      compare_with_cudnn(plan.steps[i], o, true, &step.timing);
      if (step.timing.cudnn_us > 0) {
        r.conv_ours_us += step.timing.compared_us();
        r.conv_cudnn_us += step.timing.cudnn_us;
      }
    }
    r.steps.push_back(std::move(step));
  }
  for (StepReport& step : r.steps) step.share = r.steps_ours_us > 0 ? step.timing.ours_us / r.steps_ours_us : 0;
  return r;
}

}  // namespace

ModelReport bench_model(const std::string& path, int64_t batch, const BenchOptions& o, int iterations,
                        double duration_s, bool include_transfers) {
  ShapeRequest request;
  request.batch = batch;
  return bench_loaded_model(path, request, o, iterations, duration_s, include_transfers);
}

ModelReport bench_model(const std::string& path, const std::vector<Shape>& input_shapes, const BenchOptions& o,
                        int iterations, double duration_s, bool include_transfers) {
  CNNRT_CHECK(!input_shapes.empty(), ErrorCode::Usage, "bench_model: no input shapes given");
  ShapeRequest request;
  request.shapes = input_shapes;
  return bench_loaded_model(path, request, o, iterations, duration_s, include_transfers);
}

}  // namespace cnnrt::bench
