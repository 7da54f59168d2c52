package sessionizer.bench.kstreams;

import java.io.IOException;
import java.io.InputStream;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.utils.Bytes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.KeyValue;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.Topology;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.KStream;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.kstream.SessionWindows;
import org.apache.kafka.streams.kstream.Suppressed;
import org.apache.kafka.streams.state.SessionStore;
import sessionizer.bench.Args;
import sessionizer.bench.Marks;
import sessionizer.bench.Result;
import sessionizer.bench.SessionJson;
import sessionizer.bench.ThreadCpu;
import sessionizer.bench.Totals;

/**
 * WebSessions' sessionization in the Kafka Streams DSL.
 *
 * <p>{@code stream(topics) -> processValues(decode, drop watermarks) -> groupByKey() ->
 * windowedBy(SessionWindows.ofInactivityGapAndGrace(30 min, 2 min)) -> aggregate (RocksDB
 * session store) -> suppress(untilWindowCloses) -> to(out)}, one stream thread. Kafka Streams has
 * no end of input: the driver writes one sentinel record, later than every session's close, to
 * its own topic, read with the stream topics; its time closes the last sessions and, once it has
 * been processed, this program closes the application (the final commit emits them).
 */
public final class Main {
  static final String SENTINEL_KEY = "~end-of-input~";
  static final Duration GAP = Duration.ofMinutes(30);
  static final Duration GRACE = Duration.ofMinutes(2);

  private Main() {}

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    String endTopic = args.get("end-topic");
    List<String> inputs = new ArrayList<>(args.list("topics"));
    inputs.add(endTopic);
    CountDownLatch ended = new CountDownLatch(1);
    Topology topology = topology(inputs, endTopic, args.get("out-topic"), ended);
    Properties props = properties(args);
    AtomicReference<Throwable> failure = new AtomicReference<>();
    Result result = new Result();
    long mainStarted = System.currentTimeMillis();
    try (KafkaStreams streams = new KafkaStreams(topology, props)) {
      streams.setUncaughtExceptionHandler(
          error -> {
            failure.set(error);
            ended.countDown();
            return StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
          });
      streams.start();
      ended.await();
      result.put("sentinel_at", System.currentTimeMillis() / 1000.0);
      // Before close, while the stream thread still exists.
      result.putJson("thread_cpu_s_at_sentinel", ThreadCpu.json());
      // A clean close commits: the session store's cache is flushed, suppress emits every
      // session the sentinel closed, the producer is flushed (and the transaction committed).
      streams.close(Duration.ofMinutes(2));
      result.put("closed_at", System.currentTimeMillis() / 1000.0);
    }
    if (failure.get() != null) {
      throw new IllegalStateException("the stream thread failed", failure.get());
    }
    result.put("main_started_at", mainStarted / 1000.0);
    result.put("application_id", props.getProperty(StreamsConfig.APPLICATION_ID_CONFIG));
    result.put("processing_guarantee", props.getProperty(StreamsConfig.PROCESSING_GUARANTEE_CONFIG));
    result.put("kafka_streams_version", kafkaVersion());
    Marks.appendTo(result);
    result.write(Path.of(args.get("result")));
  }

  /** The version kafka-clients reports (its kafka/kafka-version.properties resource). */
  static String kafkaVersion() throws IOException {
    Properties version = new Properties();
    try (InputStream in = KafkaStreams.class.getResourceAsStream("/kafka/kafka-version.properties")) {
      if (in != null) {
        version.load(in);
      }
    }
    return version.getProperty("version");
  }

  static Properties properties(Args args) {
    Properties props = new Properties();
    props.put(StreamsConfig.APPLICATION_ID_CONFIG, args.get("application-id"));
    props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, args.get("bootstrap"));
    props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, args.get("guarantee"));
    // Every system in the comparison commits/snapshots once per interval (ours: 1 s); for
    // exactly_once_v2 this overrides Kafka Streams' default of 100 ms.
    props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, args.get("commit-ms"));
    props.put(StreamsConfig.STATE_DIR_CONFIG, args.get("state-dir"));
    props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, "1");
    props.put(StreamsConfig.consumerPrefix(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG), "earliest");
    return props;
  }

  static Topology topology(
      List<String> inputs, String endTopic, String outTopic, CountDownLatch ended) {
    StreamsBuilder builder = new StreamsBuilder();
    KStream<String, byte[]> records =
        builder.stream(inputs, Consumed.with(Serdes.String(), Serdes.ByteArray()));
    records
        .processValues(() -> new Decode(endTopic, ended))
        .groupByKey(Grouped.with(Serdes.String(), new Serialization.RequestSerde()))
        .windowedBy(SessionWindows.ofInactivityGapAndGrace(GAP, GRACE))
        .aggregate(
            Totals::new,
            (key, request, totals) -> totals.add(request),
            (key, left, right) -> left.merge(right),
            Materialized.<String, Totals, SessionStore<Bytes, byte[]>>as("sessions")
                .withKeySerde(Serdes.String())
                .withValueSerde(new Serialization.TotalsSerde()))
        .suppress(Suppressed.untilWindowCloses(Suppressed.BufferConfig.unbounded()))
        .toStream()
        .filter((window, totals) -> totals != null && !SENTINEL_KEY.equals(window.key()))
        .map(
            (window, totals) -> {
              Marks.session();
              String key = window.key();
              String json =
                  SessionJson.of(
                      key,
                      window.window().start(),
                      window.window().end(),
                      totals.fragments,
                      totals.bytes,
                      totals.pages);
              return KeyValue.pair(key, json);
            })
        .to(outTopic, Produced.with(Serdes.String(), Serdes.String()));
    return builder.build();
  }
}
