"""Stateful conversations' blocks kept between turns (``sequenceBatching``, ts/llm/handler/sessions.py).

When a conversation's turn ends (stop or length) its full blocks -- the prompt and outputs the
next turn starts with -- stay *pinned*: one more reference each, held for the conversation, so
the prefix cache cannot evict them while the session is idle; the next turn finds them all and
prefills only its new tokens. A pin is dropped at SEQUENCE_END (``end``), replaced by the next
turn's, or given up under pressure: when the pool has no block for a sequence, the least recently
used idle conversation's pin goes first (its blocks become ordinary cached blocks, evictable)
before anyone is preempted or kept waiting.
"""

from __future__ import annotations

from collections import Counter, OrderedDict

from ts.llm.engine.paged.pool import BlockPool, BlockTable


class ConversationPins:
    def __init__(self, pool: BlockPool) -> None:
        self.pool = pool
        self._pins: OrderedDict[str, BlockTable] = OrderedDict()  # least recently used first

    def keep(self, conversation: str, table: BlockTable) -> None:
        """Pin the indexed blocks of ``table``'s sealed prefix (before the table is released);
        they replace the conversation's earlier pin."""
        pin = BlockTable()
        for h in table.hashes:
            block = self.pool.block_of(h)
            if block is None:  # not in the index (prefix caching off): a later turn could not find it
                break
            self.pool.share(block)
            pin.blocks.append(block)
            pin.hashes.append(h)
        self.end(conversation)
        if pin.blocks:
            self._pins[conversation] = pin

    def touch(self, conversation: str) -> None:
        if conversation in self._pins:
            self._pins.move_to_end(conversation)

    def end(self, conversation: str) -> None:
        pin = self._pins.pop(conversation, None)
        if pin is not None:
            self.pool.release(pin)

    def freeable(self, busy: set[str]) -> int:
        """Blocks that unpinning every conversation not in ``busy`` would give back."""
        held = Counter(b for c, pin in self._pins.items() if c not in busy for b in pin.blocks)
        return sum(1 for b, n in held.items() if self.pool.refs[b] == n)

    def unpin_one(self, busy: set[str]) -> bool:
        """Drop the least recently used pin not in ``busy``; False when there is none."""
        for conversation in self._pins:
            if conversation not in busy:
                self.end(conversation)
                return True
        return False

    def tables(self) -> list[BlockTable]:
        return list(self._pins.values())

    def blocks(self) -> int:
        return sum(len(pin.blocks) for pin in self._pins.values())
