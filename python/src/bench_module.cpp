// cnnrt._bench: Model.bench, through the bench library (cnnrt/bench.hpp). A module of its own because the
// bench library links cuDNN: `import cnnrt` must work where cuDNN is not installed, and only bench() needs it.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include "cnnrt/bench.hpp"
#include "errors.hpp"
#include "options.hpp"

namespace cnnrt_python {

namespace {

namespace bench = cnnrt::bench;

// A cuDNN figure, or None where cuDNN cannot run the step.
py::object cudnn_value(const bench::Comparison& c, double value) {
  return c.cudnn_us > 0 ? py::object(py::float_(value)) : py::object(py::none());
}

py::dict step_dict(const bench::StepReport& s) {
  const bench::Comparison& c = s.timing;
  py::dict d;
  d["step"] = c.label;
  d["nodes"] = c.nodes;
  d["kernel"] = c.kernel;
  d["output_shape"] = c.output_shape;
  d["ours_us"] = c.ours_us;
  d["share"] = s.share;
  d["floor_us"] = c.floor_us;
  d["floor_share"] = c.floor_share();
  d["is_conv"] = s.is_conv;
  // The cuDNN column: for convolution steps (the algorithm, or why cuDNN cannot run it).
  d["cudnn_algo"] = c.cudnn_algo.empty() ? py::object(py::none()) : py::object(py::str(c.cudnn_algo));
  d["cudnn_us"] = cudnn_value(c, c.cudnn_us);
  d["speedup"] = cudnn_value(c, c.speedup());  // cudnn_us / alone_us: both back to back
  d["alone_us"] = c.alone_us > 0 ? py::object(py::float_(c.alone_us)) : py::object(py::none());
  d["rel_error"] = c.cudnn_algo.empty() ? py::object(py::none()) : py::object(py::float_(c.rel_error));
  d["cudnn_rel_error"] = cudnn_value(c, c.cudnn_rel_error);
  d["mismatch"] = c.mismatch;
  return d;
}

py::dict timing_dict(const bench::Timing& t) {
  py::dict d;
  d["samples"] = t.samples;
  d["min_us"] = t.min_us;
  d["median_us"] = t.median_us;
  d["mean_us"] = t.mean_us;
  d["p90_us"] = t.p90_us;
  d["p99_us"] = t.p99_us;
  d["max_us"] = t.max_us;
  d["unstable"] = t.unstable;
  return d;
}

py::object bench_model(const std::string& path, int64_t batch, const std::optional<std::vector<cnnrt::Shape>>& shapes,
                       const py::dict& options, int iterations, double duration_s, double warmup_ms,
                       bool include_transfers, bool report) {
  if (!shapes && batch < 1) fail(cnnrt::ErrorCode::Usage, "bench: batch must be at least 1, not ", std::to_string(batch));
  if (iterations < 1) fail(cnnrt::ErrorCode::Usage, "bench: iterations must be at least 1");
  bench::BenchOptions o;
  o.engine = options_from_dict(options);
  o.warmup_ms = warmup_ms;
  bench::ModelReport r;
  {
    py::gil_scoped_release release;
    r = shapes ? bench::bench_model(path, *shapes, o, iterations, duration_s, include_transfers)
               : bench::bench_model(path, batch, o, iterations, duration_s, include_transfers);
  }
  py::list steps;
  for (const bench::StepReport& s : r.steps) steps.append(step_dict(s));
  if (!report) return std::move(steps);
  py::dict env;
  env["gpu"] = r.env.gpu;
  env["sm_count"] = r.env.sm_count;
  env["driver"] = r.env.driver;
  env["cuda_runtime"] = r.env.cuda_runtime;
  env["cudnn"] = r.env.cudnn;
  env["cnnrt"] = r.env.engine;
  py::dict d;
  d["environment"] = env;
  d["model"] = r.model;
  d["batch"] = r.batch;
  d["input_shapes"] = r.input_shapes;
  d["cuda_graph"] = r.cuda_graph;
  d["latency"] = timing_dict(r.latency);
  d["included_transfers"] = r.included_transfers;
  d["throughput_images_per_s"] = r.throughput;
  d["per_run_us"] = r.per_run_us;
  d["h2d_us"] = r.h2d_us;
  d["d2h_us"] = r.d2h_us;
  d["steps"] = steps;
  d["steps_total_us"] = r.steps_ours_us;
  d["conv_ours_us"] = r.conv_ours_us;
  d["conv_cudnn_us"] = r.conv_cudnn_us;
  return std::move(d);
}

}  // namespace

}  // namespace cnnrt_python

PYBIND11_MODULE(_bench, module) {
  using namespace cnnrt_python;
  module.doc() = "cnnrt's bench library (cuDNN comparisons), behind cnnrt.Model.bench.";
  use_errors_of(py::module_::import("cnnrt._cnnrt"));
  module.def("bench_model", &bench_model, py::arg("path"), py::arg("batch"), py::arg("input_shapes"), py::arg("options"),
             py::arg("iterations"),
             py::arg("duration_s"), py::arg("warmup_ms"), py::arg("include_transfers"), py::arg("report"));
}
