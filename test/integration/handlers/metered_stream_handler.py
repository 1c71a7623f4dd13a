"""counting_stream_handler.py with handler metrics (test_metrics.py; build the archive with that
file as an extra file): ``TokensStreamed`` counts each step's tokens and ``SequencesFinished`` the
sequences that reached their ``n``, both through ``context.metrics`` as an LLM handler would."""

from __future__ import annotations

from counting_stream_handler import CountingStreamHandler

from ts.metrics.dimension import Dimension


class MeteredStreamHandler(CountingStreamHandler):
    def initialize(self, context) -> None:
        super().initialize(context)
        self.metrics = context.metrics

    def step(self):
        events = super().step()
        kind = [Dimension("Kind", "count")]
        tokens = sum(ev.chunk is not None for ev in events)
        finished = sum(ev.final is not None and ev.status == 200 for ev in events)
        if tokens:
            self.metrics.add_counter("TokensStreamed", tokens, None, kind)
        if finished:
            self.metrics.add_counter("SequencesFinished", finished, None, kind)
        return events
