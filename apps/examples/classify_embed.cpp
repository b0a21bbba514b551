// classify_embed: cnnrt inside another program. Loads an image classifier (input [N,1,28,28], output
// [N,classes]), runs one batch through its own context on its own stream, prints each image's top class.
//
//   classify_embed models/fashion_lenet.onnx [IMAGES.pb]
//
// IMAGES.pb is a serialized ONNX TensorProto of shape [N,1,28,28]; without it, 4 synthetic images.
#include <cnnrt/cnnrt.hpp>

#include <algorithm>
#include <cstdio>
#ifdef CLASSIFY_EMBED_WITH_CUDA
#include <cuda_runtime.h>
#endif

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::fprintf(stderr, "usage: %s MODEL.onnx [IMAGES.pb]\n", argv[0]);
    return 2;
  }
  try {
    cnnrt::Tensor images;
    if (argc == 3) {
      images = cnnrt::read_tensor_file(argv[2]);
    } else {
      images.shape = {4, 1, 28, 28};
      images.data.resize(4 * 28 * 28);
      for (size_t i = 0; i < images.data.size(); ++i) images.data[i] = float(i % 97) / 96.0f;
    }
    cnnrt::Options options;
    options.batch_sizes = {images.shape.at(0)};  // plan this batch size now, not at the first run
    options.log_level = cnnrt::LogLevel::Warn;
    const cnnrt::Model model = cnnrt::Model::load(argv[1], options);

    cnnrt::Stream stream = nullptr;  // ours, if the model runs on the GPU
#ifdef CLASSIFY_EMBED_WITH_CUDA
    if (model.device() == cnnrt::Device::Gpu) cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
#endif
    std::vector<cnnrt::Tensor> outputs;
    {
      cnnrt::Context context(model, stream);  // one per thread; the model itself is shared read-only
      outputs = context.run({images});        // copies in, runs, copies out; waits on `stream` only
    }
#ifdef CLASSIFY_EMBED_WITH_CUDA
    if (stream) cudaStreamDestroy(stream);
#endif

    const cnnrt::Tensor& scores = outputs.at(0);  // [N, classes]
    const int64_t classes = scores.shape.at(1);
    for (int64_t i = 0; i < scores.shape[0]; ++i) {
      const float* row = scores.data.data() + i * classes;
      const int64_t top = std::max_element(row, row + classes) - row;
      std::printf("image %lld: class %lld (score %.3f)\n", (long long)i, (long long)top, row[top]);
    }
    return 0;
  } catch (const cnnrt::Error& e) {
    std::fprintf(stderr, "classify_embed: %s (%s)\n", e.what(), cnnrt::to_string(e.code()));
    return cnnrt::exit_code(e.code());
  }
}
