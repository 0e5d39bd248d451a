// The real SystemProbe and CommandRunner, and the CPU-list helpers.
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <set>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "partition/cuda_driver.h"
#include "tessera/partition/partition.h"

extern char** environ;

namespace tessera::partition {
namespace {

class RealSystemProbe : public SystemProbe {
 public:
  std::vector<int> AllowedCpus() override {
    cpu_set_t set;
    CPU_ZERO(&set);
    std::vector<int> cpus;
    if (sched_getaffinity(0, sizeof(set), &set) != 0) {
      // Cannot happen for our own pid; fall back to "every online core".
      long n = sysconf(_SC_NPROCESSORS_ONLN);
      for (int i = 0; i < std::max(1L, n); ++i) cpus.push_back(i);
      return cpus;
    }
    for (int i = 0; i < CPU_SETSIZE; ++i) {
      if (CPU_ISSET(i, &set)) cpus.push_back(i);
    }
    return cpus;
  }

  DriverFacts Driver() override {
    DriverFacts facts;
    StatusOr<std::shared_ptr<const CudaDriver>> loaded = LoadCudaDriver();
    if (!loaded.ok()) {
      facts.no_gpu_reason = std::string(loaded.status().message());
      return facts;
    }
    const CudaDriver& cu = **loaded;
    cu.cuDriverGetVersion(&facts.driver_version);
    int count = 0;
    if (int r = cu.cuDeviceGetCount(&count); r != 0) {
      facts.no_gpu_reason = cu.Error("cuDeviceGetCount", r);
      return facts;
    }
    for (int i = 0; i < count; ++i) {
      int dev = 0;
      GpuFacts gpu;
      if (int r = cu.cuDeviceGet(&dev, i); r != 0) {
        facts.gpus.clear();
        facts.no_gpu_reason = cu.Error("cuDeviceGet", r);
        return facts;
      }
      cu.cuDeviceGetAttribute(&gpu.sm_count, kCuAttrMultiprocessorCount, dev);
      cu.cuDeviceGetAttribute(&gpu.compute_major, kCuAttrComputeCapabilityMajor, dev);
      cu.cuDeviceGetAttribute(&gpu.compute_minor, kCuAttrComputeCapabilityMinor, dev);
      facts.gpus.push_back(WithGreenGranularity(gpu));
    }
    if (count == 0) facts.no_gpu_reason = "the CUDA driver reports 0 devices";
    return facts;
  }

  bool MpsDaemonRunning(const std::string& pipe_directory) override {
    // A stale socket file survives a crashed daemon, so connect rather than only stat.
    std::string path = pipe_directory + "/control";
    struct stat st;
    if (stat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    if (path.size() >= sizeof(addr.sun_path)) return false;
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    // The daemon's socket is not SOCK_STREAM (seen on an H100 with driver 580: a stream connect
    // fails there while the daemon answers), so each type is tried; EPROTOTYPE also means a
    // listener is there. A stale file refuses every one (ECONNREFUSED).
    for (int type : {SOCK_SEQPACKET, SOCK_STREAM, SOCK_DGRAM}) {
      int fd = socket(AF_UNIX, type | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      const int error = errno;
      close(fd);
      if (ok || error == EPROTOTYPE) return true;
    }
    return false;
  }

  std::string FindOnPath(const std::string& name) override {
    if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
    const char* path = getenv("PATH");
    for (absl::string_view dir : absl::StrSplit(path ? path : "/usr/bin:/bin", ':')) {
      if (dir.empty()) continue;
      std::string candidate = absl::StrCat(dir, "/", name);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
    return "";
  }
};

class RealCommandRunner : public CommandRunner {
 public:
  Status Run(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env,
             const std::string& stdin_text) override {
    if (argv.empty()) return absl::InvalidArgumentError("empty command");
    const std::string shown = absl::StrJoin(argv, " ");
    // Everything exec needs is built before fork: only async-signal-safe calls in the child.
    std::vector<std::string> env_strings;
    std::set<std::string> overridden;
    for (const std::string& kv : extra_env) overridden.insert(kv.substr(0, kv.find('=')));
    for (char** e = environ; *e != nullptr; ++e) {
      std::string kv(*e);
      if (!overridden.count(kv.substr(0, kv.find('=')))) env_strings.push_back(kv);
    }
    env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
    std::vector<char*> envp;
    for (std::string& kv : env_strings) envp.push_back(kv.data());
    envp.push_back(nullptr);
    std::vector<std::string> args = argv;
    std::vector<char*> argp;
    for (std::string& a : args) argp.push_back(a.data());
    argp.push_back(nullptr);

    // A socket rather than a pipe so a command that exits unread gives EPIPE, not SIGPIPE.
    int in[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, in) != 0) {
      return absl::InternalError(absl::StrCat("pipe for ", shown, ": ", strerror(errno)));
    }
    pid_t pid = fork();
    if (pid < 0) {
      close(in[0]);
      close(in[1]);
      return absl::InternalError(absl::StrCat("fork for ", shown, ": ", strerror(errno)));
    }
    if (pid == 0) {
      // Without input, stdin is /dev/null, as from a shell: a daemon (nvidia-cuda-mps-control -d)
      // must not see a socket there. Nothing of this process's but stdio reaches the command.
      int null_fd = stdin_text.empty() ? open("/dev/null", O_RDONLY) : -1;
      dup2(null_fd >= 0 ? null_fd : in[0], STDIN_FILENO);
      close_range(3, ~0U, 0);
      execve(argp[0], argp.data(), envp.data());
      _exit(127);
    }
    close(in[0]);
    if (!stdin_text.empty()) {
      ssize_t ignored = send(in[1], stdin_text.data(), stdin_text.size(), MSG_NOSIGNAL);
      (void)ignored;
    }
    close(in[1]);

    constexpr auto kTimeout = std::chrono::seconds(10);
    const auto deadline = std::chrono::steady_clock::now() + kTimeout;
    int status = 0;
    while (true) {
      pid_t r = waitpid(pid, &status, WNOHANG);
      if (r == pid) break;
      if (r < 0) return absl::InternalError(absl::StrCat("waitpid for ", shown, " failed"));
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        return absl::DeadlineExceededError(absl::StrCat(shown, " did not finish in 10 s"));
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return absl::OkStatus();
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127) {
      return absl::UnavailableError(absl::StrCat(shown, ": cannot execute ", argv[0]));
    }
    return absl::InternalError(
        absl::StrCat(shown, WIFEXITED(status) ? " exited with status " : " was killed by signal ",
                     WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status)));
  }
};

}  // namespace

std::unique_ptr<SystemProbe> CreateSystemProbe() { return std::make_unique<RealSystemProbe>(); }
std::unique_ptr<CommandRunner> CreateCommandRunner() {
  return std::make_unique<RealCommandRunner>();
}

std::string_view MechanismName(Mechanism mechanism) {
  switch (mechanism) {
    case Mechanism::kCpu:
      return "cpu";
    case Mechanism::kMps:
      return "mps";
    case Mechanism::kGreen:
      return "green";
    case Mechanism::kNone:
      return "none";
  }
  return "unknown";
}

GpuFacts WithGreenGranularity(GpuFacts facts) {
  if (facts.compute_major >= 9) {
    facts.green_min_sms = facts.green_sm_step = 8;
  } else if (facts.compute_major == 8) {
    facts.green_min_sms = 4;
    facts.green_sm_step = 2;
  } else if (facts.compute_major == 7) {
    facts.green_min_sms = facts.green_sm_step = 2;
  } else {
    facts.green_min_sms = facts.green_sm_step = 1;
  }
  return facts;
}

std::string DriverVersionString(int driver_version) {
  return absl::StrCat(driver_version / 1000, ".", (driver_version % 1000) / 10);
}

StatusOr<std::vector<int>> ParseCpuList(std::string_view text) {
  std::set<int> cpus;
  const std::string whole(text);
  auto bad = [&](absl::string_view part, const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("bad CPU list \"", whole, "\": \"", part, "\" ",
                                                   why, " (expected e.g. 0,2,4-7)"));
  };
  if (whole.empty()) return bad("", "is empty");
  for (absl::string_view part : absl::StrSplit(whole, ',')) {
    std::vector<absl::string_view> ends = absl::StrSplit(part, absl::MaxSplits('-', 1));
    int first = 0;
    int last = 0;
    if (!absl::SimpleAtoi(ends[0], &first) || ends[0].empty() || ends[0][0] == '+' ||
        ends[0][0] == '-') {
      return bad(part, "is not a core number or range");
    }
    last = first;
    if (ends.size() == 2 && (!absl::SimpleAtoi(ends[1], &last) || ends[1].empty() ||
                             ends[1][0] == '+' || ends[1][0] == '-')) {
      return bad(part, "is not a core number or range");
    }
    if (first < 0 || last < first) return bad(part, "is not an ascending range of cores >= 0");
    if (last >= CPU_SETSIZE) return bad(part, "names a core beyond the kernel's CPU_SETSIZE");
    for (int c = first; c <= last; ++c) cpus.insert(c);
  }
  return std::vector<int>(cpus.begin(), cpus.end());
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    parts.push_back(j == i ? absl::StrCat(sorted[i]) : absl::StrCat(sorted[i], "-", sorted[j]));
    i = j + 1;
  }
  return absl::StrJoin(parts, ",");
}

Status PinCurrentThreadToCpus(const std::vector<int>& cpus) {
  if (cpus.empty()) return absl::InvalidArgumentError("empty CPU list");
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  sched_getaffinity(0, sizeof(allowed), &allowed);
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> refused;
  for (int c : cpus) {
    if (c < 0 || c >= CPU_SETSIZE || !CPU_ISSET(c, &allowed)) {
      refused.push_back(c);
    } else {
      CPU_SET(c, &set);
    }
  }
  if (!refused.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("cannot pin to core(s) ", FormatCpuList(refused),
                                                   ": this process may only use ",
                                                   FormatCpuList([&] {
                                                     std::vector<int> v;
                                                     for (int i = 0; i < CPU_SETSIZE; ++i)
                                                       if (CPU_ISSET(i, &allowed)) v.push_back(i);
                                                     return v;
                                                   }())));
  }
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sched_setaffinity(", FormatCpuList(cpus), "): ", strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace tessera::partition
