#include "triton_flags.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace tessera::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

struct Parsed {
  ServerConfig config;
  LogSettingsUpdate log;
  std::vector<std::string> ignored;
  Status status;
};

// Parses `args` with the Triton flags beside the tessera-server flags they are checked against.
Parsed Parse(std::vector<std::string> args) {
  CLI::App app;
  int port = 0;
  std::string cache;
  bool disable = false;
  app.add_option("--http-port", port);
  app.add_option("--metrics-port", port);
  app.add_option("--cache-config", cache);
  app.add_flag("--disable-auto-complete-config", disable);
  TritonFlags flags(&app);
  args.insert(args.begin(), "tessera-server");
  std::vector<const char*> argv;
  for (const std::string& a : args) argv.push_back(a.c_str());
  Parsed parsed;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    parsed.status = absl::InvalidArgumentError(e.what());
    return parsed;
  }
  parsed.status = flags.Apply(&parsed.config, &parsed.log, &parsed.ignored);
  return parsed;
}

TEST(TritonFlagsTest, ATritonLaunchLineMapsOntoTheServerSettings) {
  Parsed p = Parse({"--strict-model-config=true",
                    "--exit-timeout-secs",
                    "7",
                    "--allow-http=false",
                    "--allow-metrics",
                    "false",
                    "--grpc-address=127.0.0.1",
                    "--http-thread-count",
                    "16",
                    "--exit-on-error=true",
                    "--strict-readiness=1",
                    "--response-cache-byte-size",
                    "4096",
                    "--log-format",
                    "ISO8601",
                    "--log-info=false",
                    "--log-file",
                    "/tmp/t.log",
                    "--model-config-name",
                    "h100"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_FALSE(p.config.auto_complete_config);
  EXPECT_EQ(p.config.shutdown_drain_secs, 7);
  EXPECT_EQ(p.config.http_port, -1);
  EXPECT_EQ(p.config.metrics_port, 0);
  EXPECT_EQ(p.config.grpc_address, "127.0.0.1");
  EXPECT_EQ(p.config.http_threads, 16);
  EXPECT_TRUE(p.config.exit_on_error);
  EXPECT_TRUE(p.config.strict_readiness);
  EXPECT_EQ(p.config.response_cache_bytes, 4096);
  EXPECT_EQ(p.config.model_config_name, "h100");
  EXPECT_EQ(p.log.format, "ISO8601");
  EXPECT_EQ(p.log.info, false);
  EXPECT_FALSE(p.log.warning.has_value());
  EXPECT_EQ(p.log.file, "/tmp/t.log");
  EXPECT_TRUE(p.ignored.empty());
}

TEST(TritonFlagsTest, FlagsNotGivenLeaveTheConfigAlone) {
  Parsed p = Parse({});
  ASSERT_TRUE(p.status.ok()) << p.status;
  const ServerConfig defaults;
  EXPECT_EQ(p.config.auto_complete_config, defaults.auto_complete_config);
  EXPECT_EQ(p.config.http_port, defaults.http_port);
  EXPECT_EQ(p.config.shutdown_drain_secs, defaults.shutdown_drain_secs);
  EXPECT_FALSE(p.config.exit_on_error);
  EXPECT_FALSE(p.log.info.has_value());
  EXPECT_FALSE(p.log.file.has_value());
}

TEST(TritonFlagsTest, TuningFlagsAreAcceptedAndNamedAsUnused) {
  Parsed p = Parse({"--pinned-memory-pool-byte-size=268435456", "--backend-config",
                    "onnxruntime,default-max-batch-size=8", "--backend-config=python,x=1",
                    "--model-load-thread-count", "4"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_THAT(p.ignored,
              ElementsAre(HasSubstr("--pinned-memory-pool-byte-size 268435456: not used"),
                          HasSubstr("--model-load-thread-count 4: not used"),
                          HasSubstr("--backend-config onnxruntime,default-max-batch-size=8 "
                                    "python,x=1: not used")));
}

TEST(TritonFlagsTest, ValuesThatCannotBeHonouredAreErrorsNamingTheFlag) {
  EXPECT_THAT(std::string(Parse({"--allow-grpc=false"}).status.message()),
              HasSubstr("--allow-grpc=false"));
  EXPECT_TRUE(Parse({"--allow-grpc=true"}).status.ok());
  EXPECT_THAT(std::string(Parse({"--strict-model-config=false", "--disable-auto-complete-config"})
                              .status.message()),
              HasSubstr("contradicts --disable-auto-complete-config"));
  EXPECT_THAT(std::string(Parse({"--allow-http=false", "--http-port", "8000"}).status.message()),
              HasSubstr("--allow-http=false contradicts --http-port"));
  EXPECT_THAT(
      std::string(
          Parse({"--response-cache-byte-size=1", "--cache-config=local,size=2"}).status.message()),
      HasSubstr("give one"));
  // Parsed by CLI11 itself: the message names the flag and the value.
  EXPECT_THAT(std::string(Parse({"--allow-http=maybe"}).status.message()), HasSubstr("maybe"));
  EXPECT_THAT(std::string(Parse({"--log-format=json"}).status.message()), HasSubstr("json"));
  EXPECT_FALSE(Parse({"--exit-timeout-secs=-1"}).status.ok());
}

TEST(TritonFlagsTest, TraceConfigKeepaliveCompressionAndPortReuseMapOntoTheSettings) {
  Parsed p = Parse({"--trace-config",
                    "triton,file=/tmp/trace.json",
                    "--trace-config",
                    "level=TIMESTAMPS",
                    "--trace-config=rate=10",
                    "--trace-config",
                    "count=50",
                    "--trace-config",
                    "triton,log-frequency=5",
                    "--trace-config",
                    "mode=triton",
                    "--grpc-keepalive-time",
                    "60000",
                    "--grpc-keepalive-timeout=5000",
                    "--grpc-keepalive-permit-without-calls=true",
                    "--grpc-http2-max-pings-without-data",
                    "0",
                    "--grpc-http2-min-recv-ping-interval-without-data",
                    "10000",
                    "--grpc-http2-max-ping-strikes",
                    "3",
                    "--grpc-infer-response-compression-level",
                    "high",
                    "--reuse-grpc-port=true",
                    "--reuse-http-port",
                    "1",
                    "--model-namespacing=false",
                    "--metrics-config",
                    "summary_latencies=true",
                    "--rate-limit",
                    "execution_count"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.config.trace_file, "/tmp/trace.json");
  EXPECT_EQ(p.config.trace_level, "TIMESTAMPS");
  EXPECT_EQ(p.config.trace_rate, 10);
  EXPECT_EQ(p.config.trace_count, 50);
  EXPECT_EQ(p.config.trace_log_frequency, 5);
  EXPECT_EQ(p.config.grpc_keepalive.time_ms, 60000);
  EXPECT_EQ(p.config.grpc_keepalive.timeout_ms, 5000);
  EXPECT_EQ(p.config.grpc_keepalive.permit_without_calls, 1);
  EXPECT_EQ(p.config.grpc_keepalive.http2_max_pings_without_data, 0);
  EXPECT_EQ(p.config.grpc_keepalive.http2_min_recv_ping_interval_without_data_ms, 10000);
  EXPECT_EQ(p.config.grpc_keepalive.http2_max_ping_strikes, 3);
  EXPECT_EQ(p.config.grpc_response_compression, "high");
  EXPECT_TRUE(p.config.grpc_reuse_port);
  EXPECT_TRUE(p.config.http_reuse_port);
  EXPECT_TRUE(p.config.metrics_summary_latencies);
  EXPECT_THAT(p.ignored, ElementsAre(HasSubstr("--rate-limit execution_count: not used")));
  // Not given: gRPC's defaults stay.
  EXPECT_EQ(Parse({}).config.grpc_keepalive.time_ms, -1);

  for (const auto& [args, message] : std::vector<std::pair<std::vector<std::string>, std::string>>{
           {{"--trace-config", "mode=jaeger"}, "mode must be triton or opentelemetry"},
           {{"--trace-config", "opentelemetry,bsp_max_queue_size=0"},
            "bsp_max_queue_size must be an integer >= 1"},
           {{"--trace-config", "opentelemetry,resource=service.name"}, "resource must be"},
           {{"--trace-config", "opentelemetry,file=/tmp/t"}, "unknown opentelemetry setting"},
           {{"--trace-config", "level=DETAILED"}, "level must be OFF, TIMESTAMPS or TENSORS"},
           {{"--trace-config", "rate=-1"}, "rate must be an integer >= 0"},
           {{"--trace-config", "rate"}, "expected <setting>=<value>"},
           {{"--trace-config", "colour=blue"}, "unknown setting"},
           {{"--metrics-config", "summary_latencies=1"}, "must be true or false"},
           {{"--metrics-config", "summary_quantiles=0.5:0.6"}, "the error must be a number in"},
           {{"--metrics-config", "gpu,summary_latencies=true"}, "no setting groups"},
           {{"--metrics-config", "pinned_memory=true"}, "unknown setting"},
           {{"--model-namespacing=true"}, "--model-namespacing=true"},
           {{"--grpc-infer-response-compression-level", "max"}, "max"},
       }) {
    Parsed refused = Parse(args);
    EXPECT_EQ(refused.status.code(), absl::StatusCode::kInvalidArgument) << args[0];
    EXPECT_THAT(std::string(refused.status.message()), HasSubstr(message)) << args[0];
  }
}

TEST(TritonFlagsTest, OpenTelemetrySettingsAreKeptAsGiven) {
  Parsed p = Parse({"--trace-config", "mode=opentelemetry", "--trace-config",
                    "opentelemetry,url=http://collector:4318/v1/traces", "--trace-config",
                    "opentelemetry,resource=service.name=a=b", "--trace-config",
                    "opentelemetry,resource=team=search", "--trace-config",
                    "opentelemetry,bsp_schedule_delay=100", "--trace-config",
                    "opentelemetry,bsp_max_queue_size=64", "--trace-config",
                    "opentelemetry,bsp_max_export_batch_size=8", "--trace-config", "rate=0"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_EQ(p.config.trace_mode, "opentelemetry");
  EXPECT_EQ(p.config.trace_rate, 0);
  const ServerConfig::OtelTrace& otel = p.config.trace_otel;
  EXPECT_EQ(otel.url, "http://collector:4318/v1/traces");
  // The value is everything after the key's '=' (a value may hold '=').
  EXPECT_THAT(otel.resource, ElementsAre(std::pair<std::string, std::string>("service.name", "a=b"),
                                         std::pair<std::string, std::string>("team", "search")));
  EXPECT_EQ(otel.bsp_schedule_delay_ms, 100);
  EXPECT_EQ(otel.bsp_max_queue_size, 64);
  EXPECT_EQ(otel.bsp_max_export_batch_size, 8);
  // Not given: left unset, for the environment to fill.
  EXPECT_FALSE(Parse({"--trace-config", "mode=opentelemetry"}).config.trace_otel.any());
}

TEST(TritonFlagsTest, TraceLevelsAddUp) {
  Parsed both = Parse({"--trace-config", "level=TENSORS", "--trace-config", "level=TIMESTAMPS"});
  ASSERT_TRUE(both.status.ok()) << both.status;
  EXPECT_EQ(both.config.trace_level, "TIMESTAMPS,TENSORS");
  EXPECT_EQ(Parse({"--trace-config", "level=TENSORS"}).config.trace_level, "TENSORS");
  Parsed contradiction = Parse({"--trace-config", "level=OFF", "--trace-config", "level=TENSORS"});
  EXPECT_THAT(std::string(contradiction.status.message()),
              HasSubstr("OFF cannot be named beside another level"));
}

TEST(TritonFlagsTest, MetricsConfigSetsTheLatencyMetrics) {
  Parsed p = Parse({"--metrics-config", "counter_latencies=false", "--metrics-config",
                    "summary_latencies=true", "--metrics-config",
                    "summary_quantiles=\"0.5:0.05,0.99:0.001\"", "--metrics-config",
                    "histogram_latencies=true"});
  ASSERT_TRUE(p.status.ok()) << p.status;
  EXPECT_FALSE(p.config.metrics_counter_latencies);
  EXPECT_TRUE(p.config.metrics_summary_latencies);
  ASSERT_EQ(p.config.metrics_summary_quantiles.size(), 2u);
  EXPECT_EQ(p.config.metrics_summary_quantiles[1].quantile, 0.99);
  EXPECT_EQ(p.config.metrics_summary_quantiles[1].error, 0.001);
  // Triton's one latency histogram is for decoupled models: accepted, and said to do nothing.
  EXPECT_THAT(p.ignored, ElementsAre(HasSubstr("histogram_latencies=true: no effect")));
  Parsed defaults = Parse({});
  EXPECT_TRUE(defaults.config.metrics_counter_latencies);
  EXPECT_FALSE(defaults.config.metrics_summary_latencies);
  EXPECT_EQ(defaults.config.metrics_summary_quantiles.size(), 5u);
}

TEST(TritonFlagsTest, AConfigNameThatIsNotAFileNameIsRefused) {
  for (const char* name : {"../h100", "a/b", ".hidden"}) {
    Parsed p = Parse({"--model-config-name", name});
    EXPECT_EQ(p.status.code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(std::string(p.status.message()),
                HasSubstr(std::string("--model-config-name: '") + name + "' is not a config name"));
  }
}

}  // namespace
}  // namespace tessera::server
