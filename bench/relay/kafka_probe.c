// kafka_probe: the relay's way of producing, without the relay. Produces BATCHES batches of
// M keyed ~200-byte messages; after each batch, waits (rd_kafka_poll) until every delivery
// report is in, as the kafka sink does. Same producer settings as the sink
// (enable.idempotence=true, acks=all, partitioner=murmur2_random); more as NAME VALUE pairs.
// Prints the mean time per batch (the first 5 batches, which include the producer's start,
// are not counted) and the time from rd_kafka_new to the first delivery report. Built and
// run by kafka_probe.sh.
//
//   kafka_probe BOOTSTRAP BATCHES M TOPIC [NAME VALUE]...
//
// Two NAMEs are the probe's own: probe.start.delay.ms N waits N ms between rd_kafka_new and
// the first batch (as the relay reads its configuration and fetches a batch meanwhile), and
// probe.topic.by.name true produces with RD_KAFKA_V_TOPIC(name) instead of a topic handle
// (how the sink produced before it kept topic handles: after a start delay, the first batch
// waits ~1 s for librdkafka's topic scan).
#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static int pending;
static double first_dr;
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec / 1e9; }
static void dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *o) { pending--; if (!first_dr) first_dr = now(); if (m->err) fprintf(stderr, "err %s\n", rd_kafka_err2str(m->err)); }
int main(int argc, char **argv) {
  const char *boot = argv[1]; int batches = atoi(argv[2]), m = atoi(argv[3]);
  rd_kafka_conf_t *c = rd_kafka_conf_new(); char e[512];
  rd_kafka_conf_set(c, "bootstrap.servers", boot, e, sizeof e);
  rd_kafka_conf_set(c, "enable.idempotence", "true", e, sizeof e);
  rd_kafka_conf_set(c, "acks", "all", e, sizeof e);
  rd_kafka_conf_set(c, "partitioner", "murmur2_random", e, sizeof e);
  int start_delay_ms = 0, by_name = 0;
  for (int i = 5; i + 1 < argc; i += 2) {
    if (!strcmp(argv[i], "probe.start.delay.ms")) { start_delay_ms = atoi(argv[i+1]); continue; }
    if (!strcmp(argv[i], "probe.topic.by.name")) { by_name = !strcmp(argv[i+1], "true"); continue; }
    if (rd_kafka_conf_set(c, argv[i], argv[i+1], e, sizeof e)) { fprintf(stderr, "%s\n", e); return 1; }
  }
  const char *topic = argv[4];
  rd_kafka_conf_set_dr_msg_cb(c, dr);
  double created = now();
  rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, e, sizeof e);
  if (start_delay_ms > 0) usleep(start_delay_ms * 1000);
  rd_kafka_topic_t *rkt = by_name ? NULL : rd_kafka_topic_new(rk, topic, NULL);
  char payload[200]; memset(payload, 'x', sizeof payload);
  double tot = 0, mx = 0; int n = 0;
  for (int b = 0; b < batches; b++) {
    double t0 = now();
    for (int i = 0; i < m; i++) {
      char key[16]; snprintf(key, sizeof key, "%d", rand() % 100000);
      pending++;
      if (rkt) rd_kafka_producev(rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(payload, sizeof payload), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
      else rd_kafka_producev(rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(key, strlen(key)), RD_KAFKA_V_VALUE(payload, sizeof payload), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_END);
    }
    while (pending > 0) rd_kafka_poll(rk, 100);
    double d = now() - t0;
    if (b >= 5) { tot += d; n++; if (d > mx) mx = d; }
  }
  char opts[256] = "";
  for (int i = 5; i + 1 < argc; i += 2) {
    size_t len = strlen(opts);
    snprintf(opts + len, sizeof opts - len, "%s%s=%s", len ? " " : "", argv[i], argv[i + 1]);
  }
  printf("   topic %-6s batch %5d %-42s mean %6.1f ms per batch (max %6.1f) = %7.0f msg/s; 1st report %6.1f ms after rd_kafka_new\n", topic, m,
         opts[0] ? opts : "(sink defaults)", 1000 * tot / n, 1000 * mx, m * n / tot, 1000 * (first_dr - created));
  if (rkt) rd_kafka_topic_destroy(rkt);
  rd_kafka_destroy(rk);
  return 0;
}
