// Trending pages in JavaScript, the twin of the Rust `top-n/trending`:
// views keyed by category. Each view is appended to a list state whose
// elements live `window_ms` (state TTL), so the list always holds the
// category's recent views: a sliding window kept by the state backend, with
// no timers. A map state keeps all-time counts. On every view the operator
// emits the category's top `n` pages of the window and of all time:
// `category recent=page:count,... all=page:count,...`. The states are
// encoded as the Rust twin's (`ListState<String>`, `MapState<String, u64>`),
// so a savepoint of either restores into the other.

// The string value of `"name": "..."` in a flat JSON object.
function field(json, name) {
  const m = new RegExp(`"${name}"\\s*:\\s*"([^"]*)"`).exec(json);
  return m ? m[1] : undefined;
}

// `page:count` of the `n` largest counts, ties by page name (by UTF-8 bytes,
// as Rust compares strings; the example's pages are ASCII).
function top(counts, n) {
  return [...counts]
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .slice(0, n)
    .map(([page, count]) => `${page}:${count}`)
    .join(',');
}

class Trending {
  static open(ctx) {
    const window = ctx.paramNumber('window_ms', 1000);
    return new Trending(
      ctx.listState('recent', weir.string, { ttl: window }),
      ctx.mapState('all-time', weir.string, weir.u64),
      ctx.paramNumber('n', 3),
    );
  }

  constructor(recent, allTime, n) {
    this.recent = recent;
    this.allTime = allTime;
    this.n = n;
  }

  process(ctx, element) {
    const line = element.payloadStr;
    const page = field(line, 'page');
    if (page === undefined) throw new Error(`view without page: ${line}`);
    this.recent.add(page);
    this.allTime.put(page, (this.allTime.get(page) ?? 0) + 1);

    const window = new Map();
    for (const p of this.recent) window.set(p, (window.get(p) ?? 0) + 1);
    ctx.emit(`${element.keyStr} recent=${top(window, this.n)} all=${top(this.allTime.entries(), this.n)}`);
  }
}

export const handler = weir.export(Trending);
