package sessionizer.bench;

/** A session's running counts: fragments, bytes and pages (its times come from the window). */
public class Totals {
  public long fragments;
  public long bytes;
  public long pages;

  /** Flink's POJO rules need a public no-argument constructor. */
  public Totals() {}

  public Totals(long fragments, long bytes, long pages) {
    this.fragments = fragments;
    this.bytes = bytes;
    this.pages = pages;
  }

  /** Count one request into this session (mutates and returns it). */
  public Totals add(Request request) {
    fragments += 1;
    bytes += request.bytes;
    pages += request.page;
    return this;
  }

  /** The totals of two sessions merged into one (a new object). */
  public Totals merge(Totals other) {
    return new Totals(fragments + other.fragments, bytes + other.bytes, pages + other.pages);
  }
}
