package org.tserve.util;

import java.util.UUID;
import java.util.concurrent.ThreadLocalRandom;

/** Request ids. */
public final class Ids {
    private Ids() {
    }

    /**
     * A random (version 4) UUID from ThreadLocalRandom: UUID.randomUUID() goes through
     * SecureRandom (a lock and a digest per call) for an id that needs no secrecy.
     */
    public static String fastUuid() {
        ThreadLocalRandom r = ThreadLocalRandom.current();
        long hi = (r.nextLong() & ~0xF000L) | 0x4000L;
        long lo = (r.nextLong() & 0x3FFFFFFFFFFFFFFFL) | 0x8000000000000000L;
        return new UUID(hi, lo).toString();
    }
}
