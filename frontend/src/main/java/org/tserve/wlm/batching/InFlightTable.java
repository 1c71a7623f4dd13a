package org.tserve.wlm.batching;

import java.util.ArrayList;
import java.util.Deque;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.LongSupplier;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.link.BackendLink;

/**
 * One worker's batches in flight, by batch id. A batch leaves the table exactly once — answered,
 * timed out ({@link #takeExpired}, one sweep for all) or failed with the worker
 * ({@link #failAll}) — so each job is answered once, and a dying worker fails only what it held.
 */
public final class InFlightTable {
    /** The batch id of LOAD; inference batch ids never take it (nor 0). */
    public static final long LOAD_BATCH_ID = 1;
    private final Map<Long, InFlightBatch> batches = new ConcurrentHashMap<>();
    private final AtomicLong ids = new AtomicLong(LOAD_BATCH_ID);
    private final LongSupplier nanoClock;
    private final AtomicInteger timeoutsInARow = new AtomicInteger();

    public InFlightTable(LongSupplier nanoClock) {
        this.nanoClock = nanoClock;
    }

    public InFlightTable() {
        this(System::nanoTime);
    }

    /** Registers {@code jobs} as one batch on {@code link}, due within {@code timeoutSec}; marks them dispatched. */
    InFlightBatch add(List<Job> jobs, BackendLink link, int timeoutSec) {
        for (Job j : jobs) {
            j.markDispatched();
        }
        InFlightBatch b = new InFlightBatch(nextBatchId(), jobs, link,
                nanoClock.getAsLong() + TimeUnit.SECONDS.toNanos(timeoutSec), timeoutSec);
        batches.put(b.id, b);
        return b;
    }

    InFlightBatch get(long batchId) {
        return batches.get(batchId);
    }

    /** Takes the batch out (its answer arrived); null when it is not (or no longer) here. */
    InFlightBatch remove(long batchId) {
        InFlightBatch b = batches.remove(batchId);
        if (b != null) {
            timeoutsInARow.set(0);
        }
        return b;
    }

    /** Takes {@code b} out if it is still here; false when someone else answered it first. */
    boolean remove(InFlightBatch b) {
        return batches.remove(b.id, b);
    }

    public boolean isEmpty() {
        return batches.isEmpty();
    }

    int size() {
        return batches.size();
    }

    /** Takes out and returns the batches whose deadline has passed (the periodic sweep). */
    public List<InFlightBatch> takeExpired() {
        if (batches.isEmpty()) {
            return List.of();
        }
        long now = nanoClock.getAsLong();
        List<InFlightBatch> out = new ArrayList<>();
        for (InFlightBatch b : batches.values()) {
            if (now - b.deadlineNanos >= 0 && remove(b)) {
                out.add(b);
                timeoutsInARow.incrementAndGet();
            }
        }
        return out;
    }

    /** Batches that timed out since the last one answered (TorchServe logs the count). */
    public int timeoutsInARow() {
        return timeoutsInARow.get();
    }

    /** Fails every job of every batch still here with {@code status}; returns how many batches that was. */
    public int failAll(int status, String message) {
        int n = 0;
        for (Long id : new ArrayList<>(batches.keySet())) {
            InFlightBatch b = batches.remove(id);
            if (b != null) {
                n++;
                for (Job j : b.jobs) {
                    j.fail(status, message);
                }
            }
        }
        return n;
    }

    /**
     * Puts jobs that were taken from {@code queue} but never written back at its head, in their
     * order; a job that no longer fits is answered 503.
     */
    static void requeue(List<Job> jobs, Deque<Job> queue, String modelName) {
        for (int i = jobs.size() - 1; i >= 0; i--) {
            Job j = jobs.get(i);
            if (!queue.offerFirst(j)) {
                j.fail(503, "Job queue of model " + modelName + " is full; retry later");
            }
        }
    }

    /** Batch ids are 32-bit on the wire; they wrap without ever reusing 0 or LOAD's id. */
    private long nextBatchId() {
        long id = ids.incrementAndGet() & 0xffffffffL;
        if (id <= LOAD_BATCH_ID) {
            ids.set(LOAD_BATCH_ID + 1);
            id = LOAD_BATCH_ID + 1;
        }
        return id;
    }
}
