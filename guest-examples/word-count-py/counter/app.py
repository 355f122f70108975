"""Word-count counter in Python: keyed by word, keeps an int per word in
value state and emits `<word> <count>` on every update, like the Rust
`word-count/counter`, with the same state encoding (a postcard u64), so
either can restore the other's savepoint."""

import weir


class Counter:
    @staticmethod
    def open(ctx):
        return Counter(ctx.value_state("count", int))

    def __init__(self, count):
        self.count = count

    def process(self, ctx, element):
        if element.key is None:
            raise ValueError('counter needs a keyed input (partition = "key")')
        n = (self.count.get() or 0) + 1
        self.count.set(n)
        ctx.emit(element.key + b" " + str(n).encode())


Handler = weir.export(Counter)
