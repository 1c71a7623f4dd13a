package org.tserve.wlm.batching;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.BlockingDeque;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BooleanSupplier;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.link.BackendLink;
import org.tserve.wlm.protocol.Codec;
import org.tserve.wlm.protocol.FrameType;
import org.tserve.wlm.protocol.Request;

/**
 * Sends one worker's batches: the writer loop takes jobs from the model's queue, forms a batch
 * ({@link BatchAggregator}) and writes it, holding one of the link's permits per batch in flight;
 * {@link #dispatchNow} lets the thread that received a job write it to an idle worker itself.
 */
public final class BatchWriter {
    /** Bigger batches go through the writer thread: the event loop must not wait on a full socket. */
    static final int DIRECT_MAX_BYTES = 64 * 1024;
    private final BatchModel model;
    private final int port;
    private final InFlightTable inFlight;
    private final BooleanSupplier stopping;
    /** The link while {@link #serve} runs on it: {@link #dispatchNow} may write to it then. */
    private volatile BackendLink serving;
    /** Jobs written by the thread that submitted them (dispatchNow), for tests. */
    private final AtomicLong directDispatches = new AtomicLong();
    /** Batches written by the reader thread as the previous one was answered (dispatchQueued), for tests. */
    private final AtomicLong chainedDispatches = new AtomicLong();

    /** This worker's own queue: the requests of the sequences pinned to it (stateful models). */
    private final BlockingDeque<Job> pinned;

    public BatchWriter(BatchModel model, int port, InFlightTable inFlight, BooleanSupplier stopping, BlockingDeque<Job> pinned) {
        this.model = model;
        this.pinned = pinned;
        this.port = port;
        this.inFlight = inFlight;
        this.stopping = stopping;
    }

    public long directDispatches() {
        return directDispatches.get();
    }

    public long chainedDispatches() {
        return chainedDispatches.get();
    }

    /** Batches this worker could take now (its free permits); 0 while it is not serving. */
    public int freeBatches() {
        BackendLink c = serving;
        return c == null || stopping.getAsBoolean() || !c.alive() ? 0 : c.permits.availablePermits();
    }

    /** The writer loop: runs until the worker stops or the link dies. */
    public void serve(BackendLink c) throws InterruptedException {
        serving = c;
        try {
            while (!stopping.getAsBoolean() && c.alive()) {
                BlockingDeque<Job> queue = model.getSettings().sequenceBatching ? pinned : model.jobQueue();
                // Jobs wait: wait for a free permit (an answered batch). With none waiting, wait on
                // the queue instead, so that an answered batch does not wake this thread: the next
                // job, finding the worker idle, is written by the thread that received it (dispatchNow).
                if (!queue.isEmpty()) {
                    if (!c.permits.tryAcquire(200, TimeUnit.MILLISECONDS)) {
                        continue;   // every batch this worker can take is in flight
                    }
                    c.permits.release();   // the job is taken first: another worker may be free for it
                }
                Job first = queue.poll(200, TimeUnit.MILLISECONDS);
                if (first == null || first.isDone()) {   // done: cancelled by its client while queued
                    continue;
                }
                if (!c.permits.tryAcquire()) {   // dispatchNow took the permit meanwhile
                    InFlightTable.requeue(List.of(first), queue, model.modelName());
                    continue;
                }
                ModelSettings s = model.getSettings();
                List<Job> jobs = s.joinsRunningBatch() ? List.of(first)   // it joins the running batch at once
                        : BatchAggregator.pollAfter(first, queue, s.batchSize, s.maxBatchDelay, s.dispatchPolicy);
                if (stopping.getAsBoolean() || !c.alive()) {
                    InFlightTable.requeue(jobs, queue, model.modelName());
                    c.permits.release();
                    break;
                }
                jobs = withoutExpired(jobs, s.clientTimeoutInMills);
                if (jobs.isEmpty()) {
                    c.permits.release();
                    continue;
                }
                dispatch(c, jobs, encode(jobs), s);
            }
        } finally {
            serving = null;
        }
    }

    /**
     * Writes {@code job} to this worker from the calling thread (the event loop that received it)
     * when the worker is idle and the job would go alone anyway, saving the hand-off to the writer
     * thread. Only for a plain (one-rank) worker with nothing in flight and a small batch, so the
     * write cannot block on a full socket. Returns false, having changed nothing, otherwise: the
     * caller queues the job.
     */
    public boolean dispatchNow(Job job) {
        BackendLink c = serving;
        if (c == null || stopping.getAsBoolean() || !c.alive() || c.rankCount() != 1 || !inFlight.isEmpty()
                || job.getKind() != Job.Kind.INFERENCE || !c.permits.tryAcquire()) {
            return false;
        }
        ModelSettings s = model.getSettings();
        byte[] body = null;
        if (serving == c && !stopping.getAsBoolean() && inFlight.isEmpty() && model.jobQueue().isEmpty()) {
            body = Codec.encodeBatch(List.of(request(job)));
        }
        if (body == null || body.length > DIRECT_MAX_BYTES
                || !BatchAggregator.sendsAloneNow(model.jobQueue(), job, s.batchSize, s.dispatchPolicy)) {
            c.permits.release();
            return false;
        }
        failIfDied(c, dispatch(c, List.of(job), body, s));
        directDispatches.incrementAndGet();
        return true;
    }

    /**
     * Called by the reader thread with the permit of the batch it just took off the link: writes
     * the next batch from the model's queue at once, from that thread, when the batch would go
     * without waiting anyway (the queue holds a full batch) and the write cannot block (nothing
     * else in flight, so the worker has read all it was sent; a small batch). The permit then
     * passes to that batch, and the writer thread, parked on the permits, is neither woken nor
     * needed: under load a worker's batches follow each other with no thread hand-off. Returns
     * false otherwise, the jobs back at the head of the queue (the caller releases the permit).
     */
    public boolean dispatchQueued(BackendLink c) {
        ModelSettings s = model.getSettings();
        BlockingDeque<Job> queue = model.jobQueue();
        if (serving != c || stopping.getAsBoolean() || !c.alive() || c.rankCount() != 1 || s.sequenceBatching
                || s.joinsRunningBatch() || !inFlight.isEmpty() || queue.size() < s.batchSize
                || tooBigToChain(queue.peek(), s.batchSize)) {
            return false;
        }
        Job first = queue.poll();
        if (first == null) {
            return false;
        }
        List<Job> jobs;
        try {   // a maxBatchDelay of 0: takes what is queued, never waits on this thread
            jobs = BatchAggregator.pollAfter(first, queue, s.batchSize, 0, s.dispatchPolicy);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            InFlightTable.requeue(List.of(first), queue, model.modelName());
            return false;
        }
        if (jobs.size() < s.batchSize && first.getKind() != Job.Kind.DESCRIBE) {
            InFlightTable.requeue(jobs, queue, model.modelName());   // taken meanwhile: the writer thread forms it
            return false;
        }
        jobs = withoutExpired(jobs, s.clientTimeoutInMills);
        if (jobs.isEmpty()) {
            return false;
        }
        List<Request> reqs = requests(jobs);
        if (Codec.sizeHint(reqs) > DIRECT_MAX_BYTES) {
            InFlightTable.requeue(jobs, queue, model.modelName());
            return false;
        }
        failIfDied(c, dispatch(c, jobs, Codec.encodeBatch(reqs), s));
        chainedDispatches.incrementAndGet();
        return true;
    }

    /**
     * The link may have died before a batch written outside the writer loop was registered, after
     * the cleanup failed what was in flight: then nobody else answers it.
     */
    private void failIfDied(BackendLink c, InFlightBatch b) {
        if (!c.alive() && inFlight.remove(b)) {
            for (Job j : b.jobs) {
                j.fail(500, "Worker died. (worker " + port + " of model " + model.modelName() + ": " + c.deadReason() + ")");
            }
        }
    }

    /** A model whose requests are large (going by the next one) is left to the writer thread. */
    private static boolean tooBigToChain(Job head, int batchSize) {
        if (head == null) {
            return true;
        }
        long bytes = 0;
        for (Part p : head.getParts()) {
            bytes += p.value().length;
        }
        return bytes * batchSize > DIRECT_MAX_BYTES;
    }

    private static List<Request> requests(List<Job> jobs) {
        List<Request> reqs = new ArrayList<>(jobs.size());
        for (Job j : jobs) {
            reqs.add(request(j));
        }
        return reqs;
    }

    /** A job as the worker reads it (docs/protocol.md): its id, headers and parts. */
    private static Request request(Job j) {
        return new Request(j.getId(), j.getHeaders(), j.getParts());
    }

    private static byte[] encode(List<Job> jobs) {
        return Codec.encodeBatch(requests(jobs));
    }

    /**
     * The jobs that waited at most {@code clientTimeoutInMills} (0 = no limit) since they arrived;
     * the others are answered 503 and not sent, as their clients have likely given up already.
     */
    private List<Job> withoutExpired(List<Job> jobs, int clientTimeoutInMills) {
        if (clientTimeoutInMills <= 0) {
            return jobs;
        }
        long now = System.nanoTime();
        List<Job> kept = new ArrayList<>(jobs.size());
        for (Job j : jobs) {
            long waited = TimeUnit.NANOSECONDS.toMillis(now - j.getCreatedNanos());
            if (waited <= clientTimeoutInMills) {
                kept.add(j);
            } else {
                j.fail(503, "Request waited " + waited + " ms for a worker of model " + model.modelName() + ", longer than its "
                        + "clientTimeoutInMills (" + clientTimeoutInMills + " ms), and was not run. Retry, add workers, "
                        + "or raise clientTimeoutInMills.");
            }
        }
        return kept;
    }

    /** Tells the worker to drop a cancelled job's sequence; its RESULT then frees the slot. */
    private static void cancelInWorker(BackendLink c, long batchId, Job job) {
        try {
            c.write(FrameType.CANCEL, batchId, job.getId().getBytes(StandardCharsets.UTF_8), false);
        } catch (IOException e) {
            c.die("write to worker failed: " + e.getMessage());
        }
    }

    /** Registers the batch as in flight (with its response timeout) and writes it; holds a permit. */
    private InFlightBatch dispatch(BackendLink c, List<Job> jobs, byte[] body, ModelSettings s) {
        if (!s.joinsRunningBatch()) {   // before the write: from now on only the worker's answer ends them
            for (Job j : jobs) {
                j.heldByWorker();
            }
        }
        InFlightBatch b = inFlight.add(jobs, c, s.responseTimeout);
        try {
            long t0 = System.nanoTime();
            c.write(FrameType.INFERENCE, b.id, body, model.inferenceToAllRanks());
            b.frontendNanos = System.nanoTime() - t0;
        } catch (IOException e) {
            c.die("write to worker failed: " + e.getMessage());
        }
        if (s.joinsRunningBatch()) {   // after the write: a CANCEL must follow its INFERENCE
            for (Job j : jobs) {
                j.onCancel(() -> cancelInWorker(c, b.id, j));
            }
        }
        return b;
    }
}
