package sessionizer.bench.kstreams;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.streams.processor.api.FixedKeyProcessor;
import org.apache.kafka.streams.processor.api.FixedKeyProcessorContext;
import org.apache.kafka.streams.processor.api.FixedKeyRecord;
import org.apache.kafka.streams.processor.api.RecordMetadata;
import sessionizer.bench.Marks;
import sessionizer.bench.Request;
import sessionizer.bench.Wire;

/**
 * Drops the producer's watermark records, decodes a fragment's msgpack value, and passes the
 * end-of-input sentinel on (its time is what closes the last sessions downstream).
 *
 * <p>A processor of values only, so the key stays and nothing is repartitioned.
 */
final class Decode implements FixedKeyProcessor<String, byte[], Request> {
  private static final Request NOTHING = new Request(Main.SENTINEL_KEY, 0, 0);

  private final String endTopic;
  private final CountDownLatch ended;
  private FixedKeyProcessorContext<String, Request> context;

  Decode(String endTopic, CountDownLatch ended) {
    this.endTopic = endTopic;
    this.ended = ended;
  }

  @Override
  public void init(FixedKeyProcessorContext<String, Request> context) {
    this.context = context;
  }

  @Override
  public void process(FixedKeyRecord<String, byte[]> record) {
    String topic = context.recordMetadata().map(RecordMetadata::topic).orElse("");
    if (topic.equals(endTopic)) {
      // Synchronous: when forward returns, the aggregate and suppress have seen its time.
      context.forward(record.withValue(NOTHING));
      ended.countDown();
      return;
    }
    Marks.record();
    boolean kind = record.headers().lastHeader(Wire.KIND_HEADER) != null;
    if (Wire.isWatermark(record.key() != null, kind)) {
      return;
    }
    Marks.fragment();
    try {
      context.forward(record.withValue(Wire.request(record.key(), record.value())));
    } catch (IOException exc) {
      throw new UncheckedIOException("undecodable fragment in " + topic, exc);
    }
  }
}
