"""{{name}}: a Weir operator. Counts the events of each key (job.toml keys
the input by its `user` field) in value state, and emits `<key> <count>` on
every event, keyed by the key."""

import weir


class Counter:
    @staticmethod
    def open(ctx):
        return Counter(ctx.value_state("count", int))

    def __init__(self, count):
        self.count = count

    def process(self, ctx, element):
        if element.key is None:
            raise ValueError('needs a keyed input (partition = "key")')
        n = (self.count.get() or 0) + 1
        self.count.set(n)
        ctx.emit(element.key + b" " + str(n).encode(), key=element.key)


Handler = weir.export(Counter)
