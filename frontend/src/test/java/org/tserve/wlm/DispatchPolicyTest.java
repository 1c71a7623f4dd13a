package org.tserve.wlm;

import org.tserve.wlm.api.Job;
import org.tserve.wlm.api.JobResponder;
import org.tserve.wlm.api.RegisterRequest;
import static org.junit.Assert.assertEquals;
import static org.junit.Assert.assertFalse;
import static org.junit.Assert.assertSame;
import static org.junit.Assert.assertTrue;
import static org.junit.Assert.fail;

import java.io.File;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.LinkedBlockingDeque;
import java.util.concurrent.TimeUnit;
import org.junit.Rule;
import org.junit.Test;
import org.junit.rules.TemporaryFolder;
import org.tserve.config.Arguments;
import org.tserve.config.ConfigException;
import org.tserve.config.ConfigManager;
import org.tserve.config.ModelSettings;
import org.tserve.wlm.api.Response;
import org.tserve.wlm.batching.BatchAggregator;
import org.tserve.wlm.registry.SettingsResolver;

/**
 * Batch formation of the two dispatch policies, on a fake clock: a timed wait on the queue
 * advances the clock by the time asked for (and delivers the jobs scheduled within it), so the
 * tests see exactly how long each policy would have waited without waiting at all.
 */
public class DispatchPolicyTest {
    @Rule
    public TemporaryFolder tmp = new TemporaryFolder();

    private static final JobResponder NOOP = new JobResponder() {
        @Override
        public void onChunk(Response chunk) {
        }

        @Override
        public void onResult(Response result) {
        }

        @Override
        public void onError(int status, String message) {
        }
    };

    /** A job queue on a fake clock; jobs can be scheduled to arrive at a given time. */
    private static final class FakeTimeQueue extends LinkedBlockingDeque<Job> {
        private static final long serialVersionUID = 1L;
        long now;
        /** Nanoseconds of every timed wait that found the queue empty (the waiting that happened). */
        final List<Long> waits = new ArrayList<>();
        final Map<Long, Job> arrivals = new HashMap<>();

        @Override
        public Job poll(long timeout, TimeUnit unit) {
            Job j = super.poll();
            if (j != null) {
                return j;
            }
            long until = now + unit.toNanos(timeout);
            long next = arrivals.keySet().stream().filter(t -> t <= until).min(Long::compare).orElse(-1L);
            if (next < 0) {
                waits.add(until - now);
                now = until;
                return null;
            }
            waits.add(next - now);
            now = next;
            return arrivals.remove(next);
        }

        long waited() {
            return waits.stream().mapToLong(Long::longValue).sum();
        }
    }

    private static Job job() {
        return new Job("m", null, List.of(), List.of(), NOOP);
    }

    private static List<Job> fill(FakeTimeQueue q, int n) {
        List<Job> out = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            Job j = job();
            out.add(j);
            q.add(j);
        }
        return out;
    }

    private static final long MS = 1_000_000L;

    @Test
    public void eagerSendsALoneJobWithoutWaiting() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        List<Job> queued = fill(q, 1);
        q.arrivals.put(2 * MS, job());   // would join a delay batch, must not join an eager one
        List<Job> batch = new BatchAggregator(() -> q.now).next(q, 8, 5, "eager", 200);
        assertEquals(queued, batch);
        assertEquals(0, q.waited());
        assertEquals(0, q.now);
    }

    @Test
    public void delayHoldsALoneJobForTheFullDelay() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        List<Job> queued = fill(q, 1);
        List<Job> batch = new BatchAggregator(() -> q.now).next(q, 8, 5, "delay", 200);
        assertEquals(queued, batch);
        assertEquals(5 * MS, q.waited());
    }

    @Test
    public void delayTakesJobsArrivingWithinTheDelay() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        fill(q, 1);
        Job late = job();
        Job tooLate = job();
        q.arrivals.put(3 * MS, late);
        q.arrivals.put(9 * MS, tooLate);
        List<Job> batch = new BatchAggregator(() -> q.now).next(q, 8, 5, "delay", 200);
        assertEquals(2, batch.size());
        assertSame(late, batch.get(1));
        assertEquals(5 * MS, q.now);   // waited out the delay measured from the first job
        assertTrue(q.arrivals.containsValue(tooLate));
    }

    @Test
    public void eagerTakesEverythingQueuedUpToBatchSize() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        List<Job> queued = fill(q, 11);
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        assertEquals(queued.subList(0, 8), agg.next(q, 8, 5, "eager", 200));
        assertEquals(queued.subList(8, 11), agg.next(q, 8, 5, "eager", 200));
        assertEquals(0, q.waited());
        assertTrue(q.isEmpty());
    }

    @Test
    public void fullBatchNeverWaitsInEitherPolicy() throws Exception {
        for (String policy : new String[] {"eager", "adaptive", "delay"}) {
            FakeTimeQueue q = new FakeTimeQueue();
            List<Job> queued = fill(q, 8);
            assertEquals(queued, new BatchAggregator(() -> q.now).next(q, 8, 5, policy, 200));
            assertEquals(0, q.waited());
        }
    }

    @Test
    public void bothPoliciesWaitForAFirstJobOnlyUpToTheFirstWait() throws Exception {
        for (String policy : new String[] {"eager", "adaptive", "delay"}) {
            FakeTimeQueue q = new FakeTimeQueue();
            Job j = job();
            q.arrivals.put(40 * MS, j);
            assertEquals(List.of(j), new BatchAggregator(() -> q.now).next(q, 1, 5, policy, 200));
            assertEquals(40 * MS, q.now);
            FakeTimeQueue empty = new FakeTimeQueue();
            assertTrue(new BatchAggregator(() -> empty.now).next(empty, 8, 5, policy, 200).isEmpty());
            assertEquals(200 * MS, empty.now);
        }
    }

    @Test
    public void adaptiveSendsWhatIsQueuedWhileFewRequestsAreInTheServer() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        List<Job> queued = fill(q, 3);   // 3 requests in the server: they can never fill a batch of 8
        q.arrivals.put(2 * MS, job());
        List<Job> batch = new BatchAggregator(() -> q.now).next(q, 8, 5, "adaptive", 200);
        assertEquals(queued, batch);
        assertEquals(0, q.waited());
    }

    @Test
    public void adaptiveWaitsLikeDelayOnceEnoughRequestsWereInTheServer() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        List<Job> first = fill(q, 10);   // a burst: 10 requests at once, more than a batch
        assertEquals(first.subList(0, 8), agg.next(q, 8, 5, "adaptive", 200));
        assertEquals(0, q.waited());
        // 2 queued + 8 in flight: enough to fill a batch once those 8 come back, so it waits
        assertEquals(first.subList(8, 10), agg.next(q, 8, 5, "adaptive", 200));
        assertEquals(5 * MS, q.waited());
        for (Job j : first) {
            j.fail(500, "answered");   // the first batches are answered
        }
        // under that load a partial batch waits for the delay to fill up, as with delay
        fill(q, 1);
        Job late = job();
        q.arrivals.put(q.now + 3 * MS, late);
        List<Job> batch = agg.next(q, 8, 5, "adaptive", 200);
        assertEquals(2, batch.size());
        assertSame(late, batch.get(1));
        assertEquals(10 * MS, q.waited());
    }

    @Test
    public void aJobFindingAnIdleWorkerGoesAloneExactlyWhenTheBatchPolicyWouldSendIt() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        assertTrue(agg.alone(q, job(), 1, "delay"));        // batch size 1: nothing to wait for
        assertTrue(agg.alone(q, job(), 8, "eager"));
        assertFalse(agg.alone(q, job(), 8, "delay"));       // delay holds it for maxBatchDelay: the writer thread does
        assertTrue(agg.alone(q, job(), 8, "adaptive"));     // a lone request never waits
        List<Job> burst = fill(q, 10);                      // a burst fills batches: from now on adaptive waits
        assertEquals(burst.subList(0, 8), agg.next(q, 8, 5, "adaptive", 200));
        q.clear();
        assertFalse(agg.alone(q, job(), 8, "adaptive"));
        q.now += 3 * BatchAggregator.PEAK_WINDOW_NANOS;     // the peak is forgotten
        for (Job j : burst) {
            j.fail(500, "answered");
        }
        assertTrue(agg.alone(q, job(), 8, "adaptive"));
    }

    @Test
    public void adaptiveCountsTheBatchThatWasInFlightWhenTheJobArrived() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        List<Job> seven = fill(q, 7);   // 8 clients: 7 in one batch...
        assertEquals(seven, agg.next(q, 8, 5, "adaptive", 200));
        List<Job> back = fill(q, 1);    // ...the 8th comes back while they are in flight
        for (Job j : seven) {
            j.fail(500, "answered");
        }
        Job eighth = job();
        q.arrivals.put(1 * MS, eighth);
        List<Job> batch = agg.next(q, 8, 5, "adaptive", 200);   // 1 + 7 = 8 were in the server: wait
        assertEquals(back.get(0), batch.get(0));
        assertSame(eighth, batch.get(1));
        assertEquals(5 * MS, q.waited());
    }

    @Test
    public void adaptiveForgetsTheLoadAfterTwoQuietWindows() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        for (Job j : fill(q, 8)) {
            j.fail(500, "answered");
        }
        assertEquals(8, agg.next(q, 8, 5, "adaptive", 200).size());
        q.now += 3 * BatchAggregator.PEAK_WINDOW_NANOS;
        List<Job> lone = fill(q, 1);
        assertEquals(lone, agg.next(q, 8, 5, "adaptive", 200));
        assertEquals(0, q.waited());
    }

    @Test
    public void adaptiveSendsAFullBatchWithoutWaiting() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        List<Job> queued = fill(q, 10);
        assertEquals(queued.subList(0, 8), new BatchAggregator(() -> q.now).next(q, 8, 5, "adaptive", 200));
        assertEquals(0, q.waited());
    }

    @Test
    public void adaptiveKeepsADescribeJobAlone() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        Job a = job();
        Job d = Job.describe("m", null, NOOP);
        q.add(a);
        q.add(d);
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        assertEquals(List.of(a), agg.next(q, 8, 5, "adaptive", 200));
        assertEquals(List.of(d), agg.next(q, 8, 5, "adaptive", 200));
    }

    @Test
    public void eagerKeepsADescribeJobAlone() throws Exception {
        FakeTimeQueue q = new FakeTimeQueue();
        Job a = job();
        Job d = Job.describe("m", null, NOOP);
        Job c = job();
        q.add(a);
        q.add(d);
        q.add(c);
        BatchAggregator agg = new BatchAggregator(() -> q.now);
        assertEquals(List.of(a), agg.next(q, 8, 5, "eager", 200));
        assertEquals(List.of(d), agg.next(q, 8, 5, "eager", 200));
        assertEquals(List.of(c), agg.next(q, 8, 5, "eager", 200));
    }

    @Test
    public void settingDefaultsToAdaptiveAndAcceptsEachValue() {
        ModelSettings s = new ModelSettings();
        assertEquals("adaptive", s.dispatchPolicy);
        List<String> warnings = new ArrayList<>();
        s.apply(Map.of("dispatchPolicy", "DELAY"), "model-config.yaml of m", warnings);
        assertEquals("delay", s.dispatchPolicy);
        s.apply(Map.of("dispatchPolicy", "adaptive"), "model-config.yaml of m", warnings);
        assertEquals("adaptive", s.dispatchPolicy);
        s.apply(Map.of("dispatchPolicy", "delay"), "model-config.yaml of m", warnings);
        assertEquals("delay", s.copy().dispatchPolicy);
        assertTrue(warnings.isEmpty());
        assertTrue(ModelSettings.knownKeys().contains("dispatchPolicy"));
    }

    @Test
    public void badDispatchPolicyIsRefusedWithTheChoices() {
        try {
            new ModelSettings().apply(Map.of("dispatchPolicy", "soon"), "register parameters", new ArrayList<>());
            fail("accepted a bad policy");
        } catch (ConfigException e) {
            assertTrue(e.getMessage(), e.getMessage().contains("'dispatchPolicy' must be eager, adaptive or delay"));
            assertTrue(e.getMessage(), e.getMessage().contains("register parameters"));
        }
    }

    @Test
    public void registerParameterWinsOverModelConfig() throws Exception {
        File props = tmp.newFile("config.properties");
        ConfigManager cfg = new ConfigManager(Arguments.parse(new String[] {"-f", props.getPath()}), Map.of());
        RegisterRequest r = new RegisterRequest("m.mar");
        r.setting("dispatchPolicy", "delay");
        ModelSettings s = SettingsResolver.resolve(cfg, "m", "1.0", Map.of("dispatchPolicy", "eager"), r, 1,
                new ArrayList<>());
        assertEquals("delay", s.dispatchPolicy);
        assertEquals("eager", SettingsResolver.resolve(cfg, "m", "1.0", Map.of("dispatchPolicy", "eager"),
                new RegisterRequest("m.mar"), 1, new ArrayList<>()).dispatchPolicy);
    }
}
