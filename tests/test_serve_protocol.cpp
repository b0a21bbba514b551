// cnnrt serve's protocol codec (apps/cnnrt/serve/protocol.cpp): the Open Inference Protocol's JSON and binary
// tensors in, every malformed or impossible request refused with a 4xx naming the problem, responses out that
// read back to the same float32 values. The HTTP server around it is tested end to end in tests/serve/.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "serve/protocol.hpp"

using namespace cnnrt_serve;
using nlohmann::json;

namespace {

// Like fashion_lenet: one input [-1,1,2,2], one output [-1,3], up to 4 rows a request.
ModelSpec small_model() {
  ModelSpec m;
  m.name = "small";
  m.inputs = {{"x", {-1, 1, 2, 2}}};
  m.outputs = {{"y", {-1, 3}}, {"z", {-1, 1}}};
  m.batchable = true;
  m.max_batch = 4;
  return m;
}

json request_with(json data, json shape = {1, 1, 2, 2}, const std::string& datatype = "FP32") {
  return {{"inputs", {{{"name", "x"}, {"shape", shape}, {"datatype", datatype}, {"data", data}}}}};
}

// The 4xx a request gets; fails the test when it is accepted.
ProtocolError refusal(const ModelSpec& m, const std::string& body, std::optional<size_t> json_length = std::nullopt) {
  try {
    parse_infer_request(m, body, json_length);
  } catch (const ProtocolError& e) {
    return e;
  }
  FAIL("accepted: " << body);
  return ProtocolError(0, "");
}

bool says(const ProtocolError& e, const std::string& text) {
  const bool found = std::string(e.what()).find(text) != std::string::npos;
  if (!found) MESSAGE("message: " << std::string(e.what()));
  return found;
}

template <class T>
std::string bytes_of(const std::vector<T>& values) {
  return std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(T));
}

// A binary request: JSON header (with binary_data_size for x) + the bytes. Returns body and header length.
std::pair<std::string, size_t> binary_request(const std::string& datatype, const std::string& bytes,
                                              json shape = {1, 1, 2, 2}, json extra = json::object()) {
  json header = {{"inputs",
                  {{{"name", "x"},
                    {"shape", shape},
                    {"datatype", datatype},
                    {"parameters", {{"binary_data_size", bytes.size()}}}}}}};
  header.update(extra);
  const std::string text = header.dump();
  return {text + bytes, text.size()};
}

}  // namespace

TEST_CASE("serve protocol: JSON tensors, flat and nested, become float32 rows") {
  const ModelSpec m = small_model();
  InferRequest r = parse_infer_request(m, request_with({1, 2, 3, 4}).dump(), std::nullopt);
  CHECK(r.rows == 1);
  CHECK(r.inputs[0] == std::vector<float>{1, 2, 3, 4});
  CHECK(r.shapes[0] == std::vector<int64_t>{1, 1, 2, 2});
  REQUIRE(r.outputs.size() == 2);  // every output, as JSON, when none are asked for
  CHECK((r.outputs[0].index == 0 && !r.outputs[0].binary && r.outputs[1].index == 1));
  CHECK(!r.id);

  r = parse_infer_request(m, request_with(json::parse("[[[[0.5, 1.5], [2.5, 3.5]]], [[[-1, -2], [-3, -4]]]]"),
                                          {2, 1, 2, 2}).dump(),
                          std::nullopt);
  CHECK(r.rows == 2);
  CHECK(r.inputs[0] == std::vector<float>{0.5f, 1.5f, 2.5f, 3.5f, -1, -2, -3, -4});

  json with_id = request_with({1, 2, 3, 4});
  with_id["id"] = "req-7";
  CHECK(parse_infer_request(m, with_id.dump(), std::nullopt).id == std::string("req-7"));
}

TEST_CASE("serve protocol: integer and FP64 data are taken only where float32 holds them exactly") {
  const ModelSpec m = small_model();
  CHECK(parse_infer_request(m, request_with({0, 255, 7, 1}, {1, 1, 2, 2}, "UINT8").dump(), std::nullopt).inputs[0] ==
        std::vector<float>{0, 255, 7, 1});
  CHECK(parse_infer_request(m, request_with({-128, 127, 0, -1}, {1, 1, 2, 2}, "INT8").dump(), std::nullopt)
            .inputs[0] == std::vector<float>{-128, 127, 0, -1});
  CHECK(parse_infer_request(m, request_with({16777216, -16777216, 3, 4}, {1, 1, 2, 2}, "INT32").dump(),
                            std::nullopt).inputs[0][0] == 16777216.0f);
  CHECK(parse_infer_request(m, request_with({0.5, 0.25, -2, double(1e30f)}, {1, 1, 2, 2}, "FP64").dump(),
                            std::nullopt).inputs[0][3] == 1e30f);  // (1e30 as a double is not a float; 1e30f is)

  SUBCASE("2^24 + 1 is no float32") {
    const ProtocolError e = refusal(m, request_with({16777217, 0, 0, 0}, {1, 1, 2, 2}, "INT32").dump());
    CHECK(e.status() == 400);
    CHECK(says(e, "element 0 (16777217) is not exactly representable as float32"));
  }
  SUBCASE("out of the datatype's range") {
    CHECK(says(refusal(m, request_with({256, 0, 0, 0}, {1, 1, 2, 2}, "UINT8").dump()),
               "element 0 (256) is beyond the range of UINT8"));
    CHECK(says(refusal(m, request_with({0, -1, 0, 0}, {1, 1, 2, 2}, "UINT16").dump()),
               "element 1 (-1) is beyond the range of UINT16"));
  }
  SUBCASE("a fraction for an integer type") {
    CHECK(says(refusal(m, request_with({0, 1.5, 0, 0}, {1, 1, 2, 2}, "INT32").dump()),
               "element 1 (1.5) is not an integer"));
  }
  SUBCASE("FP64 that float32 would round") {
    CHECK(says(refusal(m, request_with({0.1, 0, 0, 0}, {1, 1, 2, 2}, "FP64").dump()),
               "element 0 (0.1) is not exactly a float32"));
  }
  SUBCASE("FP32 beyond float32's range") {
    CHECK(says(refusal(m, request_with({1e39, 0, 0, 0}).dump()), "is beyond the range of FP32"));
  }
  SUBCASE("not a number at all") {
    CHECK(says(refusal(m, request_with({0, "1", 0, 0}).dump()), "element 1 (\"1\") is not a number"));
    CHECK(says(refusal(m, request_with({0, 0, true, 0}).dump()), "element 2 (true) is not a number"));
  }
  SUBCASE("BOOL, BYTES, unknown types; FP16 in JSON") {
    CHECK(says(refusal(m, request_with({0, 1, 0, 1}, {1, 1, 2, 2}, "BOOL").dump()),
               "datatype BOOL cannot be converted"));
    CHECK(says(refusal(m, request_with({0, 1, 0, 1}, {1, 1, 2, 2}, "FP8").dump()), "unknown datatype \"FP8\""));
    CHECK(says(refusal(m, request_with({0, 1, 0, 1}, {1, 1, 2, 2}, "FP16").dump()),
               "FP16 data has no JSON form; send it as binary data"));
  }
}

TEST_CASE("serve protocol: wrong names, shapes and counts are 400s naming the tensor") {
  const ModelSpec m = small_model();
  const auto says_400 = [&](const std::string& body, const std::string& text) {
    const ProtocolError e = refusal(m, body);
    CHECK(e.status() == 400);
    CHECK(says(e, text));
  };
  says_400("{\"inputs\": [", "malformed JSON in the request");
  says_400("[1, 2]", "the request must be a JSON object");
  says_400("{}", "the request has no 'inputs' array");
  says_400(R"({"inputs": [{"name": "image", "shape": [1,1,2,2], "datatype": "FP32", "data": [1,2,3,4]}]})",
           "model 'small' has no input 'image' (its inputs: 'x')");
  says_400(R"({"inputs": []})", "input 'x' is missing");
  json twice = request_with({1, 2, 3, 4});
  twice["inputs"].push_back(twice["inputs"][0]);
  says_400(twice.dump(), "input 'x' is given twice");
  says_400(request_with({1, 2, 3, 4}, {1, 4}).dump(), "the model takes rank 4");
  says_400(request_with({1, 2, 3, 4, 5, 6}, {1, 1, 2, 3}).dump(), "dimension 3 must be 2");
  says_400(request_with(json::array(), {0, 1, 2, 2}).dump(), "dimension 0 (the batch) must be at least 1");
  says_400(request_with(std::vector<float>(20, 0.0f), {5, 1, 2, 2}).dump(),
           "its 5 rows are more than this server runs at once (4, --max-batch)");
  says_400(request_with({1, 2, 3}).dump(), "'data' holds 3 values, but shape [1,1,2,2] needs 4");
  says_400(request_with(json::parse("[[[[1, 2], [3]]]]")).dump(),
           "nested 'data' does not match shape [1,1,2,2] at [0][0][1]");
  says_400(request_with(json::parse("[[[[1, 2], [3, [4]]]]]")).dump(), "nested 'data' is deeper than shape");
  says_400(request_with({1, 2, 3, 4}, {1, 1, 2, -2}).dump(), "'shape' has -2, not a dimension size");
  json no_data = request_with({1, 2, 3, 4});
  no_data["inputs"][0].erase("data");
  says_400(no_data.dump(), "input 'x' has neither 'data' nor binary_data_size");

  json outputs = request_with({1, 2, 3, 4});
  outputs["outputs"] = {{{"name", "probabilities"}}};
  says_400(outputs.dump(), "model 'small' has no output 'probabilities' (its outputs: 'y', 'z')");
  outputs["outputs"] = {{{"name", "y"}, {"parameters", {{"classification", 3}}}}};
  says_400(outputs.dump(), "the classification extension is not supported");
  outputs["outputs"] = {{{"name", "y"}, {"parameters", {{"binary_data", "yes"}}}}};
  says_400(outputs.dump(), "parameter 'binary_data' must be true or false");
}

TEST_CASE("serve protocol: inputs of a request must agree on the batch") {
  ModelSpec m = small_model();
  m.inputs.push_back({"mask", {-1, 2}});
  json body = request_with({1, 2, 3, 4});
  body["inputs"].push_back({{"name", "mask"}, {"shape", {2, 2}}, {"datatype", "FP32"}, {"data", {1, 1, 1, 1}}});
  const ProtocolError e = refusal(m, body.dump());
  CHECK(says(e, "inputs 'x' and 'mask' have 1 and 2 rows"));
}

TEST_CASE("serve protocol: a model with fixed shapes takes exactly them") {
  ModelSpec m = small_model();
  m.batchable = false;
  m.max_batch = 1;
  m.inputs[0].shape = {1, 1, 2, 2};
  CHECK(parse_infer_request(m, request_with({1, 2, 3, 4}).dump(), std::nullopt).rows == 1);
  CHECK(says(refusal(m, request_with(std::vector<float>(8, 0.0f), {2, 1, 2, 2}).dump()), "dimension 0 must be 1"));
}

TEST_CASE("serve protocol: binary tensor data, every convertible datatype") {
  const ModelSpec m = small_model();
  SUBCASE("FP32, bit for bit (NaN and infinity included)") {
    const std::vector<float> values = {1.5f, -0.0f, std::numeric_limits<float>::infinity(), 3e-40f};
    const auto [body, length] = binary_request("FP32", bytes_of(values));
    const InferRequest r = parse_infer_request(m, body, length);
    CHECK(std::memcmp(r.inputs[0].data(), values.data(), 16) == 0);
  }
  SUBCASE("FP16 and BF16") {
    const std::vector<uint16_t> halves = {0x3C00, 0xC000, 0x0001, 0x7BFF};  // 1, -2, 2^-24, 65504
    auto [body, length] = binary_request("FP16", bytes_of(halves));
    CHECK(parse_infer_request(m, body, length).inputs[0] == std::vector<float>{1, -2, std::ldexp(1.0f, -24), 65504});
    const std::vector<uint16_t> bf = {0x3F80, 0xC040, 0x0000, 0x4049};  // 1, -3, 0, 3.140625
    std::tie(body, length) = binary_request("BF16", bytes_of(bf));
    CHECK(parse_infer_request(m, body, length).inputs[0] == std::vector<float>{1, -3, 0, 3.140625f});
  }
  SUBCASE("integers, and those float32 cannot hold") {
    auto [body, length] = binary_request("INT64", bytes_of(std::vector<int64_t>{-5, 0, 1 << 24, 1}));
    CHECK(parse_infer_request(m, body, length).inputs[0] == std::vector<float>{-5, 0, 16777216, 1});
    std::tie(body, length) = binary_request("INT64", bytes_of(std::vector<int64_t>{0, (1 << 24) + 1, 0, 0}));
    CHECK(says(refusal(m, body, length), "element 1 (16777217) of the INT64 binary data is not exactly"));
    std::tie(body, length) = binary_request("UINT8", bytes_of(std::vector<uint8_t>{0, 200, 255, 1}));
    CHECK(parse_infer_request(m, body, length).inputs[0] == std::vector<float>{0, 200, 255, 1});
    std::tie(body, length) = binary_request("FP64", bytes_of(std::vector<double>{0.5, 0.1, 0, 0}));
    CHECK(says(refusal(m, body, length), "element 1 (0.1) of the FP64 binary data is not exactly a float32"));
  }
  SUBCASE("byte counts that do not add up") {
    const std::string four = bytes_of(std::vector<float>{1, 2, 3, 4});
    auto [body, length] = binary_request("FP32", four.substr(0, 12));
    CHECK(says(refusal(m, body, length), "binary_data_size is 12 bytes, but FP32 [1,1,2,2] needs 16"));
    std::tie(body, length) = binary_request("FP32", four);
    CHECK(says(refusal(m, body + "xx", length), "2 bytes of binary data follow the last binary input"));
    CHECK(says(refusal(m, body.substr(0, body.size() - 4), length), "are not all there"));
    CHECK(says(refusal(m, body, body.size() + 1), "Inference-Header-Content-Length is"));
    CHECK(says(refusal(m, body, std::nullopt), "malformed JSON"));  // binary bytes read as JSON
    CHECK(says(refusal(m, body.substr(0, length), std::nullopt),
               "has no Inference-Header-Content-Length header to say where its binary data starts"));
    json both = json::parse(body.substr(0, length));
    both["inputs"][0]["data"] = {1, 2, 3, 4};
    CHECK(says(refusal(m, both.dump() + four, both.dump().size()), "has both 'data' and binary_data_size"));
  }
  SUBCASE("the header's value") {
    CHECK(parse_header_length("123") == 123);
    for (const char* bad : {"", "-1", "12a", "0x10", "99999999999999999999"}) {
      CAPTURE(bad);
      CHECK_THROWS_AS(parse_header_length(bad), ProtocolError);
    }
  }
}

TEST_CASE("serve protocol: responses read back as the same float32 values, JSON or binary") {
  const ModelSpec m = small_model();
  const std::vector<cnnrt::Tensor> outputs = {
      {{2, 3}, {0.1f, -1e-30f, 3.4028235e38f, 1.0f / 3.0f, 0.0f, std::nanf("")}},
      {{2, 1}, {7.0f, -8.5f}},
  };
  json body = request_with(std::vector<float>(8, 0.0f), {2, 1, 2, 2});
  body["id"] = "a\"b";
  InferRequest r = parse_infer_request(m, body.dump(), std::nullopt);

  EncodedResponse e = encode_infer_response(m, r, outputs);
  CHECK(!e.json_length);
  CHECK(e.content_type == "application/json");
  const json got = json::parse(e.body);
  CHECK(got["model_name"] == "small");
  CHECK(got["model_version"] == "1");
  CHECK(got["id"] == "a\"b");
  REQUIRE(got["outputs"].size() == 2);
  CHECK(got["outputs"][0]["name"] == "y");
  CHECK(got["outputs"][0]["datatype"] == "FP32");
  CHECK(got["outputs"][0]["shape"] == json({2, 3}));
  for (size_t i = 0; i < 5; ++i) CHECK(static_cast<float>(got["outputs"][0]["data"][i].get<double>()) == outputs[0].data[i]);
  CHECK(got["outputs"][0]["data"][5].is_null());  // NaN has no JSON form

  // Only z, as binary; then everything binary but y.
  body["outputs"] = {{{"name", "z"}, {"parameters", {{"binary_data", true}}}}};
  r = parse_infer_request(m, body.dump(), std::nullopt);
  e = encode_infer_response(m, r, outputs);
  REQUIRE(e.json_length);
  CHECK(e.content_type == "application/octet-stream");
  json header = json::parse(e.body.substr(0, *e.json_length));
  REQUIRE(header["outputs"].size() == 1);
  CHECK(header["outputs"][0]["name"] == "z");
  CHECK(header["outputs"][0]["parameters"]["binary_data_size"] == 8);
  CHECK(!header["outputs"][0].contains("data"));
  CHECK(e.body.substr(*e.json_length) == bytes_of(outputs[1].data));

  body.erase("outputs");
  body["parameters"] = {{"binary_data_output", true}};
  body["outputs"] = {{{"name", "y"}, {"parameters", {{"binary_data", false}}}}, {{"name", "z"}}};
  r = parse_infer_request(m, body.dump(), std::nullopt);
  e = encode_infer_response(m, r, outputs);
  header = json::parse(e.body.substr(0, *e.json_length));
  CHECK(header["outputs"][0].contains("data"));
  CHECK(header["outputs"][1]["parameters"]["binary_data_size"] == 8);
}

TEST_CASE("serve protocol: metadata and errors") {
  const json meta = model_metadata(small_model());
  CHECK(meta["name"] == "small");
  CHECK(meta["versions"] == json({"1"}));
  CHECK(meta["inputs"][0] == json({{"name", "x"}, {"datatype", "FP32"}, {"shape", {-1, 1, 2, 2}}}));
  CHECK(meta["outputs"][1]["shape"] == json({-1, 1}));
  CHECK(json::parse(error_body("bad \"thing\"")) == json({{"error", "bad \"thing\""}}));
  CHECK(json::parse(error_body(std::string("quoted \xff bytes")))["error"].get<std::string>().find("quoted") == 0);
  CHECK(http_status_for(cnnrt::ErrorCode::InvalidInput) == 400);
  CHECK(http_status_for(cnnrt::ErrorCode::LimitExceeded) == 413);
  CHECK(http_status_for(cnnrt::ErrorCode::DeviceError) == 500);
}
