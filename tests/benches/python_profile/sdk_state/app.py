"""Profile step 5: the counter's value state through the SDK's batch path
(one get-batch and one set-batch per batch), without output. Value
state's share is this minus step 4."""

import weir


class CountOnly:
    @staticmethod
    def open(ctx: weir.OpenContext) -> "CountOnly":
        return CountOnly(ctx.value_state("count", weir.U64))

    def __init__(self, count: weir.ValueState[int]) -> None:
        self.count = count

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        self.count.set((self.count.get() or 0) + 1)


Handler = weir.export(CountOnly)
