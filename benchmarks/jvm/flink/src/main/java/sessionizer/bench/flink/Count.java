package sessionizer.bench.flink;

import org.apache.flink.api.common.functions.AggregateFunction;
import sessionizer.bench.Request;
import sessionizer.bench.Totals;

/** A session's totals, kept incrementally (one accumulator per window, merged with it). */
final class Count implements AggregateFunction<Request, Totals, Totals> {
  @Override
  public Totals createAccumulator() {
    return new Totals();
  }

  @Override
  public Totals add(Request request, Totals totals) {
    return totals.add(request);
  }

  @Override
  public Totals getResult(Totals totals) {
    return totals;
  }

  @Override
  public Totals merge(Totals left, Totals right) {
    return left.merge(right);
  }
}
