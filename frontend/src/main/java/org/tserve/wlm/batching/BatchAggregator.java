package org.tserve.wlm.batching;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.WeakHashMap;
import java.util.concurrent.BlockingDeque;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import org.tserve.wlm.api.Job;

/**
 * Forms batches from a model's job queue. A worker thread calls {@link #poll} only when its
 * worker can take a batch, so the policy decides what happens to a batch that is not full yet
 * (docs/batching.md):
 * <ul>
 * <li>{@code delay} (TorchServe's): wait for the first job, then keep taking jobs until the batch
 * is full or {@code maxBatchDelay} ms have passed since the first one was taken.</li>
 * <li>{@code eager}: send what is queued now. Nothing waits while the worker is free; while it is
 * busy, jobs pile up in the queue and the next batch takes up to {@code batchSize} of them.</li>
 * <li>{@code adaptive}: {@code eager} unless the model recently had at least {@code batchSize}
 * requests in the server at once (peak over the last {@link #PEAK_WINDOW_NANOS} of: the batch
 * being formed, what is still queued, and the jobs sent earlier that were not yet answered when
 * the batch's first job arrived): only then can waiting fill a batch, so only then does a batch
 * that is not full wait, as {@code delay} does. A lone request, or a few clients that could never fill
 * a batch, never wait; many clients get full batches and the CPU they save.</li>
 * </ul>
 * A describe job always travels alone.
 */
public final class BatchAggregator {
    /** How long a peak of concurrent requests is remembered (between one and two windows). */
    public static final long PEAK_WINDOW_NANOS = TimeUnit.SECONDS.toNanos(1);

    private static final BatchAggregator SYSTEM = new BatchAggregator(System::nanoTime);

    private final LongSupplier nanoClock;
    /** Per job queue (one per model version): what {@code adaptive} knows about its load. */
    private final Map<BlockingDeque<Job>, Load> loads = Collections.synchronizedMap(new WeakHashMap<>());

    /** @param nanoClock monotonic nanoseconds ({@code System::nanoTime}; tests pass a fake) */
    public BatchAggregator(LongSupplier nanoClock) {
        this.nanoClock = nanoClock;
    }

    /** Jobs sent and not yet answered, and the peak of requests in the server, for one queue. */
    private static final class Load {
        private final List<Job> inFlight = new ArrayList<>();
        private long windowStart;
        private int peak;
        private int lastPeak;

        /** Jobs sent earlier that were still unanswered when a job created at {@code since} arrived. */
        synchronized int overlapping(long since) {
            inFlight.removeIf(j -> j.isDone() && j.getDoneNanos() - since < 0);
            return inFlight.size();
        }

        synchronized void dispatched(List<Job> batch) {
            inFlight.addAll(batch);
        }

        /** Records {@code n} requests in the server now; returns the peak of the last window or two. */
        synchronized int observe(int n, long now) {
            if (now - windowStart > PEAK_WINDOW_NANOS) {
                lastPeak = now - windowStart > 2 * PEAK_WINDOW_NANOS ? 0 : peak;
                peak = 0;
                windowStart = now;
            }
            peak = Math.max(peak, n);
            return Math.max(peak, lastPeak);
        }
    }

    /**
     * @param policy {@code eager}, {@code adaptive} or {@code delay} (anything else)
     * @param firstWaitMillis how long to wait for the first job (so the caller can check for stop)
     * @return the batch, empty when no job arrived within {@code firstWaitMillis}
     */
    static List<Job> poll(BlockingDeque<Job> queue, int batchSize, long maxBatchDelayMillis, String policy,
                          long firstWaitMillis) throws InterruptedException {
        return SYSTEM.next(queue, batchSize, maxBatchDelayMillis, policy, firstWaitMillis);
    }

    /** The {@code delay} policy (kept for callers that do not choose). */
    static List<Job> poll(BlockingDeque<Job> queue, int batchSize, long maxBatchDelayMillis, long firstWaitMillis)
            throws InterruptedException {
        return SYSTEM.next(queue, batchSize, maxBatchDelayMillis, "delay", firstWaitMillis);
    }

    /** A batch that starts with {@code first}, already taken from the queue (see {@link #next}). */
    static List<Job> pollAfter(Job first, BlockingDeque<Job> queue, int batchSize, long maxBatchDelayMillis, String policy)
            throws InterruptedException {
        return SYSTEM.after(first, queue, batchSize, maxBatchDelayMillis, policy);
    }

    /**
     * Whether {@code job}, arriving while its queue is empty and a worker is free, goes as a batch of
     * one right away (what {@link #next} would decide): always with batch size 1 or {@code eager};
     * with {@code adaptive} when the recent peak of requests could not fill a batch (the job is then
     * counted as dispatched); never with {@code delay}.
     */
    static boolean sendsAloneNow(BlockingDeque<Job> queue, Job job, int batchSize, String policy) {
        return SYSTEM.alone(queue, job, batchSize, policy);
    }

    public boolean alone(BlockingDeque<Job> queue, Job job, int batchSize, String policy) {
        if (job.getKind() == Job.Kind.DESCRIBE || batchSize <= 1 || "eager".equals(policy)) {
            return true;
        }
        if (!"adaptive".equals(policy)) {
            return false;
        }
        Load load = loads.computeIfAbsent(queue, q -> new Load());
        int inServer = 1 + queue.size() + load.overlapping(job.getCreatedNanos());
        if (load.observe(inServer, nanoClock.getAsLong()) >= batchSize) {
            return false;
        }
        load.dispatched(List.of(job));
        return true;
    }

    public List<Job> next(BlockingDeque<Job> queue, int batchSize, long maxBatchDelayMillis, String policy,
                   long firstWaitMillis) throws InterruptedException {
        Job first = queue.poll(firstWaitMillis, TimeUnit.MILLISECONDS);
        if (first == null) {
            return List.of();
        }
        return after(first, queue, batchSize, maxBatchDelayMillis, policy);
    }

    List<Job> after(Job first, BlockingDeque<Job> queue, int batchSize, long maxBatchDelayMillis, String policy)
            throws InterruptedException {
        List<Job> batch = new ArrayList<>(Math.min(batchSize, 64));
        batch.add(first);
        if (first.getKind() == Job.Kind.DESCRIBE || batchSize <= 1) {
            return batch;
        }
        long deadline = nanoClock.getAsLong() + TimeUnit.MILLISECONDS.toNanos(maxBatchDelayMillis);
        boolean adaptive = "adaptive".equals(policy);
        boolean wait = "delay".equals(policy) || !adaptive && !"eager".equals(policy);
        if (adaptive) {
            boolean describeNext = takeQueued(queue, batch, batchSize);   // it goes alone, after this batch
            Load load = loads.computeIfAbsent(queue, q -> new Load());
            int inServer = batch.size() + queue.size() + load.overlapping(first.getCreatedNanos());
            int peak = load.observe(inServer, nanoClock.getAsLong());
            wait = !describeNext && batch.size() < batchSize && peak >= batchSize;
            if (!wait) {
                load.dispatched(batch);
                return batch;
            }
        }
        while (batch.size() < batchSize) {
            Job j;
            if (wait) {
                long left = deadline - nanoClock.getAsLong();
                j = left > 0 ? queue.poll(left, TimeUnit.NANOSECONDS) : queue.poll();
            } else {
                j = queue.poll();
            }
            if (j == null) {
                break;
            }
            if (j.getKind() == Job.Kind.DESCRIBE) {
                putBack(queue, j);
                break;
            }
            batch.add(j);
        }
        if (adaptive) {
            loads.get(queue).dispatched(batch);
        }
        return batch;
    }

    /** Moves queued jobs into the batch without waiting; true when it stopped at a describe job. */
    private static boolean takeQueued(BlockingDeque<Job> queue, List<Job> batch, int batchSize) {
        while (batch.size() < batchSize) {
            Job j = queue.poll();
            if (j == null) {
                return false;
            }
            if (j.getKind() == Job.Kind.DESCRIBE) {
                putBack(queue, j);
                return true;
            }
            batch.add(j);
        }
        return false;
    }

    private static void putBack(BlockingDeque<Job> queue, Job describe) {
        if (!queue.offerFirst(describe)) {
            describe.fail(503, "Job queue is full; retry the describe request");
        }
    }
}
