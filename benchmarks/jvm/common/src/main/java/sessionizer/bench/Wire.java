package sessionizer.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.Locale;
import org.msgpack.core.MessagePack;
import org.msgpack.core.MessageUnpacker;
import org.msgpack.value.ValueType;

/**
 * The router's record format (router/wire.py), as far as the peers need it.
 *
 * <p>A fragment has a key and a msgpack map value; a watermark has no key and a {@code
 * sessionizer-kind} header. Pages are counted as {@code sessionizer.examples.weblog} does.
 */
public final class Wire {
  public static final String KIND_HEADER = "sessionizer-kind";

  private static final String[] ASSET_SUFFIXES = {
    ".css", ".js", ".png", ".jpg", ".jpeg", ".gif", ".ico", ".svg", ".woff", ".woff2", ".ttf",
    ".eot", ".map",
  };

  private Wire() {}

  /** Whether a record is one of the producer's watermarks (no key, or a kind header). */
  public static boolean isWatermark(boolean keyed, boolean hasKindHeader) {
    return !keyed || hasKindHeader;
  }

  /** Whether a request path names a page rather than an asset (WebSessions' is_page). */
  public static boolean isPage(String path) {
    int query = path.indexOf('?');
    String bare = (query < 0 ? path : path.substring(0, query)).toLowerCase(Locale.ROOT);
    for (String suffix : ASSET_SUFFIXES) {
      if (bare.endsWith(suffix)) {
        return false;
      }
    }
    return true;
  }

  /** The request a fragment record's msgpack value describes. */
  public static Request request(String key, byte[] value) throws IOException {
    long bytes = 0;
    long status = 0;
    String path = "";
    try (MessageUnpacker unpacker = MessagePack.newDefaultUnpacker(value)) {
      int fields = unpacker.unpackMapHeader();
      for (int i = 0; i < fields; i++) {
        String name = unpacker.unpackString();
        switch (name) {
          case "bytes" -> bytes = number(unpacker);
          case "status" -> status = number(unpacker);
          case "path" -> path = unpacker.unpackString();
          default -> unpacker.skipValue();
        }
      }
    }
    int page = status < 400 && isPage(path) ? 1 : 0;
    return new Request(key, bytes, page);
  }

  /** The key bytes as the router wrote them (UTF-8). */
  public static String key(byte[] key) {
    return new String(key, StandardCharsets.UTF_8);
  }

  private static long number(MessageUnpacker unpacker) throws IOException {
    ValueType type = unpacker.getNextFormat().getValueType();
    return switch (type) {
      case INTEGER -> unpacker.unpackLong();
      case FLOAT -> (long) unpacker.unpackDouble();
      case STRING -> Long.parseLong(unpacker.unpackString().trim());
      default -> {
        unpacker.skipValue();
        yield 0;
      }
    };
  }
}
