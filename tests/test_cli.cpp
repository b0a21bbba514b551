// The built `cnnrt` tool's shared conventions: --version and the build commit, global options before or after
// the command's name, --json FILE / --json - on every command that has it, and --help against docs/cli.md.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "cnnrt/cnnrt.hpp"
#include "image_test_util.hpp"
#include "model_builder.hpp"

using cnnrt::testing::CliResult;
using cnnrt::testing::read_text;
using cnnrt::testing::run_cli;
using cnnrt::testing::ScratchDir;
using cnnrt::testing::write_file;

namespace {

const std::string source_dir = CNNRT_SOURCE_DIR;
const std::string lenet = source_dir + "/models/fashion_lenet.onnx";
const std::string boot = source_dir + "/samples/fashion_0_ankle_boot.png";
const std::string bag = source_dir + "/samples/fashion_18_bag.png";
const char* fashion_images = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
const char* fashion_labels = "/usr/share/datasets/fashion-mnist/t10k-labels-idx1-ubyte.gz";

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

std::string save_tiny_conv(const ScratchDir& dir) {
  const std::string bytes = cnnrt::testing::tiny_conv_model().bytes();
  write_file(dir.path() / "conv.onnx", std::vector<uint8_t>(bytes.begin(), bytes.end()));
  return dir / "conv.onnx";
}

// Output of a shell command, and whether it succeeded.
std::pair<bool, std::string> shell(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {false, out};
  char buffer[256];
  while (std::fgets(buffer, sizeof buffer, pipe) != nullptr) out += buffer;
  return {pclose(pipe) == 0, out};
}

// The long options (--name) that a text mentions.
std::set<std::string> long_options(const std::string& text) {
  static const std::regex option(R"((^|[^A-Za-z0-9-])(--[a-z][a-z0-9-]*[a-z0-9]))");
  std::set<std::string> found;
  for (auto it = std::sregex_iterator(text.begin(), text.end(), option); it != std::sregex_iterator(); ++it) {
    found.insert((*it)[2]);
  }
  return found;
}

}  // namespace

TEST_CASE("cnnrt::build_commit names the commit the library was built from, or says unknown") {
  const std::string commit = cnnrt::build_commit();
  REQUIRE_FALSE(commit.empty());
  CHECK(std::string(cnnrt::version()) == "0.1.0");
  if (commit == "unknown") {
    // Only a build outside a git checkout (or without git) may say so.
    CHECK_FALSE(std::filesystem::exists(source_dir + "/.git"));
    return;
  }
  // `git describe --always --dirty`: an abbreviated hash, or TAG-N-gHASH, then "-dirty" if the tree was.
  std::smatch m;
  REQUIRE_MESSAGE(std::regex_match(commit, m, std::regex(R"((?:.*-[0-9]+-g)?([0-9a-f]{4,40})(-dirty)?)")), commit);
  const auto [known, ignored] = shell("git -c safe.directory='*' -C '" + source_dir + "' cat-file -e " +
                                      m[1].str() + "^{commit} 2>/dev/null");
  (void)ignored;
  CHECK_MESSAGE(known, commit << " is not a commit of " << source_dir);
}

TEST_CASE("cnnrt --version prints the version and the build commit") {
  ScratchDir dir("cli_version");
  const CliResult r = run_cli(dir, {"--version"});
  CHECK(r.status == 0);
  CHECK(r.out == std::string("cnnrt ") + cnnrt::version() + " (commit " + cnnrt::build_commit() + ")\n");
}

TEST_CASE("global options work before and after the command's name") {
  ScratchDir dir("cli_global");
  const std::string model = save_tiny_conv(dir);

  SUBCASE("-v logs the passes' rewrites either way") {
    for (const std::vector<std::string>& args : {std::vector<std::string>{"-v", "plan", model, "--device", "cpu"},
                                                  std::vector<std::string>{"plan", "-v", model, "--device", "cpu"},
                                                  std::vector<std::string>{"plan", model, "--device", "cpu", "-v"}}) {
      const CliResult r = run_cli(dir, args);
      CHECK(r.status == 0);
      CHECK_MESSAGE(r.err.find("pass fuse_activation:") != std::string::npos, r.err);
    }
    const CliResult quiet = run_cli(dir, {"plan", model, "--device", "cpu"});
    CHECK(quiet.status == 0);
    CHECK(quiet.err.find("pass fuse_activation:") == std::string::npos);
  }
  SUBCASE("engine options before the name reach the command; after the name they win") {
    const CliResult before = run_cli(dir, {"--device", "cpu", "plan", model});
    CHECK(before.status == 0);
    CHECK(before.out.find("device: cpu\n") != std::string::npos);
    const CliResult both = run_cli(dir, {"--device", "gpu", "plan", "--device", "cpu", model});
    CHECK(both.status == 0);
    CHECK(both.out.find("device: cpu\n") != std::string::npos);
  }
  SUBCASE("--disable-pass before and after the name: both passes are skipped") {
    const CliResult all = run_cli(dir, {"plan", model, "--device", "cpu"});
    CHECK(all.out.find("fuse_activation: Conv 'conv' + Relu 'relu' -> FusedConv") != std::string::npos);
    const CliResult r = run_cli(dir, {"--disable-pass", "fuse_activation", "plan", model, "--device", "cpu",
                                      "--disable-pass", "fuse_pool"});
    CHECK(r.status == 0);
    CHECK(r.out.find("fuse_activation: disabled\n") != std::string::npos);
    CHECK(r.out.find("fuse_pool: disabled\n") != std::string::npos);
    CHECK(r.out.find(" Relu ") != std::string::npos);  // a step of its own
    const CliResult bad = run_cli(dir, {"--disable-pass", "no_such_pass", "plan", model, "--device", "cpu"});
    CHECK(bad.status == 2);
    CHECK(bad.err.find("no_such_pass") != std::string::npos);
  }
  SUBCASE("a command that loads no model refuses engine options") {
    const CliResult r = run_cli(dir, {"--device", "cpu", "ops"});
    CHECK(r.status == 2);
    CHECK(r.err.find("cnnrt ops loads no model and takes no engine option (--device)") != std::string::npos);
    CHECK(run_cli(dir, {"ops", "--device", "cpu"}).status == 2);
    const CliResult verbose = run_cli(dir, {"ops", "-v"});
    CHECK(verbose.status == 0);
    CHECK(verbose.out.find("Conv\n") != std::string::npos);
  }
}

TEST_CASE("--json FILE writes the report to FILE; --json - puts it alone on standard output") {
  ScratchDir dir("cli_json");

  SUBCASE("infer") {
    const CliResult file = run_cli(dir, {"infer", lenet, boot, bag, "--device", "cpu", "-k", "1", "--json",
                                         dir / "infer.jsonl"});
    CHECK(file.status == 0);
    const std::vector<std::string> text = lines_of(file.out);
    REQUIRE(text.size() == 2);
    CHECK(text[0].rfind(boot + ": Ankle boot ", 0) == 0);
    CHECK(file.err.find("wrote " + dir / "infer.jsonl") != std::string::npos);
    const std::vector<std::string> records = lines_of(read_text(dir / "infer.jsonl"));
    REQUIRE(records.size() == 2);
    CHECK(nlohmann::json::parse(records[0])["top"][0]["label"] == "Ankle boot");
    CHECK(nlohmann::json::parse(records[1])["top"][0]["label"] == "Bag");

    const CliResult out = run_cli(dir, {"infer", lenet, boot, bag, "--json", "-", "--device", "cpu", "-k", "1"});
    CHECK(out.status == 0);
    const std::vector<std::string> lines = lines_of(out.out);
    REQUIRE(lines.size() == 2);  // nothing but the records
    CHECK(nlohmann::json::parse(lines[0])["file"] == boot);
    CHECK(nlohmann::json::parse(lines[1])["top"][0]["label"] == "Bag");
    CHECK(out.err.find(boot + ": Ankle boot ") != std::string::npos);  // the text went to stderr
  }
  SUBCASE("eval") {
    const std::vector<std::string> args = {"eval", lenet, "--images", fashion_images, "--labels", fashion_labels,
                                           "--device", "cpu", "--limit", "50"};
    std::vector<std::string> to_file = args;
    to_file.insert(to_file.end(), {"--json", dir / "eval.json"});
    const CliResult file = run_cli(dir, to_file);
    CHECK(file.status == 0);
    CHECK(file.out.find("accuracy: ") != std::string::npos);
    const nlohmann::json report = nlohmann::json::parse(read_text(dir / "eval.json"));
    CHECK(report["count"] == 50);

    std::vector<std::string> to_stdout = args;
    to_stdout.insert(to_stdout.end(), {"--json", "-"});
    const CliResult out = run_cli(dir, to_stdout);
    CHECK(out.status == 0);
    const nlohmann::json same = nlohmann::json::parse(out.out);  // the whole of stdout is one JSON object
    CHECK(same["correct"] == report["correct"]);
    CHECK(out.err.find("accuracy: ") != std::string::npos);

    // A run that fails leaves no file behind, and no partial one.
    const std::vector<uint8_t> labels_head = {0, 0, 8, 1, 0, 0, 0, 9};  // declares 9 labels, holds none
    write_file(dir.path() / "cut-labels", labels_head);
    const CliResult failed = run_cli(dir, {"eval", lenet, "--images", fashion_images, "--labels", dir / "cut-labels",
                                           "--device", "cpu", "--json", dir / "failed.json"});
    CHECK(failed.status == 4);
    CHECK_FALSE(std::filesystem::exists(dir / "failed.json"));
    CHECK_FALSE(std::filesystem::exists(dir / "failed.json.part"));
  }
  SUBCASE("bench refuses --device cpu and an unwritable --json file before measuring") {
    const CliResult cpu = run_cli(dir, {"bench", "--suite", "small", "--device", "cpu"});
    CHECK(cpu.status == 2);
    CHECK(cpu.err.find("--device cpu") != std::string::npos);
    const CliResult unwritable = run_cli(dir, {"bench", "--suite", "small", "--json", dir / "missing/dir/b.json"});
    CHECK(unwritable.status == 4);
    CHECK(unwritable.err.find("cannot write the --json file '" + dir / "missing/dir/b.json" + "'") !=
          std::string::npos);
  }
}

TEST_CASE("docs/cli.md and --help list the same commands and options") {
  ScratchDir dir("cli_help");
  const std::string doc = read_text(source_dir + "/docs/cli.md");
  REQUIRE_FALSE(doc.empty());
  // The sections: everything before the first command's heading is about every command.
  const std::regex heading(R"(\n## `cnnrt ([a-z]+)`\n)");
  std::map<std::string, std::string> sections;
  std::string global;
  {
    std::vector<std::pair<std::string, size_t>> starts;
    for (auto it = std::sregex_iterator(doc.begin(), doc.end(), heading); it != std::sregex_iterator(); ++it) {
      starts.emplace_back((*it)[1], static_cast<size_t>(it->position()));
    }
    REQUIRE_FALSE(starts.empty());
    global = doc.substr(0, starts[0].second);
    for (size_t i = 0; i < starts.size(); ++i) {
      const size_t end = i + 1 < starts.size() ? starts[i + 1].second : doc.size();
      sections[starts[i].first] = doc.substr(starts[i].second, end - starts[i].second);
    }
  }
  const std::set<std::string> global_options = long_options(global);

  const CliResult top = run_cli(dir, {"--help"});
  REQUIRE(top.status == 0);
  std::set<std::string> listed;  // the commands --help lists
  const size_t subcommands = top.out.find("Subcommands:");
  REQUIRE(subcommands != std::string::npos);
  for (const std::string& line : lines_of(top.out.substr(subcommands))) {
    std::smatch m;
    if (std::regex_match(line, m, std::regex(R"(\s+([a-z]+)\s+.*)"))) listed.insert(m[1]);
  }
  std::set<std::string> documented;
  for (const auto& [name, text] : sections) documented.insert(name);
  CHECK(listed == documented);
  for (const std::string& option : long_options(top.out)) CHECK_MESSAGE(global_options.count(option), option);

  std::set<std::string> in_some_help = long_options(top.out);
  for (const auto& [name, text] : sections) {
    const CliResult help = run_cli(dir, {name, "--help"});
    REQUIRE(help.status == 0);
    const std::set<std::string> in_help = long_options(help.out);
    in_some_help.insert(in_help.begin(), in_help.end());
    for (const std::string& option : in_help) {
      CHECK_MESSAGE((global_options.count(option) || long_options(text).count(option)),
                    "cnnrt " << name << " --help lists " << option << ", docs/cli.md does not");
    }
    for (const std::string& option : long_options(text)) {
      CHECK_MESSAGE(in_help.count(option), "docs/cli.md gives cnnrt " << name << " " << option << ", --help does not");
    }
  }
  for (const std::string& option : global_options) {
    CHECK_MESSAGE(in_some_help.count(option), "docs/cli.md names " << option << ", which no --help lists");
  }
}
