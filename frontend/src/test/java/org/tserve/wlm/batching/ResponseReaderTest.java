package org.tserve.wlm.batching;

import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertTrue;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import org.junit.After;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.wlm.CollectingResponder;
import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.WlmListener;
import org.tserve.wlm.protocol.FrameType;

/**
 * The reader on its own: a fake backend's frames answer, stream and fail the batches of an
 * {@link InFlightTable}, and what it reports goes to the listener it was given.
 */
public class ResponseReaderTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();
    private final FakeBackend.Model model = new FakeBackend.Model();
    private final InFlightTable inFlight = new InFlightTable();
    private final List<String> events = new CopyOnWriteArrayList<>();
    private final List<Long> roundTrips = new CopyOnWriteArrayList<>();
    /** What the reader's nextBatch answers: true keeps the answered batch's permit (it passed on). */
    private final AtomicBoolean chained = new AtomicBoolean();
    private FakeBackend backend;

    private final WlmListener listener = new WlmListener() {
        @Override
        public void onJobDone(String m, String version, int status, long queueNanos, long backendNanos) {
            events.add("done " + m + " " + version + " " + status);
        }

        @Override
        public void onHandlerMetrics(String m, String version, String workerId, String json) {
            events.add("metrics " + m + " " + version + " " + workerId + " " + json);
        }

        @Override
        public void onWorkerThreadTime(String m, String version, String workerName, long nanos) {
            events.add("thread time " + m + " " + version + " " + workerName);
        }
    };

    private FakeBackend start(long maxResponseSize) throws Exception {
        backend = FakeBackend.open(tmp.getRoot().toPath(), 1);
        new ResponseReader(model, listener, "W-9000-m_1.0", 9000, inFlight, () -> false, c -> chained.get(),
                maxResponseSize).start(backend.link, roundTrips::add);
        return backend;
    }

    @After
    public void close() throws Exception {
        if (backend != null) {
            backend.close();
        }
    }

    /** {@code ids} written as one batch, holding the link's permit as a writer does. */
    private InFlightBatch written(List<Job> jobs) throws Exception {
        assertTrue(backend.link.permits.tryAcquire());
        return inFlight.add(jobs, backend.link, 30);
    }

    private static Job job(String id, CollectingResponder r) {
        return new Job(id, "m", null, List.of(), List.of(), r);
    }

    private static String body(CollectingResponder r) throws Exception {
        return new String(r.result.get(10, TimeUnit.SECONDS).body(), StandardCharsets.UTF_8);
    }

    private void awaitPermitBack() throws Exception {
        assertTrue("the permit came back", backend.link.permits.tryAcquire(10, TimeUnit.SECONDS));
        backend.link.permits.release();
    }

    @Test
    public void aResultAnswersItsJobsFreesThePermitAndIsReported() throws Exception {
        start(1 << 20);
        CollectingResponder a = new CollectingResponder();
        CollectingResponder b = new CollectingResponder();
        InFlightBatch batch = written(List.of(job("a", a), job("b", b)));
        backend.send(FrameType.RESULT, batch.id, FakeBackend.answers("ok", "a", "b"));
        assertEquals("ok", body(a));
        assertEquals("ok", body(b));
        awaitPermitBack();
        assertTrue(inFlight.isEmpty());
        assertEquals(1, roundTrips.size());
        // the worker-thread time is told after every job's answer
        awaitEvents(3);
        assertEquals(List.of("done m null 200", "done m null 200", "thread time m 1.0 W-9000-m_1.0"), events);
    }

    @Test
    public void aBatchChainedOnTheAnswerKeepsThePermit() throws Exception {
        start(1 << 20);
        chained.set(true);
        CollectingResponder a = new CollectingResponder();
        InFlightBatch batch = written(List.of(job("a", a)));
        backend.send(FrameType.RESULT, batch.id, FakeBackend.answers("ok", "a"));
        assertEquals("ok", body(a));
        assertEquals("the permit passed to the chained batch", 0, backend.link.permits.availablePermits());
    }

    @Test
    public void aJobTheResultLeavesOutFails() throws Exception {
        start(1 << 20);
        CollectingResponder a = new CollectingResponder();
        CollectingResponder b = new CollectingResponder();
        InFlightBatch batch = written(List.of(job("a", a), job("b", b)));
        backend.send(FrameType.RESULT, batch.id, FakeBackend.answers("ok", "a"));
        assertEquals("ok", body(a));
        assertEquals("The worker's answer had no response for request b", b.error.get(10, TimeUnit.SECONDS));
        assertEquals(500, b.errorStatus);
    }

    @Test
    public void chunksStreamBeforeTheResult() throws Exception {
        start(1 << 20);
        CollectingResponder a = new CollectingResponder();
        InFlightBatch batch = written(List.of(job("a", a)));
        backend.send(FrameType.CHUNK, batch.id, FakeBackend.answers("x", "a"));
        backend.send(FrameType.CHUNK, batch.id, FakeBackend.answers("y", "a"));
        backend.send(FrameType.RESULT, batch.id, FakeBackend.answers("z", "a"));
        assertEquals("z", body(a));
        assertEquals(List.of("x", "y"), a.chunks);
    }

    @Test
    public void anErrorFailsTheBatchWithTheWorkersStatus() throws Exception {
        start(1 << 20);
        CollectingResponder a = new CollectingResponder();
        InFlightBatch batch = written(List.of(job("a", a)));
        backend.sendText(FrameType.ERROR, batch.id, "{\"status\": 507, \"message\": \"out of memory\"}");
        assertEquals("out of memory", a.error.get(10, TimeUnit.SECONDS));
        assertEquals(507, a.errorStatus);
        awaitPermitBack();
        assertTrue(events.isEmpty());
    }

    @Test
    public void handlerMetricsGoToTheListenerNamingTheWorker() throws Exception {
        start(1 << 20);
        backend.sendText(FrameType.METRICS, 0, "[{\"name\": \"n\"}]");
        awaitEvents(1);
        assertEquals(List.of("metrics m 1.0 9000 [{\"name\": \"n\"}]"), events);
    }

    @Test
    public void loadedAndPongCompleteWhatTheSupervisorWaitsFor() throws Exception {
        start(1 << 20);
        var pong = backend.link.ping();
        assertEquals(FrameType.PING, backend.read().type);
        backend.sendText(FrameType.PONG, 0, "{\"stages\": 1}");
        backend.sendText(FrameType.LOADED, InFlightTable.LOAD_BATCH_ID, "{\"status\": 200}");
        assertEquals("{\"stages\": 1}", pong.get(10, TimeUnit.SECONDS));
        assertEquals("{\"status\": 200}", backend.link.loadReplies.get(0).get(10, TimeUnit.SECONDS).text());
    }

    @Test
    public void aClosedSocketKillsTheLink() throws Exception {
        start(1 << 20);
        backend.hangUp();
        awaitDeath();
        assertEquals("worker closed the connection", backend.link.deadReason());
    }

    @Test
    public void aFrameOverMaxResponseSizeKillsTheLink() throws Exception {
        start(16);
        CollectingResponder a = new CollectingResponder();
        InFlightBatch batch = written(List.of(job("a", a)));
        backend.send(FrameType.RESULT, batch.id, FakeBackend.answers("a long answer, longer than 16 bytes", "a"));
        awaitDeath();
        assertTrue(backend.link.deadReason(), backend.link.deadReason().contains("16"));
        assertFalse("no answer was read", a.result.isDone());
    }

    private void awaitDeath() throws InterruptedException {
        for (int i = 0; i < 1000 && backend.link.alive(); i++) {
            Thread.sleep(10);
        }
        assertFalse("the link died", backend.link.alive());
    }

    private void awaitEvents(int n) throws InterruptedException {
        for (int i = 0; i < 1000 && events.size() < n; i++) {
            Thread.sleep(10);
        }
        assertEquals(events.toString(), n, events.size());
    }
}
