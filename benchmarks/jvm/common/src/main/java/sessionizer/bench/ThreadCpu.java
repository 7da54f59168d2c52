package sessionizer.bench;

import java.io.IOException;
import java.nio.file.DirectoryStream;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;
import java.util.TreeMap;

/**
 * CPU seconds of this JVM's live threads by kind (JIT compilers, GC, the engine's own threads),
 * read from /proc/self/task: where a short run's CPU went besides the records.
 */
public final class ThreadCpu {
  private static final double TICKS_PER_SECOND = 100.0; // USER_HZ on Linux

  private ThreadCpu() {}

  /** {thread kind: CPU s}, the kind being the thread's name without digits; empty off Linux. */
  public static Map<String, Double> byKind() {
    Map<String, Double> kinds = new TreeMap<>();
    try (DirectoryStream<Path> tasks = Files.newDirectoryStream(Path.of("/proc/self/task"))) {
      for (Path task : tasks) {
        String stat;
        try {
          stat = Files.readString(task.resolve("stat"));
        } catch (IOException gone) {
          continue; // the thread ended since the listing
        }
        int open = stat.indexOf('('), close = stat.lastIndexOf(')');
        String kind = stat.substring(open + 1, close).replaceAll("[0-9]+", "#").trim();
        String[] fields = stat.substring(close + 2).split(" ");
        double seconds = (Long.parseLong(fields[11]) + Long.parseLong(fields[12])) / TICKS_PER_SECOND;
        kinds.merge(kind, seconds, Double::sum);
      }
    } catch (IOException | RuntimeException unavailable) {
      return kinds;
    }
    return kinds;
  }

  /** The kinds as one JSON object text, largest first, those under 0.05 s left out. */
  public static String json() {
    StringBuilder out = new StringBuilder("{");
    String separator = "";
    for (Map.Entry<String, Double> entry :
        byKind().entrySet().stream()
            .filter(e -> e.getValue() >= 0.05)
            .sorted(Map.Entry.<String, Double>comparingByValue().reversed())
            .toList()) {
      out.append(separator);
      SessionJson.quote(out, entry.getKey());
      out.append(": ").append(Math.round(entry.getValue() * 100) / 100.0);
      separator = ", ";
    }
    return out.append('}').toString();
  }
}
