package org.tserve.fuzz;

import java.util.List;
import java.util.Random;

/**
 * Seeded random mutations of byte arrays (the fuzz tests' input generator): bit flips, random
 * bytes, inserts, deletes, duplicated ranges, truncation, splicing with another seed and
 * "interesting" values (0, 1, boundaries, the input's own length) written over length fields.
 * The same seed gives the same inputs, so a failure is reproduced by its iteration number.
 */
public final class Mutator {
    /** Values that break length checks: zero, one, the signed and unsigned edges. */
    static final long[] INTERESTING = {0, 1, 2, 4, 5, 8, 9, 0x7f, 0x80, 0xff, 0x100, 0x1ff, 0x200, 0xffff, 0x10000,
        0x7fff_fff0L, 0x7fff_ffffL, 0x8000_0000L, 0xffff_fffeL, 0xffff_ffffL};

    private final Random rng;
    private final List<byte[]> seeds;

    public Mutator(long seed, List<byte[]> seeds) {
        if (seeds.isEmpty()) {
            throw new IllegalArgumentException("a mutator needs at least one seed input");
        }
        this.rng = new Random(seed);
        this.seeds = seeds;
    }

    public Random random() {
        return rng;
    }

    /** A seed picked at random. */
    public byte[] seed() {
        return seeds.get(rng.nextInt(seeds.size())).clone();
    }

    /** A seed with one to four mutations. */
    public byte[] next() {
        byte[] b = seed();
        int n = 1 + rng.nextInt(4);
        for (int i = 0; i < n; i++) {
            b = mutate(b);
        }
        return b;
    }

    /** One mutation of {@code in} (a new array when the length changes). */
    public byte[] mutate(byte[] in) {
        if (in.length == 0) {
            return new byte[] {(byte) rng.nextInt(256)};
        }
        int at = rng.nextInt(in.length);
        switch (rng.nextInt(8)) {
            case 0:   // bit flip
                in[at] ^= (byte) (1 << rng.nextInt(8));
                return in;
            case 1:   // random byte
                in[at] = (byte) rng.nextInt(256);
                return in;
            case 2: { // insert 1..8 random bytes
                byte[] extra = new byte[1 + rng.nextInt(8)];
                rng.nextBytes(extra);
                return splice(in, at, 0, extra);
            }
            case 3:   // delete 1..16 bytes
                return splice(in, at, Math.min(in.length - at, 1 + rng.nextInt(16)), new byte[0]);
            case 4:   // truncate
                return java.util.Arrays.copyOf(in, at);
            case 5: { // splice: a prefix of this input, the tail of another seed
                byte[] other = seeds.get(rng.nextInt(seeds.size()));
                int from = other.length == 0 ? 0 : rng.nextInt(other.length);
                byte[] out = java.util.Arrays.copyOf(in, at + other.length - from);
                System.arraycopy(other, from, out, at, other.length - from);
                return out;
            }
            case 6: { // duplicate a range
                int len = Math.min(in.length - at, 1 + rng.nextInt(64));
                return splice(in, at, 0, java.util.Arrays.copyOfRange(in, at, at + len));
            }
            default:  // a length field: an interesting u32 (or the input's own length, +-1) over 4 bytes
                putU32(in, Math.min(at, Math.max(0, in.length - 4)), interesting(in.length), rng.nextBoolean());
                return in;
        }
    }

    /** An interesting u32: a boundary, or {@code length} give or take one. */
    public long interesting(int length) {
        int k = rng.nextInt(INTERESTING.length + 3);
        return k < INTERESTING.length ? INTERESTING[k] : length + (k - INTERESTING.length) - 1;
    }

    /** Writes {@code v} as a u32 at {@code off} (as many bytes as fit), big- or little-endian. */
    public static void putU32(byte[] b, int off, long v, boolean bigEndian) {
        for (int i = 0; i < 4 && off + i < b.length; i++) {
            int shift = bigEndian ? 24 - 8 * i : 8 * i;
            b[off + i] = (byte) (v >>> shift);
        }
    }

    /** {@code in} with {@code removed} bytes at {@code at} replaced by {@code insert}. */
    public static byte[] splice(byte[] in, int at, int removed, byte[] insert) {
        byte[] out = new byte[in.length - removed + insert.length];
        System.arraycopy(in, 0, out, 0, at);
        System.arraycopy(insert, 0, out, at, insert.length);
        System.arraycopy(in, at + removed, out, at + insert.length, in.length - at - removed);
        return out;
    }
}
