package sessionizer.bench.flink;

import java.nio.charset.StandardCharsets;
import org.apache.flink.connector.kafka.sink.KafkaRecordSerializationSchema;
import org.apache.kafka.clients.producer.ProducerRecord;

/** One session on its way to the out topic: its key and its JSON. */
public class Emitted {
  public String key;
  public String json;

  /** Flink's POJO rules need a public no-argument constructor. */
  public Emitted() {}

  public Emitted(String key, String json) {
    this.key = key;
    this.json = json;
  }

  /** The Kafka record of a session: key = the session key, value = its JSON. */
  static final class Serializer implements KafkaRecordSerializationSchema<Emitted> {
    private final String topic;

    Serializer(String topic) {
      this.topic = topic;
    }

    @Override
    public ProducerRecord<byte[], byte[]> serialize(
        Emitted session, KafkaSinkContext context, Long timestamp) {
      return new ProducerRecord<>(
          topic,
          session.key.getBytes(StandardCharsets.UTF_8),
          session.json.getBytes(StandardCharsets.UTF_8));
    }
  }
}
