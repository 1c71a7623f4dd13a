"""The paged KV cache's bookkeeping: a pool of fixed-size blocks, reference counts, and the
automatic prefix cache (no tensors here; ``storage.py`` holds the keys and values).

* A sequence's KV lives in ``block_size``-token blocks listed in its block table (``BlockTable``):
  token ``t`` sits in block ``table.blocks[t // block_size]`` at offset ``t % block_size``.
* A block is *free* (on the free list), *live* (``refs`` > 0: in one or more block tables) or
  *cached* (``refs`` == 0 but kept, in least-recently-used order, because its tokens are a known
  prefix). Allocation takes a free block first, else evicts the least recently used cached one.
* Prefix caching: once a block is full its contents are named by a chained hash of every token
  from the sequence's start to the block's end (``block_hash``), and the index maps that hash to
  the block. A new sequence walks its prompt's full blocks through the index and takes every hit
  (its reference count goes up) instead of computing those tokens again.
* A block is shared by two live sequences only when it is a cached prefix (it has a hash):
  ``share`` refuses anything else, so no sequence ever writes into a block another one reads.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field


def block_hash(parent: int | None, tokens: list[int] | tuple[int, ...]) -> int:
    """The name of a full block: its tokens and (through ``parent``) every token before them."""
    return hash((parent, tuple(tokens)))


@dataclass
class BlockTable:
    """One sequence's blocks; ``hashes[i]`` names ``blocks[i]`` once it is full (prefix chain)."""

    blocks: list[int] = field(default_factory=list)
    hashes: list[int] = field(default_factory=list)


@dataclass
class PrefixStats:
    """Prompt tokens looked up in the prefix cache and those found (the hit rate is their ratio)."""

    queried: int = 0
    hit: int = 0

    @property
    def hit_rate(self) -> float:
        return self.hit / self.queried if self.queried else 0.0


class BlockPool:
    """``num_blocks`` blocks of ``block_size`` tokens; see the module docstring."""

    def __init__(self, num_blocks: int, block_size: int, prefix_caching: bool = True) -> None:
        if num_blocks < 1 or block_size < 1:
            raise ValueError(f"the KV pool needs at least one block of at least one token "
                             f"(got {num_blocks} blocks of {block_size})")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_caching = prefix_caching
        self.refs = [0] * num_blocks
        self.hash_of: list[int | None] = [None] * num_blocks
        self._free: list[int] = list(range(num_blocks - 1, -1, -1))  # pop() takes block 0 first
        self._cached: OrderedDict[int, None] = OrderedDict()  # refs == 0, hashed; oldest first
        self._index: dict[int, int] = {}  # block hash -> block
        self.stats = PrefixStats()

    # ------------------------------------------------------------------ capacity
    @property
    def available(self) -> int:
        """Blocks an allocation can get now: free ones and unreferenced cached ones."""
        return len(self._free) + len(self._cached)

    def blocks_for(self, tokens: int) -> int:
        return -(-tokens // self.block_size)

    # ------------------------------------------------------------------ taking and giving back
    def allocate(self) -> int:
        """A block for one sequence to write (refs 1); raises MemoryError when none is left (the
        engine checks ``available`` first and preempts instead)."""
        if self._free:
            block = self._free.pop()
        elif self._cached:
            block, _ = self._cached.popitem(last=False)  # least recently used
            stale = self.hash_of[block]
            if stale is not None and self._index.get(stale) == block:
                del self._index[stale]
            self.hash_of[block] = None
        else:
            raise MemoryError("the KV block pool is exhausted")
        self.refs[block] = 1
        return block

    def share(self, block: int) -> None:
        """One more sequence reads ``block``: allowed only for a cached prefix block."""
        if self.hash_of[block] is None:
            raise AssertionError(f"block {block} is not a cached prefix: it cannot be shared between sequences")
        if self.refs[block] == 0:
            self._cached.pop(block)
        self.refs[block] += 1

    def release(self, table: BlockTable) -> None:
        """A sequence ended, was cancelled or preempted: its blocks go back (hashed ones stay
        cached, most recently used last) and the table is emptied."""
        for block in reversed(table.blocks):  # the tail first: it is evicted before the shared head
            self.refs[block] -= 1
            assert self.refs[block] >= 0, f"block {block} released twice"
            if self.refs[block] == 0:
                if self.hash_of[block] is not None and self.prefix_caching:
                    self._cached[block] = None
                else:
                    self.hash_of[block] = None
                    self._free.append(block)
        table.blocks.clear()
        table.hashes.clear()

    # ------------------------------------------------------------------ the prefix cache
    def chain(self, tokens: list[int], blocks: int) -> list[int]:
        """The hashes of the first ``blocks`` full blocks of ``tokens``."""
        out: list[int] = []
        bs = self.block_size
        for i in range(blocks):
            out.append(block_hash(out[-1] if out else None, tokens[i * bs:(i + 1) * bs]))
        return out

    def cached(self, block_hash_: int) -> bool:
        return self.prefix_caching and block_hash_ in self._index

    def block_of(self, block_hash_: int) -> int | None:
        """The block the index names ``block_hash_`` (live or cached), if any."""
        return self._index.get(block_hash_) if self.prefix_caching else None

    def match_prefix(self, tokens: list[int], table: BlockTable) -> int:
        """Fill an empty ``table`` with the cached blocks of ``tokens``' prefix, leaving at least
        the last token to compute (its logits give the next token); returns the tokens covered."""
        assert not table.blocks, "match_prefix starts a table"
        full = (len(tokens) - 1) // self.block_size
        self.stats.queried += len(tokens)
        if not self.prefix_caching:
            return 0
        for h in self.chain(tokens, full):
            block = self._index.get(h)
            if block is None:
                break
            self.share(block)
            table.blocks.append(block)
            table.hashes.append(h)
        covered = len(table.blocks) * self.block_size
        self.stats.hit += covered
        return covered

    def seal_full_blocks(self, tokens: list[int], computed: int, table: BlockTable) -> None:
        """After ``computed`` tokens are in the cache: name each newly full block of the table and
        index it (unless an identical block is already indexed: then this one stays private)."""
        bs = self.block_size
        while len(table.hashes) < computed // bs:
            i = len(table.hashes)
            parent = table.hashes[-1] if table.hashes else None
            h = block_hash(parent, tokens[i * bs:(i + 1) * bs])
            table.hashes.append(h)
            block = table.blocks[i]
            if self.prefix_caching and h not in self._index:
                self._index[h] = block
                self.hash_of[block] = h

    def check(self, tables: list[BlockTable]) -> None:
        """The allocator's invariants over the live tables (tests call this after each step)."""
        seen: dict[int, int] = {}
        for table in tables:
            for block in table.blocks:
                seen[block] = seen.get(block, 0) + 1
        for block, n in seen.items():
            assert self.refs[block] == n, f"block {block}: {n} tables hold it, refs says {self.refs[block]}"
            assert n == 1 or self.hash_of[block] is not None, \
                f"block {block} is shared by {n} live sequences but is not a cached prefix"
        idle = set(self._free) | set(self._cached)
        assert not idle & set(seen), "a live block is also free or cached"
        assert len(idle) + len(seen) == self.num_blocks, "a block is lost"
