"""Profile step 6: the counter's output line per record through the SDK
(one emit-batch per batch), without state. Output's share is this minus
step 4."""

import weir


class EmitOnly:
    @staticmethod
    def open(ctx: weir.OpenContext) -> "EmitOnly":
        return EmitOnly()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        ctx.emit((element.key or b"") + b" " + str(1).encode())


Handler = weir.export(EmitOnly)
