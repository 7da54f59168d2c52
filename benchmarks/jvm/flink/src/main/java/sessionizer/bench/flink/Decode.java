package sessionizer.bench.flink;

import java.io.IOException;
import org.apache.flink.api.common.typeinfo.TypeInformation;
import org.apache.flink.connector.kafka.source.reader.deserializer.KafkaRecordDeserializationSchema;
import org.apache.flink.util.Collector;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import sessionizer.bench.Marks;
import sessionizer.bench.Request;
import sessionizer.bench.Wire;

/** Drops the producer's watermark records and decodes a fragment's msgpack value. */
final class Decode implements KafkaRecordDeserializationSchema<Request> {
  @Override
  public void deserialize(ConsumerRecord<byte[], byte[]> record, Collector<Request> out)
      throws IOException {
    Marks.record();
    boolean kind = record.headers().lastHeader(Wire.KIND_HEADER) != null;
    if (Wire.isWatermark(record.key() != null, kind)) {
      return;
    }
    Marks.fragment();
    out.collect(Wire.request(Wire.key(record.key()), record.value()));
  }

  @Override
  public TypeInformation<Request> getProducedType() {
    return TypeInformation.of(Request.class);
  }
}
