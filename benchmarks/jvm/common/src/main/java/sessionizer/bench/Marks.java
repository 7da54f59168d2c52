package sessionizer.bench;

import java.lang.management.ManagementFactory;
import java.util.concurrent.atomic.AtomicLong;

/**
 * When the peer handled its first input record and emitted its last session, and the JVM's CPU
 * time at the first record (so that start-up can be told apart from the run).
 *
 * <p>One per JVM: Flink's source and window operators run in different threads of the same
 * process, so the counters are atomic.
 */
public final class Marks {
  private static final com.sun.management.OperatingSystemMXBean OS =
      (com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean();

  private static final AtomicLong FIRST_RECORD_MS = new AtomicLong(-1);
  private static final AtomicLong CPU_AT_FIRST_NS = new AtomicLong(-1);
  private static final AtomicLong LAST_OUTPUT_MS = new AtomicLong(-1);
  private static final AtomicLong RECORDS = new AtomicLong();
  private static final AtomicLong FRAGMENTS = new AtomicLong();
  private static final AtomicLong SESSIONS = new AtomicLong();

  private Marks() {}

  /** Call once per input record, watermarks included. */
  public static void record() {
    if (RECORDS.getAndIncrement() == 0) {
      CPU_AT_FIRST_NS.set(cpuNanos());
      FIRST_RECORD_MS.set(System.currentTimeMillis());
    }
  }

  /** Call once per input record that is a fragment. */
  public static void fragment() {
    FRAGMENTS.incrementAndGet();
  }

  /** Call once per session handed to the sink. */
  public static void session() {
    SESSIONS.incrementAndGet();
    LAST_OUTPUT_MS.set(System.currentTimeMillis());
  }

  public static long records() {
    return RECORDS.get();
  }

  /** This JVM's CPU time so far (all threads, user + system), in ns. */
  public static long cpuNanos() {
    return OS.getProcessCpuTime();
  }

  /** The marks as JSON members for the result file. */
  public static void appendTo(Result result) {
    long first = FIRST_RECORD_MS.get();
    long last = LAST_OUTPUT_MS.get();
    long cpuFirst = CPU_AT_FIRST_NS.get();
    result.put("first_record_at", first < 0 ? null : first / 1000.0);
    result.put("last_output_at", last < 0 ? null : last / 1000.0);
    result.put("cpu_at_first_record_s", cpuFirst < 0 ? null : cpuFirst / 1e9);
    result.put("records_seen", RECORDS.get());
    result.put("fragments_seen", FRAGMENTS.get());
    result.put("sessions_emitted", SESSIONS.get());
    result.put(
        "jvm_started_at", ManagementFactory.getRuntimeMXBean().getStartTime() / 1000.0);
  }
}
