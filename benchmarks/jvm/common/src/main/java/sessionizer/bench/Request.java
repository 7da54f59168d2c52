package sessionizer.bench;

/** One request (fragment) as the peers need it: its key, its bytes, whether it is a page. */
public class Request {
  /** The session key, `ip|agent` (the record key). */
  public String key;

  /** Response bytes (the `bytes` field). */
  public long bytes;

  /** 1 for a successful non-asset request (WebSessions' `pages`), else 0. */
  public int page;

  /** Flink's POJO rules need a public no-argument constructor. */
  public Request() {}

  public Request(String key, long bytes, int page) {
    this.key = key;
    this.bytes = bytes;
    this.page = page;
  }
}
