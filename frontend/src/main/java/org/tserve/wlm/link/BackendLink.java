package org.tserve.wlm.link;

import java.io.IOException;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;

/**
 * The connections to one backend for one process lifetime: a {@link RankConnection} per rank
 * (rank 0 answers inference), the permits that bound the batches in flight, the LOADED answers
 * awaited per rank and the PING in flight. Dies once, with the first reason given.
 */
public final class BackendLink {
    private final RankConnection[] ranks;
    /** One lock over every rank: all ranks see frames in the same order. */
    private final Object writeLock = new Object();
    public final List<CompletableFuture<Frame>> loadReplies = new ArrayList<>();
    public final Semaphore permits;
    private final int permitCount;
    private volatile String deadReason;
    /** The rank whose connection closed first (-1: the frontend ended the connection). */
    private volatile int deadRank = -1;
    /** The PING in flight on rank 0 (describe's stages), completed by its PONG. */
    private CompletableFuture<String> pong;

    public BackendLink(RankConnection[] ranks, int inFlightLimit) {
        this.ranks = ranks;
        this.permits = new Semaphore(inFlightLimit);
        this.permitCount = inFlightLimit;
        for (int i = 0; i < ranks.length; i++) {
            loadReplies.add(new CompletableFuture<>());
        }
    }

    public int rankCount() {
        return ranks.length;
    }

    public RankConnection rank(int r) {
        return ranks[r];
    }

    public boolean alive() {
        return deadReason == null;
    }

    public String deadReason() {
        return deadReason;
    }

    public int deadRank() {
        return deadRank;
    }

    /** Replaces the reason clients and logs see (the link is dead already). */
    public void explainDeath(String reason) {
        deadReason = reason;
    }

    /** Writes to rank 0, or to every rank when {@code allRanks}. */
    public void write(int type, long batchId, byte[] body, boolean allRanks) throws IOException {
        synchronized (writeLock) {
            for (int r = 0; r < (allRanks ? ranks.length : 1); r++) {
                ranks[r].write(type, batchId, body);
            }
        }
    }

    /**
     * Waits until every permit is back (nothing in flight, no dispatchNow under way that could
     * write after STOP), the link dies or {@code deadlineMillis} passes.
     */
    public void awaitIdle(long deadlineMillis) throws InterruptedException {
        while (alive() && System.currentTimeMillis() < deadlineMillis) {
            if (permits.tryAcquire(permitCount, 20, TimeUnit.MILLISECONDS)) {
                permits.release(permitCount);
                return;
            }
        }
    }

    /**
     * Asks rank 0 for a PONG; concurrent callers share one PING. Completes with the PONG json, or
     * with null when the link dies or the write fails.
     */
    public CompletableFuture<String> ping() {
        CompletableFuture<String> f;
        synchronized (this) {
            if (pong != null && !pong.isDone()) {
                return pong;
            }
            f = new CompletableFuture<>();
            pong = f;
        }
        try {
            write(FrameType.PING, 0, new byte[0], false);
        } catch (IOException e) {
            f.complete(null);
        }
        return f;
    }

    /** Completes the PING in flight with rank 0's PONG. */
    public synchronized void onPong(String json) {
        if (pong != null) {
            pong.complete(json);
        }
    }

    public void die(String reason) {
        die(reason, -1);
    }

    public synchronized void die(String reason, int rank) {
        if (deadReason == null) {
            deadReason = reason;
            deadRank = rank;
        }
        for (CompletableFuture<Frame> f : loadReplies) {
            f.completeExceptionally(new IOException(reason));
        }
        if (pong != null) {
            pong.complete(null);
        }
        for (RankConnection r : ranks) {
            r.close();
        }
    }
}
