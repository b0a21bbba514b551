// The GPU executor.
//
// A run resolves every slot of the plan to a device pointer (arena base + offset, an uploaded weight, or
// the input/output buffer of this run), then launches the steps in order on the stream. With CUDA graphs
// on, the launches are captured once per binding of input/output pointers and replayed; a new binding
// re-captures and updates the instantiated graph in place. Nothing here allocates after construction,
// except the first capture for a binding and the events of a profiling run.
#include "runtime/gpu_executor.hpp"

#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <random>
#include <tuple>
#include <utility>

#include "core/error.hpp"
#include "core/log.hpp"
#include "gpu/cuda_check.hpp"
#include "gpu/device_memory.hpp"
#include "gpu/graph_timing.hpp"
#include "kernels/launch.cuh"
#include "plan/gpu_plan.hpp"

namespace cnnrt::runtime {

namespace {

using plan::SlotKind;

// CNNRT_SYNC_STEPS=1: no graphs, and a synchronisation after every step, so that an asynchronous
// device error names the step that caused it.
bool sync_every_step() {
  static const bool on = [] {
    const char* v = std::getenv("CNNRT_SYNC_STEPS");
    return v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

}  // namespace

bool side_steps_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("CNNRT_NO_SIDE_STEPS");
    return !v || std::strcmp(v, "0") == 0;
  }();
  return on;
}

bool timed_whole(const plan::GpuPlan& plan) {
  constexpr int64_t kMaxArenaBytes = int64_t(256) << 20;  // each timing allocates an arena beside the contexts'
  return plan.arena_bytes <= kMaxArenaBytes && !sync_every_step();
}

namespace {

// The second stream that a captured graph runs side steps on (plan::side_steps), with the events that fork a side
// step after its fork step and join it before its join step; all three freed with it, or when creating one throws.
class SideStream {
 public:
  SideStream() {
    try {
      CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
      CNNRT_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
      CNNRT_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    } catch (...) {
      release();
      throw;
    }
  }
  ~SideStream() { release(); }
  SideStream(const SideStream&) = delete;
  SideStream& operator=(const SideStream&) = delete;

  cudaStream_t stream = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr;

 private:
  void release() noexcept {
    if (fork) cudaEventDestroy(fork);
    if (join) cudaEventDestroy(join);
    if (stream) cudaStreamDestroy(stream);
  }
};

class GpuExecutor final : public Executor {
 public:
  GpuExecutor(std::shared_ptr<const plan::Prepared> prepared, Stream stream, bool use_graphs)
      : prepared_(std::move(prepared)),
        plan_(*prepared_->gpu_plan),
        stream_(stream),
        use_graphs_(use_graphs && !sync_every_step()),
        arena_(static_cast<size_t>(plan_.arena_bytes)) {
    for (int s : plan_.input_slots) {
      own_inputs_.emplace_back(static_cast<size_t>(plan_.slots[s].bytes));
      staged_inputs_.emplace_back(static_cast<size_t>(plan_.slots[s].bytes));
    }
    for (int s : plan_.output_slots) {
      own_outputs_.emplace_back(static_cast<size_t>(plan_.slots[s].bytes));
      staged_outputs_.emplace_back(static_cast<size_t>(plan_.slots[s].bytes));
    }
    int64_t io_bytes = 0;
    for (const gpu::PinnedAllocation& p : staged_inputs_) io_bytes += static_cast<int64_t>(p.bytes());
    for (const gpu::PinnedAllocation& p : staged_outputs_) io_bytes += static_cast<int64_t>(p.bytes());
    zero_copy_ = use_graphs_ && io_bytes <= kZeroCopyBytes;
    // Inputs are read in place only where every step that reads one reads it once (launch_from_host); a kernel
    // that reads its input many times (a convolution's overlapping windows, a warp a few outputs) would pay a
    // bus round trip each time: those inputs are copied in by the graph instead.
    inputs_in_place_ = zero_copy_ && std::all_of(plan_.steps.begin(), plan_.steps.end(), [&](const plan::Step& step) {
                         return step.launch_from_host || !reads_graph_input(step);
                       });
    if (zero_copy_ && !plan_.steps.empty() && writes_every_output(plan_.steps.back())) {
      done_word_ = gpu::PinnedAllocation(sizeof(unsigned));
      done_device_ = reinterpret_cast<unsigned*>(device_view(done_word_));
    }
    slot_ptrs_.assign(plan_.slots.size(), nullptr);
    step_inputs_.resize(plan_.steps.size());
    step_outputs_.resize(plan_.steps.size());
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      step_inputs_[i].assign(plan_.steps[i].inputs.size(), nullptr);
      step_outputs_[i].assign(plan_.steps[i].outputs.size(), nullptr);
    }
    bound_inputs_.assign(plan_.input_slots.size(), nullptr);
    bound_outputs_.assign(plan_.output_slots.size(), nullptr);
    if (use_graphs_ && plan_.side_streams && side_steps_enabled()) sides_ = plan::side_steps(plan_);
    if (!sides_.empty()) side_ = std::make_unique<SideStream>();
  }

  ~GpuExecutor() override {
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    if (host_graph_exec_) cudaGraphExecDestroy(host_graph_exec_);
    for (cudaEvent_t e : events_) cudaEventDestroy(e);
  }

  // Host to host: the caller's inputs into the context's pinned buffers, then one CUDA graph launch, then the
  // outputs out of the pinned buffers. Small inputs and outputs (a batch-1 classifier's) stay where they are:
  // the last steps write the pinned outputs in place (mapped host memory), and the first steps read the pinned
  // inputs in place where each reads them once (else the graph copies them in first); larger ones are copied in
  // and out by the graph itself.
  void run_host(const float* const* inputs, float* const* outputs) override {
    for (size_t i = 0; i < own_inputs_.size(); ++i) {
      std::memcpy(staged_inputs_[i].floats(), inputs[i], staged_inputs_[i].bytes());
    }
    if (zero_copy_) {
      bind_staged_buffers();
      if (done_device_) *done_flag() = 0u;
      if (inputs_in_place_) {
        launch();
      } else {
        if (!host_graph_exec_ || host_graph_binding_ != binding_) capture_host_graph();
        CNNRT_CUDA_CHECK(cudaGraphLaunch(host_graph_exec_, stream_));
      }
    } else if (use_graphs_) {
      bind_own_buffers();
      if (!host_graph_exec_ || host_graph_binding_ != binding_) capture_host_graph();
      CNNRT_CUDA_CHECK(cudaGraphLaunch(host_graph_exec_, stream_));
    } else {
      bind_own_buffers();
      copy_in();
      launch_steps();
      copy_out();
    }
    if (zero_copy_ && done_device_) {
      wait_for_done_flag();
    } else {
      synchronize();
    }
    for (size_t i = 0; i < own_outputs_.size(); ++i) {
      std::memcpy(outputs[i], staged_outputs_[i].floats(), staged_outputs_[i].bytes());
    }
  }

  void enqueue_device(const float* const* inputs, float* const* outputs) override {
    // The pointers of the last run were checked then: asking the driver again (cudaPointerGetAttributes,
    // about a microsecond for two buffers) would sit between the caller's start event and the launch.
    if (is_bound(inputs, outputs)) {
      launch();
      return;
    }
    for (size_t i = 0; i < plan_.input_slots.size(); ++i) {
      CNNRT_CHECK(inputs[i] != nullptr, ErrorCode::Usage, "enqueue: device input {} is null", i);
      check_device_pointer(inputs[i], "input", i);
    }
    for (size_t i = 0; i < plan_.output_slots.size(); ++i) {
      CNNRT_CHECK(outputs[i] != nullptr, ErrorCode::Usage, "enqueue: device output {} is null", i);
      check_device_pointer(outputs[i], "output", i);
    }
    bind(inputs, outputs);
    launch();
  }

  volatile unsigned* done_flag() { return reinterpret_cast<volatile unsigned*>(done_word_.floats()); }

  // Spins until the last step has set the done flag (its outputs are then in the pinned buffers), about a
  // microsecond before the stream would report the launch complete. It also asks the stream after 20 us, then
  // at twice the time waited so far (a query holds the driver a few microseconds: a long run should not pay many),
  // so that a launch that failed ends the wait with its error instead of a hang. The flag is the
  // kernel's last store: it touches none of this executor's buffers after it, so the next run needs no wait
  // (it queues behind the launch on the stream) and neither does freeing them (cudaFree and cudaFreeHost wait
  // for the device).
  void wait_for_done_flag() {
    using Clock = std::chrono::steady_clock;
    const Clock::time_point start = Clock::now();
    Clock::time_point check = start + std::chrono::microseconds(20);
    while (*done_flag() != 1u) {
      const Clock::time_point now = Clock::now();
      if (now < check) continue;
      check = now + (now - start);
      if (cudaStreamQuery(stream_) != cudaErrorNotReady) {
        synchronize();  // throws the launch's error; else the stream is done (and so are the outputs)
        return;
      }
    }
    std::atomic_thread_fence(std::memory_order_acquire);  // the outputs are read after the flag
  }

  // Whether `step` reads a graph input.
  bool reads_graph_input(const plan::Step& step) const {
    return std::any_of(step.inputs.begin(), step.inputs.end(), [&](int slot) {
      return plan_.slots[static_cast<size_t>(slot)].kind == SlotKind::Input;
    });
  }

  // Whether `step` can set the done flag and writes every graph output (the flag then means they are all there).
  bool writes_every_output(const plan::Step& step) const {
    return step.signals_done && step.launch_from_host &&
           std::all_of(plan_.output_slots.begin(), plan_.output_slots.end(), [&](int slot) {
             return std::find(step.outputs.begin(), step.outputs.end(), slot) != step.outputs.end();
           });
  }

  void synchronize() override {
    const cudaError_t err = cudaStreamSynchronize(stream_);
    if (err != cudaSuccess) {
      gpu::throw_cuda_error(err, "cudaStreamSynchronize", __FILE__, __LINE__,
                            fmt::format("running '{}' ({} steps; set CNNRT_SYNC_STEPS=1 to find the failing step)",
                                        prepared_->graph.model_name, plan_.steps.size()));
    }
  }

  void set_stream(Stream stream) override {
    synchronize();
    stream_ = stream;  // graphs are launched on whatever stream is current; the exec stays valid
  }
  Stream stream() const override { return stream_; }

  // Per-step GPU time: the steps with an event between each pair, captured in one CUDA graph (event
  // record nodes) and replayed, so that launch gaps from the host do not land in a step's time.
  std::vector<StepTiming> profile(const float* const* inputs, int repetitions) override {
    bind_own_buffers();
    for (size_t i = 0; i < own_inputs_.size(); ++i) {
      CNNRT_CUDA_CHECK(cudaMemcpyAsync(own_inputs_[i].get(), inputs[i], own_inputs_[i].bytes(),
                                       cudaMemcpyHostToDevice, stream_));
    }
    const size_t n = plan_.steps.size();
    if (events_.size() != n + 1) {
      for (cudaEvent_t e : events_) cudaEventDestroy(e);
      events_.assign(n + 1, nullptr);
      for (cudaEvent_t& e : events_) CNNRT_CUDA_CHECK(cudaEventCreate(&e));
    }
    launch_steps();  // warm-up, and the error check of every step
    synchronize();
    const cudaGraphExec_t exec = instantiate(record([&] {
      CNNRT_CUDA_CHECK(cudaEventRecordWithFlags(events_[0], stream_, cudaEventRecordExternal));
      for (size_t i = 0; i < n; ++i) {
        launch_step(i);
        CNNRT_CUDA_CHECK(cudaEventRecordWithFlags(events_[i + 1], stream_, cudaEventRecordExternal));
      }
    }));
    std::vector<std::vector<float>> times(n);
    for (int r = 0; r < repetitions; ++r) {
      CNNRT_CUDA_CHECK(cudaGraphLaunch(exec, stream_));
      synchronize();
      for (size_t i = 0; i < n; ++i) {
        float ms = 0;
        CNNRT_CUDA_CHECK(cudaEventElapsedTime(&ms, events_[i], events_[i + 1]));
        times[i].push_back(ms);
      }
    }
    cudaGraphExecDestroy(exec);
    std::vector<StepTiming> result(n);
    for (size_t i = 0; i < n; ++i) {
      const plan::Step& s = plan_.steps[i];
      std::sort(times[i].begin(), times[i].end());
      result[i].step = s.label;
      result[i].nodes = s.nodes;
      result[i].kernel = s.kernel;
      result[i].output_shape = s.output_shape;
      result[i].median_ms = times[i][times[i].size() / 2];
    }
    return result;
  }

  std::vector<double> time_runs_us(int runs, int samples) override {
    CNNRT_CHECK(bound_once_, ErrorCode::Usage, "time_runs_us: run the model once first");
    return gpu::time_captured_runs(stream_, runs, samples, [this] { launch_steps(); });
  }

  const plan::GpuPlan* gpu_plan() const override { return &plan_; }

  // For measure_step_overlap: the context's own buffers bound, the inputs random in [-1, 1).
  void bind_random_inputs() {
    bind_own_buffers();
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
    for (gpu::DeviceAllocation& in : own_inputs_) {
      std::vector<float> host(in.bytes() / sizeof(float));
      for (float& x : host) x = dist(rng);
      CNNRT_CUDA_CHECK(cudaMemcpy(in.get(), host.data(), in.bytes(), cudaMemcpyHostToDevice));
    }
    bound_once_ = true;
  }

  // The median GPU time of `samples` single runs (graph replays between two events), the graph instantiated
  // anew first: the steps' `overlap` may have changed, and an edge's kind is not something an update of the
  // executable graph is sure to carry.
  double median_single_run_us(int samples) {
    CNNRT_CHECK(use_graphs_, ErrorCode::Internal, "timing single runs of '{}' needs CUDA graphs",
                prepared_->graph.model_name);
    if (graph_exec_) cudaGraphExecDestroy(graph_exec_);
    graph_exec_ = nullptr;
    graph_stale_ = true;
    launch();  // capture, and a warm-up
    launch();
    return gpu::median(gpu::time_graph_replays(graph_exec_, stream_, samples));
  }

 private:
  // A host pointer passed where device memory belongs is a common mistake; CUDA can tell us.
  static void check_device_pointer(const void* ptr, const char* what, size_t index) {
    cudaPointerAttributes attr{};
    if (cudaPointerGetAttributes(&attr, ptr) != cudaSuccess) {
      cudaGetLastError();
      return;
    }
    CNNRT_CHECK(attr.type == cudaMemoryTypeDevice || attr.type == cudaMemoryTypeManaged, ErrorCode::InvalidInput,
                "enqueue: {} {} is not device memory (it is {} memory); pass device buffers, or use run() with "
                "host buffers", what, index, attr.type == cudaMemoryTypeHost ? "pinned host" : "pageable host");
  }

  void bind_own_buffers() {
    std::vector<const float*>& in = scratch_in_;
    std::vector<float*>& out = scratch_out_;
    in.resize(own_inputs_.size());
    out.resize(own_outputs_.size());
    for (size_t i = 0; i < own_inputs_.size(); ++i) in[i] = own_inputs_[i].floats();
    for (size_t i = 0; i < own_outputs_.size(); ++i) out[i] = own_outputs_[i].floats();
    bind(in.data(), out.data());
  }

  // Resolves every slot for this set of input/output pointers. A different set than last time
  // invalidates the captured graph.
  bool is_bound(const float* const* inputs, float* const* outputs) const {
    bool same = bound_once_;
    for (size_t i = 0; i < bound_inputs_.size(); ++i) same = same && bound_inputs_[i] == inputs[i];
    for (size_t i = 0; i < bound_outputs_.size(); ++i) same = same && bound_outputs_[i] == outputs[i];
    return same;
  }

  // `on_host`: a run on host data (bind_staged_buffers): the outputs, and the inputs where they are read in
  // place, are mapped pinned host memory.
  void bind(const float* const* inputs, float* const* outputs, bool on_host = false) {
    if (is_bound(inputs, outputs) && on_host == host_run_) return;
    bound_once_ = true;
    host_run_ = on_host;
    std::copy(inputs, inputs + bound_inputs_.size(), bound_inputs_.begin());
    std::copy(outputs, outputs + bound_outputs_.size(), bound_outputs_.begin());
    char* base = static_cast<char*>(arena_.get());
    for (size_t s = 0; s < plan_.slots.size(); ++s) {
      const plan::Slot& slot = plan_.slots[s];
      switch (slot.kind) {
        case SlotKind::Arena: slot_ptrs_[s] = reinterpret_cast<float*>(base + slot.offset); break;
        case SlotKind::Weight: slot_ptrs_[s] = const_cast<float*>(slot.weight); break;
        case SlotKind::Input: slot_ptrs_[s] = const_cast<float*>(inputs[slot.io_index]); break;
        case SlotKind::Output: slot_ptrs_[s] = outputs[slot.io_index]; break;
      }
    }
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      const plan::Step& step = plan_.steps[i];
      for (size_t k = 0; k < step.inputs.size(); ++k) step_inputs_[i][k] = slot_ptrs_[step.inputs[k]];
      for (size_t k = 0; k < step.outputs.size(); ++k) step_outputs_[i][k] = slot_ptrs_[step.outputs[k]];
    }
    graph_stale_ = true;
    ++binding_;
  }

  // Inputs and outputs of at most this many bytes in all are read and written in place in pinned memory.
  static constexpr int64_t kZeroCopyBytes = 64 * 1024;

  // Binds the steps to the pinned staging buffers, through their device addresses: the outputs, and the inputs
  // where they are read in place (else the context's device buffers, which the graph copies them into).
  void bind_staged_buffers() {
    if (staged_views_in_.empty() && staged_views_out_.empty()) {
      for (size_t i = 0; i < staged_inputs_.size(); ++i) {
        staged_views_in_.push_back(inputs_in_place_ ? device_view(staged_inputs_[i]) : own_inputs_[i].floats());
      }
      for (gpu::PinnedAllocation& p : staged_outputs_) staged_views_out_.push_back(device_view(p));
    }
    bind(staged_views_in_.data(), staged_views_out_.data(), true);
  }

  static float* device_view(gpu::PinnedAllocation& host) {
    void* device = nullptr;
    if (host.bytes() == 0) return nullptr;
    CNNRT_CUDA_CHECK(cudaHostGetDevicePointer(&device, host.floats(), 0));
    return static_cast<float*>(device);
  }

  void copy_in() {
    for (size_t i = 0; i < own_inputs_.size(); ++i) {
      CNNRT_CUDA_CHECK(cudaMemcpyAsync(own_inputs_[i].get(), staged_inputs_[i].floats(), own_inputs_[i].bytes(),
                                       cudaMemcpyHostToDevice, stream_));
    }
  }

  void copy_out() {
    for (size_t i = 0; i < own_outputs_.size(); ++i) {
      CNNRT_CUDA_CHECK(cudaMemcpyAsync(staged_outputs_[i].floats(), own_outputs_[i].get(), own_outputs_[i].bytes(),
                                       cudaMemcpyDeviceToHost, stream_));
    }
  }

  // The copies in, the steps and the copies out as one graph, for the current binding (the context's own
  // device buffers; or its own inputs and the pinned outputs, written in place).
  void capture_host_graph() {
    const cudaGraph_t graph = record([&] {
      copy_in();
      launch_steps();
      if (!host_run_) copy_out();
    });
    if (host_graph_exec_) cudaGraphExecDestroy(host_graph_exec_);
    host_graph_exec_ = nullptr;  // (instantiate may throw)
    host_graph_exec_ = instantiate(graph);
    host_graph_binding_ = binding_;
  }

  // What `enqueue` puts on the stream, recorded as a graph (freed again if `enqueue` throws).
  template <typename Enqueue>
  cudaGraph_t record(Enqueue&& enqueue) {
    cudaGraph_t graph = nullptr;
    CNNRT_CUDA_CHECK(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal));
    try {
      enqueue();
    } catch (...) {
      cudaStreamEndCapture(stream_, &graph);
      if (graph) cudaGraphDestroy(graph);
      throw;
    }
    CNNRT_CUDA_CHECK(cudaStreamEndCapture(stream_, &graph));
    return graph;
  }

  // The executable graph of `graph`, which it frees.
  static cudaGraphExec_t instantiate(cudaGraph_t graph) {
    cudaGraphExec_t exec = nullptr;
    const cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
    cudaGraphDestroy(graph);
    CNNRT_CUDA_CHECK(err);
    return exec;
  }

  void launch_step(size_t i) { launch_step(i, stream_); }

  void launch_step(size_t i, cudaStream_t stream) {
    const plan::Step& step = plan_.steps[i];
    // A plain step asks for its first launch to be plain; the request goes when the step is done, whether it
    // launched anything or threw.
    struct PlainRequest {
      bool on;
      explicit PlainRequest(bool plain) : on(plain) {
        if (on) kernels::launch_next_plain();
      }
      ~PlainRequest() {
        if (on) kernels::take_programmatic_launch();
      }
    } request(!step.overlap);
    if (host_run_ && step.launch_from_host) {
      unsigned* done = i + 1 == plan_.steps.size() ? done_device_ : nullptr;
      step.launch_from_host(step_inputs_[i].data(), step_outputs_[i].data(), done, stream);
    } else {
      step.launch(step_inputs_[i].data(), step_outputs_[i].data(), stream);
    }
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) {
      gpu::throw_cuda_error(err, step.kernel.c_str(), __FILE__, __LINE__,
                            fmt::format("step {} '{}' (ONNX nodes {}) of '{}'", i, step.label,
                                        fmt::join(step.nodes, ", "), prepared_->graph.model_name));
    }
    if (sync_every_step()) {
      const cudaError_t sync_err = cudaStreamSynchronize(stream);
      if (sync_err != cudaSuccess) {
        gpu::throw_cuda_error(sync_err, step.kernel.c_str(), __FILE__, __LINE__,
                              fmt::format("step {} '{}' (ONNX nodes {}) of '{}'", i, step.label,
                                          fmt::join(step.nodes, ", "), prepared_->graph.model_name));
      }
    }
  }

  // The steps in order; while a graph is captured, each side step (plan::side_steps) on the side stream, forked
  // after its fork step and joined before its join step. Outside a capture (no graphs, a profiling run) in order.
  void launch_steps() {
    cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
    if (!sides_.empty()) CNNRT_CUDA_CHECK(cudaStreamIsCapturing(stream_, &capturing));
    if (capturing != cudaStreamCaptureStatusActive) {
      for (size_t i = 0; i < plan_.steps.size(); ++i) launch_step(i);
      return;
    }
    const auto fork = [&](const plan::SideStep& side) {
      CNNRT_CUDA_CHECK(cudaEventRecord(side_->fork, stream_));
      CNNRT_CUDA_CHECK(cudaStreamWaitEvent(side_->stream, side_->fork, 0));
      launch_step(side.step, side_->stream);
      CNNRT_CUDA_CHECK(cudaEventRecord(side_->join, side_->stream));
    };
    size_t next = 0;  // the next side step to fork
    if (next < sides_.size() && sides_[next].fork < 0) fork(sides_[next]);
    for (size_t i = 0; i < plan_.steps.size(); ++i) {
      if (next < sides_.size() && sides_[next].step == i) continue;
      if (next < sides_.size() && sides_[next].join == i) {
        CNNRT_CUDA_CHECK(cudaStreamWaitEvent(stream_, side_->join, 0));
        ++next;
      }
      launch_step(i);
      if (next < sides_.size() && sides_[next].fork == static_cast<int>(i)) fork(sides_[next]);
    }
  }

  void launch() {
    if (!use_graphs_) {
      launch_steps();
      return;
    }
    if (graph_stale_ || !graph_exec_) capture();
    CNNRT_CUDA_CHECK(cudaGraphLaunch(graph_exec_, stream_));
  }

  // The steps as a graph for the current binding: the executable graph updated in place where it can be,
  // else instantiated anew.
  void capture() {
    const cudaGraph_t graph = record([&] { launch_steps(); });
    if (graph_exec_) {
      cudaGraphExecUpdateResultInfo info{};
      if (cudaGraphExecUpdate(graph_exec_, graph, &info) == cudaSuccess) {
        cudaGraphDestroy(graph);
        graph_stale_ = false;
        return;
      }
      cudaGetLastError();
      cudaGraphExecDestroy(graph_exec_);
      graph_exec_ = nullptr;
    }
    graph_exec_ = instantiate(graph);
    graph_stale_ = false;
  }

  std::shared_ptr<const plan::Prepared> prepared_;
  const plan::GpuPlan& plan_;
  cudaStream_t stream_;
  bool use_graphs_;
  bool zero_copy_ = false;  // run_host reads and writes the pinned buffers in place (small inputs and outputs)
  bool inputs_in_place_ = false;  // zero_copy_, and every step reading an input reads it once (launch_from_host)
  bool host_run_ = false;  // bound to the pinned buffers (bind_staged_buffers): steps with a launch_from_host use it
  gpu::PinnedAllocation done_word_;  // mapped: the last step sets it once the outputs are written (signals_done)
  unsigned* done_device_ = nullptr;  // its device address, or null where the last step cannot set it
  gpu::DeviceAllocation arena_;
  std::vector<gpu::DeviceAllocation> own_inputs_, own_outputs_;
  std::vector<gpu::PinnedAllocation> staged_inputs_, staged_outputs_;
  std::vector<const float*> staged_views_in_;  // their device addresses (mapped pinned memory)
  std::vector<float*> staged_views_out_;
  std::vector<float*> slot_ptrs_;
  std::vector<std::vector<const float*>> step_inputs_;
  std::vector<std::vector<float*>> step_outputs_;
  std::vector<const float*> bound_inputs_;
  std::vector<float*> bound_outputs_;
  std::vector<const float*> scratch_in_;
  std::vector<float*> scratch_out_;
  bool bound_once_ = false;
  bool graph_stale_ = true;
  cudaGraphExec_t graph_exec_ = nullptr;
  uint64_t binding_ = 0;             // counts bind() changes
  cudaGraphExec_t host_graph_exec_ = nullptr;  // run_host's graph: copies in, steps, copies out
  uint64_t host_graph_binding_ = 0;  // the binding it was captured for
  std::vector<cudaEvent_t> events_;
  std::vector<plan::SideStep> sides_;  // steps a captured graph runs beside the others
  std::unique_ptr<SideStream> side_;   // where sides_ is not empty
};

// Whole-plan searches run one at a time in the process: two would time each other.
std::mutex& search_lock() {
  static std::mutex searching;
  return searching;
}

// The non-blocking stream a whole-plan search times on, destroyed with it.
class SearchStream {
 public:
  SearchStream() { CNNRT_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~SearchStream() { cudaStreamDestroy(stream_); }
  SearchStream(const SearchStream&) = delete;
  SearchStream& operator=(const SearchStream&) = delete;
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// measure_step_overlap's search (gpu_executor.hpp), which leaves the steps' flags as they were at a throw.
OverlapChoice search_step_overlap(const std::shared_ptr<plan::GpuPlan>& plan, const std::string& model_name) {
  constexpr int kSamples = 15;           // single runs a measurement (their median)
  constexpr double kMaxRunUs = 2000;     // longer runs are many-wave grids: a launch gap is noise there
  constexpr double kBudgetUs = 2.0e6;    // GPU time the search may take
  const size_t n = plan->steps.size();
  OverlapChoice choice;
  for (plan::Step& s : plan->steps) s.overlap = true;
  if (n < 2 || !timed_whole(*plan)) return choice;
  const std::lock_guard<std::mutex> lock(search_lock());
  auto prepared = std::make_shared<plan::Prepared>();
  prepared->graph.model_name = model_name;
  prepared->gpu_plan = plan;
  const SearchStream owned;
  const cudaStream_t stream = owned.get();
  GpuExecutor executor(prepared, stream, /*use_graphs=*/true);
  executor.bind_random_inputs();

  const auto set_plain = [&](const std::vector<bool>& plain) {
    for (size_t i = 0; i < n; ++i) plan->steps[i].overlap = !plain[i];
  };
  std::vector<bool> best(n, false);
  double best_us = executor.median_single_run_us(kSamples);
  choice.overlapped_us = choice.chosen_us = best_us;
  choice.measured = best_us <= kMaxRunUs && best_us * (kSamples + 2) * double(n + 6) <= kBudgetUs;
  if (!choice.measured) return choice;
  // Local search, first step to last, for up to kPasses passes: each step's launch flipped in turn (plain <->
  // overlapped), kept where the network got faster. One pass leaves it where the order of the trials led (a
  // step made plain early can be worth less once later ones are): the next pass revisits every step; the search
  // ends after a pass that changed nothing, or when the budget is spent.
  constexpr int kPasses = 3;
  double spent_us = best_us * kSamples;
  for (int pass = 0; pass < kPasses; ++pass) {
    bool changed = false;
    for (size_t i = 1; i < n && (pass == 0 || spent_us + best_us * kSamples <= kBudgetUs); ++i) {
      std::vector<bool> trial = best;
      trial[i] = !trial[i];
      set_plain(trial);
      const double us = executor.median_single_run_us(kSamples);
      spent_us += us * kSamples;
      if (us < best_us - search_margin(best_us)) {
        best = std::move(trial);
        best_us = us;
        changed = true;
      }
    }
    if (!changed) break;
  }
  if (std::find(best.begin(), best.end(), true) == best.end()) {
    set_plain(best);
    return choice;
  }
  // The winner against all overlapped once more, alternating, so that a lucky sample does not decide.
  std::vector<double> overlapped, chosen;
  const std::vector<bool> none(n, false);
  for (int r = 0; r < 3; ++r) {
    set_plain(none);
    overlapped.push_back(executor.median_single_run_us(kSamples));
    set_plain(best);
    chosen.push_back(executor.median_single_run_us(kSamples));
  }
  choice.overlapped_us = gpu::median(overlapped);
  choice.chosen_us = gpu::median(chosen);
  if (choice.chosen_us < choice.overlapped_us - search_margin(choice.overlapped_us)) {
    for (size_t i = 0; i < n; ++i) {
      if (best[i]) choice.plain_steps.push_back(static_cast<int>(i));
    }
  } else {
    choice.chosen_us = choice.overlapped_us;
  }
  apply_step_overlap(*plan, choice.plain_steps);
  return choice;
}

constexpr int kPlanSamples = 15;  // single runs a measurement of a whole plan (their median)

// `plan` as it stands, timed in an executor of its own on random inputs: the median of kPlanSamples single runs.
double time_plan(const std::shared_ptr<const plan::GpuPlan>& plan, const std::string& model_name,
                 cudaStream_t stream) {
  auto prepared = std::make_shared<plan::Prepared>();
  prepared->graph.model_name = model_name;
  prepared->gpu_plan = plan;
  GpuExecutor executor(prepared, stream, /*use_graphs=*/true);
  executor.bind_random_inputs();
  return executor.median_single_run_us(kPlanSamples);
}

// `a` and `b` timed in turn `rounds` times: the median of each one's times.
std::pair<double, double> time_alternating(const std::shared_ptr<const plan::GpuPlan>& a,
                                           const std::shared_ptr<const plan::GpuPlan>& b,
                                           const std::string& model_name, cudaStream_t stream, int rounds) {
  std::vector<double> as_a, as_b;
  for (int r = 0; r < rounds; ++r) {
    as_a.push_back(time_plan(a, model_name, stream));
    as_b.push_back(time_plan(b, model_name, stream));
  }
  return {gpu::median(as_a), gpu::median(as_b)};
}

}  // namespace

double search_margin(double us) { return std::max(0.25, 0.004 * us); }

std::pair<double, double> time_plans_alternating(const plan::GpuPlan& a, const plan::GpuPlan& b,
                                                 const std::string& model_name) {
  const std::lock_guard<std::mutex> lock(search_lock());
  const SearchStream owned;
  return time_alternating(std::make_shared<const plan::GpuPlan>(a), std::make_shared<const plan::GpuPlan>(b),
                          model_name, owned.get(), 3);
}

PlanChoice measure_plan_choices(const plan::GpuPlan& plan, const std::string& model_name, int64_t max_arena_bytes) {
  constexpr double kMaxRunUs = 2000;  // longer runs: a step's few microseconds are noise there
  constexpr double kBudgetUs = 3.0e6; // GPU time the search may take
  PlanChoice choice;
  // Every change to try, step by step: its other kernels, its replaced steps, one launch for it and the next ones.
  std::vector<plan::StepChange> options;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const plan::Step& step = plan.steps[i];
    for (size_t k = 0; k < step.alternatives.size(); ++k) options.push_back({static_cast<int>(i), static_cast<int>(k)});
    for (const int kind : {plan::StepChange::kUnfuse, plan::StepChange::kFuse}) {
      if (plan::change_span(plan, {static_cast<int>(i), kind}) > 0) options.push_back({static_cast<int>(i), kind});
    }
  }
  // Whether two changes cover a step in common.
  const auto overlap = [&plan](const plan::StepChange& a, const plan::StepChange& b) {
    return a.step < b.step + static_cast<int>(plan::change_span(plan, b)) &&
           b.step < a.step + static_cast<int>(plan::change_span(plan, a));
  };
  if (options.empty() || !timed_whole(plan)) return choice;
  const std::lock_guard<std::mutex> lock(search_lock());
  const SearchStream owned;
  const cudaStream_t stream = owned.get();
  double spent_us = 0;
  const auto time = [&](const std::shared_ptr<const plan::GpuPlan>& p) {
    const double us = time_plan(p, model_name, stream);
    spent_us += us * (kPlanSamples + 2);
    return us;
  };
  const auto planned = std::make_shared<const plan::GpuPlan>(plan);
  std::vector<plan::StepChange> best;
  std::shared_ptr<const plan::GpuPlan> best_plan = planned;
  double best_us = time(best_plan);
  choice.planned_us = choice.chosen_us = best_us;
  choice.measured = best_us <= kMaxRunUs && best_us * (kPlanSamples + 2) * double(options.size() + 7) <= kBudgetUs;
  if (!choice.measured) return choice;
  // One pass, first step to last, each option in turn against the best so far (an option replaces the changes that
  // cover any of its steps): kept where the network got faster in three alternating measurements (and its arena
  // stays within what the plan may take).
  for (const plan::StepChange& option : options) {
    if (spent_us + 3 * best_us * (kPlanSamples + 2) > kBudgetUs) break;
    std::vector<plan::StepChange> trial;
    for (const plan::StepChange& c : best) {
      if (!overlap(c, option)) trial.push_back(c);
    }
    trial.push_back(option);
    auto trial_plan = std::make_shared<const plan::GpuPlan>(plan::change_steps(plan, trial));
    if (trial_plan->arena_bytes > max_arena_bytes) continue;
    const double us = time(trial_plan);
    if (us >= best_us - search_margin(best_us)) continue;
    std::vector<double> as_best = {best_us}, as_trial = {us};
    for (int r = 0; r < 2; ++r) {
      as_best.push_back(time(best_plan));
      as_trial.push_back(time(trial_plan));
    }
    const double best_median = gpu::median(as_best), trial_median = gpu::median(as_trial);
    if (trial_median < best_median - search_margin(best_median)) {
      best = std::move(trial);
      best_plan = std::move(trial_plan);
      best_us = trial_median;
    } else {
      best_us = best_median;
    }
  }
  if (best.empty()) return choice;
  // The winner against the plan as planned once more, alternating, so that a lucky sample does not decide.
  std::tie(choice.planned_us, choice.chosen_us) = time_alternating(planned, best_plan, model_name, stream, 3);
  if (choice.chosen_us < choice.planned_us - search_margin(choice.planned_us)) {
    std::sort(best.begin(), best.end(),
              [](const plan::StepChange& a, const plan::StepChange& b) { return a.step < b.step; });
    choice.changes = best;
  } else {
    choice.chosen_us = choice.planned_us;
  }
  return choice;
}

OverlapChoice measure_step_overlap(const std::shared_ptr<plan::GpuPlan>& plan, const std::string& model_name) {
  try {
    return search_step_overlap(plan, model_name);
  } catch (...) {
    apply_step_overlap(*plan, {});
    throw;
  }
}

void apply_step_overlap(plan::GpuPlan& plan, const std::vector<int>& plain_steps) {
  for (plan::Step& s : plan.steps) s.overlap = true;
  for (int i : plain_steps) {
    if (i >= 0 && static_cast<size_t>(i) < plan.steps.size()) plan.steps[static_cast<size_t>(i)].overlap = false;
  }
}

std::unique_ptr<Executor> make_gpu_executor(std::shared_ptr<const plan::Prepared> prepared, Stream stream,
                                            bool use_graphs) {
  return std::make_unique<GpuExecutor>(std::move(prepared), stream, use_graphs);
}

}  // namespace cnnrt::runtime
