package org.tserve.wlm;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingDeque;
import java.util.concurrent.TimeUnit;

/**
 * Forms batches from a model's job queue: waits for a first job, then takes up to
 * {@code batchSize - 1} more, waiting at most {@code maxBatchDelay} ms measured from when the
 * first job was taken. A describe job always travels alone.
 */
final class BatchAggregator {
    private BatchAggregator() {
    }

    /**
     * @param firstWaitMillis how long to wait for the first job (so the caller can check for stop)
     * @return the batch, empty when no job arrived within {@code firstWaitMillis}
     */
    static List<Job> poll(BlockingDeque<Job> queue, int batchSize, long maxBatchDelayMillis, long firstWaitMillis)
            throws InterruptedException {
        List<Job> batch = new ArrayList<>();
        Job first = queue.poll(firstWaitMillis, TimeUnit.MILLISECONDS);
        if (first == null) {
            return batch;
        }
        batch.add(first);
        if (first.getKind() == Job.Kind.DESCRIBE) {
            return batch;
        }
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(maxBatchDelayMillis);
        while (batch.size() < batchSize) {
            long left = deadline - System.nanoTime();
            Job j = left > 0 ? queue.poll(left, TimeUnit.NANOSECONDS) : queue.poll();
            if (j == null) {
                break;
            }
            if (j.getKind() == Job.Kind.DESCRIBE) {
                if (!queue.offerFirst(j)) {
                    j.fail(503, "Job queue is full; retry the describe request");
                }
                break;
            }
            batch.add(j);
        }
        return batch;
    }
}
