#include "tessera/common/server_config.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr char kSource[] = "configs/server.yaml";

void ExpectError(const std::string& yaml, int line, const std::string& key,
                 const std::string& reason) {
  StatusOr<ServerConfig> config = ParseServerConfig(yaml, kSource);
  ASSERT_FALSE(config.ok()) << "parsed:\n" << yaml;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  std::string prefix = std::string(kSource) + ":" + std::to_string(line) + ": ";
  EXPECT_THAT(std::string(config.status().message()),
              AllOf(HasSubstr(prefix), HasSubstr(key), HasSubstr(reason)))
      << "yaml:\n"
      << yaml;
}

void ExpectDefaults(const ServerConfig& c) {
  ServerConfig d;
  EXPECT_EQ(c.grpc_address, "0.0.0.0");
  EXPECT_EQ(c.grpc_port, 8001);
  EXPECT_EQ(c.metrics_address, "0.0.0.0");
  EXPECT_EQ(c.metrics_port, 8002);
  EXPECT_EQ(c.http_port, 8000);
  EXPECT_EQ(c.http_threads, 64);
  EXPECT_EQ(c.http_idle_timeout_s, 30);
  EXPECT_EQ(c.max_grpc_message_bytes, 2147483647);
  EXPECT_FALSE(c.allow_client_shm);
  EXPECT_EQ(c.max_inflating_bytes, 0);
  EXPECT_FALSE(c.grpc_tls.enabled());
  EXPECT_FALSE(c.http_tls.enabled());
  EXPECT_EQ(c.grpc_tls.reload_secs, 60);
  EXPECT_FALSE(c.allow_log_settings);
  EXPECT_THAT(c.model_repositories, ElementsAre("configs/models"));
  EXPECT_EQ(c.model_control_mode, ModelControlMode::kPoll);
  EXPECT_TRUE(c.auto_complete_config);
  EXPECT_FALSE(c.exit_on_error);
  EXPECT_FALSE(c.strict_readiness);
  EXPECT_EQ(c.repository_poll_secs, 5);
  EXPECT_EQ(c.executor_binary, "");
  EXPECT_EQ(c.devices, "auto");
  EXPECT_EQ(c.cpu_executors, 1);
  EXPECT_EQ(c.threads_per_executor, 0);
  EXPECT_EQ(c.input_ring_bytes, 64 << 20);
  EXPECT_EQ(c.output_ring_bytes, 64 << 20);
  EXPECT_EQ(c.batches_in_flight, 2);
  EXPECT_EQ(c.inline_run_max_us, 50);
  EXPECT_EQ(c.executor_memory_limit_mb, -1);
  EXPECT_EQ(c.partition_mechanism, "auto");
  EXPECT_EQ(c.input_mirror, "auto");
  EXPECT_FALSE(c.mps_start_daemon);
  EXPECT_EQ(c.mps_pipe_directory, "");
  EXPECT_EQ(c.scheduler_policy, "triton");
  EXPECT_EQ(c.shutdown_drain_secs, 30);
  EXPECT_EQ(c.log_verbose, 0);
  EXPECT_EQ(c.trace_file, "");
  EXPECT_EQ(c.trace_level, "OFF");
  EXPECT_EQ(c.trace_rate, 1000);
  EXPECT_EQ(c.trace_count, -1);
  EXPECT_EQ(c.trace_log_frequency, 0);
  EXPECT_EQ(c.response_cache_bytes, 0);
  EXPECT_EQ(c.grpc_port, d.grpc_port);
}

TEST(ServerConfigTest, EmptyTextGivesDefaults) {
  for (const char* text : {"", "\n# only a comment\n", "grpc: {}\nlog:\n"}) {
    StatusOr<ServerConfig> c = ParseServerConfig(text, kSource);
    ASSERT_TRUE(c.ok()) << c.status();
    ExpectDefaults(*c);
  }
}

TEST(ServerConfigTest, EveryKeyOverrides) {
  StatusOr<ServerConfig> c = ParseServerConfig(R"(
grpc: { address: 127.0.0.1, port: 9001, max_message_bytes: 1048576, allow_client_shm: true }
metrics: { address: "::1", port: 0 }
http: { address: 127.0.0.2, port: -1, threads: 8, idle_timeout_s: 5 }
repository: { path: /models, control_mode: explicit, poll_secs: 2, auto_complete: false,
              exit_on_error: true, strict_readiness: true }
executors:
  binary: /opt/tessera/bin/tessera-executor
  devices: cpu
  cpu_executors: 4
  threads_per_executor: 2
  input_ring_bytes: 1048576
  output_ring_bytes: 2097152
  batches_in_flight: 3
  inline_run_max_us: 0
  memory_limit_mb: 4096
  partition_mechanism: mps
  mps: { start_daemon: true, pipe_directory: /run/tessera-mps }
scheduler: { policy: gpulet }
shutdown: { drain_secs: 0 }
log: { verbose: 2, allow_settings_rpc: true }
)",
                                               kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc_address, "127.0.0.1");
  EXPECT_EQ(c->grpc_port, 9001);
  EXPECT_EQ(c->max_grpc_message_bytes, 1048576);
  EXPECT_TRUE(c->allow_client_shm);
  EXPECT_EQ(c->metrics_address, "::1");
  EXPECT_EQ(c->metrics_port, 0);
  EXPECT_EQ(c->http_address, "127.0.0.2");
  EXPECT_EQ(c->http_port, -1);
  EXPECT_EQ(c->http_threads, 8);
  EXPECT_EQ(c->http_idle_timeout_s, 5);
  EXPECT_THAT(c->model_repositories, ElementsAre("/models"));
  EXPECT_EQ(c->model_control_mode, ModelControlMode::kExplicit);
  EXPECT_FALSE(c->auto_complete_config);
  EXPECT_TRUE(c->exit_on_error);
  EXPECT_TRUE(c->strict_readiness);
  EXPECT_EQ(c->repository_poll_secs, 2);
  EXPECT_EQ(c->executor_binary, "/opt/tessera/bin/tessera-executor");
  EXPECT_EQ(c->devices, "cpu");
  EXPECT_EQ(c->cpu_executors, 4);
  EXPECT_EQ(c->threads_per_executor, 2);
  EXPECT_EQ(c->input_ring_bytes, 1048576);
  EXPECT_EQ(c->output_ring_bytes, 2097152);
  EXPECT_EQ(c->batches_in_flight, 3);
  EXPECT_EQ(c->inline_run_max_us, 0);
  EXPECT_EQ(c->executor_memory_limit_mb, 4096);
  EXPECT_EQ(c->partition_mechanism, "mps");
  EXPECT_TRUE(c->mps_start_daemon);
  EXPECT_EQ(c->mps_pipe_directory, "/run/tessera-mps");
  EXPECT_EQ(c->scheduler_policy, "gpulet");
  EXPECT_EQ(c->shutdown_drain_secs, 0);
  EXPECT_EQ(c->log_verbose, 2);
  EXPECT_TRUE(c->allow_log_settings);
}

TEST(ServerConfigTest, PartialSectionKeepsOtherDefaults) {
  StatusOr<ServerConfig> c = ParseServerConfig("grpc:\n  port: 7000\n", kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc_port, 7000);
  EXPECT_EQ(c->grpc_address, "0.0.0.0");
  EXPECT_EQ(c->max_grpc_message_bytes, 2147483647);
}

TEST(ServerConfigTest, RepositoryPathMayListSeveralFolders) {
  StatusOr<ServerConfig> c =
      ParseServerConfig("repository:\n  path: [/models, /team/models]\n", kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_THAT(c->model_repositories, ElementsAre("/models", "/team/models"));
  ExpectError("repository:\n  path: []\n", 2, "repository.path", "lists no folder");
  ExpectError("repository:\n  path: [/models, {a: 1}]\n", 2, "repository.path[1]", "");
  c = ParseServerConfig("repository:\n  config_name: h100\n", kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model_config_name, "h100");
  ExpectError("repository:\n  config_name: ../h100\n", 2, "repository.config_name",
              "is not a config name");
}

TEST(ServerConfigTest, GrpcKeepaliveCompressionAndPortReuse) {
  StatusOr<ServerConfig> c = ParseServerConfig(
      "grpc:\n  keepalive: {time_ms: 60000, permit_without_calls: true}\n  reuse_port: true\n"
      "  response_compression: low\nhttp: {reuse_port: true}\n",
      kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->grpc_keepalive.time_ms, 60000);
  EXPECT_EQ(c->grpc_keepalive.permit_without_calls, 1);
  EXPECT_EQ(c->grpc_keepalive.timeout_ms, -1);  // not given: gRPC's default
  EXPECT_TRUE(c->grpc_reuse_port);
  EXPECT_TRUE(c->http_reuse_port);
  EXPECT_EQ(c->grpc_response_compression, "low");
  ExpectError("grpc:\n  keepalive: {time_msec: 1}\n", 2, "grpc.keepalive.time_msec", "unknown key");
  ExpectError("grpc:\n  response_compression: max\n", 2, "grpc.response_compression", "max");
}

TEST(ServerConfigTest, UnknownKeys) {
  ExpectError("grpc: { port: 1 }\ngrcp: { port: 2 }\n", 2, "grcp", "unknown key");
  ExpectError("log:\n  verbose: 1\n  level: info\n", 3, "log.level", "unknown key");
  ExpectError("executors:\n  devices: cpu\n  device: gpu\n", 3, "executors.device", "unknown key");
  ExpectError("executors:\n  mps:\n    start: true\n", 3, "executors.mps.start", "unknown key");
  ExpectError("log: { verbose: 1 }\nlog: { verbose: 2 }\n", 2, "log",
              "duplicate key (first at line 1)");
}

TEST(ServerConfigTest, TlsSections) {
  StatusOr<ServerConfig> c = ParseServerConfig(R"(
grpc:
  tls: { cert: s.pem, key: s.key, client_ca: ca.pem, reload_secs: 5 }
http:
  tls: { cert: h.pem, key: h.key, client_ca: hca.pem }
)",
                                               kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->grpc_tls.enabled());
  EXPECT_EQ(c->grpc_tls.cert, "s.pem");
  EXPECT_EQ(c->grpc_tls.key, "s.key");
  EXPECT_EQ(c->grpc_tls.client_ca, "ca.pem");
  EXPECT_EQ(c->grpc_tls.reload_secs, 5);
  EXPECT_EQ(c->http_tls.cert, "h.pem");
  EXPECT_EQ(c->http_tls.key, "h.key");
  EXPECT_EQ(c->http_tls.client_ca, "hca.pem");
  EXPECT_EQ(c->http_tls.reload_secs, 60);

  ExpectError("grpc:\n  tls:\n    cert: s.pem\n", 3, "grpc.tls.key",
              "must be set too when grpc.tls.cert is");
  ExpectError("grpc:\n  tls:\n    key: s.key\n", 3, "grpc.tls.cert",
              "must be set too when grpc.tls.key is");
  ExpectError("grpc:\n  tls:\n    client_ca: ca.pem\n", 3, "grpc.tls.cert",
              "must be set too when grpc.tls.client_ca is");
  ExpectError("grpc:\n  tls:\n    reload_secs: 0\n", 3, "grpc.tls.reload_secs",
              "must be 1..86400, got 0");
  ExpectError("http:\n  tls:\n    client_ca: ca.pem\n", 3, "http.tls.cert",
              "must be set too when http.tls.client_ca is");
  ExpectError("http:\n  tls:\n    reload_secs: 0\n", 3, "http.tls.reload_secs",
              "must be 1..86400, got 0");
}

TEST(ServerConfigTest, RestrictedSections) {
  const std::string secret = ::testing::TempDir() + "/restricted-value";
  std::ofstream(secret) << "from-a-file\r\n";
  StatusOr<ServerConfig> c = ParseServerConfig(R"(
grpc:
  restricted:
    - { apis: [model-repository, logging], header: Admin-Key, value: "a:b=c" }
    - { apis: [inference], header: infer_key, value_file: )" +
                                                   secret + R"( }
)",
                                               kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->grpc_restricted.size(), 2u);
  EXPECT_THAT(c->grpc_restricted[0].apis,
              ElementsAre(ApiGroup::kModelRepository, ApiGroup::kLogging));
  EXPECT_EQ(c->grpc_restricted[0].header, "admin-key");  // lower-cased
  EXPECT_EQ(c->grpc_restricted[0].value, "a:b=c");
  EXPECT_THAT(c->grpc_restricted[1].apis, ElementsAre(ApiGroup::kInference));
  EXPECT_EQ(c->grpc_restricted[1].value, "from-a-file");  // the line end dropped
  EXPECT_TRUE(c->http_restricted.empty());

  ExpectError("http:\n  restricted:\n    - {header: k, value: v}\n", 3, "http.restricted[0]",
              "missing");
  ExpectError("http:\n  restricted:\n    - {apis: [], header: k, value: v}\n", 3,
              "http.restricted[0].apis", "lists no API");
  ExpectError("http:\n  restricted:\n    - {apis: [admin], header: k, value: v}\n", 3,
              "http.restricted[0].apis[0]", "expected one of health, metadata, inference");
  ExpectError("http:\n  restricted:\n    - {apis: [trace], header: \"a b\", value: v}\n", 3,
              "http.restricted[0].header", "\"a b\" is not a header name");
  ExpectError("http:\n  restricted:\n    - {apis: [trace], header: k}\n", 3, "http.restricted[0]",
              "needs one of value and value_file");
  ExpectError("http:\n  restricted:\n    - {apis: [trace], header: k, value: \"caf\xc3\xa9\"}\n", 3,
              "http.restricted[0].value", "holds a character other than printable ASCII");
  ExpectError("http:\n  restricted:\n    - {apis: [trace], header: k, value: v, extra: 1}\n", 3,
              "http.restricted[0].extra", "unknown key");
  StatusOr<ServerConfig> twice = ParseServerConfig(
      "grpc:\n  restricted:\n    - {apis: [trace, logging], header: a, value: v}\n"
      "    - {apis: [logging], header: b, value: w}\n",
      kSource);
  EXPECT_THAT(twice.status().message(),
              HasSubstr("configs/server.yaml:2: grpc.restricted: logging is restricted twice"));
}

TEST(ServerConfigTest, RestrictedApisFlag) {
  StatusOr<RestrictedApis> group =
      ParseRestrictedApisFlag("shared-memory,statistics:X-Admin=k=v:1", "--http-restricted-api");
  ASSERT_TRUE(group.ok()) << group.status();
  EXPECT_THAT(group->apis, ElementsAre(ApiGroup::kSharedMemory, ApiGroup::kStatistics));
  EXPECT_EQ(group->header, "x-admin");
  EXPECT_EQ(group->value, "k=v:1");

  auto message = [](std::string_view text) {
    return std::string(ParseRestrictedApisFlag(text, "--f").status().message());
  };
  EXPECT_THAT(message("inference"), HasSubstr("--f \"inference\": no ':' after the APIs"));
  EXPECT_THAT(message("inference:k"), HasSubstr("no '=' between the header and its value"));
  EXPECT_THAT(message("inference,,trace:k=v"), HasSubstr("unknown API \"\""));
  EXPECT_THAT(message(":k=v"), HasSubstr("unknown API \"\""));
  EXPECT_THAT(message("inference:=v"), HasSubstr("the header is empty"));
  EXPECT_THAT(message("inference:k=\x01"), HasSubstr("the value holds a character"));
  EXPECT_THAT(message("inference: k=v"), HasSubstr("the header \" k\" is not a header name"));
  EXPECT_THAT(message("inference:k= v"), HasSubstr("the value starts or ends with a space"));
  // The value is a secret: never in a message.
  EXPECT_THAT(message("bogus:k=TOPSECRET"),
              AllOf(HasSubstr("\"bogus:k=...\""), Not(HasSubstr("TOPSECRET"))));

  EXPECT_TRUE(CheckRestrictedApis({*group}, "--f").ok());
  EXPECT_THAT(CheckRestrictedApis({*group, *group}, "--f").message(),
              HasSubstr("--f: shared-memory is restricted twice"));
  EXPECT_EQ(ApiGroupName(ApiGroup::kModelRepository), "model-repository");
}

TEST(ServerConfigTest, WrongTypesAndRanges) {
  ExpectError("grpc:\n  port: http\n", 2, "grpc.port", "expected an integer, got \"http\"");
  ExpectError("grpc:\n  port: 70000\n", 2, "grpc.port", "must be 0..65535, got 70000");
  ExpectError("grpc:\n  max_message_bytes: 4294967296\n", 2, "grpc.max_message_bytes",
              "must be 1..2147483647");
  ExpectError("grpc:\n  max_inflating_bytes: -1\n", 2, "grpc.max_inflating_bytes",
              "must be >= 0, got -1");
  ExpectError("http:\n  port: -2\n", 2, "http.port", "must be -1..65535, got -2");
  ExpectError("http:\n  threads: 0\n", 2, "http.threads", "must be 1..4096, got 0");
  ExpectError("http:\n  idle_timeout_s: 0\n", 2, "http.idle_timeout_s", "must be 1..86400, got 0");
  ExpectError("grpc: 8001\n", 1, "grpc", "expected a map, got \"8001\"");
  ExpectError("grpc:\n  address: [a, b]\n", 2, "grpc.address", "expected a string, got a list");
  ExpectError("repository:\n  poll_secs: 0\n", 2, "repository.poll_secs", "must be >= 1, got 0");
  ExpectError("executors:\n  cpu_executors: 0\n", 2, "executors.cpu_executors",
              "must be >= 1, got 0");
  ExpectError("executors:\n  input_ring_bytes: 64\n", 2, "executors.input_ring_bytes",
              "must be >= 4096");
  ExpectError("executors:\n  inline_run_max_us: -5\n", 2, "executors.inline_run_max_us",
              "must be 0..1000000, got -5");
  ExpectError("executors:\n  memory_limit_mb: -2\n", 2, "executors.memory_limit_mb",
              "got -2");
  ExpectError("shutdown:\n  drain_secs: -1\n", 2, "shutdown.drain_secs", "must be >= 0, got -1");
  ExpectError("- grpc\n", 1, "", "expected a map, got a list");
  ExpectError("executors:\n  mps:\n    start_daemon: maybe\n", 3, "executors.mps.start_daemon",
              "maybe");
  ExpectError("executors:\n  mps: on\n", 2, "executors.mps", "expected a map");
}

TEST(ServerConfigTest, BadEnumValues) {
  ExpectError("repository:\n  control_mode: watch\n", 2, "repository.control_mode",
              "expected one of none, poll, explicit, got \"watch\"");
  ExpectError("executors:\n  devices: tpu\n", 2, "executors.devices",
              "expected one of auto, cpu, gpu");
  ExpectError("executors:\n  partition_mechanism: mig\n", 2, "executors.partition_mechanism",
              "expected one of auto, mps, green, none");
  ExpectError("executors:\n  input_mirror: gpu\n", 2, "executors.input_mirror",
              "expected one of auto, host, off");
  ExpectError("scheduler:\n  policy: fifo\n", 2, "scheduler.policy",
              "expected one of gpulet, temporal, spatial, triton");
}

TEST(ServerConfigTest, TraceSection) {
  StatusOr<ServerConfig> c = ParseServerConfig(
      "trace:\n  file: /tmp/t.json\n  level: TIMESTAMPS\n  rate: 10\n  count: 100\n"
      "  log_frequency: 50\n",
      kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trace_file, "/tmp/t.json");
  EXPECT_EQ(c->trace_level, "TIMESTAMPS");
  EXPECT_EQ(c->trace_rate, 10);
  EXPECT_EQ(c->trace_count, 100);
  EXPECT_EQ(c->trace_log_frequency, 50);
  ExpectError("trace:\n  level: TENSOR\n", 2, "trace.level",
              "must be OFF, TIMESTAMPS or TENSORS (or both of the last two), got \"TENSOR\"");
  ExpectError("trace:\n  level: [OFF, TENSORS]\n", 2, "trace.level",
              "OFF cannot be named beside another level");
  for (const char* both : {"[TENSORS, TIMESTAMPS]", "\"TIMESTAMPS, TENSORS\""}) {
    StatusOr<ServerConfig> levels = ParseServerConfig(
        std::string("trace: {file: /tmp/t.json, level: ") + both + "}\n", kSource);
    ASSERT_TRUE(levels.ok()) << levels.status();
    EXPECT_EQ(levels->trace_level, "TIMESTAMPS,TENSORS") << both;
  }
  ExpectError("trace:\n  rate: -1\n", 2, "trace.rate", "must be >= 0, got -1");
  ExpectError("trace:\n  count: -2\n", 2, "trace.count", "got -2");
  StatusOr<ServerConfig> no_file = ParseServerConfig("trace: { level: TIMESTAMPS }\n", kSource);
  ASSERT_FALSE(no_file.ok());
  EXPECT_NE(no_file.status().message().find("trace level TIMESTAMPS needs a trace file"),
            std::string::npos)
      << no_file.status();
}

TEST(ServerConfigTest, TraceOpenTelemetry) {
  StatusOr<ServerConfig> c = ParseServerConfig(
      "trace:\n"
      "  mode: opentelemetry\n"
      "  level: TIMESTAMPS\n"
      "  opentelemetry:\n"
      "    url: https://collector:4318/v1/traces\n"
      "    resource: {service.name: tessera-prod, team: search}\n"
      "    headers: {x-api-key: secret}\n"
      "    bsp_schedule_delay: 250\n",
      kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->trace_mode, "opentelemetry");
  EXPECT_EQ(c->trace_otel.url, "https://collector:4318/v1/traces");
  ASSERT_EQ(c->trace_otel.resource.size(), 2u);
  EXPECT_EQ(c->trace_otel.resource[1].first, "team");
  ASSERT_EQ(c->trace_otel.headers.size(), 1u);
  EXPECT_EQ(c->trace_otel.headers[0].second, "secret");
  EXPECT_EQ(c->trace_otel.bsp_schedule_delay_ms, 250);
  EXPECT_FALSE(c->trace_otel.bsp_max_queue_size.has_value());

  ExpectError("trace:\n  mode: zipkin\n", 2, "trace.mode", "triton, opentelemetry");
  ExpectError("trace:\n  mode: opentelemetry\n  opentelemetry:\n    batch: 5\n", 4,
              "trace.opentelemetry.batch", "");
  ExpectError("trace:\n  mode: opentelemetry\n  opentelemetry:\n    bsp_max_queue_size: 0\n", 4,
              "trace.opentelemetry.bsp_max_queue_size", "got 0");
  EXPECT_THAT(
      std::string(ParseServerConfig("trace: {mode: opentelemetry, level: TENSORS}\n", kSource)
                      .status()
                      .message()),
      HasSubstr("mode opentelemetry records TIMESTAMPS only"));
  EXPECT_THAT(std::string(ParseServerConfig("trace: {opentelemetry: {url: 'http://x'}}\n", kSource)
                              .status()
                              .message()),
              HasSubstr("need trace mode opentelemetry"));
  // No trace file needed in mode opentelemetry.
  EXPECT_TRUE(ParseServerConfig("trace: {mode: opentelemetry, level: TIMESTAMPS}\n", kSource).ok());
}

TEST(ServerConfigTest, ResponseCache) {
  StatusOr<ServerConfig> c = ParseServerConfig("response_cache: {size_bytes: 1048576}\n", kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->response_cache_bytes, 1048576);
  EXPECT_THAT(
      std::string(
          ParseServerConfig("response_cache: {size_bytes: -1}\n", kSource).status().message()),
      HasSubstr("configs/server.yaml:1: response_cache.size_bytes"));
  EXPECT_EQ(ParseCacheConfig("local,size=4096").value(), 4096);
  for (const char* bad :
       {"local,size=", "local,size=-3", "redis,host=x", "local", "local,size=1k"}) {
    StatusOr<int64_t> bytes = ParseCacheConfig(bad);
    ASSERT_FALSE(bytes.ok()) << bad;
    EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("expected local,size=<bytes>"));
  }
}

TEST(ServerConfigTest, LatencyMetrics) {
  StatusOr<ServerConfig> c = ParseServerConfig(
      "metrics: {counter_latencies: false, summary_latencies: true, summary_quantiles: "
      "'0.5:0.05, 0.999:0.001'}\n",
      kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->metrics_counter_latencies);
  EXPECT_TRUE(c->metrics_summary_latencies);
  ASSERT_EQ(c->metrics_summary_quantiles.size(), 2u);
  EXPECT_EQ(c->metrics_summary_quantiles[0].quantile, 0.5);
  EXPECT_EQ(c->metrics_summary_quantiles[1].error, 0.001);
  EXPECT_THAT(std::string(ParseServerConfig("metrics:\n  summary_quantiles: '0.5:x'\n", kSource)
                              .status()
                              .message()),
              AllOf(HasSubstr("configs/server.yaml:2: metrics.summary_quantiles"),
                    HasSubstr("summary quantile \"0.5:x\": the error must be")));

  EXPECT_EQ(ParseSummaryQuantiles("0.5:0.05,0.9:0.01,0.95:0.001,0.99:0.001,0.999:0.001")->size(),
            DefaultSummaryQuantiles().size());
  for (const auto& [bad, why] : std::vector<std::pair<const char*, const char*>>{
           {"", "no ':'"},
           {"0.5", "no ':'"},
           {"0:0.1", "between 0 and 1"},
           {"1:0.1", "between 0 and 1"},
           {"nan:0.1", "between 0 and 1"},
           {"0.5:0", "the error must be a number in (0, 0.5]"},
           {"0.9:0.2", "the error must be a number in (0, 0.1"},
           {"0.1:0.2", "the error must be a number in (0, 0.1]"},
           {"0.5:0.1,0.5:0.2", "already listed"},
       }) {
    StatusOr<std::vector<SummaryQuantileSpec>> parsed = ParseSummaryQuantiles(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(std::string(parsed.status().message()), HasSubstr(why)) << bad;
  }
}

TEST(ServerConfigTest, SyntaxError) {
  StatusOr<ServerConfig> c = ParseServerConfig("grpc:\n  port: [1, 2\nlog: {}\n", kSource);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(c.status().message()),
              AllOf(HasSubstr(kSource), HasSubstr("YAML syntax error")));
}

TEST(ServerConfigTest, ControlModeNames) {
  for (ModelControlMode mode :
       {ModelControlMode::kNone, ModelControlMode::kPoll, ModelControlMode::kExplicit}) {
    StatusOr<ModelControlMode> parsed = ParseModelControlMode(ModelControlModeName(mode));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, mode);
  }
  StatusOr<ModelControlMode> bad = ParseModelControlMode("POLL");
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("none, poll, explicit"));
}

TEST(ServerConfigTest, LoadFile) {
  EXPECT_EQ(LoadServerConfigFile("/nonexistent/tessera/server.yaml").status().code(),
            absl::StatusCode::kNotFound);
  std::string path = ::testing::TempDir() + "/tessera_server_config_test.yaml";
  {
    std::ofstream out(path);
    out << "log:\n  verbose: loud\n";
  }
  StatusOr<ServerConfig> c = LoadServerConfigFile(path);
  ASSERT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr(path + ":2: log.verbose"));
}

// The shipped configs/server.yaml must parse and hold exactly the built-in defaults.
TEST(ServerConfigTest, ShippedFileHoldsDefaults) {
  StatusOr<ServerConfig> c = LoadServerConfigFile(TESSERA_SOURCE_DIR "/configs/server.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ExpectDefaults(*c);
}

TEST(ServerConfigTest, SchedulerControlLoopKeys) {
  StatusOr<ServerConfig> c = ParseServerConfig(
      "scheduler:\n  policy: gpulet\n  profiles: profiles/cpu-2core\n  epoch_secs: 2.5\n"
      "  rate_window_ms: 250\n  slo_drop: false\n",
      kSource);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->scheduler_profiles, "profiles/cpu-2core");
  EXPECT_DOUBLE_EQ(c->scheduler_epoch_secs, 2.5);
  EXPECT_EQ(c->scheduler_rate_window_ms, 250);
  EXPECT_FALSE(c->scheduler_slo_drop);

  StatusOr<ServerConfig> defaults = ParseServerConfig("", kSource);
  ASSERT_TRUE(defaults.ok());
  EXPECT_DOUBLE_EQ(defaults->scheduler_epoch_secs, 20);
  EXPECT_EQ(defaults->scheduler_rate_window_ms, 500);
  EXPECT_TRUE(defaults->scheduler_slo_drop);

  StatusOr<ServerConfig> window_past_epoch =
      ParseServerConfig("scheduler:\n  epoch_secs: 1\n  rate_window_ms: 2000\n", kSource);
  ASSERT_FALSE(window_past_epoch.ok());
  EXPECT_NE(window_past_epoch.status().message().find("rate_window_ms"), std::string::npos);
  ExpectError("scheduler:\n  epoch_secs: 0\n", 2, "scheduler.epoch_secs", "");
}

}  // namespace
}  // namespace tessera
