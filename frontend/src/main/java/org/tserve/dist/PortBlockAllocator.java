package org.tserve.dist;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.TreeSet;

/**
 * Blocks of consecutive TCP ports for torchrun jobs (rendezvous endpoint and friends), drawn
 * upward from {@code initial_distribution_port}. A block is never handed out twice while held,
 * and ports something else already listens on are skipped, so no two workers or models collide.
 */
public final class PortBlockAllocator {
    private static final int MAX_PORT = 65535;
    private final int first;
    private final TreeSet<Integer> held = new TreeSet<>();
    private int next;

    public PortBlockAllocator(int initialPort) {
        if (initialPort < 1024 || initialPort > MAX_PORT) {
            throw new IllegalArgumentException("initial_distribution_port must be in 1024..65535, got " + initialPort);
        }
        this.first = initialPort;
        this.next = initialPort;
    }

    /** The first port of {@code size} free consecutive ports, now held by the caller. */
    public synchronized int take(int size) {
        int span = MAX_PORT - first + 1;
        for (int tried = 0; tried < span; tried++) {
            int base = next;
            next = base + size > MAX_PORT ? first : base + size;
            if (base + size - 1 > MAX_PORT) {
                continue;
            }
            if (overlapsHeld(base, size) || !allBindable(base, size)) {
                continue;
            }
            for (int p = base; p < base + size; p++) {
                held.add(p);
            }
            return base;
        }
        throw new IllegalStateException("no " + size + " consecutive free ports at or above " + first
                + "; raise initial_distribution_port or stop other jobs using ports");
    }

    public synchronized void release(int base, int size) {
        for (int p = base; p < base + size; p++) {
            held.remove(p);
        }
    }

    private boolean overlapsHeld(int base, int size) {
        Integer above = held.ceiling(base);
        return above != null && above < base + size;
    }

    private static boolean allBindable(int base, int size) {
        for (int p = base; p < base + size; p++) {
            try (ServerSocket s = new ServerSocket()) {
                s.setReuseAddress(false);
                s.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), p));
            } catch (IOException e) {
                return false;
            }
        }
        return true;
    }
}
