// libFuzzer target: arbitrary bytes -> load -> plan -> (tiny models) one CPU inference; see
// load_plan_run.hpp. A crash, a sanitizer report, an exception other than cnnrt::Error, or a run past
// libFuzzer's -timeout is a bug: add the input to tests/fuzz/corpus (unit_tests replays it) and fix it.
//   cmake --preset fuzz && cmake --build --preset fuzz
//   build/fuzz/bin/fuzz_load_plan -max_total_time=60 tests/fuzz/corpus     (or scripts/ci_fuzz.sh)
#include "load_plan_run.hpp"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  cnnrt::set_log_level(cnnrt::LogLevel::Off);  // refused models log warnings; keep the fuzzer's output readable
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  cnnrt::fuzzing::load_plan_run(data, size);
  return 0;
}
