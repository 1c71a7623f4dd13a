package org.tserve.wlm.batching;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.wlm.CollectingResponder;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.Part;
import org.tserve.wlm.protocol.Frame;
import org.tserve.wlm.protocol.FrameType;

/**
 * The writer on its own, over a fake backend: its three ways to the worker — the writer loop
 * ({@link BatchWriter#serve}), the receiving thread's direct write ({@link BatchWriter#dispatchNow})
 * and the reader's chained write with an answered batch's permit ({@link BatchWriter#dispatchQueued}).
 */
public class BatchWriterTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private final FakeBackend.Model model = new FakeBackend.Model();
    private final InFlightTable inFlight = new InFlightTable();
    private final AtomicBoolean stopping = new AtomicBoolean();
    private FakeBackend backend;
    private BatchWriter writer;
    private Thread loop;

    private void open(int batchSize, int inFlightLimit) throws Exception {
        model.settings.batchSize = batchSize;
        model.settings.maxBatchDelay = 100;
        backend = FakeBackend.open(tmp.getRoot().toPath(), inFlightLimit);
        writer = new BatchWriter(model, 9000, inFlight, stopping::get, new java.util.concurrent.LinkedBlockingDeque<>());
    }

    /** Runs the writer loop on a thread of its own, as the worker thread does. */
    private void serve() {
        loop = new Thread(() -> {
            try {
                writer.serve(backend.link);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "test-writer");
        loop.start();
    }

    @After
    public void close() throws Exception {
        stopping.set(true);
        if (loop != null) {
            loop.join(10_000);
        }
        if (backend != null) {
            backend.close();
        }
    }

    private static Job job(String id) {
        return new Job(id, "m", null, List.of(), List.of(new Part("body", "text/plain", id.getBytes(StandardCharsets.UTF_8))),
                new CollectingResponder());
    }

    private List<String> nextBatch() throws Exception {
        Frame f = backend.read();
        assertEquals(FrameType.INFERENCE, f.type);
        return backend.readBatchIds(f);
    }

    /** Until the writer loop runs on the link (it then counts the link's free permits). */
    private void awaitServing() throws InterruptedException {
        for (int i = 0; i < 1000 && writer.freeBatches() == 0; i++) {
            Thread.sleep(10);
        }
        assertEquals(1, writer.freeBatches());
    }

    @Test
    public void theWriterLoopSendsQueuedJobsAsOneBatch() throws Exception {
        open(2, 1);
        Job a = job("a");
        Job b = job("b");
        model.queue.add(a);
        model.queue.add(b);
        serve();
        assertEquals(List.of("a", "b"), nextBatch());
        assertFalse("in flight until answered", inFlight.isEmpty());
        assertEquals(0, backend.link.permits.availablePermits());
    }

    @Test
    public void aContinuousModelsJobGoesAloneAndItsCancelFollowsIt() throws Exception {
        open(4, 8);
        model.settings.continuousBatching = true;
        Job a = job("a");
        model.queue.add(a);
        serve();
        assertEquals(List.of("a"), nextBatch());
        for (int i = 0; i < 1000 && !a.isCancellable(); i++) {
            Thread.sleep(10);
        }
        assertTrue(a.cancel());
        Frame cancel = backend.read();
        assertEquals(FrameType.CANCEL, cancel.type);
        assertEquals("a", cancel.text());
    }

    @Test
    public void anIdleWorkerTakesAJobFromTheReceivingThread() throws Exception {
        open(1, 1);
        serve();
        awaitServing();
        assertTrue(writer.dispatchNow(job("a")));
        assertEquals(List.of("a"), nextBatch());
        assertEquals(1, writer.directDispatches());
        assertFalse("a batch is in flight: the next job is queued instead", writer.dispatchNow(job("b")));
        assertEquals(1, writer.directDispatches());
    }

    @Test
    public void aJobThatWouldWaitForABatchIsNotWrittenDirectly() throws Exception {
        open(4, 1);
        model.settings.dispatchPolicy = "delay";   // waits for a fuller batch
        serve();
        awaitServing();
        assertFalse(writer.dispatchNow(job("a")));
        assertEquals(1, writer.freeBatches());   // the permit went back
        assertFalse("not serving: nothing is written", new BatchWriter(model, 9001, inFlight, stopping::get,
                model.queue).dispatchNow(job("b")));
    }

    @Test
    public void anAnsweredBatchsPermitWritesTheNextFullBatchAtOnce() throws Exception {
        open(2, 1);
        assertTrue(backend.link.permits.tryAcquire());   // the reader's: the batch it just took off the link
        model.queue.add(job("a"));
        model.queue.add(job("b"));
        serve();
        // the loop waits for a permit (jobs are queued), so the queue stays as it is
        for (int i = 0; i < 1000 && !backend.link.permits.hasQueuedThreads(); i++) {
            Thread.sleep(10);
        }
        assertTrue(writer.dispatchQueued(backend.link));
        assertEquals(List.of("a", "b"), nextBatch());
        assertEquals(1, writer.chainedDispatches());
        assertEquals("the permit passed to the new batch", 0, backend.link.permits.availablePermits());
    }

    @Test
    public void lessThanAFullBatchIsLeftToTheWriterLoop() throws Exception {
        open(2, 1);
        assertTrue(backend.link.permits.tryAcquire());
        model.queue.add(job("a"));
        serve();
        for (int i = 0; i < 1000 && !backend.link.permits.hasQueuedThreads(); i++) {
            Thread.sleep(10);
        }
        assertFalse(writer.dispatchQueued(backend.link));
        assertEquals(1, model.queue.size());
        assertEquals(0, writer.chainedDispatches());
        backend.link.permits.release();   // the caller frees the permit: the writer loop sends it
        assertEquals(List.of("a"), nextBatch());
    }
}
