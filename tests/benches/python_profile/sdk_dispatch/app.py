"""Profile step 4: the SDK handing each record of a batch to an operator
whose `process` does nothing. The SDK's per-record share is this minus
step 1."""

import weir


class Nothing:
    @staticmethod
    def open(ctx: weir.OpenContext) -> "Nothing":
        return Nothing()

    def process(self, ctx: weir.Context, element: weir.Element) -> None:
        pass


Handler = weir.export(Nothing)
