package sessionizer.bench.flink;

import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import sessionizer.bench.Marks;
import sessionizer.bench.SessionJson;
import sessionizer.bench.Totals;

/** A closed session window as the JSON record every peer writes. */
final class Emit extends ProcessWindowFunction<Totals, Emitted, String, TimeWindow> {
  private final long gapMs;

  Emit(long gapMs) {
    this.gapMs = gapMs;
  }

  @Override
  public void process(
      String key, Context context, Iterable<Totals> totals, Collector<Emitted> out) {
    Totals session = totals.iterator().next();
    TimeWindow window = context.window();
    // A session window is [first event, last event + gap).
    long first = window.getStart();
    long last = window.getEnd() - gapMs;
    Marks.session();
    String json =
        SessionJson.of(key, first, last, session.fragments, session.bytes, session.pages);
    out.collect(new Emitted(key, json));
  }
}
