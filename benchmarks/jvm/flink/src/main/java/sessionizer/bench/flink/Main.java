package sessionizer.bench.flink;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import org.apache.flink.api.common.JobExecutionResult;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.connector.base.DeliveryGuarantee;
import org.apache.flink.connector.kafka.sink.KafkaSink;
import org.apache.flink.connector.kafka.source.KafkaSource;
import org.apache.flink.connector.kafka.source.enumerator.initializer.OffsetsInitializer;
import org.apache.flink.runtime.util.EnvironmentInformation;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import sessionizer.bench.Args;
import sessionizer.bench.Marks;
import sessionizer.bench.Request;
import sessionizer.bench.Result;

/**
 * WebSessions' sessionization as a Flink DataStream job on a local MiniCluster, parallelism 1.
 *
 * <p>{@code KafkaSource (earliest to the end offsets at start: bounded) -> bounded
 * out-of-orderness 2 min on the record timestamps -> keyBy(key) ->
 * EventTimeSessionWindows.withGap(30 min) -> aggregate -> KafkaSink (at-least-once)}, checkpoints
 * every interval to a local directory (hashmap state backend, Flink's default). The bounded
 * source is Flink's own end of input: its final watermark closes every session still open.
 */
public final class Main {
  static final Duration GAP = Duration.ofMinutes(30);
  static final Duration OUT_OF_ORDERNESS = Duration.ofMinutes(2);

  private Main() {}

  public static void main(String[] argv) throws Exception {
    Args args = new Args(argv);
    long mainStarted = System.currentTimeMillis();
    Path checkpoints = Path.of(args.get("checkpoint-dir")).toAbsolutePath();
    Configuration conf =
        Configuration.fromMap(
            Map.of(
                "execution.checkpointing.interval", args.get("checkpoint-ms") + " ms",
                "execution.checkpointing.dir", checkpoints.toUri().toString(),
                "state.backend.type", "hashmap",
                // A free port: other runs on the machine may hold Flink's default 8081.
                "rest.bind-port", "0"));
    StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
    env.setParallelism(1);
    String bootstrap = args.get("bootstrap");
    KafkaSource<Request> source =
        KafkaSource.<Request>builder()
            .setBootstrapServers(bootstrap)
            .setTopics(args.list("topics"))
            .setGroupId(args.get("group"))
            .setStartingOffsets(OffsetsInitializer.earliest())
            .setBounded(OffsetsInitializer.latest())
            .setDeserializer(new Decode())
            .build();
    KafkaSink<Emitted> sink =
        KafkaSink.<Emitted>builder()
            .setBootstrapServers(bootstrap)
            .setRecordSerializer(new Emitted.Serializer(args.get("out-topic")))
            .setDeliveryGuarantee(DeliveryGuarantee.AT_LEAST_ONCE)
            .build();
    env.fromSource(
            source, WatermarkStrategy.forBoundedOutOfOrderness(OUT_OF_ORDERNESS), "stream topics")
        .keyBy(request -> request.key)
        .window(EventTimeSessionWindows.withGap(GAP))
        .aggregate(new Count(), new Emit(GAP.toMillis()))
        .sinkTo(sink)
        .name("out topic");
    JobExecutionResult job = env.execute("bench-sessions");
    Result result = new Result();
    result.put("main_started_at", mainStarted / 1000.0);
    result.put("job_runtime_s", job.getNetRuntime() / 1000.0);
    result.put("flink_version", EnvironmentInformation.getVersion());
    Marks.appendTo(result);
    result.write(Path.of(args.get("result")));
    // The MiniCluster's non-daemon threads may linger after the job: the run is over.
    System.exit(0);
  }
}
