package sessionizer.bench;

/** The JSON record of one session, as every peer writes it (benchmarks/peer_common.py). */
public final class SessionJson {
  private SessionJson() {}

  /** {"key","first_ts","last_ts","fragments","bytes","pages"}, times in epoch ms. */
  public static String of(
      String key, long firstTs, long lastTs, long fragments, long bytes, long pages) {
    StringBuilder out = new StringBuilder(96 + key.length());
    out.append("{\"key\":");
    quote(out, key);
    out.append(",\"first_ts\":").append(firstTs);
    out.append(",\"last_ts\":").append(lastTs);
    out.append(",\"fragments\":").append(fragments);
    out.append(",\"bytes\":").append(bytes);
    out.append(",\"pages\":").append(pages);
    return out.append('}').toString();
  }

  /** Append `text` as a JSON string (user agents hold quotes, backslashes, any Unicode). */
  public static void quote(StringBuilder out, String text) {
    out.append('"');
    for (int i = 0; i < text.length(); i++) {
      char c = text.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        default -> {
          if (c < 0x20) {
            out.append(String.format("\\u%04x", (int) c));
          } else {
            out.append(c);
          }
        }
      }
    }
    out.append('"');
  }
}
