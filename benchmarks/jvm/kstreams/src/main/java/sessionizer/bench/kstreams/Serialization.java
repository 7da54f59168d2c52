package sessionizer.bench.kstreams;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.common.serialization.Serializer;
import sessionizer.bench.Request;
import sessionizer.bench.Totals;

/** Fixed-width binary serdes for the session store's values (and the grouped requests). */
final class Serialization {
  private Serialization() {}

  /** Totals: three longs (24 bytes) per session in the store and its changelog. */
  static final class TotalsSerde extends Serdes.WrapperSerde<Totals> {
    TotalsSerde() {
      super(TotalsSerde::serialize, TotalsSerde::deserialize);
    }

    private static byte[] serialize(String topic, Totals totals) {
      if (totals == null) {
        return null;
      }
      return ByteBuffer.allocate(24)
          .putLong(totals.fragments)
          .putLong(totals.bytes)
          .putLong(totals.pages)
          .array();
    }

    private static Totals deserialize(String topic, byte[] data) {
      if (data == null) {
        return null;
      }
      ByteBuffer buffer = ByteBuffer.wrap(data);
      return new Totals(buffer.getLong(), buffer.getLong(), buffer.getLong());
    }
  }

  /** A request: bytes, page flag and key (only used if the DSL ever repartitioned). */
  static final class RequestSerde implements Serde<Request> {
    @Override
    public Serializer<Request> serializer() {
      return (topic, request) -> {
        if (request == null) {
          return null;
        }
        byte[] key = request.key.getBytes(StandardCharsets.UTF_8);
        return ByteBuffer.allocate(12 + key.length)
            .putLong(request.bytes)
            .putInt(request.page)
            .put(key)
            .array();
      };
    }

    @Override
    public Deserializer<Request> deserializer() {
      return (topic, data) -> {
        if (data == null) {
          return null;
        }
        ByteBuffer buffer = ByteBuffer.wrap(data);
        long bytes = buffer.getLong();
        int page = buffer.getInt();
        String key = new String(data, 12, data.length - 12, StandardCharsets.UTF_8);
        return new Request(key, bytes, page);
      };
    }
  }
}
