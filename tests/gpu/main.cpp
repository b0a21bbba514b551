// Runner for the GPU test cases. Without a usable CUDA device every case reports "skipped" to CTest
// (exit code 77, SKIP_RETURN_CODE) with the reason, so the suite passes visibly on machines without a GPU.
// Listing test cases (doctest_discover_tests at build time) never touches CUDA.
//
// A crash (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) prints the last check point the tests recorded
// (testing::note_check_point), the faulting instruction and the mappings (resolve with addr2line against the
// same binary) and a raw backtrace, then dies with the signal: on the GPU machine there is no debugger. doctest's own signal
// handling is off so that it does not replace ours.
#define DOCTEST_CONFIG_IMPLEMENT
#define DOCTEST_CONFIG_NO_POSIX_SIGNALS
#include <doctest/doctest.h>
#include <execinfo.h>
#include <fcntl.h>
#include <ucontext.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>

#include "gpu_test_util.hpp"
#include "runtime/device.hpp"

namespace cnnrt::testing {
char g_check_point[512] = "(none)";
bool g_skipped = false;
}

namespace {

void write_str(const char* s) { (void)!write(STDERR_FILENO, s, std::strlen(s)); }

void write_hex(uint64_t v) {
  char buf[19] = "0x";
  for (int i = 0; i < 16; ++i) buf[2 + i] = "0123456789abcdef"[(v >> (60 - 4 * i)) & 0xF];
  buf[18] = '\0';
  write_str(buf);
}

// Runs on its own stack (sigaltstack), so that a stack overflow can still be reported. Prints the
// faulting address, the instruction and stack pointers, and the process's executable mappings: with
// them, `addr2line -e BINARY OFFSET` here finds the line.
extern "C" void on_fatal_signal(int sig, siginfo_t* info, void* context) {
  const auto* uc = static_cast<const ucontext_t*>(context);
  write_str("\nFATAL SIGNAL ");
  write_str(strsignal(sig));
  write_str(" during check point: ");
  write_str(cnnrt::testing::g_check_point);
  write_str("\nfault address ");
  write_hex(reinterpret_cast<uint64_t>(info->si_addr));
  write_str(" rip ");
  write_hex(static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RIP]));
  write_str(" rsp ");
  write_hex(static_cast<uint64_t>(uc->uc_mcontext.gregs[REG_RSP]));
  write_str("\nmappings:\n");
  const int fd = open("/proc/self/maps", O_RDONLY);
  if (fd >= 0) {
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0) (void)!write(STDERR_FILENO, buf, static_cast<size_t>(n));
    close(fd);
  }
  write_str("backtrace:\n");
  void* frames[64];
  const int count = backtrace(frames, 64);
  backtrace_symbols_fd(frames, count, STDERR_FILENO);
  signal(sig, SIG_DFL);
  raise(sig);
}

void install_crash_report() {
  static char alt_stack[1 << 16];
  stack_t ss{};
  ss.ss_sp = alt_stack;
  ss.ss_size = sizeof alt_stack;
  sigaltstack(&ss, nullptr);
  struct sigaction sa{};
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) sigaction(sig, &sa, nullptr);
}

}  // namespace

int main(int argc, char** argv) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strstr(argv[i], "list-test") || std::strstr(argv[i], "-ltc") || std::strstr(argv[i], "help")) {
      listing = true;
    }
  }
  std::string why;
  if (!listing && !cnnrt::runtime::cuda_device_available(&why)) {
    std::printf("SKIPPED: GPU test cases need a CUDA device: %s\n", why.c_str());
    return 77;
  }
  void* warm[1];
  backtrace(warm, 1);  // loads libgcc's unwinder now: the first call allocates, which a crashed heap may not allow
  install_crash_report();
  doctest::Context context(argc, argv);
  const int result = context.run();
  return result == 0 && cnnrt::testing::g_skipped ? 77 : result;
}
