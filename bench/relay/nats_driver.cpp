// Drives the NATS sink alone, without PostgreSQL: N events in batches of B to a nats-server
// -js at URL (stream OUTBOX on outbox.event.> must exist), send() per batch, or with
// `pipelined` two batches started at a time as the relay does. Prints events/s and the
// process' CPU time (cnats' threads included). For profiling the sink (perf record -g).
//   g++ -std=c++17 -O2 -g -Isrc bench/relay/nats_driver.cpp $(ls src/sinks/nats/*.cpp |
//     grep -v _plugin) src/sinks/common/{event_template,cloudevents,option_rules,option_files}.cpp
//     -lnats -pthread
//   ./a.out nats://127.0.0.1:4222 100000 1000 [pipelined]
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "sinks/nats/nats_sink.hpp"

using namespace outbox::sinks;

static double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec +
         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s URL N BATCH [pipelined]\n", argv[0]);
    return 2;
  }
  const std::string url = argv[1];
  const long n = std::atol(argv[2]);
  const long batch = std::atol(argv[3]);
  const bool pipelined = argc > 4 && std::strcmp(argv[4], "pipelined") == 0;
  {
    // The stream, if missing (file storage, as the relay's benchmarks use).
    natsConnection* nc = nullptr;
    jsCtx* js = nullptr;
    if (natsConnection_ConnectTo(&nc, url.c_str()) != NATS_OK ||
        natsConnection_JetStream(&js, nc, nullptr) != NATS_OK) {
      std::fprintf(stderr, "cannot connect to %s\n", url.c_str());
      return 2;
    }
    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    cfg.Name = "OUTBOX";
    const char* subjects[] = {"outbox.event.>"};
    cfg.Subjects = subjects;
    cfg.SubjectsLen = 1;
    cfg.Storage = js_FileStorage;
    jsStreamInfo* si = nullptr;
    js_AddStream(&si, js, &cfg, nullptr, nullptr);
    jsStreamInfo_Destroy(si);
    jsCtx_Destroy(js);
    natsConnection_Destroy(nc);
  }
  NatsSink sink({{"servers", url}});
  const std::string run =
      std::to_string(std::chrono::system_clock::now().time_since_epoch().count());
  struct Data {
    std::string id, aggregatetype, aggregateid, type, payload;
  };
  std::vector<Data> data(n);
  for (long i = 0; i < n; ++i) {
    char id[64];
    std::snprintf(id, sizeof id, "0190a6e0-%s-%012ld", run.c_str(), i);
    data[i] = {id, "order", "k" + std::to_string(i % 100), "OrderCreated",
               "{\"n\": " + std::to_string(i) +
                   ", \"pad\": \"0123456789012345678901234567890123456789\"}"};
  }
  std::vector<std::vector<Message>> batches;
  for (long start = 0; start < n; start += batch) {
    std::vector<Message> b;
    for (long i = start; i < std::min(n, start + batch); ++i) {
      Message m;
      m.id = data[i].id;
      m.aggregatetype = data[i].aggregatetype;
      m.aggregateid = data[i].aggregateid;
      m.type = data[i].type;
      m.payload = data[i].payload;
      m.headers = {{"tenant", "t1"}};
      m.created_at_unix_us = 1700000000000000;
      b.push_back(m);
    }
    batches.push_back(std::move(b));
  }
  std::vector<std::vector<Outcome>> outcomes(batches.size());
  const double cpu0 = cpu_seconds();
  const auto t0 = std::chrono::steady_clock::now();
  for (std::size_t k = 0; k < batches.size(); ++k) {
    if (pipelined) {
      sink.start(batches[k], outcomes[k], std::chrono::seconds(30));
      if (k >= 1) sink.finish();
    } else {
      sink.send(batches[k], outcomes[k], std::chrono::seconds(30));
    }
  }
  if (pipelined && !batches.empty()) sink.finish();
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const double cpu = cpu_seconds() - cpu0;
  long acked = 0;
  for (const auto& o : outcomes)
    for (const Outcome& x : o) acked += x.delivery == Delivery::kAcked;
  std::printf("%s: %ld events, %ld acked, %.3f s, %.0f events/s, cpu %.3f s (%.1f us/event)\n",
              pipelined ? "pipelined" : "send", n, acked, secs, n / secs, cpu, cpu * 1e6 / n);
  return acked == n ? 0 : 1;
}
