package sessionizer.bench;

import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/** `--name value` pairs, as the Python drivers pass them. */
public final class Args {
  private final Map<String, String> values = new HashMap<>();

  public Args(String[] argv) {
    for (int i = 0; i < argv.length; i++) {
      if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
        throw new IllegalArgumentException("expected --name value pairs, got " + argv[i]);
      }
      values.put(argv[i].substring(2), argv[++i]);
    }
  }

  /** A required value. */
  public String get(String name) {
    String value = values.get(name);
    if (value == null) {
      throw new IllegalArgumentException("missing --" + name);
    }
    return value;
  }

  /** A value with a default. */
  public String get(String name, String fallback) {
    return values.getOrDefault(name, fallback);
  }

  /** A comma-separated list. */
  public List<String> list(String name) {
    return Arrays.asList(get(name).split(","));
  }
}
