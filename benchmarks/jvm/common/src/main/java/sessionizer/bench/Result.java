package sessionizer.bench;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;

/** The JVM's result file: a JSON object of numbers, strings, nulls and JSON texts. */
public final class Result {
  private final Map<String, Object> values = new LinkedHashMap<>();

  /** A member's JSON text, written as it is. */
  private record Raw(String json) {}

  /** Set one member (Number, String, Boolean or null). */
  public Result put(String name, Object value) {
    values.put(name, value);
    return this;
  }

  /** Set one member to a JSON text, written as it is. */
  public Result putJson(String name, String json) {
    values.put(name, new Raw(json));
    return this;
  }

  /** Write the object to `path` (with the JVM's CPU time at this moment). */
  public void write(Path path) throws IOException {
    put("cpu_at_end_s", Marks.cpuNanos() / 1e9);
    putJson("thread_cpu_s", ThreadCpu.json());
    put("finished_at", System.currentTimeMillis() / 1000.0);
    StringBuilder out = new StringBuilder("{\n");
    String separator = "";
    for (Map.Entry<String, Object> entry : values.entrySet()) {
      out.append(separator).append("  ");
      SessionJson.quote(out, entry.getKey());
      out.append(": ");
      Object value = entry.getValue();
      if (value instanceof Raw raw) {
        out.append(raw.json());
      } else if (value instanceof String text) {
        SessionJson.quote(out, text);
      } else {
        out.append(value);
      }
      separator = ",\n";
    }
    out.append("\n}\n");
    Files.writeString(path, out, StandardCharsets.UTF_8);
  }
}
