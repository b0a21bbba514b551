// The Open Inference Protocol (KServe v2, Triton's HTTP/REST API) for `cnnrt serve`: inference requests in,
// responses out, model metadata. JSON tensors (flat or nested `data`) and the binary tensor data extension
// (`Inference-Header-Content-Length`, `binary_data_size`, `binary_data`, `binary_data_output`). Nothing here
// knows about HTTP connections or the engine's threads, so the tests drive it directly.
//
// Every refusal is a ProtocolError with the HTTP status to answer and a message naming the tensor, the field
// and the value; the server sends it as {"error": "..."}.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "cnnrt/cnnrt.hpp"

namespace cnnrt_serve {

class ProtocolError : public std::runtime_error {
 public:
  ProtocolError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const noexcept { return status_; }

 private:
  int status_;
};

// The HTTP status for an engine error: the request's fault (400), a configured limit (413), no device (503),
// or the server's fault (500).
int http_status_for(cnnrt::ErrorCode code);

// A tensor as the protocol describes it: name, datatype, shape (-1 for a dimension that varies per request).
struct TensorSpec {
  std::string name;
  std::vector<int64_t> shape;
};

// What the codec needs to know of a served model.
struct ModelSpec {
  std::string name;
  std::vector<TensorSpec> inputs;   // the engine's order
  std::vector<TensorSpec> outputs;  // the engine's order
  // Dimension 0 of every input and output is the batch: requests may carry 1..max_batch rows and are merged
  // along it. Otherwise every input must have its declared shape, and requests run one at a time.
  bool batchable = true;
  int64_t max_batch = 1;  // rows a request may carry (batchable models)
};

// A parsed, checked inference request.
struct InferRequest {
  std::optional<std::string> id;             // echoed in the response
  int64_t rows = 1;                          // dimension 0, common to every input (batchable models)
  std::vector<std::vector<int64_t>> shapes;  // per model input, as sent
  std::vector<std::vector<float>> inputs;    // per model input, converted to float32
  struct Output {
    int index = 0;        // into ModelSpec::outputs
    bool binary = false;  // returned as binary data rather than JSON
  };
  std::vector<Output> outputs;  // what to return, in the response's order
};

// Parses a POST body. `json_length`: the Inference-Header-Content-Length header's value when present (the JSON
// object is that many bytes at the front of the body and binary tensor data follows); absent, the whole body is
// JSON. Throws ProtocolError (400) naming the problem.
InferRequest parse_infer_request(const ModelSpec& model, std::string_view body, std::optional<size_t> json_length);

// Parses the Inference-Header-Content-Length header's value (decimal digits). Throws ProtocolError (400).
size_t parse_header_length(const std::string& value);

struct EncodedResponse {
  std::string body;
  std::optional<size_t> json_length;  // set when binary data follows the JSON (Inference-Header-Content-Length)
  std::string content_type;
};

// The response for `request`, whose outputs (one per model output, this request's rows only) are given.
// JSON numbers are the shortest decimal text that reads back as the same float32; NaN and infinities, which
// JSON cannot spell, are written as null (binary outputs carry them exactly).
EncodedResponse encode_infer_response(const ModelSpec& model, const InferRequest& request,
                                      const std::vector<cnnrt::Tensor>& outputs);

// GET /v2/models/{name}: name, versions, platform, inputs and outputs with datatype and shape.
nlohmann::json model_metadata(const ModelSpec& model);

// {"error": message}, as text.
std::string error_body(const std::string& message);

// Writes a line of the server's log and flushes; never throws (a closed stdout or stderr must not stop
// serving).
void say(std::FILE* stream, const std::string& text) noexcept;

// JSON text of `value`; invalid UTF-8 in strings (a message may quote a malformed request) becomes U+FFFD.
std::string json_text(const nlohmann::json& value);

}  // namespace cnnrt_serve
