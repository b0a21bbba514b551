// cnnrt: a small CNN inference engine. This header is the whole public API for running models.
//
//   cnnrt::Model model = cnnrt::Model::load("models/fashion_lenet.onnx");
//   cnnrt::Context ctx(model);                       // one per thread; owns its arena and CUDA graph
//   std::vector<cnnrt::Tensor> out = ctx.run({input}); // host in, host out
//
// Thread safety: a Model is immutable after load and may be shared by any number of threads. A Context is
// used by one thread at a time; give each thread its own (they share the model's weights).
// Errors: every failure throws cnnrt::Error with a code and a message naming the file, node and shape.
// The library never exits and never writes to stdout; it logs through the spdlog logger named "cnnrt".
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

struct CUstream_st;  // the CUDA runtime's stream type, so that this header needs no CUDA headers

namespace cnnrt {

// A cudaStream_t. nullptr means the context's own stream.
using Stream = CUstream_st*;

// A tensor shape: one extent per dimension, outermost first (NCHW for images).
using Shape = std::vector<int64_t>;

// The library's version ("0.1.0"), and the git commit it was built from: `git describe --always --dirty`
// at build time (an abbreviated hash, with "-dirty" when the checkout had uncommitted changes), or
// "unknown" when it was built outside a git checkout.
const char* version();
const char* build_commit();

enum class ErrorCode {
  Usage,              // the caller asked for something impossible (bad option, wrong argument count)
  Unsupported,        // the model uses an op, attribute, type or shape cnnrt cannot run
  InvalidModel,       // the file is not a valid ONNX model, or the model contradicts itself
  InvalidInput,       // an input tensor or image is wrong (shape, size, contents)
  LimitExceeded,      // a configured memory or size limit would be exceeded (see Limits)
  DeviceUnavailable,  // a GPU was required but none is usable, or this build has no CUDA
  DeviceError,        // a CUDA or cuDNN call failed
  Io,                 // a file could not be read or written
  Internal,           // a bug in cnnrt: please report it
};
const char* to_string(ErrorCode code);
// The exit status the cnnrt tool uses for an error of this category (2 usage, 3 unsupported, 4 invalid
// model or input, 5 no device, 6 limit, 7 device error, 8 internal).
int exit_code(ErrorCode code);

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, const std::string& message);
  ErrorCode code() const noexcept { return code_; }

 private:
  ErrorCode code_;
};

enum class Device { Auto, Cpu, Gpu };
const char* to_string(Device device);

enum class LogLevel { Trace, Debug, Info, Warn, Error, Off };
// Sets the level of the "cnnrt" spdlog logger (created on first use; hosts may replace its sinks).
void set_log_level(LogLevel level);

// Process-wide, on by default: on Hopper GPUs each convolution, GEMM or pooling step is launched while the
// step before it drains (programmatic dependent launch), and waits on the device for that step's results, so
// outputs are bit-identical either way. Off: plain launches, each after the previous step has finished (for
// comparison; `cnnrt --no-launch-overlap`). Takes effect for plans captured or launched after the call.
void set_launch_overlap(bool on);

// Guards against hostile or accidental giant models. Each message that trips one names it and this struct.
struct Limits {
  int64_t max_model_bytes = int64_t(2) << 30;        // size of the .onnx file or buffer
  int64_t max_weight_bytes = int64_t(4) << 30;       // all initializers and constants together
  int64_t max_activation_bytes = int64_t(16) << 30;  // the activation arena of one batch size
  int64_t max_nodes = 200000;                        // nodes in the graph
};

struct Options {
  Device device = Device::Auto;          // Auto: the GPU when one is usable, else the CPU with a warning
  int gpu_index = -1;                    // the CUDA device to load onto (0, 1, ...); -1: the loading thread's
                                         // current device. Contexts of the model always run on that device,
                                         // whichever device their thread has current.
  std::vector<int64_t> batch_sizes;      // plans to prepare at load; other sizes are planned on first use
  // Shapes to prepare at load, in addition to batch_sizes (each entry: one shape per input, in the model's
  // input order). This is how a model with symbolic dimensions other than the batch (a fully convolutional
  // net's height and width) gets its plan at load time; other shapes are planned on first use.
  std::vector<std::vector<Shape>> input_shapes;
  bool tuning = true;                    // time candidate kernels per layer (cached); false: heuristic choice
  std::string tuning_cache;              // file for measured choices; "" = default location, "none" = off
  bool cuda_graphs = true;               // replay each run as one CUDA graph
  std::vector<std::string> disabled_passes;  // graph passes to skip, by name (see `cnnrt plan`)
  std::string force_kernel;              // run every convolution (or conv chain) with this kernel where eligible
  std::optional<LogLevel> log_level;     // set: set_log_level(*log_level) before loading; unset: leave the
                                         // "cnnrt" logger as the host configured it
  Limits limits;
};

// An input or output of a model. Symbolic dimensions have size -1 and their name in dim_names.
struct TensorDesc {
  std::string name;
  std::vector<int64_t> shape;
  std::vector<std::string> dim_names;
};

// An owning float32 tensor in host memory, row-major (NCHW for images).
struct Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};

// GPU time of one planned step (profiling runs only).
struct StepTiming {
  std::string step;                 // the step's label, e.g. "conv1+relu1+pool1"
  std::vector<std::string> nodes;   // the ONNX nodes it covers
  std::string kernel;               // the kernel that ran it
  std::vector<int64_t> output_shape;
  double median_ms = 0;
};

// What the engine knows: the ONNX ops it runs, and its graph passes (name, one-line description).
std::vector<std::string> supported_ops();
std::vector<std::pair<std::string, std::string>> graph_passes();

// A family of convolution kernels the GPU planner chooses from (docs/kernels.md), in the planner's order.
struct KernelFamily {
  std::string name;                   // the first token of its kernels' names
  std::string summary;                // the algorithm, in one line
  std::string needs;                  // the hardware features it uses
  std::string compute_capability;     // the lowest that has them ("8.0"), or "9.0 exactly" (sm_90a code)
  std::vector<std::string> variants;  // its kernels' names; "*" stands for a token chosen per layer
};
// Empty in a build without CUDA.
std::vector<KernelFamily> kernel_families();

// Serialized ONNX TensorProto files (the ONNX test-data layout's input_0.pb / output_0.pb). Integer
// tensors are converted to float32. Throws Io or InvalidInput naming the file.
Tensor read_tensor_file(const std::string& path, std::string* name = nullptr);
void write_tensor_file(const std::string& path, const Tensor& tensor, const std::string& name);

namespace detail {
struct ModelImpl;
struct ContextImpl;
struct ContextAccess;  // the bench library's way in (engine/src/api/context_access.hpp)
}  // namespace detail

class Model {
 public:
  static Model load(const std::string& path, const Options& options = {});
  static Model load_from_memory(const void* data, std::size_t size, const Options& options = {},
                                const std::string& name = "<memory>");

  const std::string& name() const;
  const std::vector<TensorDesc>& inputs() const;
  const std::vector<TensorDesc>& outputs() const;
  const std::map<std::string, std::string>& metadata() const;  // the model's metadata_props
  Device device() const;                                        // the backend chosen at load

  // Output shapes for the given batch size (the first dimension of every input); batch 0 means the
  // declared shapes, with a symbolic batch dimension as 1.
  std::vector<Shape> output_shapes(int64_t batch) const;
  // Output shapes for explicit input shapes (one per input, in the model's order), which bind every
  // symbolic dimension. A wrong count or rank, a fixed dimension contradicted, a dimension of 0 or less, or
  // one symbol given two sizes: InvalidInput naming the input and the dimension.
  std::vector<Shape> output_shapes(const std::vector<Shape>& input_shapes) const;
  // The text `cnnrt plan` prints: steps, kernels, shapes and the memory plan for this batch size
  // (0: as declared), or for explicit input shapes (checked as output_shapes does).
  std::string describe_plan(int64_t batch, bool explain = false) const;
  std::string describe_plan(const std::vector<Shape>& input_shapes, bool explain = false) const;

 private:
  friend class Context;
  friend struct detail::ContextAccess;
  explicit Model(std::shared_ptr<detail::ModelImpl> impl);
  std::shared_ptr<detail::ModelImpl> impl_;
};

class Context {
 public:
  // stream: the CUDA stream runs are queued on (nullptr: a stream the context creates).
  explicit Context(const Model& model, Stream stream = nullptr);
  ~Context();
  Context(Context&&) noexcept;
  Context& operator=(Context&&) noexcept;
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  // Host tensors in, host tensors out. The batch size is the first dimension of the inputs; every input's
  // shape binds the model's symbolic dimensions.
  std::vector<Tensor> run(const std::vector<Tensor>& inputs);

  // Host buffers the caller owns (one per input and output, in the model's order, sized for `batch`).
  // Copies through pinned staging buffers and returns when the outputs are in place. Allocates nothing
  // once the plan for this batch size exists.
  void run(const float* const* inputs, float* const* outputs, int64_t batch);
  // The same for explicit input shapes (one per input; checked as Model::output_shapes checks them), for
  // models with symbolic dimensions other than the batch. Outputs sized as Model::output_shapes says.
  void run(const float* const* inputs, float* const* outputs, const std::vector<Shape>& input_shapes);

  // Device buffers the caller owns (GPU backend only). Queued on the stream; no copies, no waiting.
  void enqueue(const float* const* device_inputs, float* const* device_outputs, int64_t batch);
  void enqueue(const float* const* device_inputs, float* const* device_outputs,
               const std::vector<Shape>& input_shapes);
  void synchronize();

  Stream stream() const;
  void set_stream(Stream stream);

  // Runs `repetitions` times with CUDA events around each step and returns the median time per step.
  // The normal run path records no events.
  std::vector<StepTiming> profile(const std::vector<Tensor>& inputs, int repetitions = 20);

 private:
  friend struct detail::ContextAccess;
  std::unique_ptr<detail::ContextImpl> impl_;
};

}  // namespace cnnrt
